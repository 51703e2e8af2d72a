//! One pre-norm Transformer encoder layer: `x + MHA(LN(x))`, then `x + FF(LN(x))`, with
//! multi-head scaled dot-product self-attention whose keys skip padding. Pre-norm trains
//! without a learning-rate warm-up, which the shared training loop does not have.

use burn::nn::{Dropout, DropoutConfig, Linear};
use burn::prelude::*;
use burn::tensor::activation::{relu, softmax};

use super::attention::padding_offset;
use super::dense::{dense, emit_dense};
use super::norm::LayerNorm;
use crate::onnx::{GraphBuilder, Value};

#[derive(Module, Debug)]
pub struct EncoderLayer {
    query: Linear,
    key: Linear,
    value: Linear,
    out: Linear,
    attention_norm: LayerNorm,
    expand: Linear,
    contract: Linear,
    feed_forward_norm: LayerNorm,
    dropout: Dropout,
    heads: usize,
}

impl EncoderLayer {
    pub fn new(dim: usize, heads: usize, feed_forward_dim: usize, dropout: f64, device: &Device) -> Self {
        Self {
            query: dense(dim, dim, true, device),
            key: dense(dim, dim, true, device),
            value: dense(dim, dim, true, device),
            out: dense(dim, dim, true, device),
            attention_norm: LayerNorm::new(dim, device),
            expand: dense(dim, feed_forward_dim, true, device),
            contract: dense(feed_forward_dim, dim, true, device),
            feed_forward_norm: LayerNorm::new(dim, device),
            dropout: DropoutConfig::new(dropout).init(),
            heads,
        }
    }

    pub fn heads(&self) -> usize {
        self.heads
    }

    /// `x`: `[batch, seq, dim]`; `mask`: `[batch, seq]`, 1 on real positions. Returns the new
    /// states and the attention probabilities `[batch, heads, seq, seq]`.
    pub fn forward(&self, x: Tensor<3>, mask: Tensor<2>) -> (Tensor<3>, Tensor<4>) {
        let [batch, seq, dim] = x.dims();
        let (heads, head_dim) = (self.heads, dim / self.heads);
        let split = |t: Tensor<3>| t.reshape([batch, seq, heads, head_dim]).swap_dims(1, 2); // [B, h, T, dh]
        let normed = self.attention_norm.forward(x.clone());
        let query = split(self.query.forward(normed.clone()));
        let key = split(self.key.forward(normed.clone()));
        let value = split(self.value.forward(normed));
        let scores = query.matmul(key.swap_dims(2, 3)) / (head_dim as f32).sqrt(); // [B, h, T, T]
        let key_offset = padding_offset(mask.reshape([batch, 1, 1, seq]));
        let attention = softmax(scores + key_offset, 3);
        let context = attention.clone().matmul(value).swap_dims(1, 2).reshape([batch, seq, dim]);
        let x = x + self.dropout.forward(self.out.forward(context));
        let expanded = relu(self.expand.forward(self.feed_forward_norm.forward(x.clone())));
        let states = x + self.dropout.forward(self.contract.forward(expanded));
        (states, attention)
    }

    /// Graph twin of [`forward`](Self::forward); `key_offset` is `[batch, 1, 1, seq]`, 0 on real
    /// positions and `MASKED_SCORE` on padding. Returns states and `[batch, heads, seq, seq]`.
    pub fn emit(&self, g: &mut GraphBuilder, x: &Value, key_offset: &Value) -> (Value, Value) {
        let dim = self.query.weight.dims()[0];
        let (heads, head_dim) = (self.heads, dim / self.heads);
        let split_shape = g.ints("split_heads", &[4], &[0, 0, heads as i64, head_dim as i64]);
        let merge_shape = g.ints("merge_heads", &[3], &[0, 0, dim as i64]);
        let normed = self.attention_norm.emit(g, x, "attention_norm");
        let split = |g: &mut GraphBuilder, layer: &Linear, name: &str| {
            let projected = emit_dense(g, layer, &normed, name);
            let projected = g.reshape(&projected, &split_shape);
            g.transpose(&projected, &[0, 2, 1, 3])
        };
        let query = split(g, &self.query, "query");
        let key = split(g, &self.key, "key");
        let value = split(g, &self.value, "value");
        let key_t = g.transpose(&key, &[0, 1, 3, 2]);
        let scores = g.matmul(&query, &key_t);
        let scale = g.scalar_f32("attention_scale", (head_dim as f32).sqrt());
        let scores = g.div(&scores, &scale);
        let scores = g.add(&scores, key_offset);
        let attention = g.softmax(&scores, -1);
        let context = g.matmul(&attention, &value);
        let context = g.transpose(&context, &[0, 2, 1, 3]);
        let context = g.reshape(&context, &merge_shape);
        let attended = emit_dense(g, &self.out, &context, "out");
        let x = g.add(x, &attended);
        let normed = self.feed_forward_norm.emit(g, &x, "feed_forward_norm");
        let expanded = emit_dense(g, &self.expand, &normed, "expand");
        let expanded = g.relu(&expanded);
        let contracted = emit_dense(g, &self.contract, &expanded, "contract");
        let states = g.add(&x, &contracted);
        (states, attention)
    }
}

//! TE: a Transformer-encoder classifier (the "Transformer encoder" row of Mehta et al. Table 3).
//!
//! word embedding + sinusoidal positions, a learned [CLS] vector put in front → pre-norm
//! encoder layers (multi-head scaled dot-product self-attention, residuals, layer norm,
//! ReLU feed-forward; padding never attended to) → final layer norm of the [CLS] position →
//! softmax layer. Its `attention` output is the [CLS] position's attention in the last layer,
//! one row per head, over the document's tokens: the share [CLS] gives itself is left out and
//! each row renormalised to sum to 1, so rows read like the other variants' hops.

use burn::module::Param;
use burn::nn::{Dropout, DropoutConfig, Embedding, Linear};
use burn::prelude::*;
use serde::Serialize;

use super::{GraphShape, ModelConfig, Network, NetworkOutput, check_sizes, declare_outputs};
use crate::layers::attention::emit_padding_offset;
use crate::layers::dense::{dense, emit_dense};
use crate::layers::embedding::{InitialWords, embedding, emit_embedding};
use crate::layers::encoder::EncoderLayer;
use crate::layers::norm::LayerNorm;
use crate::layers::positions::{add_positions, emit_add_positions};
use crate::layers::{GraphBatch, TokenBatch, values};
use crate::onnx::{GraphBuilder, Value};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TransformerConfig {
    pub embedding_dim: usize,
    pub heads: usize,
    pub layers: usize,
    pub feed_forward_dim: usize,
    pub dropout: f64,
}

config_from_flags!(TransformerConfig, |flags| { heads, layers, feed_forward_dim });

impl ModelConfig for TransformerConfig {
    type Model = Transformer;

    fn validate(&self) -> anyhow::Result<()> {
        check_sizes(
            &[
                ("--embedding-dim", self.embedding_dim),
                ("--heads", self.heads),
                ("--layers", self.layers),
                ("--feed-forward-dim", self.feed_forward_dim),
            ],
            self.dropout,
        )?;
        anyhow::ensure!(
            self.embedding_dim.is_multiple_of(self.heads),
            "--embedding-dim ({}) must be a multiple of --heads ({}): each head takes an equal slice",
            self.embedding_dim,
            self.heads
        );
        Ok(())
    }

    fn init(&self, words: &InitialWords, classes: usize, device: &Device) -> Transformer {
        let d = self.embedding_dim;
        Transformer {
            embedding: embedding(words, d, device),
            read_out: Param::from_tensor(Tensor::zeros([d], device)),
            layers: (0..self.layers)
                .map(|_| EncoderLayer::new(d, self.heads, self.feed_forward_dim, self.dropout, device))
                .collect(),
            final_norm: LayerNorm::new(d, device),
            output: dense(d, classes, true, device),
            dropout: DropoutConfig::new(self.dropout).init(),
        }
    }
}

#[derive(Module, Debug)]
pub struct Transformer {
    embedding: Embedding,
    /// The learned [CLS] vector.
    read_out: Param<Tensor<1>>,
    layers: Vec<EncoderLayer>,
    final_norm: LayerNorm,
    output: Linear,
    dropout: Dropout,
}

impl Transformer {
    fn dim(&self) -> usize {
        self.read_out.dims()[0]
    }
}

impl Network for Transformer {
    fn divide_logits(self, temperature: f32) -> Self {
        Self { output: crate::layers::dense::divided(self.output, temperature), ..self }
    }

    fn forward(&self, batch: &TokenBatch) -> NetworkOutput {
        let (b, t, d) = (batch.batch, batch.seq, self.dim());
        let words = add_positions(self.embedding.forward(batch.ids.clone()));
        let read_out = self.read_out.val().reshape([1, 1, d]).expand([b, 1, d]);
        let mut states = self.dropout.forward(Tensor::cat(vec![read_out, words], 1)); // [B, 1+T, d]
        let device = states.device();
        let mask = Tensor::cat(vec![Tensor::ones([b, 1], &device), batch.mask.clone()], 1);
        let mut last_attention = None;
        for layer in &self.layers {
            let (next, attention) = layer.forward(states, mask.clone());
            states = next;
            last_attention = Some(attention);
        }
        let read_out = self.final_norm.forward(states.narrow(1, 0, 1).reshape([b, d]));
        let logits = self.output.forward(self.dropout.forward(read_out));
        let attention = last_attention.map(|a| {
            let heads = a.dims()[1];
            let over_tokens = a.narrow(2, 0, 1).narrow(3, 1, t).reshape([b, heads, t]);
            over_tokens.clone() / over_tokens.sum_dim(2)
        });
        NetworkOutput { logits, attention, regularizer: None, sentence_attention: None }
    }

    fn emit(&self, g: &mut GraphBuilder) {
        let d = self.dim();
        let batch = GraphBatch::declare(g);
        let words = emit_embedding(g, &self.embedding, &batch.ids);
        let words = emit_add_positions(g, &words, d);
        let read_out = g.weight("read_out", &[1, 1, d], &values(self.read_out.val()));
        let one = g.ints("one_1d", &[1], &[1]);
        let width = g.ints("model_width", &[1], &[d as i64]);
        let shape = g.concat(&[&batch.batch_size, &one, &width], 0);
        let read_out = g.expand(&read_out, &shape);
        let mut states = g.concat(&[&read_out, &words], 1);
        let key_offset = emit_key_offset(g, &batch);
        let mut last_attention = None;
        for (index, layer) in self.layers.iter().enumerate() {
            let (next, attention) = g.scoped(&format!("layer{index}"), |g| layer.emit(g, &states, &key_offset));
            states = next;
            last_attention = Some(attention);
        }
        let first = g.ints("read_out_index", &[], &[0]);
        let read_out = g.gather(&states, &first, 1); // [B, d]
        let read_out = self.final_norm.emit(g, &read_out, "final_norm");
        let logits = emit_dense(g, &self.output, &read_out, "output");
        let probs = g.probabilities(&logits);
        let attention = last_attention.map(|a| emit_read_out_attention(g, &a));
        let heads = self.layers.first().map_or(0, EncoderLayer::heads);
        let classes = self.output.weight.dims()[1];
        declare_outputs(g, (&probs, classes), attention.as_ref().map(|a| (a, heads)), (&read_out, d));
    }

    fn graph_shape(&self) -> GraphShape {
        let heads = self.layers.first().map(EncoderLayer::heads);
        GraphShape { attention_heads: heads, embedding_dim: self.dim() }
    }
}

/// `[batch, 1, 1, 1 + seq]`: 0 for [CLS] and the real tokens, `MASKED_SCORE` on padding.
fn emit_key_offset(g: &mut GraphBuilder, batch: &GraphBatch) -> Value {
    g.scoped("key_offset", |g| emit_key_offset_unscoped(g, batch))
}

fn emit_key_offset_unscoped(g: &mut GraphBuilder, batch: &GraphBatch) -> Value {
    let one = g.ints("one_1d", &[1], &[1]);
    let shape = g.concat(&[&batch.batch_size, &one], 0);
    let read_out = g.constant_of_shape(&shape, 1.0);
    let mask = g.concat(&[&read_out, &batch.mask_f32], 1);
    let offset = emit_padding_offset(g, &mask);
    let axes = g.ints("axes_1_2", &[2], &[1, 2]);
    g.unsqueeze(&offset, &axes)
}

/// The [CLS] row of `[batch, heads, 1 + seq, 1 + seq]` over the tokens, renormalised.
fn emit_read_out_attention(g: &mut GraphBuilder, attention: &Value) -> Value {
    g.scoped("read_out_attention", |g| emit_read_out_attention_unscoped(g, attention))
}

fn emit_read_out_attention_unscoped(g: &mut GraphBuilder, attention: &Value) -> Value {
    let starts = g.ints("slice_starts", &[2], &[0, 1]);
    let ends = g.ints("slice_ends", &[2], &[1, i64::MAX]);
    let axes = g.ints("slice_axes", &[2], &[2, 3]);
    let row = g.slice(attention, &starts, &ends, &axes);
    let axis2 = g.ints("axis2", &[1], &[2]);
    let row = g.squeeze(&row, &axis2);
    let total = g.reduce_sum(&row, &axis2, true);
    g.div(&row, &total)
}

//! Structured self-attention (Lin et al. 2017): `A = softmax(W_s2 · tanh(W_s1 · Hᵀ))` with
//! `r` hops, masked over padding, and its penalty `‖A·Aᵀ − I‖²_F`.

use burn::nn::Linear;
use burn::prelude::*;
use burn::tensor::activation::softmax;

use super::dense::{dense, emit_dense};
use super::{GraphBatch, TokenBatch};
use crate::onnx::{GraphBuilder, Value};

/// Added to the scores of padding positions so that softmax gives them exactly zero weight.
pub const MASKED_SCORE: f32 = -1e9;

#[derive(Module, Debug)]
pub struct StructuredAttention {
    /// `W_s1`: `[2u, d_a]`, no bias.
    ws1: Linear,
    /// `W_s2`: `[d_a, r]`, no bias.
    ws2: Linear,
}

impl StructuredAttention {
    pub fn new(d_input: usize, d_attention: usize, hops: usize, device: &Device) -> Self {
        Self { ws1: dense(d_input, d_attention, false, device), ws2: dense(d_attention, hops, false, device) }
    }

    pub fn hops(&self) -> usize {
        self.ws2.weight.dims()[1]
    }

    /// `[batch, seq, d]` → attention `[batch, hops, seq]`, zero on padding.
    pub fn forward(&self, h: Tensor<3>, batch: &TokenBatch) -> Tensor<3> {
        let scores = self.ws2.forward(self.ws1.forward(h).tanh()).swap_dims(1, 2);
        masked_softmax(scores, batch.mask.clone())
    }

    pub fn emit(&self, g: &mut GraphBuilder, batch: &GraphBatch, h: &Value) -> Value {
        g.scoped("attention", |g| {
            let hidden = emit_dense(g, &self.ws1, h, "ws1");
            let hidden = g.tanh(&hidden);
            let scores = emit_dense(g, &self.ws2, &hidden, "ws2");
            let scores = g.transpose(&scores, &[0, 2, 1]);
            emit_masked_softmax(g, &scores, &batch.mask_f32)
        })
    }
}

/// `(mask − 1) · |MASKED_SCORE|`: 0 on real positions, `MASKED_SCORE` on padding. Added to
/// scores or values, it leaves real positions exact (`x + 0`) and sinks padding.
pub fn padding_offset<const D: usize>(mask: Tensor<D>) -> Tensor<D> {
    (mask - 1.0) * (-MASKED_SCORE)
}

/// Graph twin of [`padding_offset`] for a float mask of any shape.
pub fn emit_padding_offset(g: &mut GraphBuilder, mask_f32: &Value) -> Value {
    let one = g.scalar_f32("one", 1.0);
    let scale = g.scalar_f32("masked_score", -MASKED_SCORE);
    let offset = g.sub(mask_f32, &one);
    g.mul(&offset, &scale)
}

/// Softmax over the last axis of `[batch, rows, seq]` scores, ignoring padded positions.
/// Real positions keep their exact scores (`s·1 + 0`), padding gets `MASKED_SCORE`.
pub fn masked_softmax(scores: Tensor<3>, mask: Tensor<2>) -> Tensor<3> {
    let mask = mask.unsqueeze_dim::<3>(1);
    softmax(scores * mask.clone() + padding_offset(mask), 2)
}

pub fn emit_masked_softmax(g: &mut GraphBuilder, scores: &Value, mask_f32: &Value) -> Value {
    let axis1 = g.ints("axis1", &[1], &[1]);
    let mask = g.unsqueeze(mask_f32, &axis1);
    let offset = emit_padding_offset(g, &mask);
    let kept = g.mul(scores, &mask);
    let masked = g.add(&kept, &offset);
    g.softmax(&masked, -1)
}

/// `‖A·Aᵀ − I‖²_F`, averaged over the batch.
pub fn redundancy_penalty(attention: Tensor<3>) -> Tensor<1> {
    let [batch, hops, _] = attention.dims();
    let gram = attention.clone().matmul(attention.swap_dims(1, 2));
    let identity = Tensor::<2>::eye(hops, &gram.device()).unsqueeze_dim::<3>(0);
    let difference = gram - identity;
    (difference.clone() * difference).sum().reshape([1]) / batch as f32
}

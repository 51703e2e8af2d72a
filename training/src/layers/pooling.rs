//! Pooling over the sequence axis that ignores padding: the masked mean, and the masked max
//! with its argmax share (which token supplied how many of the pooled features).

use burn::prelude::*;

use super::attention::{emit_padding_offset, padding_offset};
use crate::onnx::{ElemType, GraphBuilder, Value};

/// Mean of `[batch, seq, d]` over the real tokens of each example → `[batch, d]`.
/// Every document has at least one token (empty ones are never batched).
pub fn masked_mean(x: Tensor<3>, mask: Tensor<2>) -> Tensor<2> {
    let [batch, _, d] = x.dims();
    let summed = (x * mask.clone().unsqueeze_dim::<3>(2)).sum_dim(1).reshape([batch, d]);
    summed / mask.sum_dim(1)
}

pub fn emit_masked_mean(g: &mut GraphBuilder, x: &Value, mask_f32: &Value) -> Value {
    g.scoped("mean_pool", |g| emit_masked_mean_unscoped(g, x, mask_f32))
}

fn emit_masked_mean_unscoped(g: &mut GraphBuilder, x: &Value, mask_f32: &Value) -> Value {
    let axis2 = g.ints("axis2", &[1], &[2]);
    let mask = g.unsqueeze(mask_f32, &axis2);
    let masked = g.mul(x, &mask);
    let axis1 = g.ints("axis1", &[1], &[1]);
    let summed = g.reduce_sum(&masked, &axis1, false);
    let lengths = g.reduce_sum(mask_f32, &axis1, true);
    g.div(&summed, &lengths)
}

/// Max of `[batch, seq, d]` over the real tokens → (`[batch, d]`, and `[batch, 1, seq]`: the
/// share of the `d` features whose maximum each token supplied, 0 on padding). The share is
/// the baselines' stand-in for attention: it says which words the pooled vector came from.
pub fn masked_max(x: Tensor<3>, mask: Tensor<2>) -> (Tensor<2>, Tensor<3>) {
    let [batch, seq, d] = x.dims();
    // Real positions keep their exact values (x + 0); padding sinks far below any of them.
    let masked = x + padding_offset(mask.unsqueeze_dim::<3>(2));
    let pooled = masked.clone().max_dim(1); // [B, 1, d]
    let supplied = masked.equal(pooled.clone().expand([batch, seq, d])).float();
    let share = supplied.detach().mean_dim(2).reshape([batch, 1, seq]);
    (pooled.reshape([batch, d]), share)
}

/// Graph twin of [`masked_max`]: returns (pooled `[batch, d]`, share `[batch, 1, seq]`).
pub fn emit_masked_max(g: &mut GraphBuilder, x: &Value, mask_f32: &Value) -> (Value, Value) {
    g.scoped("max_pool", |g| emit_masked_max_unscoped(g, x, mask_f32))
}

fn emit_masked_max_unscoped(g: &mut GraphBuilder, x: &Value, mask_f32: &Value) -> (Value, Value) {
    let axis2 = g.ints("axis2", &[1], &[2]);
    let mask = g.unsqueeze(mask_f32, &axis2);
    let offset = emit_padding_offset(g, &mask);
    let masked = g.add(x, &offset);
    // Opset 17: ReduceMax and ReduceMean still take their axes as an attribute.
    let pooled = g.reduce_max(&masked, &[1], true);
    let supplied = g.equal(&masked, &pooled);
    let supplied = g.cast(&supplied, ElemType::Float);
    let share = g.reduce_mean(&supplied, &[2], false);
    let axis1 = g.ints("axis1", &[1], &[1]);
    let share = g.unsqueeze(&share, &axis1);
    let pooled = g.squeeze(&pooled, &axis1);
    (pooled, share)
}

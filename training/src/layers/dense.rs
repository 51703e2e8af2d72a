//! Fully connected layer: `y = x·W + b`, as burn's `Linear` stores it (`W` is `[in, out]`).

use burn::nn::{Linear, LinearConfig};
use burn::prelude::*;

use super::values;
use crate::onnx::{GraphBuilder, Value};

pub fn dense(d_input: usize, d_output: usize, bias: bool, device: &Device) -> Linear {
    LinearConfig::new(d_input, d_output).with_bias(bias).init(device)
}

/// `layer` with its weight and bias divided by `divisor`, so its outputs are.
pub fn divided(layer: Linear, divisor: f32) -> Linear {
    Linear { weight: layer.weight.map(|w| w / divisor), bias: layer.bias.map(|b| b.map(|b| b / divisor)) }
}

/// Emits `x·W (+ b)` for an input whose last dimension is `W`'s first, in the scope `name`.
pub fn emit_dense(g: &mut GraphBuilder, layer: &Linear, x: &Value, name: &str) -> Value {
    emit_dense_keeping_weight(g, layer, x, name).0
}

/// [`emit_dense`], also returning `W`, for a graph that uses it again (not a second copy).
pub fn emit_dense_keeping_weight(g: &mut GraphBuilder, layer: &Linear, x: &Value, name: &str) -> (Value, Value) {
    g.scoped(name, |g| {
        let [d_input, d_output] = layer.weight.dims();
        let weight = g.weight("weight", &[d_input, d_output], &values(layer.weight.val()));
        let product = g.matmul(x, &weight);
        let output = match &layer.bias {
            Some(bias) => {
                let bias = g.weight("bias", &[d_output], &values(bias.val()));
                g.add(&product, &bias)
            }
            None => product,
        };
        (output, weight)
    })
}

//! The classifier most variants end with: dropout, a ReLU hidden layer, dropout, and the
//! softmax layer over the classes.

use burn::nn::{Dropout, DropoutConfig, Linear};
use burn::prelude::*;
use burn::tensor::activation::relu;

use super::dense::{dense, emit_dense};
use crate::onnx::{GraphBuilder, Value};

#[derive(Module, Debug)]
pub struct MlpHead {
    hidden: Linear,
    output: Linear,
    dropout: Dropout,
}

impl MlpHead {
    pub fn new(d_input: usize, d_hidden: usize, classes: usize, dropout: f64, device: &Device) -> Self {
        Self {
            hidden: dense(d_input, d_hidden, true, device),
            output: dense(d_hidden, classes, true, device),
            dropout: DropoutConfig::new(dropout).init(),
        }
    }

    /// `[batch, d_input]` → logits `[batch, classes]`.
    pub fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        let hidden = relu(self.hidden.forward(self.dropout.forward(x)));
        self.output.forward(self.dropout.forward(hidden))
    }

    /// Emits the head (dropout is the identity at inference); returns `probs`.
    pub fn emit(&self, g: &mut GraphBuilder, x: &Value) -> Value {
        g.scoped("head", |g| {
            let hidden = emit_dense(g, &self.hidden, x, "hidden");
            let hidden = g.relu(&hidden);
            let logits = emit_dense(g, &self.output, &hidden, "output");
            g.softmax(&logits, -1)
        })
    }

    pub fn classes(&self) -> usize {
        self.output.weight.dims()[1]
    }
}

//! Layer normalisation over the last axis, written out so that the graph uses only ops both
//! runtimes share at opset 17 (ReduceMean, Sub, Mul, Sqrt, Div).

use burn::module::Param;
use burn::prelude::*;

use super::values;
use crate::onnx::{GraphBuilder, Value};

const EPSILON: f32 = 1e-5;

#[derive(Module, Debug)]
pub struct LayerNorm {
    gamma: Param<Tensor<1>>,
    beta: Param<Tensor<1>>,
}

impl LayerNorm {
    pub fn new(dim: usize, device: &Device) -> Self {
        Self {
            gamma: Param::from_tensor(Tensor::ones([dim], device)),
            beta: Param::from_tensor(Tensor::zeros([dim], device)),
        }
    }

    pub fn forward<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        let last = D - 1;
        let centred = x.clone() - x.mean_dim(last);
        let variance = (centred.clone() * centred.clone()).mean_dim(last);
        let normalised = centred / variance.add_scalar(EPSILON).sqrt();
        normalised * self.gamma.val().unsqueeze::<D>() + self.beta.val().unsqueeze::<D>()
    }

    /// Emits the normalisation in the scope `name`.
    pub fn emit(&self, g: &mut GraphBuilder, x: &Value, name: &str) -> Value {
        g.scoped(name, |g| self.emit_unscoped(g, x))
    }

    fn emit_unscoped(&self, g: &mut GraphBuilder, x: &Value) -> Value {
        let mean = g.reduce_mean(x, &[-1], true);
        let centred = g.sub(x, &mean);
        let squares = g.mul(&centred, &centred);
        let variance = g.reduce_mean(&squares, &[-1], true);
        let epsilon = g.scalar_f32("epsilon", EPSILON);
        let variance = g.add(&variance, &epsilon);
        let deviation = g.sqrt(&variance);
        let normalised = g.div(&centred, &deviation);
        let dim = self.gamma.dims()[0];
        let gamma = g.weight("gamma", &[dim], &values(self.gamma.val()));
        let beta = g.weight("beta", &[dim], &values(self.beta.val()));
        let scaled = g.mul(&normalised, &gamma);
        g.add(&scaled, &beta)
    }
}

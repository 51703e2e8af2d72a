//! Layer normalisation over the last axis, written out so that the graph uses only ops both
//! runtimes share at opset 17 (ReduceMean, Sub, Mul, Sqrt, Div).

use burn::module::Param;
use burn::prelude::*;

use super::values;
use crate::onnx::{Attr, GraphBuilder, Value};

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

    pub fn emit(&self, g: &mut GraphBuilder, x: &Value, hint: &str) -> Value {
        let last = vec![("axes", Attr::Ints(vec![-1])), ("keepdims", Attr::Int(1))];
        let mean = g.op("ReduceMean", &[x], last);
        let centred = g.op("Sub", &[x, &mean], vec![]);
        let squares = g.op("Mul", &[&centred, &centred], vec![]);
        let last = vec![("axes", Attr::Ints(vec![-1])), ("keepdims", Attr::Int(1))];
        let variance = g.op("ReduceMean", &[&squares], last);
        let epsilon = g.scalar_f32("layer_norm_epsilon", EPSILON);
        let variance = g.op("Add", &[&variance, &epsilon], vec![]);
        let deviation = g.op("Sqrt", &[&variance], vec![]);
        let normalised = g.op("Div", &[&centred, &deviation], vec![]);
        let dim = self.gamma.dims()[0];
        let gamma = g.weight(&format!("{hint}_gamma"), &[dim], &values(self.gamma.val()));
        let beta = g.weight(&format!("{hint}_beta"), &[dim], &values(self.beta.val()));
        let scaled = g.op("Mul", &[&normalised, &gamma], vec![]);
        g.op("Add", &[&scaled, &beta], vec![])
    }
}

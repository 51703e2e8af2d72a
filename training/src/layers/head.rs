//! The classifier most variants end with: dropout, a ReLU hidden layer, dropout, and the
//! softmax layer over the classes.
//!
//! At a given input the head is linear up to its ReLU pattern, so it also yields the exact
//! gradient of each class's centred score (its logit minus the mean logit) with respect to
//! the input: what [`super::contribution`] splits over the tokens.

use burn::nn::{Dropout, DropoutConfig, Linear};
use burn::prelude::*;
use burn::tensor::activation::relu;

use super::dense::{dense, divided, emit_dense, emit_dense_keeping_weight};
use super::values;
use crate::onnx::{ElemType, GraphBuilder, Value};

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

    /// `[batch, d_input]` → `[batch, d_input, classes]`: for each row, the gradient of each
    /// class's centred score with respect to `x`, holding the ReLU pattern `x` gives. The
    /// centred scores are then exactly `x · gradient` plus a term that does not depend on `x`.
    pub fn input_gradient(&self, x: Tensor<2>) -> Tensor<3> {
        let [batch, d_input] = x.dims();
        let active = self.hidden.forward(x).greater_elem(0.0).float(); // [B, h]
        let [_, d_hidden] = self.hidden.weight.dims();
        let slopes = active.unsqueeze_dim::<3>(2) * self.centred_output_weight().unsqueeze_dim::<3>(0); // [B, h, C]
        let input_weight = self.hidden.weight.val().unsqueeze_dim::<3>(0).expand([batch, d_input, d_hidden]);
        input_weight.matmul(slopes)
    }

    /// The output weights minus their mean over the classes, `[hidden, classes]`: a shift
    /// shared by every class changes no probability, so only the centred part explains one.
    fn centred_output_weight(&self) -> Tensor<2> {
        let weight = self.output.weight.val();
        weight.clone() - weight.mean_dim(1)
    }

    /// The output weights a graph explains: centred for a softmax; for a multi-label graph,
    /// whose labels each have their own sigmoid, as they are, so that the contributions add
    /// up to each label's own logit.
    fn explained_output_weight(&self, independent_labels: bool) -> Tensor<2> {
        if independent_labels { self.output.weight.val() } else { self.centred_output_weight() }
    }

    /// Emits the head (dropout is the identity at inference); returns `probs`.
    pub fn emit(&self, g: &mut GraphBuilder, x: &Value) -> Value {
        g.scoped("head", |g| self.emit_layers(g, x).2)
    }

    /// Emits the head; returns `probs` and the graph twin of [`Self::input_gradient`].
    pub fn emit_explained(&self, g: &mut GraphBuilder, x: &Value) -> (Value, Value) {
        g.scoped("head", |g| {
            let (before_relu, input_weight, probs) = self.emit_layers(g, x);
            let gradient = g.scoped("gradient", |g| {
                let zero = g.scalar_f32("zero", 0.0);
                let active = g.less(&zero, &before_relu);
                let active = g.cast(&active, ElemType::Float);
                let axis2 = g.ints("axis2", &[1], &[2]);
                let active = g.unsqueeze(&active, &axis2);
                let [d_hidden, classes] = self.output.weight.dims();
                let explained = values(self.explained_output_weight(g.independent_labels()));
                let explained = g.weight("centred_output_weight", &[d_hidden, classes], &explained);
                let slopes = g.mul(&active, &explained); // [B, h, C]
                // One [d_input, h] × [h, B · C] product, not B products with C columns each:
                // on ONNX Runtime those took 7.7 % of the default graph's time, this 1.5 % (#34).
                let slopes = g.transpose(&slopes, &[1, 0, 2]);
                let columns = g.ints("columns_shape", &[2], &[0, -1]);
                let slopes = g.reshape(&slopes, &columns); // [h, B · C]
                let gradient = g.matmul(&input_weight, &slopes); // [d_input, B · C]
                let split = g.ints("split_shape", &[3], &[0, -1, classes as i64]);
                let gradient = g.reshape(&gradient, &split); // [d_input, B, C]
                g.transpose(&gradient, &[1, 0, 2])
            });
            (probs, gradient)
        })
    }

    /// The hidden layer before its ReLU, its weight, and `probs`.
    fn emit_layers(&self, g: &mut GraphBuilder, x: &Value) -> (Value, Value, Value) {
        let (before_relu, input_weight) = emit_dense_keeping_weight(g, &self.hidden, x, "hidden");
        let hidden = g.relu(&before_relu);
        let logits = emit_dense(g, &self.output, &hidden, "output");
        let probs = g.probabilities(&logits);
        (before_relu, input_weight, probs)
    }

    /// The head with its logits divided by `temperature` (calibration).
    pub fn divide_logits(self, temperature: f32) -> Self {
        Self { output: divided(self.output, temperature), ..self }
    }

    pub fn classes(&self) -> usize {
        self.output.weight.dims()[1]
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::Distribution;

    use super::*;

    /// The centred scores are `x · gradient` plus what the biases give under `x`'s ReLU
    /// pattern: nothing of the input is left out of the gradient.
    #[test]
    fn centred_scores_are_the_input_times_its_gradient_plus_the_biases() {
        let device = Device::default();
        let head = MlpHead::new(6, 5, 3, 0.0, &device);
        let x = Tensor::<2>::random([4, 6], Distribution::Normal(0.0, 2.0), &device);
        let logits = head.forward(x.clone());
        let centred = logits.clone() - logits.clone().mean_dim(1);
        let gradient = head.input_gradient(x.clone()); // [4, 6, 3]
        let through_gradient = x.clone().unsqueeze_dim::<3>(1).matmul(gradient).reshape([4, 3]);
        let before_relu = head.hidden.forward(x);
        let active = before_relu.greater_elem(0.0).float();
        let bias = head.hidden.bias.as_ref().expect("hidden bias").val().unsqueeze_dim::<2>(0);
        let output_bias = head.output.bias.as_ref().expect("output bias").val().unsqueeze_dim::<2>(0);
        let output_bias = output_bias.clone() - output_bias.mean_dim(1);
        let from_biases = (bias * active).matmul(head.centred_output_weight()) + output_bias;
        let difference = (centred - through_gradient - from_biases).abs().max().into_scalar::<f32>();
        assert!(difference < 1e-4, "centred scores differ from the decomposition by {difference}");
        // The inputs were large enough that the decomposition is not trivially zero.
        assert!(logits.abs().max().into_scalar::<f32>() > 0.1);
    }
}

//! AVG, the baseline of Mehta et al. Table 3: the masked mean of the word embeddings, then a
//! ReLU MLP and softmax. It has no attention; its `embedding` output is the mean vector.

use burn::nn::{Dropout, DropoutConfig, Embedding, Linear};
use burn::prelude::*;
use burn::tensor::activation::relu;
use serde::Serialize;

use super::{Classifier, ClassifierOutput, GraphShape, HyperParameters, ModelFlags, check_sizes, hyper_parameters_of};
use crate::layers::dense::{dense, emit_dense};
use crate::layers::embedding::{embedding, emit_embedding};
use crate::layers::{GraphBatch, TokenBatch};
use crate::onnx::{Attr, Dim, ElemType, GraphBuilder};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AvgConfig {
    pub embedding_dim: usize,
    pub mlp_hidden: usize,
    pub dropout: f64,
}

impl From<&ModelFlags> for AvgConfig {
    fn from(flags: &ModelFlags) -> Self {
        Self { embedding_dim: flags.embedding_dim, mlp_hidden: flags.mlp_hidden, dropout: flags.dropout }
    }
}

impl AvgConfig {
    pub fn validate(&self) -> anyhow::Result<()> {
        check_sizes(&[("--embedding-dim", self.embedding_dim), ("--mlp-hidden", self.mlp_hidden)], self.dropout)
    }

    pub fn hyper_parameters(&self) -> HyperParameters {
        hyper_parameters_of(self)
    }

    pub fn init(&self, vocab_size: usize, classes: usize, device: &Device) -> Avg {
        Avg {
            embedding: embedding(vocab_size, self.embedding_dim, device),
            hidden: dense(self.embedding_dim, self.mlp_hidden, true, device),
            output: dense(self.mlp_hidden, classes, true, device),
            dropout: DropoutConfig::new(self.dropout).init(),
        }
    }
}

#[derive(Module, Debug)]
pub struct Avg {
    embedding: Embedding,
    hidden: Linear,
    output: Linear,
    dropout: Dropout,
}

impl Avg {
    fn embedding_dim(&self) -> usize {
        self.embedding.weight.dims()[1]
    }
}

impl Classifier for Avg {
    fn forward(&self, batch: &TokenBatch) -> ClassifierOutput {
        let words = self.embedding.forward(batch.ids.clone()); // [B, T, E]
        let mask = batch.mask.clone().unsqueeze_dim::<3>(2); // [B, T, 1]
        let summed = (words * mask).sum_dim(1).reshape([batch.batch, self.embedding_dim()]);
        // Every document has at least one token (empty ones are never batched).
        let lengths = batch.mask.clone().sum_dim(1); // [B, 1]
        let mean = summed / lengths;
        let hidden = relu(self.hidden.forward(self.dropout.forward(mean)));
        let logits = self.output.forward(self.dropout.forward(hidden));
        ClassifierOutput { logits, attention: None, regularizer: None }
    }

    fn emit(&self, g: &mut GraphBuilder) {
        let batch = GraphBatch::declare(g);
        let words = emit_embedding(g, &self.embedding, &batch.ids);
        let axis2 = g.ints("avg_axis2", &[1], &[2]);
        let mask = g.op("Unsqueeze", &[&batch.mask_f32, &axis2], vec![]);
        let masked = g.op("Mul", &[&words, &mask], vec![]);
        let axis1 = g.ints("avg_axis1", &[1], &[1]);
        let summed = g.op("ReduceSum", &[&masked, &axis1], vec![("keepdims", Attr::Int(0))]);
        let lengths = g.op("ReduceSum", &[&batch.mask_f32, &axis1], vec![("keepdims", Attr::Int(1))]);
        let mean = g.op("Div", &[&summed, &lengths], vec![]);
        let hidden = emit_dense(g, &self.hidden, &mean, "mlp_hidden");
        let hidden = g.op("Relu", &[&hidden], vec![]);
        let logits = emit_dense(g, &self.output, &hidden, "mlp_output");
        let probs = g.op("Softmax", &[&logits], vec![("axis", Attr::Int(-1))]);
        let classes = self.output.weight.dims()[1];
        g.output(&probs, "probs", ElemType::Float, &[Dim::Named("batch"), Dim::Fixed(classes)]);
        g.output(&mean, "embedding", ElemType::Float, &[Dim::Named("batch"), Dim::Fixed(self.embedding_dim())]);
    }

    fn graph_shape(&self) -> GraphShape {
        GraphShape { attention_heads: None, embedding_dim: self.embedding_dim() }
    }
}

//! CNN, the baseline of Kim (2014) as compared in Mehta et al. Table 3: one convolution per
//! kernel width over the word embeddings, ReLU, max over time, the pooled features
//! concatenated, dropout, softmax layer. No attention output; `embedding` is the pooled
//! feature vector.
//!
//! Padding-correct without lengths: padding embeddings are zeroed, each convolution pads
//! k − 1 zeros on the right (so a window that runs past a document's end sees the same zeros
//! alone as in a padded batch, and a document shorter than k still has a window), and the
//! features at padding positions are zeroed before the max. ReLU makes every feature ≥ 0
//! and every document has a token, so zeroing padding cannot change a maximum.

use burn::nn::conv::{Conv1d, Conv1dConfig};
use burn::nn::{Dropout, DropoutConfig, Embedding, Linear, PaddingConfig1d};
use burn::prelude::*;
use burn::tensor::activation::relu;
use serde::Serialize;

use super::{GraphShape, ModelConfig, Network, NetworkOutput, check_sizes};
use crate::layers::dense::{dense, emit_dense};
use crate::layers::embedding::{InitialWords, embedding, emit_embedding};
use crate::layers::{GraphBatch, TokenBatch, emit_conv1d};
use crate::onnx::{Dim, ElemType, GraphBuilder, Value};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CnnConfig {
    pub embedding_dim: usize,
    pub filters: usize,
    pub kernel_widths: Vec<usize>,
    pub dropout: f64,
}

config_from_flags!(CnnConfig, |flags| { filters }, kernel_widths: flags.kernel_widths.clone());

impl ModelConfig for CnnConfig {
    type Model = Cnn;

    fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(!self.kernel_widths.is_empty(), "--kernel-widths needs at least one width");
        let mut sizes = vec![("--embedding-dim", self.embedding_dim), ("--filters", self.filters)];
        sizes.extend(self.kernel_widths.iter().map(|&k| ("--kernel-widths (each)", k)));
        check_sizes(&sizes, self.dropout)
    }

    fn init(&self, words: &InitialWords, classes: usize, device: &Device) -> Cnn {
        let convolutions = self
            .kernel_widths
            .iter()
            .map(|&k| {
                Conv1dConfig::new(self.embedding_dim, self.filters, k)
                    .with_padding(PaddingConfig1d::Explicit(0, k - 1))
                    .init(device)
            })
            .collect();
        Cnn {
            embedding: embedding(words, self.embedding_dim, device),
            convolutions,
            output: dense(self.filters * self.kernel_widths.len(), classes, true, device),
            dropout: DropoutConfig::new(self.dropout).init(),
        }
    }
}

#[derive(Module, Debug)]
pub struct Cnn {
    embedding: Embedding,
    convolutions: Vec<Conv1d>,
    output: Linear,
    dropout: Dropout,
}

impl Cnn {
    fn features(&self) -> usize {
        self.output.weight.dims()[0]
    }
}

impl Network for Cnn {
    fn divide_logits(self, temperature: f32) -> Self {
        Self { output: crate::layers::dense::divided(self.output, temperature), ..self }
    }

    fn forward(&self, batch: &TokenBatch) -> NetworkOutput {
        let words = batch.zero_padding(self.embedding.forward(batch.ids.clone()));
        let channels = words.swap_dims(1, 2); // [B, E, T]
        let positions = batch.mask.clone().unsqueeze_dim::<3>(1); // [B, 1, T]
        let pooled: Vec<Tensor<2>> = self
            .convolutions
            .iter()
            .map(|conv| {
                let filters = conv.weight.dims()[0];
                let features = relu(conv.forward(channels.clone())) * positions.clone();
                features.max_dim(2).reshape([batch.batch, filters])
            })
            .collect();
        let pooled = Tensor::cat(pooled, 1);
        let logits = self.output.forward(self.dropout.forward(pooled));
        NetworkOutput { logits, attention: None, regularizer: None, sentence_attention: None }
    }

    fn emit(&self, g: &mut GraphBuilder) {
        let batch = GraphBatch::declare(g);
        let words = emit_embedding(g, &self.embedding, &batch.ids);
        let words = batch.zero_padding(g, &words);
        let channels = g.transpose(&words, &[0, 2, 1]);
        let axis1 = g.ints("axis1", &[1], &[1]);
        let positions = g.unsqueeze(&batch.mask_f32, &axis1);
        let mut pooled = Vec::with_capacity(self.convolutions.len());
        for conv in &self.convolutions {
            let width = conv.weight.dims()[2];
            pooled.push(g.scoped(&format!("conv{width}"), |g| {
                // Padded on the right by width − 1, so every position starts a window.
                let features = emit_conv1d(g, conv, &channels, [0, width - 1]);
                let features = g.relu(&features);
                let features = g.mul(&features, &positions);
                // Opset 17: ReduceMax still takes its axes as an attribute.
                g.reduce_max(&features, &[2], false)
            }));
        }
        let pooled: Vec<&Value> = pooled.iter().collect();
        let pooled = g.concat(&pooled, 1);
        let logits = emit_dense(g, &self.output, &pooled, "output");
        let probs = g.probabilities(&logits);
        let classes = self.output.weight.dims()[1];
        g.output(&probs, "probs", ElemType::Float, &[Dim::Named("batch"), Dim::Fixed(classes)]);
        g.output(&pooled, "embedding", ElemType::Float, &[Dim::Named("batch"), Dim::Fixed(self.features())]);
    }

    fn graph_shape(&self) -> GraphShape {
        GraphShape { attention_heads: None, embedding_dim: self.features() }
    }
}

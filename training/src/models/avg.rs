//! AVG, the baseline of Mehta et al. Table 3: the masked mean of the word embeddings, then a
//! ReLU MLP and softmax. It has no attention; its `embedding` output is the mean vector.

use burn::nn::Embedding;
use burn::prelude::*;
use serde::Serialize;

use super::{GraphShape, ModelConfig, Network, NetworkOutput, check_sizes, declare_outputs};
use crate::layers::embedding::{InitialWords, embedding, emit_embedding};
use crate::layers::head::MlpHead;
use crate::layers::pooling::{emit_masked_mean, masked_mean};
use crate::layers::{GraphBatch, TokenBatch};
use crate::onnx::GraphBuilder;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AvgConfig {
    pub embedding_dim: usize,
    pub mlp_hidden: usize,
    pub dropout: f64,
}

config_from_flags!(AvgConfig, |flags| { mlp_hidden });

impl ModelConfig for AvgConfig {
    type Model = Avg;

    fn validate(&self) -> anyhow::Result<()> {
        check_sizes(&[("--embedding-dim", self.embedding_dim), ("--mlp-hidden", self.mlp_hidden)], self.dropout)
    }

    fn init(&self, words: &InitialWords, classes: usize, device: &Device) -> Avg {
        Avg {
            embedding: embedding(words, self.embedding_dim, device),
            head: MlpHead::new(self.embedding_dim, self.mlp_hidden, classes, self.dropout, device),
        }
    }
}

#[derive(Module, Debug)]
pub struct Avg {
    embedding: Embedding,
    head: MlpHead,
}

impl Avg {
    fn embedding_dim(&self) -> usize {
        self.embedding.weight.dims()[1]
    }
}

impl Network for Avg {
    fn divide_logits(self, temperature: f32) -> Self {
        Self { head: self.head.divide_logits(temperature), ..self }
    }

    fn forward(&self, batch: &TokenBatch) -> NetworkOutput {
        let words = self.embedding.forward(batch.ids.clone()); // [B, T, E]
        let mean = masked_mean(words, batch.mask.clone());
        let logits = self.head.forward(mean);
        NetworkOutput { logits, attention: None, regularizer: None, sentence_attention: None }
    }

    fn emit(&self, g: &mut GraphBuilder) {
        let batch = GraphBatch::declare(g);
        let words = emit_embedding(g, &self.embedding, &batch.ids);
        let mean = emit_masked_mean(g, &words, &batch.mask_f32);
        let probs = self.head.emit(g, &mean);
        declare_outputs(g, (&probs, self.head.classes()), None, (&mean, self.embedding_dim()));
    }

    fn graph_shape(&self) -> GraphShape {
        GraphShape { attention_heads: None, embedding_dim: self.embedding_dim() }
    }
}

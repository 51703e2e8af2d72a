//! BiGRU, the baseline of Mehta et al. Table 3: a biGRU over the word embeddings, max-pooled
//! over time, then the MLP classifier. Its `attention` output (one row) is the max-pool's
//! argmax share: the fraction of the 2h pooled features whose maximum each word supplied.

use burn::nn::Embedding;
use burn::prelude::*;
use serde::Serialize;

use super::{GraphShape, ModelConfig, Network, NetworkOutput, check_sizes, declare_outputs};
use crate::layers::embedding::{InitialWords, embedding, emit_embedding};
use crate::layers::head::MlpHead;
use crate::layers::pooling::{emit_masked_max, masked_max};
use crate::layers::recurrent::BiGru;
use crate::layers::{GraphBatch, TokenBatch};
use crate::onnx::GraphBuilder;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BiGruConfig {
    pub embedding_dim: usize,
    pub gru_hidden: usize,
    pub mlp_hidden: usize,
    pub dropout: f64,
}

config_from_flags!(BiGruConfig, |flags| { gru_hidden, mlp_hidden });

impl ModelConfig for BiGruConfig {
    type Model = BiGruMaxPool;

    fn validate(&self) -> anyhow::Result<()> {
        check_sizes(
            &[
                ("--embedding-dim", self.embedding_dim),
                ("--gru-hidden", self.gru_hidden),
                ("--mlp-hidden", self.mlp_hidden),
            ],
            self.dropout,
        )
    }

    fn init(&self, words: &InitialWords, classes: usize, device: &Device) -> BiGruMaxPool {
        BiGruMaxPool {
            embedding: embedding(words, self.embedding_dim, device),
            encoder: BiGru::new(self.embedding_dim, self.gru_hidden, device),
            head: MlpHead::new(2 * self.gru_hidden, self.mlp_hidden, classes, self.dropout, device),
        }
    }
}

#[derive(Module, Debug)]
pub struct BiGruMaxPool {
    embedding: Embedding,
    encoder: BiGru,
    head: MlpHead,
}

impl BiGruMaxPool {
    fn pooled_dim(&self) -> usize {
        2 * self.encoder.hidden()
    }
}

impl Network for BiGruMaxPool {
    fn divide_logits(self, temperature: f32) -> Self {
        Self { head: self.head.divide_logits(temperature), ..self }
    }

    fn forward(&self, batch: &TokenBatch) -> NetworkOutput {
        let words = self.embedding.forward(batch.ids.clone());
        let states = self.encoder.forward(words, batch);
        let (pooled, share) = masked_max(states, batch.mask.clone());
        NetworkOutput {
            logits: self.head.forward(pooled),
            attention: Some(share),
            regularizer: None,
            sentence_attention: None,
        }
    }

    fn emit(&self, g: &mut GraphBuilder) {
        let batch = GraphBatch::declare(g);
        let words = emit_embedding(g, &self.embedding, &batch.ids);
        let states = self.encoder.emit(g, &batch, &words);
        let (pooled, share) = emit_masked_max(g, &states, &batch.mask_f32);
        let probs = self.head.emit(g, &pooled);
        declare_outputs(g, (&probs, self.head.classes()), Some((&share, 1)), (&pooled, self.pooled_dim()));
    }

    fn graph_shape(&self) -> GraphShape {
        GraphShape { attention_heads: Some(1), embedding_dim: self.pooled_dim() }
    }
}

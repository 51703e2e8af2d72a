//! NAL (Shetty et al.): self-attention without a recurrent encoder, then a neural averaging
//! layer over the heads.
//!
//! word embedding + sinusoidal positions = `X` → SAN attention `A = softmax(W_s2 tanh(W_s1 Xᵀ))`
//! with r hops (padding masked, penalty ‖A·Aᵀ − I‖²_F) → `M = A·X` → neural averaging: each
//! head's row `m_i` times its own `W_ni`, concatenated, times `W_av` (with ReLU) into a
//! single vector → softmax layer. `W_av` and the softmax layer are the [`MlpHead`].

use burn::module::Param;
use burn::nn::Embedding;
use burn::prelude::*;
use burn::tensor::Distribution;
use serde::Serialize;

use super::{GraphShape, ModelConfig, Network, NetworkOutput, check_sizes, declare_contribution, declare_outputs};
use crate::layers::attention::{StructuredAttention, redundancy_penalty};
use crate::layers::contribution::{emit_per_hop, emit_token_contribution, per_hop, token_contribution};
use crate::layers::embedding::{InitialWords, embedding, emit_embedding};
use crate::layers::head::MlpHead;
use crate::layers::positions::{add_positions, emit_add_positions};
use crate::layers::{GraphBatch, TokenBatch, values};
use crate::onnx::GraphBuilder;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NalConfig {
    pub embedding_dim: usize,
    pub attention_dim: usize,
    pub hops: usize,
    pub averaging_dim: usize,
    pub mlp_hidden: usize,
    pub dropout: f64,
    pub penalty: f32,
}

config_from_flags!(
    NalConfig,
    |flags| { attention_dim, hops, averaging_dim, mlp_hidden },
    penalty: flags.penalty.unwrap_or(1.0),
);

impl ModelConfig for NalConfig {
    type Model = Nal;

    fn validate(&self) -> anyhow::Result<()> {
        check_sizes(
            &[
                ("--embedding-dim", self.embedding_dim),
                ("--attention-dim", self.attention_dim),
                ("--hops", self.hops),
                ("--averaging-dim", self.averaging_dim),
                ("--mlp-hidden", self.mlp_hidden),
            ],
            self.dropout,
        )?;
        anyhow::ensure!(self.penalty >= 0.0, "--penalty must not be negative");
        Ok(())
    }

    fn init(&self, words: &InitialWords, classes: usize, device: &Device) -> Nal {
        let bound = 1.0 / (self.embedding_dim as f64).sqrt();
        let per_head = Tensor::random(
            [self.hops, self.embedding_dim, self.averaging_dim],
            Distribution::Uniform(-bound, bound),
            device,
        );
        Nal {
            embedding: embedding(words, self.embedding_dim, device),
            attention: StructuredAttention::new(self.embedding_dim, self.attention_dim, self.hops, device),
            per_head: Param::from_tensor(per_head),
            head: MlpHead::new(self.hops * self.averaging_dim, self.mlp_hidden, classes, self.dropout, device),
            penalty: self.penalty,
        }
    }
}

#[derive(Module, Debug)]
pub struct Nal {
    embedding: Embedding,
    attention: StructuredAttention,
    /// `W_ni` for each hop i: `[hops, embedding_dim, averaging_dim]`.
    per_head: Param<Tensor<3>>,
    head: MlpHead,
    penalty: f32,
}

impl Nal {
    fn averaged_dim(&self) -> usize {
        let [hops, _, width] = self.per_head.dims();
        hops * width
    }

    fn embedding_dim(&self) -> usize {
        self.embedding.weight.dims()[1]
    }

    /// The words with positions `[B, T, E]`, the attention `[B, r, T]` and the averaged
    /// hops flattened.
    fn read(&self, batch: &TokenBatch) -> (Tensor<3>, Tensor<3>, Tensor<2>) {
        let words = add_positions(self.embedding.forward(batch.ids.clone())); // [B, T, E]
        let attention = self.attention.forward(words.clone(), batch); // [B, r, T]
        let rows = attention.clone().matmul(words.clone()); // [B, r, E]
        // Each head through its own W_ni: [r, B, E] · [r, E, d_n] → [r, B, d_n].
        let projected = rows.swap_dims(0, 1).matmul(self.per_head.val()).swap_dims(0, 1);
        (words, attention, projected.reshape([batch.batch, self.averaged_dim()]))
    }
}

impl Network for Nal {
    fn divide_logits(self, temperature: f32) -> Self {
        Self { head: self.head.divide_logits(temperature), ..self }
    }

    fn forward(&self, batch: &TokenBatch) -> NetworkOutput {
        let (_, attention, averaged) = self.read(batch);
        let regularizer = (self.penalty > 0.0).then(|| redundancy_penalty(attention.clone()) * self.penalty);
        NetworkOutput {
            logits: self.head.forward(averaged),
            attention: Some(attention),
            regularizer,
            sentence_attention: None,
        }
    }

    fn emit(&self, g: &mut GraphBuilder) {
        let batch = GraphBatch::declare(g);
        let words = emit_embedding(g, &self.embedding, &batch.ids);
        let words = emit_add_positions(g, &words, self.embedding_dim());
        let attention = self.attention.emit(g, &batch, &words);
        let (averaged, per_head) = g.scoped("averaging", |g| {
            let rows = g.matmul(&attention, &words);
            let head_major = g.transpose(&rows, &[1, 0, 2]);
            let [hops, dim, width] = self.per_head.dims();
            let per_head = g.weight("per_head", &[hops, dim, width], &values(self.per_head.val()));
            let projected = g.matmul(&head_major, &per_head);
            let projected = g.transpose(&projected, &[1, 0, 2]);
            let flat = g.ints("flatten_shape", &[2], &[0, -1]);
            (g.reshape(&projected, &flat), per_head)
        });
        let (probs, gradient) = self.head.emit_explained(g, &averaged);
        let contribution = g.scoped("averaging", |g| {
            // Back through each head's W_ni: [r, E, d_n] · [B, r, d_n, C] → [B, r, E, C].
            let [hops, _, width] = self.per_head.dims();
            let gradient = emit_per_hop(g, &gradient, hops, width);
            let gradient = g.matmul(&per_head, &gradient);
            emit_token_contribution(g, &attention, &words, &gradient, (hops, self.head.classes()))
        });
        declare_outputs(
            g,
            (&probs, self.head.classes()),
            Some((&attention, self.attention.hops())),
            (&averaged, self.averaged_dim()),
        );
        declare_contribution(g, &contribution, self.head.classes());
    }

    fn contribution(&self, batch: &TokenBatch) -> Option<Tensor<3>> {
        let (words, attention, averaged) = self.read(batch);
        let [hops, dim, width] = self.per_head.dims();
        let gradient = per_hop(self.head.input_gradient(averaged), hops); // [B, r, d_n, C]
        let [batch_size, _, _, _] = gradient.dims();
        let per_head = self.per_head.val().unsqueeze_dim::<4>(0).expand([batch_size, hops, dim, width]);
        Some(token_contribution(attention, words, per_head.matmul(gradient)))
    }

    fn graph_shape(&self) -> GraphShape {
        GraphShape { attention_heads: Some(self.attention.hops()), embedding_dim: self.averaged_dim() }
    }
}

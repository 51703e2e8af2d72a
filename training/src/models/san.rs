//! SAN: structured self-attentive sentence embedding (Lin et al. 2017).
//! embedding → biLSTM (u per direction) → r-hop attention A → M = A·H → ReLU MLP → softmax,
//! trained with cross-entropy + coefficient · ‖A·Aᵀ − I‖²_F.
//!
//! `--pooled-values words` (our extension) pools the word embeddings E instead of H: M = A·E.
//! The biLSTM then only chooses where each hop looks, and a token's contribution is its own
//! word's value weighted by that attention; with H, a token's state also carries its
//! neighbours' meaning, and the contribution credits carrier words (`this`, `.`) for it.
//!
//! `--pooled-values gated-words` (ours too) scales each pooled word by `tanh(w·h_t + b)`, read
//! from its biLSTM state: a word's push can then turn with its context ("not bad") and is
//! still its own.
//!
//! `--encoder conv` and `conv-mean` (our extensions) read the words with one convolution
//! over a window around each token (plus, for `conv-mean`, the document's mean word) instead
//! of the biLSTM, which costs one sequential step per token.

use burn::module::Param;
use burn::nn::{Embedding, Linear};
use burn::prelude::*;
use burn::tensor::activation::tanh;
use serde::Serialize;

use super::{
    Encoder, GraphShape, ModelConfig, NETWORK_DEFAULTS, Network, NetworkOutput, Perturbable, PooledValues,
    VariantDefaults, check_sizes, declare_contribution, declare_outputs,
};
use crate::layers::attention::{StructuredAttention, redundancy_penalty};
use crate::layers::contribution::{emit_per_hop, emit_token_contribution, per_hop, token_contribution};
use crate::layers::dense::{dense, emit_dense};
use crate::layers::embedding::{InitialWords, embedding, emit_embedding};
use crate::layers::head::MlpHead;
use crate::layers::recurrent::BiLstm;
use crate::layers::window::WindowConv;
use crate::layers::{GraphBatch, TokenBatch};
use crate::onnx::{GraphBuilder, Value};

/// SAN hyper-parameters (see [`ModelFlags`] for their meaning and defaults).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SanConfig {
    pub embedding_dim: usize,
    pub encoder: Encoder,
    /// `--conv-width`, recorded only for the convolutions (`--encoder conv` or `conv-mean`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conv_width: Option<usize>,
    pub lstm_hidden: usize,
    pub attention_dim: usize,
    pub hops: usize,
    pub mlp_hidden: usize,
    pub dropout: f64,
    pub penalty: f32,
    pub pooled_values: PooledValues,
}

config_from_flags!(
    SanConfig,
    |flags| { encoder, lstm_hidden, attention_dim, hops, mlp_hidden },
    conv_width: (flags.encoder != Encoder::Bilstm).then_some(flags.conv_width),
    penalty: flags.penalty.unwrap_or(0.0),
    pooled_values: flags.pooled_values.unwrap_or(PooledValues::Words),
);

/// The default model's recipe, which fits other corpora too (RESULTS.md, "SAN's defaults"):
/// trained at a higher rate with looser clipping and less dropout than the paper. The rest of
/// the recipe is in the flags' defaults: the hops pool words and have no penalty
/// (`config_from_flags!` above), and the biLSTM that only places them has 16 units
/// (`--lstm-hidden`). Width, token limit and batch are the other networks'. Like the default
/// model, whose words started from vectors trained on IMDB, it starts from word vectors:
/// without `--word-vectors`, from ones trained on the training documents first, when they are
/// enough text (`job::MIN_PRETRAINING_WORDS`; RESULTS.md, "Word vectors from the corpus").
pub const DEFAULTS: VariantDefaults =
    VariantDefaults { dropout: 0.3, learning_rate: 3e-3, clip_norm: 5.0, pretrains_words: true, ..NETWORK_DEFAULTS };

impl ModelConfig for SanConfig {
    type Model = San;
    const DEFAULTS: VariantDefaults = DEFAULTS;

    fn validate(&self) -> anyhow::Result<()> {
        check_sizes(
            &[
                ("--embedding-dim", self.embedding_dim),
                ("--lstm-hidden", self.lstm_hidden),
                ("--attention-dim", self.attention_dim),
                ("--hops", self.hops),
                ("--mlp-hidden", self.mlp_hidden),
            ],
            self.dropout,
        )?;
        anyhow::ensure!(self.penalty >= 0.0, "--penalty must not be negative");
        if let Some(width) = self.conv_width {
            anyhow::ensure!(
                width % 2 == 1,
                "--conv-width must be odd, so each window is centred on its word (got {width})"
            );
        }
        Ok(())
    }

    fn trains_on_perturbed_words(&self) -> bool {
        true
    }

    fn init(&self, words: &InitialWords, classes: usize, device: &Device) -> San {
        let states = 2 * self.lstm_hidden;
        let pools_words = self.pooled_values != PooledValues::States;
        let value_gate = (self.pooled_values == PooledValues::GatedWords).then(|| {
            let mut gate = dense(states, 1, true, device);
            gate.bias = Some(Param::from_tensor(Tensor::full([1], VALUE_GATE_BIAS, device)));
            gate
        });
        let value_width = if pools_words { self.embedding_dim } else { states };
        San {
            embedding: embedding(words, self.embedding_dim, device),
            encoder: match (self.encoder, self.conv_width) {
                (Encoder::Bilstm, _) | (_, None) => {
                    ContextReader::BiLstm(BiLstm::new(self.embedding_dim, self.lstm_hidden, device))
                }
                (encoder, Some(width)) => {
                    let document = encoder == Encoder::ConvMean;
                    ContextReader::Window(WindowConv::new(self.embedding_dim, states, width, document, device))
                }
            },
            attention: StructuredAttention::new(states, self.attention_dim, self.hops, device),
            head: MlpHead::new(self.hops * value_width, self.mlp_hidden, classes, self.dropout, device),
            penalty: self.penalty,
            pools_words,
            value_gate,
        }
    }
}

/// The value gate's starting bias: tanh(2) ≈ 0.96, so training starts from the plain word
/// values (a gate near 0 would start from no values at all) and learns where to turn them.
const VALUE_GATE_BIAS: f32 = 2.0;

/// What reads the words before the hops choose where to look (`--encoder`).
#[derive(Module, Debug)]
pub enum ContextReader {
    BiLstm(BiLstm),
    Window(WindowConv),
}

impl ContextReader {
    /// The width of each position's state.
    fn states(&self) -> usize {
        match self {
            Self::BiLstm(lstm) => 2 * lstm.hidden(),
            Self::Window(window) => window.filters(),
        }
    }

    fn forward(&self, words: Tensor<3>, batch: &TokenBatch) -> Tensor<3> {
        match self {
            Self::BiLstm(lstm) => lstm.forward(words, batch),
            Self::Window(window) => window.forward(words, batch),
        }
    }

    fn emit(&self, g: &mut GraphBuilder, batch: &GraphBatch, words: &Value) -> Value {
        match self {
            Self::BiLstm(lstm) => lstm.emit(g, batch, words),
            Self::Window(window) => window.emit(g, batch, words),
        }
    }
}

#[derive(Module, Debug)]
pub struct San {
    embedding: Embedding,
    encoder: ContextReader,
    attention: StructuredAttention,
    head: MlpHead,
    penalty: f32,
    /// `--pooled-values words` or `gated-words`: the hops pool the embeddings, not the states.
    pools_words: bool,
    /// `--pooled-values gated-words`: each word's scale, from its state (then tanh).
    value_gate: Option<Linear>,
}

impl San {
    /// The width of each pooled value: an embedding's or the encoder's state's.
    fn value_width(&self) -> usize {
        if self.pools_words { self.embedding.weight.dims()[1] } else { self.encoder.states() }
    }

    fn embedding_dim(&self) -> usize {
        self.attention.hops() * self.value_width()
    }

    /// The pooled values `[B, T, width]`, the attention `[B, r, T]` and `M` flattened, from
    /// the batch's word embeddings `words`.
    fn read(&self, words: Tensor<3>, batch: &TokenBatch) -> (Tensor<3>, Tensor<3>, Tensor<2>) {
        let states = self.encoder.forward(words.clone(), batch);
        let attention = self.attention.forward(states.clone(), batch);
        let values = match (&self.value_gate, self.pools_words) {
            (Some(gate), _) => words * tanh(gate.forward(states)),
            (None, true) => words,
            (None, false) => states,
        };
        let sentence = attention.clone().matmul(values.clone()).reshape([batch.batch, self.embedding_dim()]);
        (values, attention, sentence)
    }
}

impl Network for San {
    fn divide_logits(self, temperature: f32) -> Self {
        Self { head: self.head.divide_logits(temperature), ..self }
    }

    fn forward(&self, batch: &TokenBatch) -> NetworkOutput {
        self.forward_embedded(self.embed(batch), batch)
    }

    fn emit(&self, g: &mut GraphBuilder) {
        let batch = GraphBatch::declare(g);
        let words = emit_embedding(g, &self.embedding, &batch.ids);
        let states = self.encoder.emit(g, &batch, &words);
        let attention = self.attention.emit(g, &batch, &states);
        let values = match (&self.value_gate, self.pools_words) {
            (Some(gate), _) => {
                let scale = emit_dense(g, gate, &states, "value_gate");
                let scale = g.tanh(&scale);
                g.mul(&words, &scale)
            }
            (None, true) => words,
            (None, false) => states,
        };
        let sentence = g.matmul(&attention, &values);
        let flat = g.ints("flatten_shape", &[2], &[0, -1]);
        let sentence = g.reshape(&sentence, &flat);
        let (probs, gradient) = self.head.emit_explained(g, &sentence);
        let hops = self.attention.hops();
        let gradient = emit_per_hop(g, &gradient, hops, self.value_width());
        let contribution = emit_token_contribution(g, &attention, &values, &gradient, (hops, self.head.classes()));
        declare_outputs(g, (&probs, self.head.classes()), Some((&attention, hops)), (&sentence, self.embedding_dim()));
        declare_contribution(g, &contribution, self.head.classes());
    }

    fn contribution(&self, batch: &TokenBatch) -> Option<Tensor<3>> {
        let (values, attention, sentence) = self.read(self.embed(batch), batch);
        let gradient = per_hop(self.head.input_gradient(sentence), self.attention.hops());
        Some(token_contribution(attention, values, gradient))
    }

    fn graph_shape(&self) -> GraphShape {
        GraphShape { attention_heads: Some(self.attention.hops()), embedding_dim: self.embedding_dim() }
    }

    fn perturbable(&self) -> Option<&dyn Perturbable> {
        Some(self)
    }
}

impl Perturbable for San {
    fn embed(&self, batch: &TokenBatch) -> Tensor<3> {
        self.embedding.forward(batch.ids.clone())
    }

    fn forward_embedded(&self, words: Tensor<3>, batch: &TokenBatch) -> NetworkOutput {
        let (_, attention, sentence) = self.read(words, batch);
        let logits = self.head.forward(sentence);
        let regularizer = (self.penalty > 0.0).then(|| redundancy_penalty(attention.clone()) * self.penalty);
        NetworkOutput { logits, attention: Some(attention), regularizer, sentence_attention: None }
    }
}

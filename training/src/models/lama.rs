//! LAMA (Mehta et al.): low-rank multi-head attention over a biGRU.
//!
//! biGRU states `h_t` → annotations `u_t = tanh(W_w h_t + b_w)` → for m heads at once,
//! `f_t = l2norm(tanh(P̃ᵀc ∘ Q̃ᵀu_t))` ∈ ℝᵐ (the bilinear form `cᵀ W_i u_t` of each head
//! factored to rank one, `P̃` and `Q̃` holding one column per head) → per head, softmax over
//! the words (padding masked) → `S = A·H`, flattened → MLP → softmax.
//!
//! The scores lie in [−1, 1] (l2-normalised across heads), so over hundreds of words the
//! softmax stays nearly flat: LAMA's heads then explain nothing. `--attention-scale`, our
//! extension of the paper, multiplies the scores by `s` before the softmax: `s` learned
//! (a temperature, as `exp` of a parameter that starts at the paper's `s = 1`), fixed, or
//! absent (`none`, the paper's formula).
//!
//! The context `c` is what the two variants differ in:
//! - `lama`: one learned global vector in the word-embedding space, initialised to the mean
//!   word embedding as the paper says;
//! - `lama-ctx`: our reading of the paper's "+ctx": each document brings its own context, the
//!   masked mean of its biGRU annotations `mean_t h_t`, so the heads ask "which words
//!   matter for *this* review" instead of for the corpus.

use burn::module::Param;
use burn::nn::{Embedding, Linear};
use burn::prelude::*;
use serde::Serialize;

use super::{
    GraphShape, ModelConfig, ModelFlags, Network, NetworkOutput, PooledValues, check_sizes, declare_contribution,
    declare_outputs,
};
use crate::layers::attention::{emit_masked_softmax, masked_softmax};
use crate::layers::contribution::{emit_per_hop, emit_token_contribution, per_hop, token_contribution};
use crate::layers::dense::{dense, emit_dense};
use crate::layers::embedding::{InitialWords, embedding, emit_embedding};
use crate::layers::head::MlpHead;
use crate::layers::pooling::{emit_masked_mean, masked_mean};
use crate::layers::recurrent::BiGru;
use crate::layers::{GraphBatch, TokenBatch, values};
use crate::onnx::{GraphBuilder, Value};

/// Keeps the l2 normalisation finite when every head scores exactly zero.
const NORM_EPSILON: f32 = 1e-12;

/// How LAMA's scores are scaled before the softmax.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AttentionScale {
    /// The paper's formula: no scale.
    None,
    /// A fixed scale.
    Fixed(f32),
    /// A learned scale, starting at 1.
    Learned,
}

impl std::str::FromStr for AttentionScale {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "none" => Ok(Self::None),
            "learned" => Ok(Self::Learned),
            _ => match text.strip_prefix("fixed:").map(str::parse::<f32>) {
                Some(Ok(value)) if value.is_finite() && value > 0.0 => Ok(Self::Fixed(value)),
                _ => Err(format!("`{text}`: give learned, fixed:VALUE (a positive number, e.g. fixed:10) or none")),
            },
        }
    }
}

impl std::fmt::Display for AttentionScale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::None => f.write_str("none"),
            Self::Fixed(value) => write!(f, "fixed:{value}"),
            Self::Learned => f.write_str("learned"),
        }
    }
}

/// Recorded in the manifest as the flag's value (`"learned"`, `"fixed:10"`, `"none"`).
impl Serialize for AttentionScale {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Where the context vector `c` comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Context {
    /// One learned vector for the whole corpus (`lama`).
    Global,
    /// The document's masked mean biGRU annotation (`lama-ctx`).
    DocumentMean,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LamaConfig {
    pub embedding_dim: usize,
    pub gru_hidden: usize,
    pub attention_dim: usize,
    pub heads: usize,
    pub mlp_hidden: usize,
    pub dropout: f64,
    pub context: Context,
    pub attention_scale: AttentionScale,
    pub pooled_values: PooledValues,
}

config_from_flags!(
    LamaConfig,
    |flags| { gru_hidden, attention_dim, heads, mlp_hidden, attention_scale },
    context: Context::Global,
    pooled_values: flags.pooled_values.unwrap_or(PooledValues::States),
);

impl ModelConfig for LamaConfig {
    type Model = Lama;

    fn validate(&self) -> anyhow::Result<()> {
        check_sizes(
            &[
                ("--embedding-dim", self.embedding_dim),
                ("--gru-hidden", self.gru_hidden),
                ("--attention-dim", self.attention_dim),
                ("--heads", self.heads),
                ("--mlp-hidden", self.mlp_hidden),
            ],
            self.dropout,
        )?;
        anyhow::ensure!(
            self.pooled_values != PooledValues::GatedWords,
            "--pooled-values gated-words is for --variant san; LAMA pools `states` or `words`"
        );
        Ok(())
    }

    fn init(&self, words: &InitialWords, classes: usize, device: &Device) -> Lama {
        let states = 2 * self.gru_hidden;
        let pools_words = self.pooled_values == PooledValues::Words;
        let value_width = if pools_words { self.embedding_dim } else { states };
        let embedding = embedding(words, self.embedding_dim, device);
        let (global_context, context_dim) = match self.context {
            Context::Global => {
                let mean_word = embedding.weight.val().mean_dim(0).reshape([self.embedding_dim]);
                (Some(Param::from_tensor(mean_word.detach())), self.embedding_dim)
            }
            Context::DocumentMean => (None, states),
        };
        Lama {
            embedding,
            encoder: BiGru::new(self.embedding_dim, self.gru_hidden, device),
            annotation: dense(states, self.attention_dim, true, device),
            context_projection: dense(context_dim, self.heads, false, device),
            annotation_projection: dense(self.attention_dim, self.heads, false, device),
            global_context,
            log_scale: match self.attention_scale {
                AttentionScale::None => None,
                AttentionScale::Fixed(value) => {
                    Some(Param::from_tensor(Tensor::from_floats([value.ln()], device)).set_require_grad(false))
                }
                AttentionScale::Learned => Some(Param::from_tensor(Tensor::zeros([1], device))),
            },
            head: MlpHead::new(self.heads * value_width, self.mlp_hidden, classes, self.dropout, device),
            pools_words,
        }
    }
}

/// `lama-ctx`: the same model and flags with a per-document context.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct LamaCtxConfig(pub LamaConfig);

impl From<&ModelFlags> for LamaCtxConfig {
    fn from(flags: &ModelFlags) -> Self {
        Self(LamaConfig { context: Context::DocumentMean, ..LamaConfig::from(flags) })
    }
}

impl ModelConfig for LamaCtxConfig {
    type Model = Lama;

    fn validate(&self) -> anyhow::Result<()> {
        self.0.validate()
    }

    fn init(&self, words: &InitialWords, classes: usize, device: &Device) -> Lama {
        self.0.init(words, classes, device)
    }
}

#[derive(Module, Debug)]
pub struct Lama {
    embedding: Embedding,
    encoder: BiGru,
    /// `W_w`, `b_w`.
    annotation: Linear,
    /// `P̃`: context → one score factor per head.
    context_projection: Linear,
    /// `Q̃`: annotation → one score factor per head.
    annotation_projection: Linear,
    /// `c` for `lama`; absent for `lama-ctx`, whose context is computed per document.
    global_context: Option<Param<Tensor<1>>>,
    /// `ln s` for `--attention-scale learned|fixed:V`; absent for the paper's formula.
    log_scale: Option<Param<Tensor<1>>>,
    head: MlpHead,
    /// `--pooled-values words`: the heads pool the embeddings, not the biGRU states.
    pools_words: bool,
}

impl Lama {
    fn heads(&self) -> usize {
        self.annotation_projection.weight.dims()[1]
    }

    /// The width of each pooled value: an embedding's or a biGRU state's.
    fn value_width(&self) -> usize {
        if self.pools_words { self.embedding.weight.dims()[1] } else { 2 * self.encoder.hidden() }
    }

    fn sentence_dim(&self) -> usize {
        self.heads() * self.value_width()
    }

    fn emit_context_factors(&self, g: &mut GraphBuilder, batch: &GraphBatch, states: &Value) -> Value {
        let axis1 = g.ints("axis1", &[1], &[1]);
        let factors = match &self.global_context {
            Some(context) => {
                // A constant of the trained model: computed once here, as burn computes it.
                let factors = values(self.context_projection.forward(context.val().unsqueeze_dim::<2>(0)));
                g.weight("global_context_factors", &[1, self.heads()], &factors)
            }
            None => {
                let mean = emit_masked_mean(g, states, &batch.mask_f32);
                emit_dense(g, &self.context_projection, &mean, "context_projection")
            }
        };
        g.unsqueeze(&factors, &axis1)
    }

    /// `P̃ᵀc`: `[1, heads]` for the global context, `[batch, heads]` per document.
    fn context_factors(&self, states: Tensor<3>, batch: &TokenBatch) -> Tensor<2> {
        match &self.global_context {
            Some(context) => self.context_projection.forward(context.val().unsqueeze_dim::<2>(0)),
            None => self.context_projection.forward(masked_mean(states, batch.mask.clone())),
        }
    }

    /// The pooled values (biGRU states `[B, T, 2h]` or embeddings), the attention `[B, m, T]`
    /// and the heads' reads flattened.
    fn read(&self, batch: &TokenBatch) -> (Tensor<3>, Tensor<3>, Tensor<2>) {
        let words = self.embedding.forward(batch.ids.clone());
        let states = self.encoder.forward(words.clone(), batch); // [B, T, 2h]
        let annotations = self.annotation.forward(states.clone()).tanh(); // [B, T, d_u]
        let context = self.context_factors(states.clone(), batch).unsqueeze_dim::<3>(1); // [B|1, 1, m]
        let scores = (self.annotation_projection.forward(annotations) * context).tanh(); // [B, T, m]
        let norms = (scores.clone() * scores.clone()).sum_dim(2).add_scalar(NORM_EPSILON).sqrt();
        let mut scores = (scores / norms).swap_dims(1, 2); // [B, m, T]
        if let Some(log_scale) = &self.log_scale {
            scores = scores * log_scale.val().exp().reshape([1, 1, 1]);
        }
        let attention = masked_softmax(scores, batch.mask.clone());
        let values = if self.pools_words { words } else { states };
        let sentence = attention.clone().matmul(values.clone()).reshape([batch.batch, self.sentence_dim()]);
        (values, attention, sentence)
    }
}

impl Network for Lama {
    fn divide_logits(self, temperature: f32) -> Self {
        Self { head: self.head.divide_logits(temperature), ..self }
    }

    fn forward(&self, batch: &TokenBatch) -> NetworkOutput {
        let (_, attention, sentence) = self.read(batch);
        NetworkOutput {
            logits: self.head.forward(sentence),
            attention: Some(attention),
            regularizer: None,
            sentence_attention: None,
        }
    }

    fn emit(&self, g: &mut GraphBuilder) {
        let batch = GraphBatch::declare(g);
        let words = emit_embedding(g, &self.embedding, &batch.ids);
        let states = self.encoder.emit(g, &batch, &words);
        let attention = g.scoped("attention", |g| {
            let annotations = emit_dense(g, &self.annotation, &states, "annotation");
            let annotations = g.tanh(&annotations);
            let context = g.scoped("context", |g| self.emit_context_factors(g, &batch, &states)); // [B|1, 1, m]
            let factors = emit_dense(g, &self.annotation_projection, &annotations, "annotation_projection");
            let scores = g.mul(&factors, &context);
            let scores = g.tanh(&scores);
            let squares = g.mul(&scores, &scores);
            let axis2 = g.ints("axis2", &[1], &[2]);
            let norms = g.reduce_sum(&squares, &axis2, true);
            let epsilon = g.scalar_f32("norm_epsilon", NORM_EPSILON);
            let norms = g.add(&norms, &epsilon);
            let norms = g.sqrt(&norms);
            let mut scores = g.div(&scores, &norms);
            if let Some(log_scale) = &self.log_scale {
                // A constant of the trained model, as burn computes it.
                let scale = values(log_scale.val().exp());
                let scale = g.scalar_f32("attention_scale", scale.first().copied().unwrap_or(1.0));
                scores = g.mul(&scores, &scale);
            }
            let scores = g.transpose(&scores, &[0, 2, 1]);
            emit_masked_softmax(g, &scores, &batch.mask_f32)
        });
        let values = if self.pools_words { words } else { states };
        let sentence = g.matmul(&attention, &values);
        let flat = g.ints("flatten_shape", &[2], &[0, -1]);
        let sentence = g.reshape(&sentence, &flat);
        let (probs, gradient) = self.head.emit_explained(g, &sentence);
        let gradient = emit_per_hop(g, &gradient, self.heads(), self.value_width());
        let contribution =
            emit_token_contribution(g, &attention, &values, &gradient, (self.heads(), self.head.classes()));
        declare_outputs(
            g,
            (&probs, self.head.classes()),
            Some((&attention, self.heads())),
            (&sentence, self.sentence_dim()),
        );
        declare_contribution(g, &contribution, self.head.classes());
    }

    fn contribution(&self, batch: &TokenBatch) -> Option<Tensor<3>> {
        let (values, attention, sentence) = self.read(batch);
        let gradient = per_hop(self.head.input_gradient(sentence), self.heads());
        Some(token_contribution(attention, values, gradient))
    }

    fn graph_shape(&self) -> GraphShape {
        GraphShape { attention_heads: Some(self.heads()), embedding_dim: self.sentence_dim() }
    }
}

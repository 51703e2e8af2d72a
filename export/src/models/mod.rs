//! The model variants. Each is one module implementing [`Classifier`] plus one entry in
//! [`Variant`]; training, export, evaluation and the parity tests work on any of them.

pub mod avg;
pub mod cnn;
pub mod san;

use std::collections::BTreeMap;

use burn::module::Module;
use burn::prelude::*;
use serde::Serialize;

use crate::layers::TokenBatch;
use crate::onnx::GraphBuilder;

/// What a forward pass returns to the training loop.
pub struct ClassifierOutput {
    /// `[batch, classes]` unnormalised scores.
    pub logits: Tensor<2>,
    /// `[batch, heads, seq]`, for variants that attend over tokens.
    pub attention: Option<Tensor<3>>,
    /// A regularisation term added to the loss (already weighted), e.g. SAN's penalty.
    pub regularizer: Option<Tensor<1>>,
}

/// Shapes a variant's graph declares, recorded in the manifest.
pub struct GraphShape {
    pub attention_heads: Option<usize>,
    pub embedding_dim: usize,
}

pub trait Classifier: Module + Clone {
    fn forward(&self, batch: &TokenBatch) -> ClassifierOutput;
    /// Emits the full graph (inputs `input_ids`, `attention_mask`; outputs `probs`,
    /// `embedding` and, if any, `attention`).
    fn emit(&self, g: &mut GraphBuilder);
    fn graph_shape(&self) -> GraphShape;
}

/// The variants `export train --variant` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Variant {
    /// Structured self-attention over a biLSTM (Lin et al. 2017).
    San,
    /// Baseline: masked mean of the word embeddings, then an MLP (AVG in Mehta et al.).
    Avg,
    /// Baseline: convolutions of several widths, max over time (Kim 2014).
    Cnn,
}

impl Variant {
    pub fn name(self) -> &'static str {
        match self {
            Variant::San => "san",
            Variant::Avg => "avg",
            Variant::Cnn => "cnn",
        }
    }
}

/// Hyper-parameters as recorded in the manifest.
pub type HyperParameters = BTreeMap<String, serde_json::Value>;

/// A variant's configuration as manifest hyper-parameters.
pub fn hyper_parameters_of(config: &impl Serialize) -> HyperParameters {
    match serde_json::to_value(config) {
        Ok(serde_json::Value::Object(map)) => map.into_iter().collect(),
        _ => HyperParameters::new(),
    }
}

/// The model flags of `export train`, shared by the variants: each reads the ones it uses
/// (named in brackets). Defaults are the papers' values where they fit a 2-core machine
/// (Lin et al. use u = 300, d_a = 350, r = 30 and a 3000-unit MLP on Yelp).
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct ModelFlags {
    /// Word embedding width [all].
    #[arg(long, default_value_t = 100)]
    pub embedding_dim: usize,
    /// LSTM units per direction, u [san].
    #[arg(long, default_value_t = 64)]
    pub lstm_hidden: usize,
    /// Attention hidden width, d_a [san].
    #[arg(long, default_value_t = 64)]
    pub attention_dim: usize,
    /// Attention hops, r [san].
    #[arg(long, default_value_t = 8)]
    pub hops: usize,
    /// Convolution filters per kernel width [cnn].
    #[arg(long, default_value_t = 100)]
    pub filters: usize,
    /// Convolution kernel widths, comma-separated [cnn].
    #[arg(long, value_delimiter = ',', default_values_t = [3, 4, 5])]
    pub kernel_widths: Vec<usize>,
    /// Hidden units of the classifier MLP [san, avg].
    #[arg(long, default_value_t = 256)]
    pub mlp_hidden: usize,
    /// Dropout before the classifier layers [all].
    #[arg(long, default_value_t = 0.5)]
    pub dropout: f64,
    /// Weight of the penalty ‖A·Aᵀ − I‖²_F in the loss; the paper uses 1.0 [san].
    #[arg(long, default_value_t = 1.0)]
    pub penalty: f32,
}

impl Default for ModelFlags {
    fn default() -> Self {
        Self {
            embedding_dim: 100,
            lstm_hidden: 64,
            attention_dim: 64,
            hops: 8,
            filters: 100,
            kernel_widths: vec![3, 4, 5],
            mlp_hidden: 256,
            dropout: 0.5,
            penalty: 1.0,
        }
    }
}

/// Refuses sizes of zero and a dropout outside [0, 1) before any training starts.
pub fn check_sizes(sizes: &[(&str, usize)], dropout: f64) -> anyhow::Result<()> {
    for (name, value) in sizes {
        anyhow::ensure!(*value > 0, "{name} must be at least 1");
    }
    anyhow::ensure!((0.0..1.0).contains(&dropout), "--dropout must be in [0, 1)");
    Ok(())
}

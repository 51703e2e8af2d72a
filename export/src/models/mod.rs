//! The model variants. Each is one module implementing [`Classifier`] plus one entry in
//! [`Variant`]; training, export, evaluation and the parity tests work on any of them.

pub mod san;

use std::collections::BTreeMap;

use burn::module::Module;
use burn::prelude::*;

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
}

impl Variant {
    pub fn name(self) -> &'static str {
        match self {
            Variant::San => "san",
        }
    }
}

/// Hyper-parameters as recorded in the manifest.
pub type HyperParameters = BTreeMap<String, serde_json::Value>;

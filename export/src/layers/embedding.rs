//! Token embedding lookup.

use burn::module::Param;
use burn::nn::{Embedding, EmbeddingConfig};
use burn::prelude::*;

use super::values;
use crate::onnx::{Attr, GraphBuilder, Value};

/// What a word embedding starts from.
#[derive(Debug, Clone)]
pub struct InitialWords {
    pub vocab_size: usize,
    /// Pre-trained rows, row-major `[vocab_size, dim]`; random N(0, 1) rows without them.
    pub vectors: Option<Vec<f32>>,
}

impl InitialWords {
    pub fn random(vocab_size: usize) -> Self {
        Self { vocab_size, vectors: None }
    }
}

/// # Panics
/// If pre-trained rows do not have `dim` values each (checked when they are loaded).
pub fn embedding(words: &InitialWords, dim: usize, device: &Device) -> Embedding {
    let mut layer = EmbeddingConfig::new(words.vocab_size, dim).init(device);
    if let Some(vectors) = &words.vectors {
        assert_eq!(vectors.len(), words.vocab_size * dim, "pre-trained rows must be [vocab, dim]");
        let table = Tensor::from_data(TensorData::new(vectors.clone(), [words.vocab_size, dim]), device);
        layer.weight = Param::from_tensor(table);
    }
    layer
}

pub fn emit_embedding(g: &mut GraphBuilder, layer: &Embedding, ids: &Value) -> Value {
    let [vocab, dim] = layer.weight.dims();
    let table = g.weight("embedding", &[vocab, dim], &values(layer.weight.val()));
    g.op("Gather", &[&table, ids], vec![("axis", Attr::Int(0))])
}

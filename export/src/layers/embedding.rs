//! Token embedding lookup.

use burn::nn::{Embedding, EmbeddingConfig};
use burn::prelude::*;

use super::values;
use crate::onnx::{Attr, GraphBuilder, Value};

pub fn embedding(vocab_size: usize, dim: usize, device: &Device) -> Embedding {
    EmbeddingConfig::new(vocab_size, dim).init(device)
}

pub fn emit_embedding(g: &mut GraphBuilder, layer: &Embedding, ids: &Value) -> Value {
    let [vocab, dim] = layer.weight.dims();
    let table = g.weight("embedding", &[vocab, dim], &values(layer.weight.val()));
    g.op("Gather", &[&table, ids], vec![("axis", Attr::Int(0))])
}

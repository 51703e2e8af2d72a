//! Token embedding lookup.

use burn::module::Param;
use burn::nn::{Embedding, EmbeddingConfig};
use burn::prelude::*;

use super::values;
use crate::onnx::{GraphBuilder, Value};

/// What a word embedding starts from.
#[derive(Debug, Clone)]
pub struct InitialWords {
    pub vocab_size: usize,
    /// Pre-trained rows, row-major `[vocab_size, dim]`; random N(0, 1) rows without them.
    pub vectors: Option<Vec<f32>>,
    /// Keep the pre-trained rows as they are during training.
    pub frozen: bool,
}

impl InitialWords {
    pub fn random(vocab_size: usize) -> Self {
        Self { vocab_size, vectors: None, frozen: false }
    }
}

/// # Panics
/// If pre-trained rows do not have `dim` values each (checked when they are loaded).
pub fn embedding(words: &InitialWords, dim: usize, device: &Device) -> Embedding {
    let mut layer = EmbeddingConfig::new(words.vocab_size, dim).init(device);
    if let Some(vectors) = &words.vectors {
        assert_eq!(vectors.len(), words.vocab_size * dim, "pre-trained rows must be [vocab, dim]");
        let table = Tensor::from_data(TensorData::new(vectors.clone(), [words.vocab_size, dim]), device);
        layer.weight = Param::from_tensor(table).set_require_grad(!words.frozen);
    }
    layer
}

pub fn emit_embedding(g: &mut GraphBuilder, layer: &Embedding, ids: &Value) -> Value {
    g.scoped("embedding", |g| {
        let [vocab, dim] = layer.weight.dims();
        let table = g.weight("table", &[vocab, dim], &values(layer.weight.val()));
        g.gather(&table, ids, 0)
    })
}

#[cfg(test)]
mod tests {
    use burn::optim::{AdamConfig, GradientsParams};

    use super::*;
    use crate::layers::values;

    /// The embedding table after one Adam step on a loss that depends on every row.
    fn after_one_step(frozen: bool) -> (Vec<f32>, Vec<f32>) {
        let device = Device::flex().autodiff();
        let (vocab_size, dim) = (5, 3);
        let vectors: Vec<f32> = (0..vocab_size * dim).map(|i| i as f32 / 10.0).collect();
        let layer = embedding(&InitialWords { vocab_size, vectors: Some(vectors.clone()), frozen }, dim, &device);
        let ids = Tensor::<2, Int>::from_data(TensorData::new(vec![0i64, 1, 2, 3, 4], [1, vocab_size]), &device);
        // The trainable scale keeps the loss differentiable when the table itself is frozen.
        let scale = Tensor::<1>::ones([1], &device).require_grad();
        let loss = (layer.forward(ids) * scale.unsqueeze::<3>()).powf_scalar(2.0).sum();
        let gradients = GradientsParams::from_grads(loss.backward(), &layer);
        let layer = AdamConfig::new().init().step(0.1, layer, gradients);
        (vectors, values(layer.weight.val()))
    }

    #[test]
    fn frozen_word_vectors_stay_as_loaded_and_others_are_trained() {
        let (loaded, frozen) = after_one_step(true);
        assert_eq!(frozen, loaded);
        let (loaded, trained) = after_one_step(false);
        assert!(trained.iter().zip(&loaded).any(|(t, l)| (t - l).abs() > 1e-3), "an unfrozen table moves");
    }
}

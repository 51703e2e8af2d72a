//! A stand-in for the model that costs nothing, to measure the pipeline's own ceiling
//! (`pipeline run --null-model`, a hidden bench-only flag). Its outputs have the model's
//! names and shapes and pass the package contract, and their values vary with the tokens, as a
//! model's do: constant attention would compress for free and flatter the write stage.

use super::{InferenceBackend, ModelInputs, ModelOutputs, OutputTensor};
use crate::package::{InputLayout, Manifest, tensor};

pub struct NullBackend {
    classes: usize,
    heads: Option<usize>,
    embedding_dim: usize,
    output_names: Vec<String>,
}

impl NullBackend {
    /// Outputs shaped like the graph `manifest` describes. Flat models only.
    pub fn for_manifest(manifest: &Manifest) -> anyhow::Result<Self> {
        anyhow::ensure!(
            manifest.input_layout == InputLayout::Tokens,
            "--null-model stands in for flat models only, not `{}`",
            manifest.variant
        );
        let mut output_names = vec![tensor::PROBS.to_owned()];
        if manifest.attention_heads.is_some() {
            output_names.push(tensor::ATTENTION.to_owned());
        }
        output_names.push(tensor::EMBEDDING.to_owned());
        Ok(Self {
            classes: manifest.labels.len(),
            heads: manifest.attention_heads,
            embedding_dim: manifest.embedding_dim,
            output_names,
        })
    }
}

/// A weight in (0, 1] that varies with the token id and position.
fn weight(id: i64, salt: usize) -> f32 {
    let mixed = (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(salt as u64).rotate_left(17);
    ((mixed % 1000) + 1) as f32 / 1000.0
}

/// `values` scaled to sum to one.
fn normalised(values: &mut [f32]) {
    let total: f32 = values.iter().sum();
    if total > 0.0 {
        values.iter_mut().for_each(|v| *v /= total);
    }
}

impl InferenceBackend for NullBackend {
    fn run(&self, inputs: &ModelInputs) -> anyhow::Result<ModelOutputs> {
        let (batch, seq) = match inputs.shape.as_slice() {
            [batch, seq] => (*batch, *seq),
            shape => anyhow::bail!("--null-model takes [batch, seq] inputs, not {shape:?}"),
        };
        let rows: Vec<(&[i64], &[i64])> =
            inputs.input_ids.chunks(seq.max(1)).zip(inputs.attention_mask.chunks(seq.max(1))).take(batch).collect();
        let mut outputs = ModelOutputs::new();
        let mut probs = Vec::with_capacity(batch * self.classes);
        let mut embedding = Vec::with_capacity(batch * self.embedding_dim);
        for (ids, _) in &rows {
            let first = ids.first().copied().unwrap_or(0);
            let mut row: Vec<f32> = (0..self.classes).map(|class| weight(first, class)).collect();
            normalised(&mut row);
            probs.extend(row);
            embedding.extend((0..self.embedding_dim).map(|d| weight(first, d + 7)));
        }
        outputs.insert(tensor::PROBS.to_owned(), OutputTensor { shape: vec![batch, self.classes], data: probs });
        if let Some(heads) = self.heads {
            let mut attention = Vec::with_capacity(batch * heads * seq);
            for (ids, mask) in &rows {
                for head in 0..heads {
                    let mut row: Vec<f32> =
                        ids.iter().zip(*mask).map(|(&id, &m)| if m == 0 { 0.0 } else { weight(id, head) }).collect();
                    normalised(&mut row);
                    attention.extend(row);
                }
            }
            outputs
                .insert(tensor::ATTENTION.to_owned(), OutputTensor { shape: vec![batch, heads, seq], data: attention });
        }
        outputs.insert(
            tensor::EMBEDDING.to_owned(),
            OutputTensor { shape: vec![batch, self.embedding_dim], data: embedding },
        );
        Ok(outputs)
    }

    fn output_names(&self) -> &[String] {
        &self.output_names
    }

    /// It stands in for a backend that leaves the cores free (a GPU), to measure the ceiling
    /// such a backend meets.
    fn computes_on_cpu(&self) -> bool {
        false
    }

    fn describe(&self) -> String {
        "null-model".to_owned()
    }
}

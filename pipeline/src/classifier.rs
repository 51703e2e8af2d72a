//! A model package opened for inference: texts in, per-document predictions out.
//!
//! Shared by `pipeline run` (one window of a file at a time) and SQL's `classify()` (one
//! Arrow array at a time), so both tokenize, batch and read the graph's outputs identically.

use anyhow::{Context, bail};
use rayon::prelude::*;

use crate::inference::{BackendOptions, InferenceBackend, ModelInputs, open_backend};
use crate::package::{MANIFEST_FILE, ModelPackage};
use crate::predictions::DocumentPrediction;
use crate::text::{EncodedText, TextEncoder};

pub struct Classifier {
    package: ModelPackage,
    encoder: TextEncoder,
    backend: Box<dyn InferenceBackend>,
    has_attention: bool,
}

/// What happened to the texts of one [`Classifier::predict`] call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TextCounts {
    pub predicted: usize,
    pub null_texts: usize,
    /// Texts with no token the tokenizer knows how to produce (their prediction is null).
    pub empty_texts: usize,
    pub truncated: usize,
    pub tokens: usize,
}

impl Classifier {
    /// Loads the tokenizer and the graph, and checks the graph against the manifest.
    /// `max_tokens` overrides the package's token limit.
    pub fn open(package: ModelPackage, backend: &BackendOptions, max_tokens: Option<usize>) -> anyhow::Result<Self> {
        let max_tokens = max_tokens.unwrap_or(package.manifest.max_tokens);
        let encoder = TextEncoder::from_file(&package.tokenizer_path(), max_tokens)?;
        let backend = open_backend(&package.graph_path(), backend)?;
        let has_attention = check_graph_matches_manifest(&package, backend.as_ref())?;
        Ok(Self { package, encoder, backend, has_attention })
    }

    pub fn package(&self) -> &ModelPackage {
        &self.package
    }

    pub fn backend(&self) -> &dyn InferenceBackend {
        self.backend.as_ref()
    }

    pub fn labels(&self) -> &[String] {
        &self.package.manifest.labels
    }

    pub fn max_tokens(&self) -> usize {
        self.encoder.max_tokens()
    }

    pub fn has_attention(&self) -> bool {
        self.has_attention
    }

    /// Tokenizes `texts` in parallel, runs them in length-sorted batches of `batch_size`
    /// (less padding) on all cores, and returns the predictions in input order: `None` for
    /// null texts and texts without tokens.
    pub fn predict(
        &self,
        texts: &[Option<&str>],
        batch_size: usize,
    ) -> anyhow::Result<(Vec<Option<DocumentPrediction>>, TextCounts)> {
        anyhow::ensure!(batch_size > 0, "the batch size must be at least 1");
        let mut counts = TextCounts::default();
        let present: Vec<(usize, &str)> = texts.iter().enumerate().filter_map(|(i, t)| t.map(|t| (i, t))).collect();
        counts.null_texts = texts.len() - present.len();
        let strings: Vec<&str> = present.iter().map(|(_, t)| *t).collect();
        let encoded = self.encoder.encode_batch(&strings)?;
        let mut documents: Vec<(usize, EncodedText)> = Vec::with_capacity(encoded.len());
        for ((row, _), encoding) in present.iter().zip(encoded) {
            counts.truncated += usize::from(encoding.truncated);
            if encoding.ids.is_empty() {
                counts.empty_texts += 1;
            } else {
                counts.tokens += encoding.ids.len();
                documents.push((*row, encoding));
            }
        }
        counts.predicted = documents.len();
        documents.sort_by_key(|(_, e)| e.ids.len());
        let batches: Vec<anyhow::Result<Vec<(usize, DocumentPrediction)>>> =
            documents.par_chunks(batch_size).map(|chunk| self.predict_batch(chunk)).collect();
        let mut rows: Vec<Option<DocumentPrediction>> = vec![None; texts.len()];
        for batch in batches {
            for (row, doc) in batch? {
                rows[row] = Some(doc);
            }
        }
        Ok((rows, counts))
    }

    fn predict_batch(&self, chunk: &[(usize, EncodedText)]) -> anyhow::Result<Vec<(usize, DocumentPrediction)>> {
        let sequences: Vec<&[i64]> = chunk.iter().map(|(_, e)| e.ids.as_slice()).collect();
        let inputs = ModelInputs::right_padded(&sequences, self.package.manifest.padding_id);
        let outputs = self.backend.run(&inputs)?;
        let probs = outputs.get("probs").context("graph has no `probs` output")?;
        let attention = outputs.get("attention");
        let embedding = outputs.get("embedding");
        Ok(chunk
            .iter()
            .enumerate()
            .map(|(i, (row, encoding))| {
                let len = encoding.ids.len();
                let attention = attention.map(|a| {
                    let seq = a.shape[2];
                    a.row(i).chunks(seq).map(|head| head[..len].to_vec()).collect()
                });
                let doc = DocumentPrediction {
                    probabilities: probs.row(i).to_vec(),
                    tokens: encoding.tokens.clone(),
                    attention,
                    embedding: embedding.map(|e| e.row(i).to_vec()),
                };
                (*row, doc)
            })
            .collect())
    }
}

/// Returns whether the graph has an `attention` output, after checking that the graph and
/// the manifest agree on it.
fn check_graph_matches_manifest(package: &ModelPackage, backend: &dyn InferenceBackend) -> anyhow::Result<bool> {
    let names = backend.output_names();
    if !names.iter().any(|n| n == "probs") {
        bail!(
            "{} does not match the package contract: it has outputs {names:?}, but `probs` is required",
            package.graph_path().display()
        );
    }
    let has_attention = names.iter().any(|n| n == "attention");
    if has_attention != package.manifest.attention_heads.is_some() {
        bail!(
            "{} does not match {}: the manifest says attention_heads = {:?} but the graph {} an `attention` output",
            package.graph_path().display(),
            package.dir.join(MANIFEST_FILE).display(),
            package.manifest.attention_heads,
            if has_attention { "has" } else { "has no" }
        );
    }
    Ok(has_attention)
}

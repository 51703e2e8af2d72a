//! Inference backends: one trait, implemented by tract (pure Rust, default) and ONNX Runtime.
//!
//! Backends exchange plain row-major buffers so that callers (the pipeline, `pipeline eval`,
//! the parity tests) never depend on a runtime's own tensor types.

mod null;
mod onnxruntime;
mod tract;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use batch_io::spelling;

pub use null::NullBackend;
pub use onnxruntime::{
    FROM_PYTHON, INSTALL_DIR, LIBRARY_FILE, ORT_GPU_VERSION, ORT_VERSION, OrtBackend, OrtLibrary,
    TELEMETRY_OFF_VARIABLE, keep_telemetry_off,
};
pub use tract::TractBackend;

/// A batch of right-padded token ids with its mask, both `[batch, seq]` (or
/// `[batch, sentences, words]` for hierarchical models), row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInputs {
    pub shape: Vec<usize>,
    pub input_ids: Vec<i64>,
    pub attention_mask: Vec<i64>,
}

impl ModelInputs {
    /// Right-pads token sequences to the longest one (at least one position).
    pub fn right_padded<S: AsRef<[i64]>>(sequences: &[S], pad_id: i64) -> Self {
        let seq = sequences.iter().map(|s| s.as_ref().len()).max().unwrap_or(0).max(1);
        let mut input_ids = Vec::with_capacity(sequences.len() * seq);
        let mut attention_mask = Vec::with_capacity(sequences.len() * seq);
        for sequence in sequences {
            let sequence = sequence.as_ref();
            input_ids.extend_from_slice(sequence);
            input_ids.extend(std::iter::repeat_n(pad_id, seq - sequence.len()));
            attention_mask.extend(std::iter::repeat_n(1, sequence.len()));
            attention_mask.extend(std::iter::repeat_n(0, seq - sequence.len()));
        }
        Self { shape: vec![sequences.len(), seq], input_ids, attention_mask }
    }

    /// Right-pads documents cut into sentences to `[batch, sentences, words]`: each document
    /// to the most sentences in the batch, each sentence to the longest one. `documents` are
    /// (token ids, sentence lengths summing to the ids' length) pairs.
    pub fn sentences_padded(documents: &[(&[i64], &[usize])], pad_id: i64) -> Self {
        let most_sentences = documents.iter().map(|(_, lengths)| lengths.len()).max().unwrap_or(0).max(1);
        let words = documents.iter().flat_map(|(_, lengths)| lengths.iter().copied()).max().unwrap_or(0).max(1);
        let size = documents.len() * most_sentences * words;
        let (mut input_ids, mut attention_mask) = (vec![pad_id; size], vec![0; size]);
        // Each document's sentence rows, `words` wide; each sentence takes its ids in turn.
        let sentence_rows = input_ids.chunks_mut(words).zip(attention_mask.chunks_mut(words));
        let mut documents_rows = sentence_rows.collect::<Vec<_>>();
        for ((ids, lengths), rows) in documents.iter().zip(documents_rows.chunks_mut(most_sentences)) {
            let mut remaining: &[i64] = ids;
            for (&len, (row_ids, row_mask)) in lengths.iter().zip(rows.iter_mut()) {
                let (sentence, rest) = remaining.split_at(len.min(remaining.len()));
                remaining = rest;
                for ((id, mask), &token) in row_ids.iter_mut().zip(row_mask.iter_mut()).zip(sentence) {
                    (*id, *mask) = (token, 1);
                }
            }
        }
        Self { shape: vec![documents.len(), most_sentences, words], input_ids, attention_mask }
    }

    pub fn batch_size(&self) -> usize {
        self.shape.first().copied().unwrap_or(0)
    }
}

/// A float32 output tensor, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputTensor {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

impl OutputTensor {
    /// The slice belonging to example `row` of the batch (first dimension).
    pub fn row(&self, row: usize) -> anyhow::Result<&[f32]> {
        let width: usize = self.shape.iter().skip(1).product();
        let start = row.checked_mul(width);
        start
            .and_then(|start| self.data.get(start..start.checked_add(width)?))
            .with_context(|| format!("the graph returned an output of shape {:?} with no row {row}", self.shape))
    }

    /// Example `row` of a `[batch, heads, seq]` output as one list per head, cut to the
    /// document's `len` tokens (the rest is padding).
    pub fn heads(&self, row: usize, len: usize) -> anyhow::Result<Vec<Vec<f32>>> {
        let seq = self.shape.get(2).copied().unwrap_or(0);
        anyhow::ensure!(
            self.shape.len() == 3 && len <= seq,
            "the graph returned an output of shape {:?} where [batch, rows (hops or classes), at least {len}] was expected",
            self.shape
        );
        Ok(self.row(row)?.chunks(seq.max(1)).filter_map(|head| head.get(..len)).map(<[f32]>::to_vec).collect())
    }
}

/// Graph outputs by name (`probs`, `attention`, `embedding`, ...).
pub type ModelOutputs = BTreeMap<String, OutputTensor>;

/// Runs an ONNX model package graph on batches.
pub trait InferenceBackend: Send + Sync {
    /// Runs one batch. Safe to call from several threads at once.
    fn run(&self, inputs: &ModelInputs) -> anyhow::Result<ModelOutputs>;
    /// [`InferenceBackend::run`], with the time the run spent in the model (not waiting for it).
    fn run_timed(&self, inputs: &ModelInputs) -> anyhow::Result<(ModelOutputs, std::time::Duration)> {
        let started = std::time::Instant::now();
        let outputs = self.run(inputs)?;
        Ok((outputs, started.elapsed()))
    }
    /// Names of the graph's outputs, in graph order.
    fn output_names(&self) -> &[String];
    /// A short name for logs and metadata (`tract`, `ort-cpu`, `ort-cuda`).
    fn describe(&self) -> String;
    /// Whether runs keep the CPU's cores busy. When they do not (a GPU, the null model), the
    /// cores are free for tokenization.
    fn computes_on_cpu(&self) -> bool {
        true
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// tract: pure Rust, CPU, no shared library needed.
    #[default]
    Tract,
    /// ONNX Runtime, loaded at run time from its shared library.
    Ort,
    /// ONNX Runtime where its library is found (about 1.8× tract's speed on a 2-core CPU), else
    /// tract.
    Auto,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Device {
    #[default]
    Cpu,
    Cuda,
}

impl Device {
    /// Documents per inference batch where the caller gives none. A CPU core finishes a batch
    /// of 64 in milliseconds, and larger ones only pad more; a GPU wants wide batches: on one
    /// H100, 1,024 ran 24,769 docs/s against 5,779 at 64 (RESULTS.md, "Batch size on the GPU").
    pub fn default_batch_size(self) -> usize {
        match self {
            Device::Cpu => 64,
            Device::Cuda => 1024,
        }
    }
}

impl batch_io::choice::Choice for BackendKind {
    const CHOICES: &'static [(Self, &'static str, &'static str)] = &[
        (Self::Tract, "tract", "pure Rust, CPU, no shared library needed"),
        (Self::Ort, "ort", "ONNX Runtime, loaded at run time from its shared library"),
        (Self::Auto, "auto", "ONNX Runtime where its library is found, else tract"),
    ];
}

impl batch_io::choice::Choice for Device {
    const CHOICES: &'static [(Self, &'static str, &'static str)] =
        &[(Self::Cpu, "cpu", "the CPU's cores"), (Self::Cuda, "cuda", "an NVIDIA GPU, through ONNX Runtime")];
}

/// Everything needed to open a backend on a graph.
#[derive(Debug, Clone)]
pub struct BackendOptions {
    pub kind: BackendKind,
    pub device: Device,
    /// Threads ONNX Runtime may use inside one run (tract runs one thread per call).
    pub intra_op_threads: usize,
    /// Explicit ONNX Runtime library; otherwise discovered (see [`OrtLibrary::locate`]).
    pub ort_library: Option<PathBuf>,
    /// More directories to look for the ONNX Runtime library in when none is named (the
    /// Python module passes its environment's `onnxruntime/capi`).
    pub ort_search_dirs: Vec<PathBuf>,
    /// On CUDA, let matrix products use TensorFloat-32 (faster; probabilities then differ
    /// from the CPU's by up to about 5e-4). Off by default, unlike ONNX Runtime's own default.
    pub tf32: bool,
}

impl Default for BackendOptions {
    fn default() -> Self {
        Self {
            kind: BackendKind::Tract,
            device: Device::Cpu,
            intra_op_threads: 1,
            ort_library: None,
            ort_search_dirs: Vec::new(),
            tf32: false,
        }
    }
}

/// Opens `graph` with the backend `options` asks for.
pub fn open_backend(graph: &Path, options: &BackendOptions) -> anyhow::Result<Box<dyn InferenceBackend>> {
    if options.tf32 && options.device != Device::Cuda {
        anyhow::bail!(
            "{} applies to CUDA only; add `{}`, or leave it out",
            spelling::flag_set("tf32"),
            spelling::option_with("device", "cuda")
        );
    }
    match options.kind {
        BackendKind::Tract => {
            if options.device == Device::Cuda {
                anyhow::bail!(
                    "the tract backend runs on the CPU only; use `{} {}` for a GPU",
                    spelling::option_with("backend", "ort"),
                    spelling::option_with("device", "cuda")
                );
            }
            Ok(Box::new(TractBackend::open(graph)?))
        }
        BackendKind::Ort => Ok(Box::new(OrtBackend::open(graph, options)?)),
        BackendKind::Auto => open_auto(graph, options),
    }
}

/// [`BackendKind::Auto`]: ONNX Runtime when its library is found; tract, saying so, when it
/// is not. A library named explicitly (`--ort-library` or `ORT_DYLIB_PATH`), or a GPU asked
/// for, must work: their errors are not hidden behind tract.
fn open_auto(graph: &Path, options: &BackendOptions) -> anyhow::Result<Box<dyn InferenceBackend>> {
    let named = options.ort_library.is_some() || OrtLibrary::from_environment().is_some();
    if named || options.device == Device::Cuda {
        return Ok(Box::new(OrtBackend::open(graph, options)?));
    }
    match OrtLibrary::locate(None, &options.ort_search_dirs) {
        Ok(_) => match OrtBackend::open(graph, options) {
            Ok(backend) => Ok(Box::new(backend)),
            Err(error) => {
                tracing::warn!("ONNX Runtime was found but cannot run the model ({error:#}); using tract");
                Ok(Box::new(TractBackend::open(graph)?))
            }
        },
        Err(_) => {
            tracing::info!(
                "no ONNX Runtime library found, so using tract (pure Rust); `scripts/install-onnxruntime.sh` \
                 or ORT_DYLIB_PATH makes the default run about 1.7× faster"
            );
            Ok(Box::new(TractBackend::open(graph)?))
        }
    }
}

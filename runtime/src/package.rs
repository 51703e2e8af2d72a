//! The model-package contract: one directory holding `model.onnx`, `tokenizer.json` and
//! `manifest.json`. `pipeline train` writes it; the pipeline, `pipeline eval` and the SQL functions read it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use batch_io::locations::{InputLocation, LocationKind};

pub const GRAPH_FILE: &str = "model.onnx";
pub const TOKENIZER_FILE: &str = "tokenizer.json";
pub const MANIFEST_FILE: &str = "manifest.json";
/// Bumped when the manifest or graph contract changes incompatibly.
pub const FORMAT_VERSION: u32 = 1;
/// The version of a multi-label package (independent sigmoid `probs`, per-label thresholds):
/// a build that reads only [`FORMAT_VERSION`] refuses it rather than read its probabilities
/// as one distribution over the classes.
pub const MULTI_LABEL_FORMAT_VERSION: u32 = 2;

/// The names of the graph's inputs and outputs (ARCHITECTURE.md, "The model package"), as
/// `pipeline train` writes them and the runtime looks them up.
pub mod tensor {
    pub const INPUT_IDS: &str = "input_ids";
    pub const ATTENTION_MASK: &str = "attention_mask";
    pub const PROBS: &str = "probs";
    pub const ATTENTION: &str = "attention";
    pub const WORD_ATTENTION: &str = "word_attention";
    pub const SENTENCE_ATTENTION: &str = "sentence_attention";
    pub const EMBEDDING: &str = "embedding";
    pub const CONTRIBUTION: &str = "contribution";
}

/// How token ids are laid out in the graph inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputLayout {
    /// `[batch, seq]`
    Tokens,
    /// `[batch, sentences, words]` (hierarchical models)
    SentencesWords,
}

/// Where the training data came from, so a package can be traced back to its corpus.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CorpusFingerprint {
    pub path: String,
    pub rows: usize,
    /// SHA-256 over the file bytes.
    pub sha256: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainingSummary {
    pub corpus: CorpusFingerprint,
    pub train_rows: usize,
    pub validation_rows: usize,
    pub epochs_run: usize,
    pub best_epoch: usize,
    pub seconds: f64,
    pub seed: u64,
    /// Models trained and averaged (the fast tier's members); `epochs_run` and `best_epoch`
    /// are the first one's.
    #[serde(default = "one")]
    pub members: usize,
    /// Training documents per class, in the order of `labels` (empty in packages written
    /// before it was recorded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub class_counts: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format_version: u32,
    /// The model family, e.g. `san`.
    pub variant: String,
    /// Class labels in the order of the `probs` output.
    pub labels: Vec<String>,
    pub input_layout: InputLayout,
    /// Documents are truncated to this many tokens.
    pub max_tokens: usize,
    /// Hierarchical layout only: sentences longer than this are cut into pieces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_sentence_words: Option<usize>,
    pub padding_id: i64,
    /// Number of attention rows in the `attention` output, if the graph has one.
    pub attention_heads: Option<usize>,
    /// Width of the `embedding` output.
    pub embedding_dim: usize,
    /// Float values in the graph's weights (packages before it: the parameters trained).
    pub parameter_count: u64,
    /// The variant's hyper-parameters, as given to `pipeline train`.
    pub hyper_parameters: BTreeMap<String, serde_json::Value>,
    pub training: TrainingSummary,
    /// Named metrics, e.g. `validation_accuracy`.
    pub metrics: BTreeMap<String, f64>,
    /// Version of the software that wrote the package.
    pub package_version: String,
    /// Multi-label models: each label's probability is its own (a sigmoid, not a share of a
    /// softmax), and a document has every label whose probability reaches its threshold
    /// here, tuned on validation; `None` for a model of one class per document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_thresholds: Option<Vec<f32>>,
}

impl Manifest {
    /// The format version a package of this kind is written with.
    pub fn format_version_for(label_thresholds: Option<&[f32]>) -> u32 {
        if label_thresholds.is_some() { MULTI_LABEL_FORMAT_VERSION } else { FORMAT_VERSION }
    }

    /// Refuses thresholds that do not give one probability in [0, 1] per label, and a
    /// version that does not match the kind of model.
    fn check_kind(&self, path: &Path) -> anyhow::Result<()> {
        let expected = Self::format_version_for(self.label_thresholds.as_deref());
        if ![FORMAT_VERSION, MULTI_LABEL_FORMAT_VERSION].contains(&self.format_version) {
            bail!(
                "{} has format version {}, this build reads versions {FORMAT_VERSION} and \
                 {MULTI_LABEL_FORMAT_VERSION}; re-export the model",
                path.display(),
                self.format_version
            );
        }
        if self.format_version != expected {
            bail!(
                "{} has format version {} but {} `label_thresholds`: version {MULTI_LABEL_FORMAT_VERSION} is a \
                 multi-label model with them, {FORMAT_VERSION} one without; the manifest was edited or is corrupt",
                path.display(),
                self.format_version,
                if self.label_thresholds.is_some() { "has" } else { "no" }
            );
        }
        if let Some(thresholds) = &self.label_thresholds
            && (thresholds.len() != self.labels.len() || !thresholds.iter().all(|t| (0.0..=1.0).contains(t)))
        {
            bail!(
                "{}: `label_thresholds` must hold one probability between 0 and 1 per label ({} labels, {} \
                 thresholds); the manifest was edited or is corrupt",
                path.display(),
                self.labels.len(),
                thresholds.len()
            );
        }
        Ok(())
    }
}

fn one() -> usize {
    1
}

/// What an output's metadata says of the model that wrote it (`model.card`): where it was
/// trained, on how much, and how well it did on validation, so that a table read a year later
/// still says which model's predictions it holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelCard {
    pub trained_on: String,
    pub corpus_sha256: String,
    pub train_rows: usize,
    pub validation_rows: usize,
    pub classes: usize,
    pub validation_accuracy: Option<f64>,
    pub validation_macro_f1: Option<f64>,
    /// Expected calibration error on validation, after calibration.
    pub validation_ece: Option<f64>,
    pub temperature: Option<f64>,
    /// The version of the software that trained it.
    pub trained_with: String,
}

impl ModelCard {
    pub fn of(manifest: &Manifest) -> Self {
        let metric = |name: &str| manifest.metrics.get(name).copied();
        let training = &manifest.training;
        Self {
            trained_on: training.corpus.path.clone(),
            corpus_sha256: training.corpus.sha256.clone(),
            train_rows: training.train_rows,
            validation_rows: training.validation_rows,
            classes: manifest.labels.len(),
            validation_accuracy: metric("validation_accuracy"),
            validation_macro_f1: metric("validation_macro_f1"),
            validation_ece: metric("validation_ece"),
            temperature: metric("temperature"),
            trained_with: manifest.package_version.clone(),
        }
    }
}

/// A model package found on disk and checked for completeness.
#[derive(Debug, Clone)]
pub struct ModelPackage {
    pub dir: PathBuf,
    pub manifest: Manifest,
}

impl ModelPackage {
    pub fn open(dir: &Path) -> anyhow::Result<Self> {
        if !dir.is_dir() {
            bail!("model package {} is not a directory", dir.display());
        }
        let missing: Vec<&str> =
            [GRAPH_FILE, TOKENIZER_FILE, MANIFEST_FILE].into_iter().filter(|f| !dir.join(f).is_file()).collect();
        if !missing.is_empty() {
            bail!(
                "model package {} is incomplete: missing {} (a package holds {GRAPH_FILE}, {TOKENIZER_FILE} and {MANIFEST_FILE}, as written by `pipeline train`)",
                dir.display(),
                missing.join(", ")
            );
        }
        let manifest_path = dir.join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&manifest_path)
            .with_context(|| format!("cannot read {}", manifest_path.display()))?;
        let manifest: Manifest = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a valid model manifest", manifest_path.display()))?;
        manifest.check_kind(&manifest_path)?;
        if manifest.labels.len() < 2 {
            bail!(
                "{} lists {} label(s); a classifier needs at least two",
                manifest_path.display(),
                manifest.labels.len()
            );
        }
        let mut seen = std::collections::BTreeSet::new();
        if let Some(twice) = manifest.labels.iter().find(|label| !seen.insert(label.as_str())) {
            bail!(
                "{} lists the label `{twice}` twice; each label names one column of the graph's `probs`",
                manifest_path.display()
            );
        }
        if manifest.max_tokens == 0 {
            bail!("{} has max_tokens 0; a document needs at least one token", manifest_path.display());
        }
        if manifest.max_sentence_words == Some(0) {
            bail!("{} has max_sentence_words 0; a sentence needs at least one word", manifest_path.display());
        }
        // Absolute, so that a later change of the working directory (Python's `os.chdir`)
        // cannot make the package's files unreadable or name other files.
        let dir = std::path::absolute(dir).with_context(|| format!("cannot make {} absolute", dir.display()))?;
        Ok(Self { dir, manifest })
    }

    pub fn graph_path(&self) -> PathBuf {
        self.dir.join(GRAPH_FILE)
    }

    pub fn tokenizer_path(&self) -> PathBuf {
        self.dir.join(TOKENIZER_FILE)
    }

    /// The package's files as an input location, so that no output is written over them.
    pub fn as_input(&self) -> InputLocation {
        InputLocation {
            location: format!("model package {}", self.dir.display()),
            kind: LocationKind::File,
            files: [GRAPH_FILE, TOKENIZER_FILE, MANIFEST_FILE].iter().map(|f| self.dir.join(f)).collect(),
        }
    }
}

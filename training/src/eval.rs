//! `pipeline eval`: scores a package on a labelled corpus by running its exported ONNX graph
//! through the pipeline's backends (not the burn model), so the figures are production's.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, bail};
use runtime::classifier::Classifier;
use runtime::inference::BackendOptions;
use runtime::long_documents::LongDocuments;
use runtime::package::ModelPackage;
use serde::Serialize;

use crate::calibration::{ChanceError, ECE_BINS, chance_calibration_error, expected_calibration_error};
use crate::data::corpus::{Columns, LabelledCorpus, some_labels};
use crate::label_sets::LabelSets;
use crate::metrics::{ClassMetrics, Confusion, Scores};

#[derive(Debug, Clone, Serialize)]
pub struct Evaluation {
    pub labels: Vec<String>,
    pub rows: usize,
    /// Rows skipped: null text/label, or no tokens at all.
    pub skipped: usize,
    /// Documents given their class, or for a multi-label model exactly their set of labels.
    pub accuracy: f64,
    pub macro_f1: f64,
    /// Multi-label models: F1 over every (document, label) decision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub micro_f1: Option<f64>,
    /// `confusion[true][predicted]`; empty for a multi-label model.
    pub confusion: Vec<Vec<usize>>,
    /// Precision, recall and F1 of each class, in the order of `labels`.
    pub per_class: Vec<ClassMetrics>,
    /// Expected calibration error of the top probability, or of each (document, label)
    /// decision of a multi-label model (15 equal-width bins).
    pub ece: f64,
    /// The error a perfectly calibrated model with the same confidences shows on these
    /// documents by chance alone: an `ece` below it is as small as they can tell.
    pub ece_by_chance: ChanceError,
    /// Accuracy on the most confident documents: what a `--min-confidence` keeping that share
    /// of them would give.
    pub coverage: Vec<Coverage>,
    pub backend: String,
    pub seconds: f64,
    pub docs_per_second: f64,
    #[serde(skip)]
    scores: Scores,
}

/// Accuracy on the `share` of documents the model is most confident of, and the confidence of
/// the least confident among them.
#[derive(Debug, Clone, Serialize)]
pub struct Coverage {
    pub share: f64,
    pub accuracy: f64,
    pub min_confidence: f64,
}

/// The shares of documents `pipeline eval` reports accuracy on.
const COVERAGES: [f64; 4] = [0.5, 0.8, 0.9, 1.0];

fn coverage(mut scored: Vec<(f64, bool)>) -> Vec<Coverage> {
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    COVERAGES
        .iter()
        .filter_map(|&share| {
            let kept = ((scored.len() as f64 * share).ceil() as usize).clamp(1, scored.len());
            let top = scored.get(..kept)?;
            let accuracy = top.iter().filter(|(_, right)| *right).count() as f64 / kept as f64;
            Some(Coverage { share, accuracy, min_confidence: top.last().map_or(0.0, |(c, _)| *c) })
        })
        .collect()
}

pub fn evaluate(
    package_dir: &Path,
    data: &Path,
    columns: &Columns,
    backend: &BackendOptions,
    batch_size: usize,
    long_documents: LongDocuments,
) -> anyhow::Result<Evaluation> {
    let package = ModelPackage::open(package_dir)?;
    let labels = package.manifest.labels.clone();
    let package_thresholds = package.manifest.label_thresholds.clone();
    let corpus = LabelledCorpus::read(data, columns)?;
    if corpus.multi_label != package_thresholds.is_some() {
        let (model, column) = if corpus.multi_label {
            ("gives one class per document", "lists of labels")
        } else {
            ("is multi-label", "one label per row")
        };
        bail!(
            "{}: the model {model}, but column `{}` holds {column}; evaluate it on a corpus labelled as it was \
             trained",
            data.display(),
            columns.label
        );
    }
    let unknown: Vec<String> = corpus.classes().into_iter().filter(|c| !labels.contains(c)).collect();
    if !unknown.is_empty() {
        let as_number = |label: &str| label.trim().parse::<f64>().ok();
        // 1.0 against 1: the same classes, written by a column of another type.
        let renumbered =
            unknown.iter().all(|u| as_number(u).is_some_and(|n| labels.iter().any(|l| as_number(l) == Some(n))));
        let hint = if renumbered {
            "; they are the model's numbers written another way (a float column against integers, say): cast the \
             label column to the type the model was trained on"
        } else {
            ""
        };
        bail!(
            "{} has {} label(s) the model does not know: {}; the model's labels are: {}{hint}",
            data.display(),
            unknown.len(),
            some_labels(unknown.iter().map(String::as_str)),
            some_labels(labels.iter().map(String::as_str))
        );
    }
    // The classifier `pipeline run` uses: same tokenization, layout and batching.
    let classifier = Classifier::open(package, backend, None)?.with_long_documents(long_documents)?;
    let started = Instant::now();
    let texts: Vec<Option<&str>> = corpus.texts.iter().map(|t| Some(t.as_str())).collect();
    let (predictions, counts) = classifier.predict(&texts, batch_size.max(1))?;
    let skipped = corpus.skipped_null + counts.empty_texts;
    if counts.predicted == 0 {
        bail!(
            "no document of {} has a token the model knows ({} rows skipped); there is nothing to score",
            data.display(),
            skipped
        );
    }
    let thresholds = package_thresholds.as_deref();
    let mut scores = match thresholds {
        None => Scores::Classes(Confusion::new(labels.clone())),
        Some(thresholds) => Scores::LabelSets(LabelSets::new(labels.clone(), thresholds)),
    };
    let (mut scored, mut confidences, mut correct) = (Vec::new(), Vec::new(), Vec::new());
    for (prediction, truth) in predictions.iter().zip(&corpus.labels) {
        let Some(prediction) = prediction else { continue };
        let truth: Vec<usize> = truth.iter().filter_map(|t| labels.iter().position(|l| l == t)).collect();
        let predicted = prediction.predicted_index();
        let confidence = f64::from(prediction.probabilities.get(predicted).copied().unwrap_or(0.0));
        let right = match &mut scores {
            Scores::Classes(confusion) => {
                let truth = truth.first().copied().unwrap_or_default();
                confusion.add(truth, predicted);
                confidences.push(confidence);
                correct.push(predicted == truth);
                predicted == truth
            }
            Scores::LabelSets(sets) => {
                let given = prediction.labels(&sets.thresholds);
                sets.add(&truth, &given);
                for (label, &p) in prediction.probabilities.iter().enumerate() {
                    let p = f64::from(p);
                    confidences.push(p.max(1.0 - p));
                    correct.push((p >= 0.5) == truth.contains(&label));
                }
                let mut truth = truth;
                truth.sort_unstable();
                truth.dedup();
                given == truth
            }
        };
        scored.push((confidence, right));
    }
    scores.warn_never_predicted(&data.display().to_string());
    let rows = counts.predicted;
    let seconds = started.elapsed().as_secs_f64();
    Ok(Evaluation {
        macro_f1: scores.macro_f1(),
        accuracy: scores.accuracy(),
        micro_f1: match &scores {
            Scores::LabelSets(sets) => Some(sets.micro_f1()),
            Scores::Classes(_) => None,
        },
        per_class: scores.per_class(),
        ece: expected_calibration_error(&confidences, &correct),
        ece_by_chance: chance_calibration_error(&confidences),
        coverage: coverage(scored),
        labels,
        rows,
        skipped,
        confusion: match &scores {
            Scores::Classes(confusion) => confusion.counts.clone(),
            Scores::LabelSets(_) => Vec::new(),
        },
        backend: classifier.backend().describe(),
        seconds,
        docs_per_second: rows as f64 / seconds,
        scores,
    })
}

/// Records `evaluation` in the package's manifest as `{prefix}_accuracy` and
/// `{prefix}_macro_f1` (written to a temporary file and renamed, so the manifest is never
/// half-written).
pub fn record_in_manifest(package_dir: &Path, prefix: &str, evaluation: &Evaluation) -> anyhow::Result<()> {
    // Opened first, so that only a package that loads is written to.
    ModelPackage::open(package_dir)?;
    let path = package_dir.join(runtime::package::MANIFEST_FILE);
    // Edited as JSON, so that the two figures are all that changes: a manifest read into the
    // current struct and written back would gain every field that has a default.
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut manifest: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    let Some(fields) = manifest.as_object_mut() else {
        anyhow::bail!("{} is not a JSON object", path.display());
    };
    let metrics = fields.entry("metrics").or_insert_with(|| serde_json::json!({}));
    let Some(metrics) = metrics.as_object_mut() else {
        anyhow::bail!("{}: `metrics` is not an object; fix or remove it", path.display());
    };
    metrics.insert(format!("{prefix}_accuracy"), serde_json::json!(evaluation.accuracy));
    metrics.insert(format!("{prefix}_macro_f1"), serde_json::json!(evaluation.macro_f1));
    let mut staged = batch_io::atomic_file::temp_beside(&path)?;
    std::io::Write::write_all(&mut staged, serde_json::to_string_pretty(&manifest)?.as_bytes())
        .map_err(|e| batch_io::atomic_file::write_failed(&path, &e))?;
    staged.publish(&path)
}

impl std::fmt::Display for Evaluation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "rows: {} (skipped {})  backend: {}  {:.0} docs/s",
            self.rows, self.skipped, self.backend, self.docs_per_second
        )?;
        match self.micro_f1 {
            None => writeln!(f, "accuracy: {:.4}", self.accuracy)?,
            Some(micro_f1) => {
                writeln!(f, "exact label sets: {:.4}", self.accuracy)?;
                writeln!(f, "micro-F1: {micro_f1:.4}")?;
            }
        }
        writeln!(f, "macro-F1: {:.4}", self.macro_f1)?;
        writeln!(f, "expected calibration error ({ECE_BINS} bins): {:.4}", self.ece)?;
        let decisions = if self.micro_f1.is_some() { "document-label decisions" } else { "documents" };
        writeln!(
            f,
            "  a perfectly calibrated model shows {:.4} on these {decisions} by chance alone (19 draws in 20 below {:.4})",
            self.ece_by_chance.mean, self.ece_by_chance.p95
        )?;
        for c in &self.coverage {
            writeln!(
                f,
                "accuracy on the {:.0} % most confident: {:.4} (confidence ≥ {:.4})",
                100.0 * c.share,
                c.accuracy,
                c.min_confidence
            )?;
        }
        write!(f, "{}", self.scores.table())?;
        Ok(())
    }
}

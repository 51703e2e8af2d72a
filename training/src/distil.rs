//! `pipeline train --teacher`: a trained package's probabilities as the targets of a new model
//! (knowledge distillation), on the training documents and, with `--unlabelled`, on documents
//! no one labelled, so that one model learns what an ensemble knows at one model's cost.
//!
//! The teacher must read the corpus as the student does: the same vocabulary, built from the
//! same training part (so the same corpus, seed and split), which also keeps the student's
//! validation documents unseen by the teacher.

use std::path::Path;

use anyhow::{Context, bail};
use rayon::prelude::*;
use runtime::inference::{InferenceBackend, ModelInputs, TractBackend};
use runtime::package::{InputLayout, ModelPackage};
use runtime::text::Vocabulary;
use tokenizers::Tokenizer;

use crate::data::vocabulary::PAD_ID;
use crate::fit::{Example, Task, argmax};
use crate::job::{PreparedData, read_unlabelled};
use crate::schedule::ClassCounts;

/// A labelled training document's target: this share on its class, the rest on the teacher's
/// distribution. Unlabelled documents take the teacher's alone.
pub const LABEL_SHARE: f32 = 0.5;

/// Documents per inference call of the teacher.
const BATCH: usize = 64;

/// Where the targets come from.
pub(crate) struct Teaching<'a> {
    pub teacher: &'a Path,
    pub unlabelled: Option<&'a Path>,
    pub text_column: &'a str,
    /// The corpus files, which `--unlabelled` must not be.
    pub labelled: Vec<&'a Path>,
}

/// Gives every training document the teacher's targets, and adds the unlabelled documents with
/// theirs; returns what the manifest records of it.
pub(crate) fn teach(
    teaching: &Teaching<'_>,
    data: &mut PreparedData,
    max_tokens: usize,
    sentence_words: Option<usize>,
) -> anyhow::Result<serde_json::Value> {
    let teacher = open_teacher(teaching.teacher, data)?;
    let classes = data.classes.len();
    let probs = probabilities(&teacher, &data.train)?;
    for (example, row) in data.train.iter_mut().zip(probs.chunks(classes)) {
        let mut targets: Vec<f32> = row.iter().map(|p| (1.0 - LABEL_SHARE) * p).collect();
        if let Some(target) = targets.get_mut(example.label()) {
            *target += LABEL_SHARE;
        }
        example.soft_targets = Some(targets);
    }
    let agreement = data.train.iter().zip(probs.chunks(classes)).filter(|(e, row)| argmax(row) == e.label()).count();
    tracing::info!(
        "teacher {}: agrees with {agreement} of the {} training labels; each training document's target is {:.0} % \
         its class and {:.0} % the teacher's probabilities",
        teaching.teacher.display(),
        data.train.len(),
        LABEL_SHARE * 100.0,
        (1.0 - LABEL_SHARE) * 100.0
    );
    let mut unlabelled_rows = 0;
    if let Some(path) = teaching.unlabelled {
        let mut examples =
            read_unlabelled(path, &teaching.labelled, teaching.text_column, data, max_tokens, sentence_words)?;
        let probs = probabilities(&teacher, &examples)?;
        for (example, row) in examples.iter_mut().zip(probs.chunks(classes)) {
            example.labels = vec![argmax(row)];
            example.soft_targets = Some(row.to_vec());
        }
        unlabelled_rows = examples.len();
        tracing::info!(
            "{unlabelled_rows} unlabelled documents of {} join training with the teacher's targets",
            path.display()
        );
        data.train.extend(examples);
        data.counts = ClassCounts::of(&data.train, classes);
    }
    Ok(serde_json::json!({
        "teacher": teacher.dir.display().to_string(),
        "teacher_variant": teacher.manifest.variant,
        "label_share": LABEL_SHARE,
        "unlabelled": teaching.unlabelled.map(|p| p.display().to_string()),
        "unlabelled_rows": unlabelled_rows,
    }))
}

/// The teacher package, checked to give one class per document over the corpus's classes and
/// to read it with the vocabulary built here.
fn open_teacher(dir: &Path, data: &PreparedData) -> anyhow::Result<ModelPackage> {
    let teacher = ModelPackage::open(dir)?;
    let manifest = &teacher.manifest;
    if data.task == Task::MultiLabel || manifest.label_thresholds.is_some() {
        bail!(
            "--teacher: distillation is for models of one class per document; {} or the corpus is multi-label",
            dir.display()
        );
    }
    if manifest.input_layout != InputLayout::Tokens {
        bail!("--teacher {} reads sentences of words (han); give a teacher that reads tokens", dir.display());
    }
    if manifest.labels != data.classes {
        bail!(
            "--teacher {} has labels {:?}, the corpus {:?}; give a teacher of the same classes",
            dir.display(),
            manifest.labels,
            data.classes
        );
    }
    let tokenizer = Tokenizer::from_file(teacher.tokenizer_path())
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", teacher.tokenizer_path().display()))?;
    if Vocabulary::of(&tokenizer).digest() != Vocabulary::of(&data.tokenizer).digest() {
        bail!(
            "--teacher {}'s vocabulary is not the one built here: train the student on the teacher's corpus with \
             its --seed ({}), --valid-fraction, --max-vocab and --min-count, so that it reads the same tokens and \
             its validation documents stay unseen by the teacher",
            dir.display(),
            manifest.training.seed
        );
    }
    Ok(teacher)
}

/// The package's probabilities on `examples`, in their order, `[documents × classes]` (flat
/// token inputs, batches of similar length, scored in parallel).
pub fn probabilities(package: &ModelPackage, examples: &[Example]) -> anyhow::Result<Vec<f32>> {
    let backend = TractBackend::open(&package.graph_path())?;
    let classes = package.manifest.labels.len();
    let mut order: Vec<usize> = (0..examples.len()).collect();
    order.sort_by_key(|&i| examples.get(i).map_or(0, |e| e.ids.len()));
    let batches: Vec<&[usize]> = order.chunks(BATCH).collect();
    let scored = batches
        .par_iter()
        .map(|batch| {
            let ids: Vec<&[i64]> = batch.iter().filter_map(|&i| examples.get(i)).map(|e| e.ids.as_slice()).collect();
            let outputs = backend.run(&ModelInputs::right_padded(&ids, PAD_ID))?;
            let probs = outputs.get("probs").context("the graph has no `probs` output")?;
            anyhow::ensure!(probs.data.len() == batch.len() * classes, "`probs` has the wrong size");
            Ok(probs.data.clone())
        })
        .collect::<anyhow::Result<Vec<Vec<f32>>>>()?;
    let mut in_order = vec![0.0f32; examples.len() * classes];
    for (batch, probs) in batches.iter().zip(&scored) {
        for (&doc, row) in batch.iter().zip(probs.chunks(classes)) {
            if let Some(slot) = in_order.get_mut(doc * classes..(doc + 1) * classes) {
                slot.copy_from_slice(row);
            }
        }
    }
    Ok(in_order)
}

//! `pipeline train` from corpus to verified package: the steps in order.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use burn::prelude::*;
use rand::SeedableRng;
use rand::rngs::StdRng;
use runtime::inference::{InferenceBackend, ModelInputs, TractBackend};
use runtime::long_documents::MAX_DOCUMENT_TOKENS;
use runtime::package::{GRAPH_FILE, InputLayout, Manifest, TrainingSummary};
use runtime::text::{TextEncoder, VOCABULARY_DIGEST_KEY, Vocabulary, sentence_lengths};
use tokenizers::Tokenizer;

use crate::calibration::{Calibration, calibrate};
use crate::data::corpus::{Columns, LabelledCorpus};
use crate::data::split::stratified_split;
use crate::data::vocabulary::{PAD_ID, VocabularyConfig, build_tokenizer};
use crate::data::word_vectors::{WordVectorConfig, WordVectors, train_on_documents};
use crate::fit::{EpochStats, Example, Task, TrainConfig, forward_probs, padded, score, train};
use crate::layers::embedding::InitialWords;
use crate::metrics::Scores;
use crate::models::{ModelConfig, ModelFlags, Network, Variant, VariantVisitor};
use crate::onnx::GraphBuilder;
use crate::package_writer::{PackageFiles, check_destination, refuse_input_inside_destination, write_package};
use crate::schedule::{ClassCounts, Schedule, TrainingFlags};
use batch_io::atomic_file::temp_dir_beside;

/// Most classes a corpus may have: more is nearly always an id or text column taken for labels.
pub const MAX_CLASSES: usize = 10_000;

/// Largest |burn − tract| allowed on `probs` when verifying an exported graph.
pub const VERIFY_TOLERANCE: f32 = 1e-4;

#[derive(Debug, Clone)]
pub struct TrainRequest {
    pub variant: Variant,
    pub train: PathBuf,
    pub valid: Option<PathBuf>,
    pub columns: Columns,
    /// `--multi-label`: the label column must hold lists (it selects multi-label anyway).
    pub multi_label: bool,
    pub out: PathBuf,
    pub force: bool,
    pub valid_fraction: f64,
    pub max_tokens: usize,
    pub vocabulary: VocabularyConfig,
    /// The training flags; those left out are chosen from the corpus ([`crate::schedule`]).
    pub training: TrainingFlags,
    pub model: ModelFlags,
    /// Pre-trained word vectors (word2vec text format) to start the word embedding from.
    pub word_vectors: Option<PathBuf>,
    /// Train everything but the embedding started from `word_vectors`.
    pub freeze_word_vectors: bool,
    /// `--no-word-vectors`: without `word_vectors`, start the embedding at random even where
    /// the variant trains vectors on the training documents first.
    pub random_words: bool,
    /// A trained package whose probabilities the model learns to give ([`crate::distil`]).
    pub teacher: Option<PathBuf>,
    /// Unlabelled documents the teacher labels for training (with `teacher` only).
    pub unlabelled: Option<PathBuf>,
}

/// What the data preparation reads of a request: the corpus, its columns, and how it is split
/// and tokenized (`pipeline combine` rebuilds its members' split from the same).
pub(crate) struct DataSpec<'a> {
    pub train: &'a Path,
    pub valid: Option<&'a Path>,
    pub columns: &'a Columns,
    pub multi_label: bool,
    pub valid_fraction: f64,
    pub seed: u64,
    pub max_tokens: usize,
    pub vocabulary: &'a VocabularyConfig,
}

impl TrainRequest {
    /// The word embedding's width: `--embedding-dim`, or the variant's.
    fn embedding_dim(&self) -> usize {
        self.model.embedding_dim.unwrap_or(self.variant.defaults().embedding_dim)
    }

    fn data(&self) -> DataSpec<'_> {
        DataSpec {
            train: &self.train,
            valid: self.valid.as_deref(),
            columns: &self.columns,
            multi_label: self.multi_label,
            valid_fraction: self.valid_fraction,
            seed: self.training.seed,
            max_tokens: self.max_tokens,
            vocabulary: &self.vocabulary,
        }
    }
}

pub struct TrainReport {
    pub package: PathBuf,
    pub manifest: Manifest,
    /// The packaged model on the validation documents.
    pub validation: Scores,
    pub calibration: Calibration,
    /// The training configuration used, and why each value left to the rule was chosen.
    pub training: TrainConfig,
    pub reasons: Vec<String>,
    /// Each member's epochs (one member for most variants).
    pub history: Vec<Vec<EpochStats>>,
}

/// Labelled, tokenized examples ready for training.
pub(crate) struct PreparedData {
    pub(crate) classes: Vec<String>,
    pub(crate) task: Task,
    pub(crate) tokenizer: Tokenizer,
    pub(crate) train: Vec<Example>,
    pub(crate) valid: Vec<Example>,
    /// Of the training part.
    pub(crate) counts: ClassCounts,
    pub(crate) corpus: LabelledCorpus,
}

/// A trained variant with its written package.
pub struct TrainOutcome<M> {
    pub report: TrainReport,
    /// The best epoch's weights, as exported.
    pub model: M,
}

pub fn run(request: &TrainRequest) -> anyhow::Result<TrainReport> {
    request.variant.visit(Train(request))
}

/// Trains the variant it visits, checking its configuration before any data is read.
struct Train<'a>(&'a TrainRequest);

impl VariantVisitor for Train<'_> {
    type Output = anyhow::Result<TrainReport>;

    fn visit<C: ModelConfig>(self, variant: Variant) -> Self::Output {
        let config = C::from(&self.0.model);
        config.validate()?;
        if let Some(members) = self.0.model.members.filter(|m| *m != config.members()) {
            bail!(
                "--members {members}: --variant {} trains one model; --members applies to --variant ngram",
                variant.name()
            );
        }
        Ok(run_variant(self.0, &config)?.report)
    }
}

/// `pipeline train` writes a local directory: a storage URL would be taken for a path
/// (`s3:/bucket/…` made here), so it is refused with what to do instead.
fn refuse_url_destination(out: &Path) -> anyhow::Result<()> {
    let text = out.to_string_lossy();
    if batch_io::object_storage::is_url(&text) || text.contains("://") {
        bail!(
            "--out {text}: pipeline train writes a package to a local directory, not to object storage. Write it \
             locally (--out models/m), copy the directory to the store (e.g. `aws s3 cp --recursive models/m {text}`), \
             then run with --model {text}"
        );
    }
    Ok(())
}

/// Trains the model `config` describes and writes its verified package.
pub fn run_variant<C: ModelConfig>(request: &TrainRequest, config: &C) -> anyhow::Result<TrainOutcome<C::Model>> {
    refuse_url_destination(&request.out)?;
    batch_io::locations::refuse_output_inside_table("out", &request.out.to_string_lossy())?;
    check_destination(&request.out, request.force)?;
    refuse_input_inside_destination("--train", &request.train, &request.out)?;
    if let Some(valid) = &request.valid {
        refuse_input_inside_destination("--valid", valid, &request.out)?;
    }
    if let Some(vectors) = &request.word_vectors {
        refuse_input_inside_destination("--word-vectors", vectors, &request.out)?;
    }
    if let Some(teacher) = &request.teacher {
        refuse_input_inside_destination("--teacher", teacher, &request.out)?;
    }
    let perturbation = request.training.perturbation();
    if perturbation.is_used() && !config.trains_on_perturbed_words() {
        bail!(
            "--adversarial and --virtual-adversarial perturb the word embeddings of --variant san only, not of --variant {}",
            request.variant.name()
        );
    }
    if let Some(unlabelled) = &request.unlabelled {
        match (&request.teacher, perturbation.virtual_adversarial) {
            (None, None) => bail!(
                "--unlabelled needs a --teacher to label its documents, or --virtual-adversarial to learn from them \
                 without labels"
            ),
            (Some(_), Some(_)) => bail!(
                "--unlabelled serves either --teacher or --virtual-adversarial, not both: drop one (with --teacher, \
                 --virtual-adversarial alone perturbs the training batches)"
            ),
            _ => {}
        }
        refuse_input_inside_destination("--unlabelled", unlabelled, &request.out)?;
    }
    // Training takes minutes to hours: a destination that cannot be written is found now, by
    // making (and removing) the temporary directory the package will be staged in.
    drop(
        temp_dir_beside(&request.out)
            .with_context(|| format!("--out {} cannot be written; choose another --out", request.out.display()))?,
    );
    request.training.validate()?;
    anyhow::ensure!(request.max_tokens > 0, "--max-tokens must be at least 1");
    anyhow::ensure!(
        request.max_tokens <= MAX_DOCUMENT_TOKENS,
        "--max-tokens {} is more than the {MAX_DOCUMENT_TOKENS} tokens any document is read to; give at most that",
        request.max_tokens
    );
    if let Some(valid) = &request.valid
        && batch_io::locations::same_location(valid, &request.train)
    {
        bail!(
            "--valid {} is the --train corpus: accuracy on the documents a model learned from says nothing of new ones; \
             give a held-out file, or leave --valid out to hold out a stratified share of --train (--valid-fraction)",
            valid.display()
        );
    }
    check_valid_fraction(request.valid.as_deref(), request.valid_fraction)?;
    let started = Instant::now();
    if request.word_vectors.is_some() && !config.takes_word_vectors() {
        bail!(
            "--variant {} learns its feature vectors for the classes and starts from none; drop --word-vectors",
            request.variant.name()
        );
    }
    let vectors = request.word_vectors.as_deref().map(|path| load_word_vectors(path, request)).transpose()?;
    let mut data = prepare(&request.data(), config.sentence_words())?;
    let (config, sizing) = config.fitted_to_classes(data.classes.len());
    config.validate()?;
    let config = &config;
    let mut recorded = BTreeMap::new();
    if let Some(teacher) = &request.teacher {
        let teaching = crate::distil::Teaching {
            teacher,
            unlabelled: request.unlabelled.as_deref(),
            text_column: &request.columns.text,
            labelled: labelled_files(request),
        };
        let distilled = crate::distil::teach(&teaching, &mut data, request.max_tokens, config.sentence_words())?;
        recorded.insert("distilled".to_owned(), distilled);
    }
    // Documents for the virtual adversarial loss alone (with a teacher, they joined training).
    let mut unlabelled = Vec::new();
    if let (Some(path), None) = (&request.unlabelled, &request.teacher) {
        unlabelled = read_unlabelled(
            path,
            &labelled_files(request),
            &request.columns.text,
            &data,
            request.max_tokens,
            config.sentence_words(),
        )?;
        tracing::info!(
            "{} unlabelled documents of {} for the virtual adversarial loss",
            unlabelled.len(),
            path.display()
        );
        let summary = serde_json::json!({ "path": path.display().to_string(), "rows": unlabelled.len() });
        recorded.insert("unlabelled".to_owned(), summary);
    }
    tracing::info!(
        "{} training and {} validation documents, {} classes ({}), vocabulary {} tokens",
        data.train.len(),
        data.valid.len(),
        data.classes.len(),
        data.classes.join(", "),
        data.tokenizer.get_vocab_size(true)
    );
    let device = Device::flex().autodiff();
    device.seed(request.training.seed);
    let mut words = InitialWords::random(data.tokenizer.get_vocab_size(true));
    let start = match vectors {
        Some(vectors) => {
            let path = request.word_vectors.as_ref().map(|p| p.display().to_string());
            let summary = serde_json::json!({ "path": path, "words_in_file": vectors.words.len() });
            Some((vectors, summary))
        }
        None if C::DEFAULTS.pretrains_words && !request.random_words && config.takes_word_vectors() => {
            pretrain_words(request, &data, &unlabelled)?
        }
        None => None,
    };
    if let Some((vectors, mut summary)) = start {
        let (table, found) = vectors.embedding_table(&data.tokenizer, request.training.seed);
        tracing::info!("word vectors: {found} of {} vocabulary words found", words.vocab_size);
        words.vectors = Some(table);
        words.frozen = request.freeze_word_vectors;
        summary["vocabulary_words_found"] = found.into();
        summary["frozen"] = request.freeze_word_vectors.into();
        recorded.insert("word_vectors".to_owned(), summary);
    }
    let mut schedule = request.training.resolve(&C::DEFAULTS, &data.counts, data.task);
    schedule.reasons.splice(0..0, sizing);
    for reason in &schedule.reasons {
        tracing::info!("chose {reason}");
    }
    let fitted = fit(config, &words, &device, &data, &unlabelled, &schedule.config)?;
    finish(request, &data, fitted, config, schedule, recorded, started)
}

/// The trained model and how its training went: one run, or one per member of a variant that
/// averages several models ([`ModelConfig::members`]).
struct Fitted<M> {
    /// In inference mode, calibrated.
    model: M,
    runs: Vec<TrainedRun>,
    validation: Scores,
    calibration: Calibration,
    /// A multi-label model's per-label thresholds, tuned on validation.
    thresholds: Option<Vec<f32>>,
}

struct TrainedRun {
    history: Vec<EpochStats>,
    best: EpochStats,
}

/// Trains the model; a variant of several members trains each from the next seed (weights,
/// dropout and batch order) and joins them into one.
fn fit<C: ModelConfig>(
    config: &C,
    words: &InitialWords,
    device: &Device,
    data: &PreparedData,
    unlabelled: &[Example],
    training: &TrainConfig,
) -> anyhow::Result<Fitted<C::Model>> {
    let members = config.members();
    let (mut models, mut runs) = (Vec::with_capacity(members), Vec::with_capacity(members));
    for member in 0..members {
        if members > 1 {
            tracing::info!("member {} of {members}", member + 1);
        }
        let training = TrainConfig { seed: training.seed + member as u64, ..training.clone() };
        device.seed(training.seed);
        let model = config.init(words, data.classes.len(), device);
        let model = config.fitted_to_corpus(model, &data.train, data.classes.len(), data.task);
        let trained = train(model, &data.classes, &data.train, &data.valid, unlabelled, &training)?;
        let best = trained.best().context("no best epoch recorded")?.clone();
        runs.push(TrainedRun { history: trained.history, best });
        models.push(trained.model);
    }
    let model = C::join(models)?;
    let (model, calibration) =
        calibrate(model.valid(), &data.valid, training.batch_size, training.calibrate, data.task)?;
    if training.calibrate {
        tracing::info!(
            "calibrated: temperature {:.3}; validation ECE ({} bins) {:.4} before, {:.4} after",
            calibration.temperature,
            crate::calibration::ECE_BINS,
            calibration.ece_before,
            calibration.ece_after
        );
    } else {
        tracing::info!("not calibrated (--no-calibration); validation ECE {:.4}", calibration.ece_before);
    }
    // A multi-label model's thresholds are tuned here, on the calibrated probabilities, which
    // the graph gives.
    let validation = score(&model, &data.valid, data.classes.clone(), training, None)?;
    let thresholds = match &validation {
        Scores::Classes(_) => None,
        Scores::LabelSets(sets) => {
            tracing::info!(
                "label thresholds tuned on validation for each label's F1: {}",
                sets.thresholds.iter().map(|t| format!("{t:.2}")).collect::<Vec<_>>().join(" ")
            );
            Some(sets.thresholds.clone())
        }
    };
    if members > 1 {
        tracing::info!(
            "the {members} members joined: valid acc {:.4}  valid macro-F1 {:.4}",
            validation.accuracy(),
            validation.macro_f1()
        );
    }
    validation.warn_never_predicted("validation");
    Ok(Fitted { model, runs, validation, calibration, thresholds })
}

/// Fewer words of training text than this learn word vectors that start SAN worse than random
/// ones, down to chance on IMDB's 600-review fixture (108,000–127,000 words) and lower on half
/// of R8 (242,000); from R8's 477,000 words they helped (+0.008 accuracy over three seeds), and
/// from IMDB's 5.3 M (+0.004). A million keeps twice the margin (RESULTS.md, "Word vectors from
/// the corpus").
pub const MIN_PRETRAINING_WORDS: usize = 1_000_000;

/// Skip-gram vectors for the model's words, trained on the training part (never on the
/// validation documents) and the `--unlabelled` ones, as the default model's words were on
/// IMDB's, with the summary the manifest records; none for a corpus too small to learn them.
fn pretrain_words(
    request: &TrainRequest,
    data: &PreparedData,
    unlabelled: &[Example],
) -> anyhow::Result<Option<(WordVectors, serde_json::Value)>> {
    let started = Instant::now();
    let config = WordVectorConfig::word2vec(request.embedding_dim(), request.training.seed);
    let documents: Vec<Vec<u32>> = data
        .train
        .iter()
        .chain(unlabelled)
        .map(|example| example.ids.iter().filter_map(|&id| u32::try_from(id).ok()).collect())
        .collect();
    let words: usize = documents.iter().map(Vec::len).sum();
    let source = if unlabelled.is_empty() { "training" } else { "training and unlabelled" };
    if words < MIN_PRETRAINING_WORDS {
        tracing::info!(
            "word embedding starts at random: the {source} documents have {words} words, too few to learn word \
             vectors from (at least {MIN_PRETRAINING_WORDS}; --word-vectors FILE starts from vectors learned elsewhere)"
        );
        return Ok(None);
    }
    tracing::info!(
        "training word vectors on the {} {source} documents ({words} words) first; --no-word-vectors starts from \
         random ones",
        documents.len()
    );
    let vectors = train_on_documents(&data.tokenizer, &documents, &config)?;
    let summary = serde_json::json!({
        "trained_on": format!("{source} documents"),
        "documents": documents.len(),
        "words": words,
        "epochs": config.epochs,
        "seconds": started.elapsed().as_secs_f64().round(),
    });
    Ok(Some((vectors, summary)))
}

/// Reads `--word-vectors` and checks their width against `--embedding-dim`.
fn load_word_vectors(path: &Path, request: &TrainRequest) -> anyhow::Result<WordVectors> {
    let vectors = WordVectors::read(path)?;
    let embedding_dim = request.embedding_dim();
    anyhow::ensure!(
        vectors.dim == embedding_dim,
        "{} holds {}-dimensional word vectors but --embedding-dim is {}; pass --embedding-dim {}",
        path.display(),
        vectors.dim,
        embedding_dim,
        vectors.dim
    );
    tracing::info!("read {} word vectors of width {} from {}", vectors.words.len(), vectors.dim, path.display());
    Ok(vectors)
}

/// Without a `--valid` file, a share of the training corpus is held out: it must leave some of
/// it on each side.
pub(crate) fn check_valid_fraction(valid: Option<&Path>, valid_fraction: f64) -> anyhow::Result<()> {
    anyhow::ensure!(
        valid.is_some() || (valid_fraction > 0.0 && valid_fraction < 1.0),
        "--valid-fraction must be between 0 and 1"
    );
    Ok(())
}

/// `sentence_words`: cut documents into sentences of at most this many tokens (hierarchical
/// variants), as the pipeline will.
pub(crate) fn prepare(request: &DataSpec<'_>, sentence_words: Option<usize>) -> anyhow::Result<PreparedData> {
    let corpus = LabelledCorpus::read(request.train, request.columns)?;
    let classes = corpus.classes();
    if classes.len() < 2 {
        bail!(
            "{} has a single class (`{}`) in column `{}`; a classifier needs at least two",
            request.train.display(),
            classes.join(""),
            request.columns.label
        );
    }
    if classes.len() > MAX_CLASSES {
        bail!(
            "{}: column `{}` has {} distinct labels, more than the {MAX_CLASSES} classes a model here can learn; \
             is it an id or a text column? Name the class column with --label-column",
            request.train.display(),
            request.columns.label,
            classes.len()
        );
    }
    crate::data::corpus::refuse_classes_differing_in_white_space(request.train, &classes)?;
    let task = task_of(request, &corpus)?;
    let index: BTreeMap<&str, usize> = classes.iter().enumerate().map(|(i, c)| (c.as_str(), i)).collect();
    let class_of = |label: &str| index.get(label).copied();
    let labels: Vec<Vec<usize>> =
        corpus.labels.iter().map(|set| set.iter().filter_map(|l| class_of(l)).collect()).collect();
    if request.valid.is_none() {
        refuse_single_document_classes(request, &classes, &labels, task)?;
    }

    let mut rng = StdRng::seed_from_u64(request.seed);
    let (train_texts, train_labels, valid_texts, valid_labels) = match request.valid {
        Some(path) => {
            let valid = LabelledCorpus::read(path, request.columns)?;
            if valid.fingerprint.sha256 == corpus.fingerprint.sha256 {
                bail!(
                    "--valid {} holds the same bytes as --train {}: accuracy on the documents a model learned from says \
                     nothing of new ones; give a held-out file, or leave --valid out",
                    path.display(),
                    request.train.display()
                );
            }
            if valid.multi_label != corpus.multi_label {
                let kind = |multi: bool| if multi { "lists of labels" } else { "one label per row" };
                bail!(
                    "--valid {} holds {} in column `{}`, but --train {} holds {}; give both files the same kind of \
                     label column",
                    path.display(),
                    kind(valid.multi_label),
                    request.columns.label,
                    request.train.display(),
                    kind(corpus.multi_label)
                );
            }
            let mut valid_labels = Vec::with_capacity(valid.len());
            for set in &valid.labels {
                let mut indices = Vec::with_capacity(set.len());
                for label in set {
                    match class_of(label) {
                        Some(class) => indices.push(class),
                        None => bail!(
                            "{} has label `{}`, which the training set {} does not have (its labels: {})",
                            path.display(),
                            label.escape_debug(),
                            request.train.display(),
                            crate::data::corpus::some_labels(classes.iter().map(String::as_str))
                        ),
                    }
                }
                valid_labels.push(indices);
            }
            (corpus.texts.clone(), labels, valid.texts, valid_labels)
        }
        None => {
            // Stratified on each document's first label: every class keeps a share in both.
            let first: Vec<usize> = labels.iter().map(|set| set.first().copied().unwrap_or_default()).collect();
            let (train_idx, valid_idx) = stratified_split(&first, request.valid_fraction, &mut rng);
            let pick = |idx: &[usize]| -> (Vec<String>, Vec<Vec<usize>>) {
                (
                    idx.iter().map(|&i| corpus.texts[i].clone()).collect(),
                    idx.iter().map(|&i| labels[i].clone()).collect(),
                )
            };
            let (tt, tl) = pick(&train_idx);
            let (vt, vl) = pick(&valid_idx);
            (tt, tl, vt, vl)
        }
    };
    if train_texts.is_empty() || valid_texts.is_empty() {
        let (empty, other) =
            if train_texts.is_empty() { ("training", "validation") } else { ("validation", "training") };
        bail!(
            "{} has {} usable rows; split into training and validation, the {empty} part is empty (all {} rows \
             went to {other}). Each class needs at least 2 rows to be split (--valid-fraction), or give a separate \
             --valid corpus",
            request.train.display(),
            corpus.len(),
            corpus.len()
        );
    }
    let valid_classes: std::collections::BTreeSet<usize> = valid_labels.iter().flatten().copied().collect();
    if let (1, Some(only), Some(path)) = (valid_classes.len(), valid_classes.first(), request.valid)
        && classes.len() > 1
    {
        bail!(
            "--valid {} holds only the class `{}`: it cannot tell how well the model separates {} classes, nor choose \
             the best epoch; give a validation file with every class, or leave --valid out",
            path.display(),
            classes.get(*only).map_or("?", String::as_str),
            classes.len()
        );
    }
    // The vocabulary comes from the training part only, so validation stays unseen.
    let tokenizer = build_tokenizer(&train_texts, request.vocabulary)?;
    let encoder = TextEncoder::new(tokenizer.clone(), request.max_tokens);
    let train = encode(&encoder, &train_texts, &train_labels, sentence_words, "training")?;
    if train.is_empty() {
        bail!(
            "{}: no training document of the text column `{}` has a token left after tokenization (they are empty or \
             punctuation only); check --text-column, or the texts themselves",
            request.train.display(),
            request.columns.text
        );
    }
    let valid = encode(&encoder, &valid_texts, &valid_labels, sentence_words, "validation")?;
    let counts = ClassCounts::of(&train, classes.len());
    Ok(PreparedData { classes, task, tokenizer, train, valid, counts, corpus })
}

/// One class per document, or a multi-label model: from the label column's type, which
/// `--multi-label` must agree with.
fn task_of(request: &DataSpec<'_>, corpus: &LabelledCorpus) -> anyhow::Result<Task> {
    if request.multi_label && !corpus.multi_label {
        bail!(
            "--multi-label: column `{}` of {} holds one label per row; a multi-label corpus holds a list of labels \
             per row (list<string>). Give such a column with --label-column, or leave --multi-label out",
            request.columns.label,
            request.train.display()
        );
    }
    if corpus.multi_label {
        tracing::info!(
            "column `{}` holds lists of labels: training a multi-label model (a sigmoid per label)",
            request.columns.label
        );
        return Ok(Task::MultiLabel);
    }
    Ok(Task::OneClass)
}

/// Without `--valid`, a class of one document cannot be both learned and validated.
fn refuse_single_document_classes(
    request: &DataSpec<'_>,
    classes: &[String],
    labels: &[Vec<usize>],
    task: Task,
) -> anyhow::Result<()> {
    let mut counts = vec![0usize; classes.len()];
    for &label in labels.iter().flatten() {
        if let Some(count) = counts.get_mut(label) {
            *count += 1;
        }
    }
    let single: Vec<&str> = classes.iter().zip(&counts).filter(|&(_, &n)| n == 1).map(|(c, _)| c.as_str()).collect();
    // A multi-label document has other labels to learn from: its rare label is a warning
    // (corpora such as Reuters-21578 have labels of one training document).
    if !single.is_empty() && task == Task::MultiLabel {
        tracing::warn!(
            "{}: {} label(s) have a single document ({}): each is learned or validated, not both, so its \
             threshold stays one half",
            request.train.display(),
            single.len(),
            crate::data::corpus::some_labels(single)
        );
    } else if !single.is_empty() {
        bail!(
            "{}: {} class(es) have a single document ({}): such a class cannot be both learned and \
             validated. Add documents to it, merge or drop it, or give a --valid file",
            request.train.display(),
            single.len(),
            crate::data::corpus::some_labels(single)
        );
    }
    Ok(())
}

/// The labelled corpus files of a request, which `--unlabelled` must not be.
fn labelled_files(request: &TrainRequest) -> Vec<&Path> {
    let mut labelled = vec![request.train.as_path()];
    labelled.extend(request.valid.as_deref());
    labelled
}

/// The `--unlabelled` documents, tokenized as the corpus is, less any that read as a validation
/// document (the validation documents must stay unseen). Refused when the file is one of the
/// labelled corpus files.
pub(crate) fn read_unlabelled(
    path: &Path,
    labelled: &[&Path],
    text_column: &str,
    data: &PreparedData,
    max_tokens: usize,
    sentence_words: Option<usize>,
) -> anyhow::Result<Vec<Example>> {
    if let Some(same) = labelled.iter().find(|p| batch_io::locations::same_location(path, p)) {
        bail!(
            "--unlabelled {} is also a labelled corpus ({}): give documents outside the training and validation sets \
             (and never the test set)",
            path.display(),
            same.display()
        );
    }
    let texts = crate::data::corpus::read_texts(path, text_column)?;
    let encoder = TextEncoder::new(data.tokenizer.clone(), max_tokens);
    let no_labels = vec![Vec::new(); texts.len()];
    let mut examples = encode(&encoder, &texts, &no_labels, sentence_words, "unlabelled")?;
    let validation: std::collections::HashSet<&[i64]> = data.valid.iter().map(|e| e.ids.as_slice()).collect();
    let before = examples.len();
    examples.retain(|e| !validation.contains(e.ids.as_slice()));
    if examples.len() < before {
        tracing::warn!(
            "--unlabelled {}: left out {} document(s) that read as validation documents",
            path.display(),
            before - examples.len()
        );
    }
    anyhow::ensure!(!examples.is_empty(), "--unlabelled {} has no document with a token to learn from", path.display());
    Ok(examples)
}

pub(crate) fn encode(
    encoder: &TextEncoder,
    texts: &[String],
    labels: &[Vec<usize>],
    sentence_words: Option<usize>,
    part: &str,
) -> anyhow::Result<Vec<Example>> {
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let encoded = encoder.encode_batch(&refs)?;
    let (mut examples, mut empty, mut truncated) = (Vec::with_capacity(texts.len()), 0, 0);
    for (encoding, labels) in encoded.into_iter().zip(labels) {
        truncated += usize::from(encoding.truncated);
        if encoding.ids.is_empty() {
            empty += 1;
        } else {
            let sentence_lengths = sentence_words
                .map(|max_words| anyhow::Ok(sentence_lengths(&encoder.vocabulary().tokens(&encoding.ids)?, max_words)))
                .transpose()?;
            examples.push(Example { ids: encoding.ids, labels: labels.clone(), sentence_lengths, soft_targets: None });
        }
    }
    if empty > 0 {
        tracing::warn!("{part}: skipped {empty} document(s) with no tokens");
    }
    if truncated > 0 {
        tracing::info!("{part}: {truncated} document(s) truncated to {} tokens", encoder.max_tokens());
    }
    Ok(examples)
}

fn finish<C: ModelConfig>(
    request: &TrainRequest,
    data: &PreparedData,
    fitted: Fitted<C::Model>,
    config: &C,
    schedule: Schedule,
    recorded: BTreeMap<String, serde_json::Value>,
    started: Instant,
) -> anyhow::Result<TrainOutcome<C::Model>> {
    let model = fitted.model.valid();
    let shape = model.graph_shape();
    let epochs = || fitted.runs.iter().flat_map(|run| &run.history);
    let mut metrics = BTreeMap::new();
    metrics.insert("validation_accuracy".to_owned(), fitted.validation.accuracy());
    metrics.insert("validation_macro_f1".to_owned(), fitted.validation.macro_f1());
    if let Scores::LabelSets(sets) = &fitted.validation {
        metrics.insert("validation_micro_f1".to_owned(), sets.micro_f1());
    }
    for class in fitted.validation.per_class() {
        metrics.insert(format!("validation_f1_{}", class.label), class.f1);
    }
    metrics.insert("temperature".to_owned(), fitted.calibration.temperature);
    metrics.insert("validation_ece_uncalibrated".to_owned(), fitted.calibration.ece_before);
    metrics.insert("validation_ece".to_owned(), fitted.calibration.ece_after);
    metrics.insert("train_accuracy".to_owned(), mean(fitted.runs.iter().map(|run| run.best.train_accuracy)));
    metrics.insert("seconds_per_epoch".to_owned(), mean(epochs().map(|e| e.seconds)));
    metrics.insert("train_docs_per_second".to_owned(), mean(epochs().map(|e| e.docs_per_second)));
    if fitted.runs.len() > 1 {
        for (member, run) in fitted.runs.iter().enumerate() {
            let name = format!("member_{}_validation_accuracy", member + 1);
            metrics.insert(name, run.best.validation_accuracy);
        }
    }
    let mut hyper_parameters = config.hyper_parameters();
    // Where the model started from (`word_vectors`) and learned from (`distilled`).
    hyper_parameters.extend(recorded);
    hyper_parameters.insert("training".to_owned(), serde_json::to_value(&schedule.config)?);
    hyper_parameters.insert("min_count".to_owned(), request.vocabulary.min_count.into());
    hyper_parameters.insert("max_vocab".to_owned(), request.vocabulary.max_vocab.into());
    let mut manifest = Manifest {
        format_version: Manifest::format_version_for(fitted.thresholds.as_deref()),
        variant: request.variant.name().to_owned(),
        labels: data.classes.clone(),
        input_layout: match config.sentence_words() {
            None => InputLayout::Tokens,
            Some(_) => InputLayout::SentencesWords,
        },
        max_tokens: request.max_tokens,
        max_sentence_words: config.sentence_words(),
        padding_id: PAD_ID,
        attention_heads: shape.attention_heads,
        embedding_dim: shape.embedding_dim,
        parameter_count: model.num_params() as u64,
        hyper_parameters,
        training: TrainingSummary {
            corpus: data.corpus.fingerprint.clone(),
            train_rows: data.train.len(),
            validation_rows: data.valid.len(),
            // Of the first member, for a variant of several: epochs a user can count.
            epochs_run: fitted.runs.first().map_or(0, |run| run.history.len()),
            best_epoch: fitted.runs.first().map_or(0, |run| run.best.epoch),
            members: fitted.runs.len(),
            seconds: started.elapsed().as_secs_f64(),
            seed: request.training.seed,
            class_counts: data.counts.per_class.clone(),
        },
        metrics,
        package_version: env!("CARGO_PKG_VERSION").to_owned(),
        label_thresholds: fitted.thresholds,
    };
    let mut graph = GraphBuilder::new(request.variant.name()).multi_label(data.task == Task::MultiLabel);
    model.emit(&mut graph);
    // What a user can check against the file's size, not what training updated.
    manifest.parameter_count = graph.float_values();
    let graph = graph.into_model(&[
        ("variant", manifest.variant.clone()),
        ("labels", serde_json::to_string(&manifest.labels)?),
        ("package_version", manifest.package_version.clone()),
        (VOCABULARY_DIGEST_KEY, Vocabulary::of(&data.tokenizer).digest()),
    ]);
    let sample = padded(&data.valid, &(0..data.valid.len().min(32)).collect::<Vec<_>>());
    let package = write_package(
        &request.out,
        request.force,
        PackageFiles { graph: &graph, tokenizer: &data.tokenizer, manifest: &manifest },
        |dir| verify_graph(&model, &dir.join(GRAPH_FILE), &sample, data.task),
    )?;
    let report = TrainReport {
        package,
        manifest,
        validation: fitted.validation,
        calibration: fitted.calibration,
        training: schedule.config,
        reasons: schedule.reasons,
        history: fitted.runs.into_iter().map(|run| run.history).collect(),
    };
    Ok(TrainOutcome { report, model })
}

/// Runs the written graph with tract on a padded batch and compares it with burn.
pub fn verify_graph<M: Network>(model: &M, graph: &Path, inputs: &ModelInputs, task: Task) -> anyhow::Result<()> {
    let expected = forward_probs(model, inputs, task).probs;
    let outputs = TractBackend::open(graph)?.run(inputs)?;
    let actual = &outputs.get("probs").context("graph has no `probs` output")?.data;
    // NaN on both sides would pass the comparison below (f32::max ignores NaN).
    anyhow::ensure!(
        expected.iter().chain(actual).all(|p| p.is_finite()),
        "training diverged: the model's probabilities are not finite (NaN); lower --learning-rate or --clip-norm"
    );
    let worst = expected.iter().zip(actual).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    anyhow::ensure!(
        expected.len() == actual.len() && worst <= VERIFY_TOLERANCE,
        "tract's probabilities differ from burn's by {worst} (tolerance {VERIFY_TOLERANCE})"
    );
    tracing::info!("verified the graph with tract: max |Δprobs| = {worst:.2e} on {} documents", inputs.batch_size());
    Ok(())
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 { 0.0 } else { sum / n as f64 }
}

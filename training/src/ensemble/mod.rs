//! `pipeline combine`: trained packages joined into one that sums their weighted logits.
//!
//! The members must have been trained on the same corpus and split (same seed, vocabulary
//! settings and validation share): the split is rebuilt from `--train` and checked against
//! each member's vocabulary, so the weights are chosen on documents no member learned from.
//! Each member is run on those documents, the weights of least log-loss are fitted
//! ([`weights`]), and one graph holding every member is written ([`graph`]) and verified.

pub mod graph;
pub mod weights;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use prost::Message;
use runtime::classifier::Classifier;
use runtime::inference::{InferenceBackend, TractBackend};
use runtime::package::{GRAPH_FILE, InputLayout, Manifest, ModelPackage, TrainingSummary};
use runtime::text::{VOCABULARY_DIGEST_KEY, Vocabulary};
use sha2::{Digest, Sha256};
use tokenizers::Tokenizer;
use tract_onnx::pb::ModelProto;

use crate::calibration::expected_calibration_error;
use crate::data::corpus::Columns;
use crate::data::vocabulary::VocabularyConfig;
use crate::fit::{Example, padded};
use crate::job::{DataSpec, PreparedData, VERIFY_TOLERANCE, check_valid_fraction, prepare};
use crate::metrics::{Confusion, Scores};
use crate::package_writer::{PackageFiles, check_destination, refuse_input_inside_destination, write_package};
use weights::{MemberScores, combined, fit_weights, log_loss, log_probabilities};

/// The variant name an ensemble's manifest and graph carry.
pub const VARIANT: &str = "ensemble";

#[derive(Debug, Clone)]
pub struct CombineRequest {
    pub members: Vec<PathBuf>,
    /// The corpus the members were trained on, from which their validation split is rebuilt.
    pub train: PathBuf,
    pub valid: Option<PathBuf>,
    pub columns: Columns,
    pub valid_fraction: f64,
    pub out: PathBuf,
    pub force: bool,
}

/// How one candidate did on the validation split: a member alone, the members at equal
/// weights, or the fitted ensemble.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Standing {
    pub name: String,
    /// Each member's weight, for the candidates that sum several.
    pub weights: Vec<f64>,
    pub accuracy: f64,
    pub macro_f1: f64,
    pub log_loss: f64,
}

pub struct CombineReport {
    pub package: PathBuf,
    pub manifest: Manifest,
    /// Each member, then equal weights, then the ensemble as written.
    pub standings: Vec<Standing>,
    pub validation: Scores,
    pub ece: f64,
}

/// A member package and its decoded graph.
struct Member {
    name: String,
    package: ModelPackage,
    model: ModelProto,
    tokenizer: Tokenizer,
}

pub fn combine(request: &CombineRequest) -> anyhow::Result<CombineReport> {
    let started = Instant::now();
    if request.members.len() < 2 {
        bail!("--members: give at least two model packages to combine ({} given)", request.members.len());
    }
    check_valid_fraction(request.valid.as_deref(), request.valid_fraction)?;
    check_destination(&request.out, request.force)?;
    refuse_input_inside_destination("--train", &request.train, &request.out)?;
    if let Some(valid) = &request.valid {
        refuse_input_inside_destination("--valid", valid, &request.out)?;
    }
    for member in &request.members {
        refuse_input_inside_destination("--members", member, &request.out)?;
    }
    let members = request.members.iter().map(|dir| open_member(dir)).collect::<anyhow::Result<Vec<_>>>()?;
    let first = members.first().context("no members")?;
    check_alike(&members)?;
    let vocabulary = vocabulary_settings(first)?;
    let seed = first.package.manifest.training.seed;
    let max_tokens = members.iter().map(|m| m.package.manifest.max_tokens).min().unwrap_or(1);
    tracing::info!(
        "rebuilding the members' validation split of {} (seed {seed}, --max-vocab {}, --min-count {}); documents \
         cut at {max_tokens} tokens, the members' smallest limit",
        request.train.display(),
        vocabulary.max_vocab,
        vocabulary.min_count
    );
    let spec = DataSpec {
        train: &request.train,
        valid: request.valid.as_deref(),
        columns: &request.columns,
        multi_label: false,
        valid_fraction: request.valid_fraction,
        seed,
        max_tokens,
        vocabulary: &vocabulary,
    };
    let data = prepare(&spec, None)?;
    check_same_split(&members, &data, request)?;

    let classes = data.classes.len();
    let labels: Vec<usize> = data.valid.iter().map(Example::label).collect();
    let mut scores = Vec::with_capacity(members.len());
    for member in &members {
        tracing::info!("scoring the {} validation documents with {}", data.valid.len(), member.name);
        scores.push(member_scores(member, &data.valid)?);
    }
    let fitted = fit_weights(&scores, &labels, classes);
    for (member, weight) in members.iter().zip(&fitted) {
        if *weight < 1e-6 {
            tracing::warn!(
                "{} gets weight 0: on validation it adds nothing to the others, yet the ensemble still runs it; \
                 combine without it",
                member.name
            );
        }
    }
    let mut standings = Vec::with_capacity(members.len() + 2);
    for (index, member) in members.iter().enumerate() {
        let alone: Vec<f64> = (0..members.len()).map(|i| f64::from(u8::from(i == index))).collect();
        let standing = standing(&member.name, &scores, &alone, &labels, &data.classes);
        standings.push(Standing { weights: Vec::new(), ..standing.0 });
    }
    let equal = vec![1.0 / members.len() as f64; members.len()];
    standings.push(standing("equal weights", &scores, &equal, &labels, &data.classes).0);
    let (ensemble, validation, ece) = standing("ensemble", &scores, &fitted, &labels, &data.classes);
    standings.push(ensemble);

    let metadata = [
        ("variant", VARIANT.to_owned()),
        ("labels", serde_json::to_string(&data.classes)?),
        ("package_version", env!("CARGO_PKG_VERSION").to_owned()),
        (VOCABULARY_DIGEST_KEY, Vocabulary::of(&first.tokenizer).digest()),
    ];
    let graphs: Vec<graph::MemberGraph<'_>> = members
        .iter()
        .zip(&fitted)
        .map(|(m, &w)| graph::MemberGraph {
            name: &m.name,
            model: &m.model,
            weight: w as f32,
            classes,
            attention_heads: m.package.manifest.attention_heads,
            embedding_dim: m.package.manifest.embedding_dim,
        })
        .collect();
    let (model, floats) = graph::combine(&graphs, &metadata)?;
    let manifest = manifest(&members, &fitted, &data, &validation, ece, &standings, max_tokens, floats, started)?;
    let sample: Vec<usize> = (0..data.valid.len().min(32)).collect();
    let package = write_package(
        &request.out,
        request.force,
        PackageFiles { graph: &model, tokenizer: &first.tokenizer, manifest: &manifest },
        |dir| verify(dir, &data.valid, &sample, &scores, &fitted, classes),
    )?;
    Ok(CombineReport { package, manifest, standings, validation, ece })
}

fn open_member(dir: &Path) -> anyhow::Result<Member> {
    let package = ModelPackage::open(dir)?;
    let name = dir.display().to_string();
    let bytes = std::fs::read(package.graph_path())
        .with_context(|| format!("cannot read {}", package.graph_path().display()))?;
    let model = ModelProto::decode(bytes.as_slice())
        .with_context(|| format!("{} is not an ONNX model", package.graph_path().display()))?;
    let tokenizer = Tokenizer::from_file(package.tokenizer_path())
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", package.tokenizer_path().display()))?;
    Ok(Member { name, package, model, tokenizer })
}

/// Members that can be summed: the same labels in the same order, one class per document,
/// token inputs, and the same corpus, seed and vocabulary settings.
fn check_alike(members: &[Member]) -> anyhow::Result<()> {
    let first = members.first().context("no members")?;
    let reference = &first.package.manifest;
    for member in members {
        let manifest = &member.package.manifest;
        if manifest.label_thresholds.is_some() {
            bail!(
                "{} is a multi-label model; pipeline combine sums models of one class per document (each label's \
                 sigmoid would need its own threshold tuned again)",
                member.name
            );
        }
        if manifest.input_layout != InputLayout::Tokens {
            bail!(
                "{} ({}) reads documents as sentences of words; an ensemble's members share one flat token input, so \
                 combine variants other than han",
                member.name,
                manifest.variant
            );
        }
        if manifest.labels != reference.labels {
            bail!(
                "{} has labels {:?} but {} has {:?}; combine models of the same classes, trained on the same corpus",
                member.name,
                manifest.labels,
                first.name,
                reference.labels
            );
        }
        let (corpus, expected) = (&manifest.training.corpus, &reference.training.corpus);
        if corpus.sha256 != expected.sha256 {
            bail!(
                "{} was trained on {} but {} on {} (other bytes); combine models trained on the same corpus",
                member.name,
                corpus.path,
                first.name,
                expected.path
            );
        }
        if manifest.training.seed != reference.training.seed {
            bail!(
                "{} was trained with --seed {} but {} with --seed {}: their validation splits differ, so no split is \
                 unseen by both. Train the members with the same seed",
                member.name,
                manifest.training.seed,
                first.name,
                reference.training.seed
            );
        }
    }
    Ok(())
}

/// The `--max-vocab` and `--min-count` the first member recorded, which every member's
/// vocabulary is then checked against.
fn vocabulary_settings(member: &Member) -> anyhow::Result<VocabularyConfig> {
    let hyper = &member.package.manifest.hyper_parameters;
    let setting = |name: &str| {
        hyper.get(name).and_then(serde_json::Value::as_u64).with_context(|| {
            format!(
                "{}'s manifest does not record --{} (written by an older build); retrain it",
                member.name,
                name.replace('_', "-")
            )
        })
    };
    Ok(VocabularyConfig {
        min_count: setting("min_count")?,
        max_vocab: usize::try_from(setting("max_vocab")?).context("--max-vocab out of range")?,
    })
}

/// The rebuilt split is the members': the same corpus bytes, the same validation size, and a
/// vocabulary (built from the training part only) equal to each member's.
fn check_same_split(members: &[Member], data: &PreparedData, request: &CombineRequest) -> anyhow::Result<()> {
    let digest = Vocabulary::of(&data.tokenizer).digest();
    for member in members {
        let training = &member.package.manifest.training;
        if training.corpus.sha256 != data.corpus.fingerprint.sha256 {
            bail!(
                "--train {} is not the corpus {} was trained on ({}, {} rows); give that file",
                request.train.display(),
                member.name,
                training.corpus.path,
                training.corpus.rows
            );
        }
        if data.classes != member.package.manifest.labels {
            bail!("{}'s labels are not the classes of --train {}", member.name, request.train.display());
        }
        if training.validation_rows != data.valid.len() || Vocabulary::of(&member.tokenizer).digest() != digest {
            bail!(
                "{} held out {} validation documents and the split rebuilt here holds {}{}: it was trained with \
                 another --valid-fraction or --valid, so documents here may be ones it learned from. Pass the \
                 --valid-fraction (or --valid) it was trained with",
                member.name,
                training.validation_rows,
                data.valid.len(),
                if training.validation_rows == data.valid.len() { ", or its vocabulary differs" } else { "" }
            );
        }
    }
    Ok(())
}

/// The member's log-probabilities on `examples`, in their order.
fn member_scores(member: &Member, examples: &[Example]) -> anyhow::Result<MemberScores> {
    Ok(log_probabilities(&crate::distil::probabilities(&member.package, examples)?))
}

/// The candidate's figures, its confusion matrix and its calibration error.
fn standing(
    name: &str,
    scores: &[MemberScores],
    weights: &[f64],
    labels: &[usize],
    classes: &[String],
) -> (Standing, Scores, f64) {
    let mut confusion = Confusion::new(classes.to_vec());
    let (mut confidences, mut correct) = (Vec::with_capacity(labels.len()), Vec::with_capacity(labels.len()));
    for (doc, &label) in labels.iter().enumerate() {
        let q = combined(scores, weights, classes.len(), doc);
        let (predicted, confidence) =
            q.iter().copied().enumerate().fold((0, f64::MIN), |best, (c, p)| if p > best.1 { (c, p) } else { best });
        confusion.add(label, predicted);
        confidences.push(confidence);
        correct.push(predicted == label);
    }
    let ece = expected_calibration_error(&confidences, &correct);
    let standing = Standing {
        name: name.to_owned(),
        weights: weights.to_vec(),
        accuracy: confusion.accuracy(),
        macro_f1: confusion.macro_f1(),
        log_loss: log_loss(scores, weights, labels, classes.len()).0,
    };
    (standing, Scores::Classes(confusion), ece)
}

#[allow(clippy::too_many_arguments)]
fn manifest(
    members: &[Member],
    weights: &[f64],
    data: &PreparedData,
    validation: &Scores,
    ece: f64,
    standings: &[Standing],
    max_tokens: usize,
    float_values: u64,
    started: Instant,
) -> anyhow::Result<Manifest> {
    let first = members.first().context("no members")?;
    let reference = &first.package.manifest;
    let mut member_list = Vec::with_capacity(members.len());
    for (member, weight) in members.iter().zip(weights) {
        let graph = std::fs::read(member.package.graph_path())?;
        member_list.push(serde_json::json!({
            "package": member.package.dir.display().to_string(),
            "variant": member.package.manifest.variant,
            "weight": weight,
            "graph_sha256": format!("{:x}", Sha256::digest(&graph)),
        }));
    }
    let mut hyper_parameters = BTreeMap::new();
    hyper_parameters.insert("members".to_owned(), serde_json::Value::Array(member_list));
    for setting in ["max_vocab", "min_count"] {
        if let Some(value) = reference.hyper_parameters.get(setting) {
            hyper_parameters.insert(setting.to_owned(), value.clone());
        }
    }
    let mut metrics = BTreeMap::new();
    metrics.insert("validation_accuracy".to_owned(), validation.accuracy());
    metrics.insert("validation_macro_f1".to_owned(), validation.macro_f1());
    for class in validation.per_class() {
        metrics.insert(format!("validation_f1_{}", class.label), class.f1);
    }
    metrics.insert("validation_ece".to_owned(), ece);
    for (index, standing) in standings.iter().take(members.len()).enumerate() {
        metrics.insert(format!("member_{}_validation_accuracy", index + 1), standing.accuracy);
    }
    if let Some(equal) = standings.get(members.len()) {
        metrics.insert("equal_weights_validation_accuracy".to_owned(), equal.accuracy);
    }
    let combining = started.elapsed().as_secs_f64();
    metrics.insert("combine_seconds".to_owned(), combining);
    let attention_heads: usize = members.iter().filter_map(|m| m.package.manifest.attention_heads).sum();
    Ok(Manifest {
        format_version: Manifest::format_version_for(None),
        variant: VARIANT.to_owned(),
        labels: data.classes.clone(),
        input_layout: InputLayout::Tokens,
        max_tokens,
        max_sentence_words: None,
        padding_id: reference.padding_id,
        attention_heads: (attention_heads > 0).then_some(attention_heads),
        embedding_dim: members.iter().map(|m| m.package.manifest.embedding_dim).sum(),
        // What a user can check against the file's size, as for a trained package.
        parameter_count: float_values,
        hyper_parameters,
        training: TrainingSummary {
            corpus: data.corpus.fingerprint.clone(),
            train_rows: data.train.len(),
            validation_rows: data.valid.len(),
            epochs_run: 0,
            best_epoch: 0,
            // The members' training and the combining: what the package cost.
            seconds: members.iter().map(|m| m.package.manifest.training.seconds).sum::<f64>() + combining,
            seed: reference.training.seed,
            members: members.len(),
            class_counts: data.counts.per_class.clone(),
        },
        metrics,
        package_version: env!("CARGO_PKG_VERSION").to_owned(),
        label_thresholds: None,
    })
}

/// The written package opens as `pipeline run` opens it, and its graph gives the probabilities
/// the weights were fitted for on the first validation documents.
fn verify(
    dir: &Path,
    examples: &[Example],
    sample: &[usize],
    scores: &[MemberScores],
    weights: &[f64],
    classes: usize,
) -> anyhow::Result<()> {
    let backend = TractBackend::open(&dir.join(GRAPH_FILE))?;
    let outputs = backend.run(&padded(examples, sample))?;
    let probs = &outputs.get("probs").context("the ensemble's graph has no `probs`")?.data;
    let mut worst = 0.0f64;
    for (row, &doc) in sample.iter().enumerate() {
        let expected = combined(scores, weights, classes, doc);
        let actual = probs.get(row * classes..(row + 1) * classes).context("`probs` has too few rows")?;
        for (e, &a) in expected.iter().zip(actual) {
            worst = worst.max((e - f64::from(a)).abs());
        }
    }
    anyhow::ensure!(
        worst <= f64::from(VERIFY_TOLERANCE),
        "the ensemble's graph gives probabilities {worst:.2e} away from the members' weighted sum"
    );
    tracing::info!(
        "verified the ensemble's graph with tract: max |Δprobs| = {worst:.2e} on {} documents",
        sample.len()
    );
    Classifier::with_backend(ModelPackage::open(dir)?, Arc::new(backend) as Arc<dyn InferenceBackend>, None)?;
    Ok(())
}

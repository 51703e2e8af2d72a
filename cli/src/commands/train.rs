//! `pipeline train`: a variant trained on a Parquet corpus, written as a model package.

use std::path::PathBuf;

use batch_io::atomic_file::write_failed;
use batch_io::earlier_output::OutputKind;
use clap::Args;
use training::data::vocabulary::VocabularyConfig;
use training::job::{self, TrainRequest};
use training::models::{ModelFlags, Variant};
use training::schedule::TrainingFlags;

use super::checked_output;
use crate::args::ColumnFlags;

#[derive(Args)]
pub struct TrainArgs {
    #[arg(long, value_enum)]
    variant: Variant,
    /// Training corpus (Parquet).
    #[arg(long)]
    train: PathBuf,
    /// Validation corpus; without it a stratified --valid-fraction of --train is held out.
    #[arg(long)]
    valid: Option<PathBuf>,
    #[arg(long, default_value_t = 0.1)]
    valid_fraction: f64,
    /// Output package directory.
    #[arg(long)]
    out: PathBuf,
    /// Replace --out if it exists.
    #[arg(long)]
    force: bool,
    /// Documents are truncated to this many tokens, in training and in the package
    /// [default 400, ngram 2500].
    #[arg(long)]
    max_tokens: Option<usize>,
    #[command(flatten)]
    columns: ColumnFlags,
    /// Train a multi-label model (a sigmoid per label, a threshold per label tuned on
    /// validation). A label column of lists selects it anyway; the flag refuses any other.
    #[arg(long)]
    multi_label: bool,
    #[command(flatten)]
    vocabulary: VocabularyConfig,
    #[command(flatten)]
    training: TrainingFlags,
    #[command(flatten)]
    model: ModelFlags,
    /// Start the word embedding from these vectors (word2vec text format, as written by
    /// `pipeline vectors`; their width must equal --embedding-dim). Words without a vector start
    /// random.
    #[arg(long, value_name = "FILE")]
    word_vectors: Option<PathBuf>,
    /// Keep the pre-trained word vectors fixed: train everything but the embedding.
    #[arg(long, requires = "word_vectors")]
    freeze_word_vectors: bool,
    /// Start the word embedding at random. Without --word-vectors, san first trains skip-gram
    /// vectors on the training documents (and --unlabelled ones) when they hold at least a
    /// million words, and starts from them.
    #[arg(long, conflicts_with = "word_vectors")]
    no_word_vectors: bool,
    /// Distil this package (an ensemble, say) into the new model: each training document's
    /// target is half its class and half the teacher's probabilities. The teacher must have been
    /// trained on --train with the same seed, split and vocabulary settings.
    #[arg(long, value_name = "DIR")]
    teacher: Option<PathBuf>,
    /// Documents without labels (Parquet, the --text-column), never the test set: they train
    /// with the --teacher's probabilities as their targets, or the --virtual-adversarial loss.
    #[arg(long, value_name = "FILE")]
    unlabelled: Option<PathBuf>,
    /// Also write how training went as JSON to this file: the configuration and why, each
    /// epoch, and the validation metrics per class with the confusion matrix.
    #[arg(long, value_name = "FILE")]
    metrics_json: Option<PathBuf>,
}

pub fn run(args: TrainArgs) -> anyhow::Result<()> {
    let defaults = args.variant.defaults();
    let request = TrainRequest {
        variant: args.variant,
        train: args.train,
        valid: args.valid,
        columns: args.columns.columns(),
        multi_label: args.multi_label,
        out: args.out,
        force: args.force,
        valid_fraction: args.valid_fraction,
        max_tokens: args.max_tokens.unwrap_or(defaults.max_tokens),
        vocabulary: args.vocabulary,
        training: args.training,
        model: args.model,
        word_vectors: args.word_vectors,
        freeze_word_vectors: args.freeze_word_vectors,
        random_words: args.no_word_vectors,
        teacher: args.teacher,
        unlabelled: args.unlabelled,
    };
    // Checked before training, which can take hours.
    let mut inputs = vec![request.train.as_path()];
    inputs.extend(request.valid.as_deref());
    inputs.extend(request.unlabelled.as_deref());
    if let Some(path) = &args.metrics_json {
        // The package directory is replaced whole at the end: a summary inside it would vanish.
        anyhow::ensure!(
            !absolute(path).starts_with(absolute(&request.out)),
            "--metrics-json {} lies in --out {}, which training replaces; write it elsewhere",
            path.display(),
            request.out.display()
        );
    }
    let metrics = args
        .metrics_json
        .as_deref()
        .map(|path| checked_output("metrics_json", path, &inputs, OutputKind::SummaryJson))
        .transpose()?;
    // This process only trains: the tensors each step frees are worth keeping for the next.
    crate::memory::keep_freed_memory_for_training();
    let report = job::run(&request)?;
    let fitted = &report.calibration;
    let calibration = if report.training.calibrate {
        format!(
            "calibration: temperature {:.3}, expected calibration error {:.4} (uncalibrated {:.4})",
            fitted.temperature, fitted.ece_after, fitted.ece_before
        )
    } else {
        format!("calibration: off (--no-calibration), expected calibration error {:.4}", fitted.ece_before)
    };
    let calibration = format!(
        "{calibration}; a perfectly calibrated model shows {:.4} on these validation documents by chance alone",
        fitted.ece_by_chance.mean
    );
    let m = &report.manifest;
    batch_io::command_line::print_report(&format!(
        "wrote {} ({} parameters, best epoch {} of {}{})\nvalidation: {} documents, accuracy {:.4}, macro-F1 \
         {:.4}\n{calibration}\n{}",
        report.package.display(),
        m.parameter_count,
        m.training.best_epoch,
        m.training.epochs_run,
        match m.training.members {
            1 => String::new(),
            members => format!(", first of {members} members"),
        },
        report.validation.total(),
        report.validation.accuracy(),
        report.validation.macro_f1(),
        report.validation.table()
    ))?;
    if let (Some(mut file), Some(path)) = (metrics, &args.metrics_json) {
        let summary = serde_json::json!({
            "package": report.package,
            "training": report.training,
            "chosen": report.reasons,
            "epochs": report.history,
            "validation": report.validation.json(),
            "calibration": report.calibration,
        });
        std::io::Write::write_all(&mut file, serde_json::to_string_pretty(&summary)?.as_bytes())
            .map_err(|e| write_failed(path, &e))?;
        file.publish(path)?;
    }
    Ok(())
}

/// `path` made absolute against the working directory, without touching the file system, so
/// that a path not yet written compares with one that exists.
fn absolute(path: &std::path::Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

//! The training commands, `pipeline train`, `pipeline eval` and `pipeline vectors` (and,
//! for one release, the old `export train|eval|vectors`): their flags and what each runs.

use std::path::{Path, PathBuf};

use batch_io::atomic_file::{TempFile, temp_beside, write_failed};
use batch_io::choice::Choice;
use batch_io::earlier_output::{OutputKind, check_replaceable_output};
use batch_io::locations::same_location;
use clap::{Args, Subcommand};
use flags::choice;
use runtime::inference::{BackendKind, BackendOptions, Device};
use runtime::long_documents::{Aggregate, LongDocuments, Mode};
use runtime::package::{GRAPH_FILE, MANIFEST_FILE, TOKENIZER_FILE};

use crate::data::corpus::{Columns, read_texts};
use crate::data::vocabulary::VocabularyConfig;
use crate::data::word_vectors::{WordVectorConfig, train_word_vectors};
use crate::eval::{evaluate, record_in_manifest};
use crate::job::{self, TrainRequest};
use crate::models::{ModelFlags, Variant};
use crate::schedule::TrainingFlags;

#[derive(Subcommand)]
pub enum Command {
    /// Train a variant on a Parquet corpus and write a model package.
    Train(Box<TrainArgs>),
    /// Score a model package on a labelled Parquet corpus by running its ONNX graph.
    Eval(EvalArgs),
    /// Pre-train word vectors (skip-gram, negative sampling) on unlabelled Parquet texts, for
    /// `train --word-vectors`.
    Vectors(VectorArgs),
}

#[derive(Args)]
pub struct VectorArgs {
    /// Parquet corpora to learn from (repeat the flag for several), e.g. the unlabelled and
    /// the training reviews.
    #[arg(long, required = true)]
    corpus: Vec<PathBuf>,
    /// Output file, word2vec text format.
    #[arg(long)]
    out: PathBuf,
    /// Replace --out if it exists.
    #[arg(long)]
    force: bool,
    /// Column holding the text in every corpus.
    #[arg(long, default_value = "text")]
    text_column: String,
    #[command(flatten)]
    vocabulary: VocabularyConfig,
    #[command(flatten)]
    vectors: WordVectorConfig,
}

#[derive(Args)]
pub struct ColumnArgs {
    /// Column holding the document text.
    #[arg(long, default_value = "text")]
    text_column: String,
    /// Column holding the class label (any type castable to a string), or a list of labels
    /// per document (`list<string>`: a multi-label corpus).
    #[arg(long, default_value = "label")]
    label_column: String,
}

impl ColumnArgs {
    fn columns(&self) -> Columns {
        Columns { text: self.text_column.clone(), label: self.label_column.clone() }
    }
}

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
    columns: ColumnArgs,
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
    /// Also write how training went as JSON to this file: the configuration and why, each
    /// epoch, and the validation metrics per class with the confusion matrix.
    #[arg(long, value_name = "FILE")]
    metrics_json: Option<PathBuf>,
}

#[derive(Args)]
pub struct EvalArgs {
    /// Model package directory.
    #[arg(long)]
    model: PathBuf,
    /// Labelled Parquet corpus.
    #[arg(long)]
    data: PathBuf,
    #[arg(long, value_parser = choice::<BackendKind>(), default_value = BackendKind::Tract.name())]
    backend: BackendKind,
    #[arg(long, value_parser = choice::<Device>(), default_value = Device::Cpu.name())]
    device: Device,
    #[arg(long, default_value_t = 64, value_parser = flags::at_least_one)]
    batch_size: usize,
    /// ONNX Runtime shared library: a file, a directory holding it, or `python` for the onnxruntime
    /// package of the python3 on PATH (default: $ORT_DYLIB_PATH, then target/onnxruntime/).
    #[arg(long)]
    ort_library: Option<PathBuf>,
    /// What happens to documents longer than the model's token limit, as in `pipeline run`
    /// (windows); `truncate` scores the model on what it was trained on, its first tokens.
    #[arg(long, value_parser = choice::<Mode>(), default_value = Mode::Windows.name())]
    long_documents: Mode,
    /// Also write the metrics as JSON to this file.
    #[arg(long)]
    metrics_json: Option<PathBuf>,
    /// Record accuracy and macro-F1 in the package's manifest as `NAME_accuracy` and
    /// `NAME_macro_f1` (e.g. `--record test`).
    #[arg(long, value_name = "NAME")]
    record: Option<String>,
    #[command(flatten)]
    columns: ColumnArgs,
}

/// The temporary for an output file (named by `flag`), after checking that it may be replaced
/// (an earlier output of `kind`), that it is none of `inputs` and not inside a Delta table.
fn checked_output(flag: &str, output: &Path, inputs: &[&Path], kind: OutputKind) -> anyhow::Result<TempFile> {
    batch_io::locations::refuse_output_inside_table(flag, &output.to_string_lossy())?;
    for input in inputs {
        anyhow::ensure!(
            !same_location(output, input),
            "{} is also an input; write the output to another file",
            output.display()
        );
    }
    check_replaceable_output(flag, output, kind)?;
    temp_beside(output)
}

/// Runs one training command.
pub fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Train(args) => {
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
            };
            // Checked before training, which can take hours.
            let mut inputs = vec![request.train.as_path()];
            inputs.extend(request.valid.as_deref());
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
                .map(|path| checked_output("--metrics-json", path, &inputs, OutputKind::SummaryJson))
                .transpose()?;
            let report = job::run(&request)?;
            let calibration = if report.training.calibrate {
                format!(
                    "calibration: temperature {:.3}, expected calibration error {:.4} (uncalibrated {:.4})",
                    report.calibration.temperature, report.calibration.ece_after, report.calibration.ece_before
                )
            } else {
                format!(
                    "calibration: off (--no-calibration), expected calibration error {:.4}",
                    report.calibration.ece_before
                )
            };
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
        Command::Eval(args) => {
            if let Some(name) = &args.record {
                // `train` and `validation` are what `pipeline train` recorded; an empty name
                // would write `_accuracy`.
                let valid = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                anyhow::ensure!(
                    valid && !matches!(name.as_str(), "train" | "validation"),
                    "--record {name:?}: give a name of letters, digits and _ other than train and validation (those \
                     are pipeline train's own figures), such as test"
                );
            }
            let backend = BackendOptions {
                kind: args.backend,
                device: args.device,
                intra_op_threads: 1,
                tf32: false,
                ort_library: args.ort_library,
                ort_search_dirs: Vec::new(),
            };
            // Checked before the evaluation, which can take minutes: never over the data or the package.
            let package_files = [GRAPH_FILE, TOKENIZER_FILE, MANIFEST_FILE].map(|f| args.model.join(f));
            let mut inputs = vec![args.data.as_path()];
            inputs.extend(package_files.iter().map(PathBuf::as_path));
            let metrics = args
                .metrics_json
                .as_deref()
                .map(|path| checked_output("--metrics-json", path, &inputs, OutputKind::SummaryJson))
                .transpose()?;
            // The stride and the aggregation are `pipeline run`'s defaults.
            let long_documents = LongDocuments::choose(args.long_documents, None, Aggregate::default())?;
            let evaluation =
                evaluate(&args.model, &args.data, &args.columns.columns(), &backend, args.batch_size, long_documents)?;
            batch_io::command_line::print_report(&evaluation.to_string())?;
            if let (Some(mut file), Some(path)) = (metrics, &args.metrics_json) {
                std::io::Write::write_all(&mut file, serde_json::to_string_pretty(&evaluation)?.as_bytes())
                    .map_err(|e| write_failed(path, &e))?;
                file.publish(path)?;
            }
            if let Some(name) = args.record {
                record_in_manifest(&args.model, &name, &evaluation)?;
            }
            Ok(())
        }
        Command::Vectors(args) => {
            if args.out.exists() && !args.force {
                anyhow::bail!("{} already exists; pass --force to replace it", args.out.display());
            }
            let corpora: Vec<&Path> = args.corpus.iter().map(PathBuf::as_path).collect();
            let temp = checked_output("--out", &args.out, &corpora, OutputKind::WordVectors)?;
            args.vectors.validate()?;
            let mut texts = Vec::new();
            for path in &args.corpus {
                texts.extend(read_texts(path, &args.text_column)?);
            }
            let vectors = train_word_vectors(&texts, &args.vocabulary, &args.vectors)?;
            vectors.write(temp.path())?;
            temp.publish(&args.out)?;
            batch_io::command_line::print_report(&format!(
                "wrote {} ({} words × {} dimensions from {} documents)\n",
                args.out.display(),
                vectors.words.len(),
                vectors.dim,
                texts.len()
            ))?;
            Ok(())
        }
    }
}

/// `path` made absolute against the working directory, without touching the file system, so
/// that a path not yet written compares with one that exists.
fn absolute(path: &std::path::Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

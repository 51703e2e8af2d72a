//! `pipeline`: classify Parquet/Arrow corpora with a model package, explain each prediction,
//! and query the results with SQL.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use backend_flags::BackendFlags;
use batch_io::command_line::{at_least_one, logs_are_json, print_report, say, thread_count};
use clap::{Args, Parser, Subcommand};
use long_document_flags::LongDocumentFlags;
use pipeline::job::{JobOptions, run_job};
use pipeline::units::Shard;
use runtime::classifier::Classifier;
use runtime::inference::BackendOptions;
use runtime::package::InputLayout;

mod backend_flags;
mod long_document_flags;
mod report_command;
mod sql_command;

#[derive(Parser)]
#[command(version, about = "Batch text classification with attention explanations")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Read from the raw arguments before parsing (see `parse_command_line`).
    #[command(flatten)]
    #[allow(dead_code)]
    logs: batch_io::command_line::LogFormatFlag,
}

#[derive(Subcommand)]
enum Command {
    /// Classify every document of the input and write predictions with attention to Parquet.
    Run(RunArgs),
    /// Query predictions (or any Parquet) with SQL, with attention functions and classify(text).
    Sql(sql_command::SqlArgs),
    /// Write an HTML page that shows why documents were classified as they were: accuracy,
    /// calibration, the tokens each class and hop attends to, and example heat maps.
    Report(report_command::ReportArgs),
    /// Show a model package: manifest, graph inputs and outputs, labels, parameter count.
    Inspect {
        /// Model package directory (default: the embedded IMDB SAN model).
        dir: Option<PathBuf>,
    },
}

/// Every flag of `run` that `--finalize` does not use: given with it, it would be ignored.
const FINALIZE_CONFLICTS: [&str; 26] = [
    "input",
    "model",
    "output",
    "shard",
    "shards",
    "rows_per_part",
    "overwrite",
    "text_column",
    "pass_through",
    "backend",
    "device",
    "tf32",
    "ort_library",
    "batch_size",
    "max_batch_tokens",
    "window",
    "max_tokens",
    "long_documents",
    "long_document_stride",
    "long_document_aggregate",
    "attention",
    "embedding",
    "profile",
    "metrics_json",
    "panic_after_first_window",
    "null_model",
];

#[derive(Args)]
struct RunArgs {
    /// A Parquet or Arrow IPC file, a directory of them, or a glob.
    #[arg(long, required_unless_present = "finalize")]
    input: Option<String>,
    /// Model package: a directory, or its prefix in object storage (s3://bucket/models/san/,
    /// downloaded once into a cache; see PIPELINE_MODEL_CACHE). Default: the embedded IMDB
    /// SAN model.
    #[arg(long)]
    model: Option<PathBuf>,
    /// A Parquet file (`*.parquet`), or a dataset: a directory (a path ending in `/`, or
    /// without `.parquet`) of parts, one per unit of work, with `_SUCCESS` written last. A
    /// rerun into a dataset resumes: parts already committed are skipped.
    #[arg(long, default_value = "predictions.parquet")]
    output: String,
    /// Dataset outputs: take only shard I of N (units whose number is I modulo N).
    #[arg(long, value_name = "I/N", conflicts_with = "shards")]
    shard: Option<Shard>,
    /// Dataset outputs: N shards, this one numbered by JOB_COMPLETION_INDEX (set by a
    /// Kubernetes Indexed Job).
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    shards: Option<usize>,
    /// Dataset outputs: the most rows in one part (parts never cross a row group).
    #[arg(long, default_value_t = 2500, value_parser = at_least_one)]
    rows_per_part: usize,
    /// Dataset outputs: delete another run's parts (and its _SUCCESS) instead of refusing.
    #[arg(long)]
    overwrite: bool,
    /// Write _SUCCESS into this dataset output once every shard's parts are committed. Takes
    /// no other flag of `run` but --threads: the run's options are read from its parts.
    #[arg(long, value_name = "DIR", conflicts_with_all = FINALIZE_CONFLICTS)]
    finalize: Option<String>,
    #[arg(long, default_value = "text")]
    text_column: String,
    /// Input columns to copy to the output, comma-separated (default: all).
    #[arg(long, value_delimiter = ',')]
    pass_through: Option<Vec<String>>,
    #[command(flatten)]
    backend: BackendFlags,
    /// Documents per inference batch.
    #[arg(long, default_value_t = 64, value_parser = at_least_one)]
    batch_size: usize,
    /// Also cap each inference batch at this many padded tokens (documents × the longest
    /// document); a document longer than that runs alone. Default: no cap.
    #[arg(long, value_parser = at_least_one)]
    max_batch_tokens: Option<usize>,
    /// Documents read, length-sorted and written together (bounds memory).
    #[arg(long, default_value_t = 2048, value_parser = at_least_one)]
    window: usize,
    /// Token limit per document (default: the model's).
    #[arg(long, value_parser = at_least_one)]
    max_tokens: Option<usize>,
    #[command(flatten)]
    long_documents: LongDocumentFlags,
    /// How much attention and explanation to write: every hop as bytes relative to its
    /// heaviest token, with each hop's entropy and the contributions as signed bytes
    /// (compact); every hop and their summary as floats (full); only the hops summed per token
    /// (summary); each hop's and the summary's N heaviest weights with the rest 0 (top-k:N);
    /// or none of them. Per-hop attention in floats is most of an output's size.
    #[arg(long, value_name = "compact|full|summary|top-k:N|none", default_value = "compact")]
    attention: runtime::output_table::AttentionOutput,
    /// Also write the sentence embedding fed to the classifier.
    #[arg(long)]
    embedding: bool,
    /// Worker threads (default: all cores; at most 1024).
    #[arg(long, value_parser = thread_count)]
    threads: Option<usize>,
    /// Print each stage's busy time at the end (on stderr), so the bottleneck shows.
    #[arg(long)]
    profile: bool,
    /// Also write the run summary as JSON to this file.
    #[arg(long)]
    metrics_json: Option<PathBuf>,
    /// Test hook: panic after the first window (exercises exit code 70 and the clean-up).
    #[arg(long, hide = true)]
    panic_after_first_window: bool,
    /// Bench hook: replace inference by a stand-in that costs nothing (outputs of the right
    /// shapes, varied weights), to measure the pipeline's own ceiling.
    #[arg(long, hide = true)]
    null_model: bool,
}

/// This pod's index in a Kubernetes Indexed Job, for `--shards N`.
fn job_completion_index() -> anyhow::Result<usize> {
    let value = std::env::var("JOB_COMPLETION_INDEX").map_err(|_| {
        anyhow::anyhow!(
            "--shards needs JOB_COMPLETION_INDEX (set by a Kubernetes Indexed Job); elsewhere give --shard I/N"
        )
    })?;
    value.trim().parse().map_err(|_| anyhow::anyhow!("JOB_COMPLETION_INDEX is `{value}`, not a shard number"))
}

fn main() -> ExitCode {
    // Logging is set up from `--log-format` before parsing, so usage errors use it too.
    match batch_io::command_line::parse_command_line::<Cli>() {
        Ok(cli) => batch_io::command_line::run_main(|| run(cli)),
        Err(code) => code,
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Run(args) => {
            if let Some(threads) = args.threads {
                rayon::ThreadPoolBuilder::new().num_threads(threads).build_global()?;
            }
            if let Some(dir) = args.finalize {
                let manifest = pipeline::job::finalize(&dir)?;
                let report = format!(
                    "{dir} complete: {} rows in {} parts; _SUCCESS written\n",
                    manifest.rows,
                    manifest.parts.len()
                );
                print_report(&report)?;
                return Ok(());
            }
            let shard = match (args.shard, args.shards) {
                (Some(shard), _) => shard,
                (None, Some(count)) => Shard::new(job_completion_index()?, count)?,
                (None, None) => Shard::WHOLE,
            };
            let (_guard, package) = pipeline::model_source::open(args.model.as_deref())?;
            let options = JobOptions {
                input: args.input.context("--input is required")?,
                output: args.output,
                text_column: args.text_column,
                pass_through: args.pass_through,
                backend: args.backend.options(),
                batch_size: args.batch_size,
                max_batch_tokens: args.max_batch_tokens,
                window: args.window,
                max_tokens: args.max_tokens,
                long_documents: args.long_documents.mode()?,
                attention: args.attention,
                with_embedding: args.embedding,
                metrics_json: args.metrics_json,
                panic_after_first_window: args.panic_after_first_window,
                null_model: args.null_model,
                // A signal ends the process (batch_io::command_line), removing its temporaries.
                cancel: None,
                shard,
                rows_per_part: args.rows_per_part,
                overwrite: args.overwrite,
            };
            let summary = run_job(&package, &options)?;
            // On stdout for a person; also as one log event for a log shipper.
            if logs_are_json() {
                summary.log();
            }
            print_report(&format!("{summary}\n"))?;
            if args.profile {
                say(summary.profile().trim_end());
            }
            Ok(())
        }
        Command::Sql(args) => {
            let (_guard, default_model) = pipeline::model_source::embedded::cached()?;
            sql_command::run(args, default_model.dir)
        }
        Command::Report(args) => report_command::run(args),
        Command::Inspect { dir } => {
            let (_guard, package) = pipeline::model_source::open(dir.as_deref())?;
            // The checks `pipeline run` makes, so that a package it would refuse is not shown as fine.
            let classifier = Classifier::open(package.clone(), &BackendOptions::default(), None)?;
            let backend = classifier.backend();
            let m = &package.manifest;
            let location = match &dir {
                None => "(embedded default: fixtures/default-model)".to_owned(),
                Some(_) => package.dir.display().to_string(),
            };
            let mut report = String::new();
            let mut line = |text: String| {
                report.push_str(&text);
                report.push('\n');
            };
            line(format!("package:     {location}"));
            line(format!("variant:     {}", m.variant));
            line(format!("labels:      {}", m.labels.join(", ")));
            line(format!("parameters:  {}", m.parameter_count));
            let layout = match (m.input_layout, m.max_sentence_words) {
                (InputLayout::Tokens, _) => "[batch, seq]".to_owned(),
                (InputLayout::SentencesWords, Some(words)) => {
                    format!("[batch, sentences, words], sentences cut at {words} tokens")
                }
                (InputLayout::SentencesWords, None) => "[batch, sentences, words]".to_owned(),
            };
            line(format!("inputs:      input_ids, attention_mask {layout}, max {} tokens", m.max_tokens));
            line(format!("outputs:     {}", backend.output_names().join(", ")));
            line(format!("attention:   {}", m.attention_heads.map_or("none".to_owned(), |h| format!("{h} heads"))));
            line(format!("embedding:   {} dims", m.embedding_dim));
            for (name, value) in &m.metrics {
                line(format!("metric:      {name} = {value:.4}"));
            }
            line(format!(
                "trained on:  {} ({} rows, sha256 {})",
                m.training.corpus.path, m.training.corpus.rows, m.training.corpus.sha256
            ));
            line(format!("manifest:\n{}", serde_json::to_string_pretty(m)?));
            print_report(&report)?;
            Ok(())
        }
    }
}

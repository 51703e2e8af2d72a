//! `pipeline`: classify Parquet/Arrow corpora with a model package, explain each prediction,
//! query the results with SQL, and train the models (`train`, `eval`, `vectors`, over the
//! `training` crate).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod args;
mod commands;
mod memory;

#[derive(Parser)]
#[command(version, about = "Batch text classification with attention explanations, and training for its models")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Read from the raw arguments before parsing (see `parse_command_line`).
    #[command(flatten)]
    #[allow(dead_code)]
    logs: flags::LogFormatFlag,
}

#[derive(Subcommand)]
enum Command {
    /// Classify every document of the input and write predictions with attention to Parquet.
    Run(Box<commands::run::RunArgs>),
    /// Query predictions (or any Parquet) with SQL, with attention functions and classify(text).
    Sql(commands::sql::SqlArgs),
    /// Write an HTML page that shows why documents were classified as they were: accuracy,
    /// calibration, the tokens each class and hop attends to, and example heat maps.
    Report(commands::report::ReportArgs),
    /// Write _SUCCESS into a sharded dataset output once every shard's parts are there (a
    /// Delta table needs none: each shard commits its own).
    Finalize(commands::finalize::FinalizeArgs),
    /// Show a model package: manifest, graph inputs and outputs, labels, parameter count.
    Inspect {
        /// Model package directory (default: the embedded IMDB SAN model).
        dir: Option<PathBuf>,
    },
    /// Train a variant on a Parquet corpus and write a model package.
    Train(Box<commands::train::TrainArgs>),
    /// Join trained packages into one that sums their logits, weighted as the members'
    /// validation split says; each token's push is the weighted sum of the members' pushes.
    Combine(commands::combine::CombineArgs),
    /// Score a model package on a labelled Parquet corpus by running its ONNX graph.
    Eval(commands::eval::EvalArgs),
    /// Pre-train word vectors (skip-gram, negative sampling) on unlabelled Parquet texts, for
    /// `train --word-vectors`.
    Vectors(commands::vectors::VectorArgs),
}

fn main() -> ExitCode {
    runtime::inference::keep_telemetry_off();
    // Logging is set up from `--log-format` before parsing, so usage errors use it too.
    let (args, old_finalize) = commands::finalize::rewrite_old_spelling(std::env::args_os().collect());
    match flags::parse_command_line::<Cli>(args) {
        Ok(cli) => {
            if old_finalize {
                tracing::warn!(
                    "`pipeline run --finalize DIR` is now `pipeline finalize DIR`; the old form goes in the next release"
                );
            }
            batch_io::command_line::run_main(|| run(cli))
        }
        Err(code) => code,
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Run(args) => commands::run::run(*args),
        Command::Sql(args) => {
            let (_guard, default_model) = runtime::model_source::embedded::cached()?;
            commands::sql::run(args, default_model.dir)
        }
        Command::Report(args) => commands::report::run(args),
        Command::Finalize(args) => commands::finalize::run(args),
        Command::Inspect { dir } => commands::inspect::run(dir),
        Command::Train(args) => commands::train::run(*args),
        Command::Combine(args) => commands::combine::run(args),
        Command::Eval(args) => commands::eval::run(args),
        Command::Vectors(args) => commands::vectors::run(args),
    }
}

//! `pipeline eval`: a model package scored on a labelled Parquet corpus by running its graph,
//! with `pipeline run`'s backend and long-document flags.

use std::path::PathBuf;

use batch_io::atomic_file::write_failed;
use batch_io::earlier_output::OutputKind;
use clap::Args;
use runtime::package::{GRAPH_FILE, MANIFEST_FILE, TOKENIZER_FILE};
use training::eval::{evaluate, record_in_manifest};

use super::checked_output;
use crate::args::{BackendFlags, ColumnFlags, LongDocumentFlags};

#[derive(Args)]
pub struct EvalArgs {
    /// Model package directory.
    #[arg(long)]
    model: PathBuf,
    /// Labelled Parquet corpus.
    #[arg(long)]
    data: PathBuf,
    #[command(flatten)]
    backend: BackendFlags,
    #[arg(long, default_value_t = 64, value_parser = flags::at_least_one)]
    batch_size: usize,
    // As in `pipeline run`; `--long-documents truncate` scores the model on what it was
    // trained on, its first tokens.
    #[command(flatten)]
    long_documents: LongDocumentFlags,
    /// Also write the metrics as JSON to this file.
    #[arg(long)]
    metrics_json: Option<PathBuf>,
    /// Record accuracy and macro-F1 in the package's manifest as `NAME_accuracy` and
    /// `NAME_macro_f1` (e.g. `--record test`).
    #[arg(long, value_name = "NAME")]
    record: Option<String>,
    #[command(flatten)]
    columns: ColumnFlags,
}

pub fn run(args: EvalArgs) -> anyhow::Result<()> {
    if let Some(name) = &args.record {
        // `train` and `validation` are what `pipeline train` recorded; an empty name
        // would write `_accuracy`.
        let valid = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        anyhow::ensure!(
            valid && !matches!(name.as_str(), "train" | "validation"),
            "--record {name:?}: give a name of ASCII letters, digits and _ other than train and validation (those \
             are pipeline train's own figures), such as test"
        );
    }
    let backend = args.backend.options()?;
    // Checked before the evaluation, which can take minutes: never over the data or the package.
    let package_files = [GRAPH_FILE, TOKENIZER_FILE, MANIFEST_FILE].map(|f| args.model.join(f));
    let mut inputs = vec![args.data.as_path()];
    inputs.extend(package_files.iter().map(PathBuf::as_path));
    let metrics = args
        .metrics_json
        .as_deref()
        .map(|path| checked_output("metrics_json", path, &inputs, OutputKind::SummaryJson))
        .transpose()?;
    let long_documents = args.long_documents.mode()?;
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

//! `pipeline run`: everything checked before any work (inputs, outputs, the model, the
//! schema of every file), then the stages run (see `stages`), then the output and the
//! summary are published together.
//!
//! Each input record batch is one window: its documents are tokenized in parallel, sorted by
//! length into model batches (less padding), run in parallel, and written back in input order.
//! Memory is bounded by the window size and the queue depth, never by the corpus.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use arrow::datatypes::{FieldRef, Schema};
use serde::Serialize;
use sha2::{Digest, Sha256};

use batch_io::atomic_file::{check_replaceable, temp_beside, write_failed};
use batch_io::locations::{InputLocation, refuse_output_among_inputs, resolve_inputs, same_location};
use batch_io::source::{BatchStream, DATA_EXTENSIONS, column_list, is_text_type, open_batches};
use runtime::classifier::{Classifier, TextCounts};
use runtime::inference::{BackendOptions, InferenceBackend, NullBackend};
use runtime::output_table::OutputTable;
use runtime::package::ModelPackage;

use crate::stages::{Line, OutputFile, Progress, StageSeconds, WriteStage, run_line};

#[derive(Debug, Clone)]
pub struct JobOptions {
    pub input: String,
    pub output: PathBuf,
    pub text_column: String,
    /// Input columns copied to the output; `None` keeps them all.
    pub pass_through: Option<Vec<String>>,
    pub backend: BackendOptions,
    pub batch_size: usize,
    /// Documents tokenized, sorted and written together.
    pub window: usize,
    pub max_tokens: Option<usize>,
    pub with_embedding: bool,
    /// Also write the run summary as JSON here.
    pub metrics_json: Option<PathBuf>,
    /// Test hook: panic after the first window is written, to exercise the internal-error
    /// path end to end (exit code 70, the unfinished output removed).
    pub panic_after_first_window: bool,
    /// Bench hook: a stand-in for the model that costs nothing (see [`NullBackend`]), to
    /// measure the pipeline's own ceiling.
    pub null_model: bool,
}

/// The end-of-run summary (also written as JSON with `--metrics-json`).
#[derive(Debug, Clone, Serialize)]
pub struct JobSummary {
    pub output: String,
    pub files: usize,
    pub rows: usize,
    /// Predicted, null, empty and truncated texts, and tokens (flat in the JSON).
    #[serde(flatten)]
    pub counts: TextCounts,
    pub seconds: f64,
    pub docs_per_second: f64,
    pub tokens_per_second: f64,
    pub backend: String,
    pub model_variant: String,
    /// Each stage's busy time; see [`StageSeconds`].
    pub stage_seconds: StageSeconds,
    /// Time inside the model's runs, summed over the runs that overlapped (one per core):
    /// `rows / (session_seconds / cores)` is the session-only speed this run is measured
    /// against.
    pub session_seconds: f64,
}

impl std::fmt::Display for JobSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} rows ({} predicted, {} null, {} empty, {} truncated) in {:.1} s: {:.0} docs/s, {:.0} tokens/s [{}] -> {}",
            self.rows,
            self.counts.predicted,
            self.counts.null_texts,
            self.counts.empty_texts,
            self.counts.truncated,
            self.seconds,
            self.docs_per_second,
            self.tokens_per_second,
            self.backend,
            self.output
        )
    }
}

/// Checks every output location before any work: each may be replaced (see
/// [`check_replaceable`]), none is read by the input (now or on a rerun) or is a file of the
/// model package, and the metrics file is not the predictions file.
fn check_outputs(options: &JobOptions, input: InputLocation, package: &ModelPackage) -> anyhow::Result<()> {
    let inputs = &[input, package.as_input()];
    check_replaceable(&options.output)?;
    refuse_output_among_inputs("--output", &options.output, inputs)?;
    if let Some(metrics) = &options.metrics_json {
        check_replaceable(metrics).context("--metrics-json")?;
        refuse_output_among_inputs("--metrics-json", metrics, inputs)?;
        if same_location(metrics, &options.output) {
            bail!("--metrics-json {} is also --output; give the summary its own file", metrics.display());
        }
    }
    Ok(())
}

pub fn run_job(package: &ModelPackage, options: &JobOptions) -> anyhow::Result<JobSummary> {
    anyhow::ensure!(options.batch_size > 0, "--batch-size must be at least 1");
    anyhow::ensure!(options.window > 0, "--window must be at least 1");
    let started = Instant::now();
    let input = resolve_inputs(&options.input, DATA_EXTENSIONS)?;
    let files = input.files.clone();
    check_outputs(options, input, package)?;
    let classifier = if options.null_model {
        let backend = Arc::new(NullBackend::for_manifest(&package.manifest)?);
        Classifier::with_backend(package.clone(), backend, options.max_tokens)?
    } else {
        Classifier::open(package.clone(), &options.backend, options.max_tokens)?
    };
    let table = OutputTable::for_model(classifier.optional_columns(options.with_embedding));

    // Every file must agree on the pass-through schema; check them all before writing anything.
    let streams: Vec<BatchStream> =
        files.iter().map(|f| open_batches(f, options.window)).collect::<anyhow::Result<_>>()?;
    let (kept_columns, output_schema) = plan_schema(&files, &streams, options, &table)?;
    let output_schema =
        Arc::new(output_schema.with_metadata(table_metadata(package, classifier.backend(), classifier.max_tokens())?));

    let total_rows: Option<usize> = streams.iter().map(|s| s.rows).sum();
    let mut metrics_file =
        options.metrics_json.as_deref().map(|path| anyhow::Ok((temp_beside(path)?, path))).transpose()?;
    let writer = WriteStage {
        output: OutputFile::create(&options.output, output_schema.clone())?,
        schema: output_schema,
        kept_columns: &kept_columns,
        table,
        labels: &package.manifest.labels,
        progress: Progress::new(total_rows),
        panic_after_first_window: options.panic_after_first_window,
    };
    let line = Line {
        files: &files,
        classifier: &classifier,
        text_column: &options.text_column,
        batch_size: options.batch_size,
        window: options.window,
    };
    let (written, stage_seconds) = run_line(&line, streams, writer)?;
    let seconds = started.elapsed().as_secs_f64();
    let counts = written.counts;
    let summary = JobSummary {
        output: options.output.display().to_string(),
        files: files.len(),
        rows: written.rows,
        counts,
        seconds,
        docs_per_second: written.rows as f64 / seconds,
        tokens_per_second: counts.tokens as f64 / seconds,
        backend: classifier.backend().describe(),
        model_variant: package.manifest.variant.clone(),
        stage_seconds,
        session_seconds: classifier.session_seconds(),
    };
    // The summary is written before the predictions are published, so that a failure here
    // leaves neither file.
    if let Some((file, path)) = &mut metrics_file {
        std::io::Write::write_all(file, serde_json::to_string_pretty(&summary)?.as_bytes())
            .map_err(|e| write_failed(path, &e))?;
    }
    written.output.finish()?;
    if let Some((file, path)) = metrics_file {
        file.publish(path)?;
    }
    Ok(summary)
}

/// Checks the text column and the pass-through columns in every file, and returns the kept
/// column names with the output schema.
fn plan_schema(
    files: &[PathBuf],
    streams: &[BatchStream],
    options: &JobOptions,
    table: &OutputTable,
) -> anyhow::Result<(Vec<String>, Schema)> {
    let first = &streams.first().context("no input file")?.schema;
    let kept: Vec<String> = match &options.pass_through {
        Some(columns) => columns.clone(),
        None => first.fields().iter().map(|f| f.name().clone()).collect(),
    };
    let mut seen = std::collections::HashSet::new();
    if let Some(twice) = kept.iter().find(|name| !seen.insert(name.as_str())) {
        bail!("--pass-through names the column `{twice}` twice; name each column once");
    }
    for (file, stream) in files.iter().zip(streams) {
        let schema = &stream.schema;
        match schema.field_with_name(&options.text_column) {
            Err(_) => bail!(
                "{} has no text column `{}`; its columns are: {} (choose one with --text-column)",
                file.display(),
                options.text_column,
                column_list(schema)
            ),
            Ok(field) if !is_text_type(field.data_type()) => bail!(
                "{}: text column `{}` has type {}, expected a string column (choose one with --text-column)",
                file.display(),
                options.text_column,
                field.data_type()
            ),
            Ok(_) => {}
        }
        for name in &kept {
            let here = schema.field_with_name(name).ok();
            let there = first.field_with_name(name).ok();
            match (here, there) {
                (Some(a), Some(b)) if a.data_type() == b.data_type() => {}
                (None, _) => bail!(
                    "{} has no column `{name}` to pass through; its columns are: {}",
                    file.display(),
                    column_list(schema)
                ),
                (Some(a), Some(b)) => bail!(
                    "{}: column `{name}` is {} there but {} in the first input file; convert one of them, \
                     or leave the column out with --pass-through",
                    file.display(),
                    a.data_type(),
                    b.data_type()
                ),
                (Some(_), None) => bail!("{}: column `{name}` is missing from the first input file", file.display()),
            }
        }
    }
    // Every kept column was found in every file above, the first included.
    let mut fields: Vec<FieldRef> =
        kept.iter().map(|name| first.field_with_name(name).map(|f| Arc::new(f.clone()))).collect::<Result<_, _>>()?;
    for field in table.fields() {
        if kept.contains(field.name()) {
            bail!("input column `{}` collides with an output column; leave it out with --pass-through", field.name());
        }
        fields.push(field);
    }
    Ok((kept, Schema::new(fields)))
}

fn table_metadata(
    package: &ModelPackage,
    backend: &dyn InferenceBackend,
    max_tokens: usize,
) -> anyhow::Result<std::collections::HashMap<String, String>> {
    let graph = std::fs::read(package.graph_path())
        .with_context(|| format!("cannot read {}", package.graph_path().display()))?;
    let mut metadata = std::collections::HashMap::new();
    metadata.insert("model.variant".to_owned(), package.manifest.variant.clone());
    metadata.insert("model.sha256".to_owned(), format!("{:x}", Sha256::digest(&graph)));
    metadata.insert("model.labels".to_owned(), serde_json::to_string(&package.manifest.labels)?);
    metadata.insert("pipeline.max_tokens".to_owned(), max_tokens.to_string());
    metadata.insert("pipeline.version".to_owned(), env!("CARGO_PKG_VERSION").to_owned());
    metadata.insert("pipeline.backend".to_owned(), backend.describe());
    Ok(metadata)
}

//! `pipeline run`: everything checked before any work (inputs, outputs, the model, the
//! schema of every file), then the stages run (see `stages`), then the output and the
//! summary are published together.
//!
//! The output is one Parquet file, or a dataset: a directory of parts, one per unit of work
//! (see `units` and `dataset`), which a rerun resumes and which shards share.
//!
//! Each input record batch is one window: its documents are tokenized in parallel, sorted by
//! length into model batches (less padding), run in parallel, and written back in input order.
//! Memory is bounded by the window size and the queue depth, never by the corpus.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use anyhow::{Context, bail};
use arrow::datatypes::{FieldRef, Schema};
use serde::Serialize;
use sha2::{Digest, Sha256};

use batch_io::atomic_file::{check_replaceable, check_replaceable_parquet, temp_beside, write_failed};
use batch_io::inputs::{InputFiles, resolve_input_files};
use batch_io::locations::{
    InputLocation, refuse_dataset_holding_inputs, refuse_output_among_inputs, refuse_remote_output_among_inputs,
    same_location,
};
use batch_io::object_storage::is_url;
use batch_io::publish::Destination;
use batch_io::source::{
    BatchStream, DATA_EXTENSIONS, InputFile, RowSpan, column_list, did_you_mean, is_text_type, open_span,
};
use runtime::classifier::{BatchLimit, Classifier, TextCounts};
use runtime::inference::{BackendOptions, NullBackend};
use runtime::long_documents::LongDocuments;
use runtime::output_origin::{ATTENTION_ENCODING, MODEL_LABELS, MODEL_SHA256};
use runtime::output_table::{AttentionOutput, OutputTable};
use runtime::package::ModelPackage;

use crate::dataset::{
    DatasetDir, FINGERPRINT_KEY, Finalized, InputIdentity, Progress as DatasetProgress, Run, RunFingerprint,
    RunManifest, inputs_sha256,
};
use crate::output::{Output, OutputFile, OutputFormat};
use crate::stages::{Line, Progress, StageSeconds, WriteStage, run_line};
use crate::units::{FileLayout, Shard, WorkUnit, part_name, plan_units};

#[derive(Debug, Clone)]
pub struct JobOptions {
    pub input: String,
    /// A local path or a storage URL; see [`is_dataset`].
    pub output: String,
    pub text_column: String,
    /// Input columns copied to the output; `None` keeps them all.
    pub pass_through: Option<Vec<String>>,
    pub backend: BackendOptions,
    pub batch_size: usize,
    /// Padded tokens per inference batch at most (documents × the longest), besides
    /// `batch_size`: keeps batches of long documents from growing memory and latency.
    pub max_batch_tokens: Option<usize>,
    /// Documents tokenized, sorted and written together.
    pub window: usize,
    pub max_tokens: Option<usize>,
    /// What happens to documents past the token limit.
    pub long_documents: LongDocuments,
    /// How much attention the output keeps.
    pub attention: AttentionOutput,
    pub with_embedding: bool,
    /// Also write the run summary as JSON here.
    pub metrics_json: Option<PathBuf>,
    /// Test hook: panic after the first window is written, to exercise the internal-error
    /// path end to end (exit code 70, the unfinished output removed).
    pub panic_after_first_window: bool,
    /// Bench hook: a stand-in for the model that costs nothing (see [`NullBackend`]), to
    /// measure the pipeline's own ceiling.
    pub null_model: bool,
    /// Set from another thread to stop the run (Ctrl-C in the Python module): no window is
    /// read after it, and the run ends with [`Interrupted`], publishing nothing.
    pub cancel: Option<Arc<AtomicBool>>,
    /// Dataset outputs only: the units this process takes.
    pub shard: Shard,
    /// Dataset outputs only: the most rows in one part.
    pub rows_per_part: usize,
    /// Dataset outputs only: delete another run's parts instead of refusing them.
    pub overwrite: bool,
}

/// Whether `--output` names a dataset (a directory or prefix of parts): a location ending in
/// `/`, an existing directory, or a new location without the `.parquet` extension. Anything
/// else is one file, as before datasets existed.
pub fn is_dataset(output: &str) -> bool {
    let path = Path::new(output);
    if output.ends_with('/') || (!is_url(output) && path.is_dir()) {
        return true;
    }
    let is_parquet = output.rsplit_once('.').is_some_and(|(_, e)| e.eq_ignore_ascii_case("parquet"));
    !is_parquet && (is_url(output) || std::fs::symlink_metadata(path).is_err())
}

/// What a dataset run did with its parts.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PartsSummary {
    pub shard: Shard,
    /// Parts written by this process.
    pub written: usize,
    /// Parts of this shard already committed by an earlier attempt, skipped.
    pub skipped: usize,
    /// Parts of the whole run (all shards).
    pub total: usize,
    /// Whether every part is now committed and `_SUCCESS` written.
    pub complete: bool,
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
    /// When the run started and finished (RFC 3339, UTC).
    pub started_at: String,
    pub finished_at: String,
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
    /// Dataset outputs only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parts: Option<PartsSummary>,
}

impl JobSummary {
    /// Each stage's busy time against the run's wall time, the busiest marked as the
    /// bottleneck, and the model's own share (`--profile`).
    pub fn profile(&self) -> String {
        let stages = &self.stage_seconds;
        let rows = [
            ("read", stages.read),
            ("tokenize", stages.tokenize),
            ("infer", stages.infer),
            ("assemble", stages.assemble),
            ("write", stages.write),
        ];
        let busiest = rows.iter().map(|(_, busy)| *busy).fold(0.0, f64::max);
        let wall = self.seconds.max(f64::EPSILON);
        let mut text = format!(
            "profile: {:.2} s wall, {} rows
  stage      busy s   busy share of wall
",
            self.seconds, self.rows
        );
        for (stage, busy) in rows {
            let mark = if busy == busiest && busy > 0.0 { "  <- the bottleneck" } else { "" };
            text.push_str(&format!(
                "  {stage:<9} {busy:>7.2}   {:>5.1} %{mark}
",
                100.0 * busy / wall
            ));
        }
        text.push_str("  (assemble: the mean over its threads that had work)\n");
        text.push_str(&format!(
            "  inside the model: {:.2} s, summed over the runs that overlapped (one per core)\n",
            self.session_seconds
        ));
        text
    }

    /// The run's figures as one log event (a JSON object with `--log-format json`).
    pub fn log(&self) {
        let stages = &self.stage_seconds;
        tracing::info!(
            rows = self.rows,
            predicted = self.counts.predicted,
            null_texts = self.counts.null_texts,
            empty_texts = self.counts.empty_texts,
            windowed = self.counts.windowed,
            truncated = self.counts.truncated,
            seconds = self.seconds,
            docs_per_second = self.docs_per_second,
            read_busy_seconds = stages.read,
            tokenize_busy_seconds = stages.tokenize,
            infer_busy_seconds = stages.infer,
            assemble_busy_seconds = stages.assemble,
            write_busy_seconds = stages.write,
            parts_written = self.parts.map(|p| p.written),
            parts_skipped = self.parts.map(|p| p.skipped),
            complete = self.parts.map(|p| p.complete),
            output = %self.output,
            "run finished"
        );
    }
}

impl std::fmt::Display for JobSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} rows ({} predicted, {} null, {} empty, {} in windows, {} truncated) in {:.1} s: {:.0} docs/s, {:.0} tokens/s [{}] -> {}",
            self.rows,
            self.counts.predicted,
            self.counts.null_texts,
            self.counts.empty_texts,
            self.counts.windowed,
            self.counts.truncated,
            self.seconds,
            self.docs_per_second,
            self.tokens_per_second,
            self.backend,
            self.output
        )?;
        if let Some(parts) = &self.parts {
            let shard = if parts.shard == Shard::WHOLE { String::new() } else { format!("shard {}: ", parts.shard) };
            let state = if parts.complete { "complete, _SUCCESS written" } else { "other parts still to come" };
            let written = if parts.written == 1 {
                "1 part written".to_owned()
            } else {
                format!("{} parts written", parts.written)
            };
            write!(f, " ({shard}{written}, {} already committed, of {} in all; {state})", parts.skipped, parts.total)?;
        }
        Ok(())
    }
}

/// Checks every output location before any work: each may be replaced (see
/// [`check_replaceable`]), none is read by the input (now or on a rerun) or is a file of the
/// model package, and the metrics file is neither the predictions file nor in a dataset
/// output's directory.
fn check_outputs(
    options: &JobOptions,
    input: &InputFiles,
    package: &ModelPackage,
    dataset: bool,
) -> anyhow::Result<()> {
    if !dataset && options.shard != Shard::WHOLE {
        bail!("--shard and --shards need a dataset output: give --output a directory (a path without .parquet)");
    }
    let output = options.output.as_str();
    if is_url(output) {
        let files: Vec<String> = input.files.iter().map(ToString::to_string).collect();
        let first_part = dataset.then(|| format!("{}/{}", output.trim_end_matches('/'), part_name(0)));
        refuse_remote_output_among_inputs("--output", output, dataset, first_part.as_deref(), &options.input, &files)?;
    } else {
        let inputs: Vec<InputLocation> = input.local.iter().cloned().chain([package.as_input()]).collect();
        let path = Path::new(output);
        if dataset {
            // The directory, and any part in it, must be out of the inputs' reach.
            refuse_output_among_inputs("--output", path, &inputs)?;
            refuse_output_among_inputs("--output", &path.join(part_name(0)), &inputs)?;
            refuse_dataset_holding_inputs("--output", path, &inputs)?;
        } else {
            check_replaceable(path)?;
            refuse_output_among_inputs("--output", path, &inputs)?;
            check_replaceable_parquet("pipeline run", path)?;
        }
    }
    if let Some(metrics) = &options.metrics_json {
        let inputs: Vec<InputLocation> = input.local.iter().cloned().chain([package.as_input()]).collect();
        check_replaceable(metrics).context("--metrics-json")?;
        refuse_output_among_inputs("--metrics-json", metrics, &inputs)?;
        if same_location(metrics, Path::new(output)) {
            bail!("--metrics-json {} is also --output; give the summary its own file", metrics.display());
        }
        // Beside the parts it could replace a committed part or `_SUCCESS`.
        let folder = metrics.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if dataset && !is_url(output) && same_location(folder, Path::new(output)) {
            bail!(
                "--metrics-json {} is inside the dataset output {output}; give the summary a file outside it",
                metrics.display()
            );
        }
    }
    Ok(())
}

pub fn run_job(package: &ModelPackage, options: &JobOptions) -> anyhow::Result<JobSummary> {
    anyhow::ensure!(options.batch_size > 0, "--batch-size must be at least 1");
    anyhow::ensure!(options.max_batch_tokens != Some(0), "--max-batch-tokens must be at least 1");
    anyhow::ensure!(options.window > 0, "--window must be at least 1");
    anyhow::ensure!(options.rows_per_part > 0, "--rows-per-part must be at least 1");
    let started = Instant::now();
    let started_at = chrono::Utc::now();
    let input = resolve_input_files(&options.input, DATA_EXTENSIONS)?;
    let dataset = is_dataset(&options.output);
    check_outputs(options, &input, package, dataset)?;
    let files = input.files;
    let classifier = if options.null_model {
        let backend = Arc::new(NullBackend::for_manifest(&package.manifest)?);
        Classifier::with_backend(package.clone(), backend, options.max_tokens)?
    } else {
        Classifier::open(package.clone(), &options.backend, options.max_tokens)?
    }
    .with_long_documents(options.long_documents)?;
    let table = OutputTable::for_model(classifier.optional_columns(options.with_embedding))
        .with_attention_output(options.attention);

    // Every file must agree on the pass-through schema; check them all before writing anything.
    let streams: Vec<BatchStream> =
        files.iter().map(|f| open_span(f, options.window, None, RowSpan::Whole)).collect::<anyhow::Result<_>>()?;
    let (kept_columns, output_schema) = plan_schema(&files, &streams, options, &table)?;
    let mut read_columns = kept_columns.clone();
    if !read_columns.contains(&options.text_column) {
        read_columns.push(options.text_column.clone());
    }
    let model_sha256 = model_sha256(package)?;
    let mut metadata = table_metadata(package, &model_sha256, &classifier, options.attention)?;

    // A single file is one unit per input; a dataset splits them into parts.
    let layouts: Vec<FileLayout> = streams.iter().map(|s| if dataset { s.row_groups.clone() } else { None }).collect();
    let units = plan_units(&layouts, options.rows_per_part);
    let mut todo: Vec<WorkUnit> = units.iter().filter(|u| options.shard.owns(u)).copied().collect();
    let owned = todo.len();
    let run = dataset
        .then(|| {
            let inputs = files.iter().map(input_identity).collect::<anyhow::Result<Vec<_>>>()?;
            let fingerprint = RunFingerprint {
                input_count: files.len(),
                inputs_sha256: inputs_sha256(&inputs),
                model_sha256,
                text_column: options.text_column.clone(),
                pass_through: kept_columns.clone(),
                max_tokens: classifier.max_tokens(),
                long_documents: classifier.long_documents().to_string(),
                attention: options.attention.to_string(),
                embedding: options.with_embedding,
                rows_per_part: options.rows_per_part,
                parts: units.len(),
            };
            anyhow::Ok(Run { fingerprint, inputs })
        })
        .transpose()?;
    if let Some(run) = &run {
        metadata.insert(FINGERPRINT_KEY.to_owned(), serde_json::to_string(&run.fingerprint)?);
    }
    let sparse_floats = matches!(options.attention, AttentionOutput::TopK(_));
    let format = OutputFormat::new(Arc::new(output_schema.with_metadata(metadata)), sparse_floats)?;
    let (output, dataset_dir) = match &run {
        None => {
            let destination = Destination::parse(&options.output)?;
            (Output::File(OutputFile::create(&destination, &format)?), None)
        }
        Some(run) => {
            let dir = DatasetDir::prepare(&options.output)?;
            match dir.progress(run, options.overwrite)? {
                DatasetProgress::Complete => todo.clear(),
                DatasetProgress::Partial { committed } => todo.retain(|u| committed.binary_search(&u.index).is_err()),
            }
            let part_inputs = run.inputs.iter().map(serde_json::to_string).collect::<Result<_, _>>()?;
            (Output::parts(dir.clone(), part_inputs), Some(dir))
        }
    };
    let skipped = owned - todo.len();

    let total_rows: Option<usize> = todo
        .iter()
        .map(|u| match u.span {
            RowSpan::InRowGroup { rows, .. } => Some(rows),
            RowSpan::Whole => streams.get(u.file).and_then(|s| s.rows),
        })
        .sum();
    drop(streams);
    let mut metrics_file =
        options.metrics_json.as_deref().map(|path| anyhow::Ok((temp_beside(path)?, path))).transpose()?;
    let writer = WriteStage {
        output,
        format,
        kept_columns: &kept_columns,
        table,
        labels: &package.manifest.labels,
        assemble_threads: rayon::current_num_threads(),
        progress: Progress::new(total_rows),
        panic_after_first_window: options.panic_after_first_window,
    };
    let line = Line {
        files: &files,
        units: &todo,
        columns: &read_columns,
        classifier: &classifier,
        text_column: &options.text_column,
        batch_limit: BatchLimit { documents: options.batch_size, tokens: options.max_batch_tokens },
        window: options.window,
        cancel: options.cancel.as_deref(),
    };
    let (written, stage_seconds) = run_line(&line, writer)?;
    let parts = match (&run, &dataset_dir, &written.output) {
        (Some(run), Some(dir), Output::Parts { committed, .. }) => Some(PartsSummary {
            shard: options.shard,
            written: *committed,
            skipped,
            total: run.fingerprint.parts,
            complete: matches!(dir.finalize(Some(run), started_at)?, Finalized::Complete(_)),
        }),
        _ => None,
    };
    let seconds = started.elapsed().as_secs_f64();
    let counts = written.counts;
    let summary = JobSummary {
        output: options.output.clone(),
        files: files.len(),
        rows: written.rows,
        counts,
        started_at: rfc3339(started_at),
        finished_at: rfc3339(chrono::Utc::now()),
        seconds,
        docs_per_second: written.rows as f64 / seconds,
        tokens_per_second: counts.tokens as f64 / seconds,
        backend: classifier.backend().describe(),
        model_variant: package.manifest.variant.clone(),
        stage_seconds,
        session_seconds: classifier.session_seconds(),
        parts,
    };
    // The summary is written before the predictions are published, so that a failure here
    // leaves neither file.
    if let Some((file, path)) = &mut metrics_file {
        std::io::Write::write_all(file, serde_json::to_string_pretty(&summary)?.as_bytes())
            .map_err(|e| write_failed(path, &e))?;
    }
    if let Output::File(file) = written.output {
        file.finish()?;
    }
    if let Some((file, path)) = metrics_file {
        file.publish(path)?;
    }
    Ok(summary)
}

/// Where a single-file output goes.
/// An input file's identity for the run fingerprint: its resolved path (or URL), size and
/// modification time (or ETag).
fn input_identity(file: &InputFile) -> anyhow::Result<InputIdentity> {
    let path = match file {
        InputFile::Local(path) => path,
        InputFile::Remote(object) => {
            return Ok(InputIdentity {
                location: object.url.clone(),
                size: object.meta.size,
                version: object.version(),
            });
        }
    };
    let meta = std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    let modified = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
    let location = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    Ok(InputIdentity {
        location: location.display().to_string(),
        size: meta.len(),
        version: modified.map_or_else(String::new, |d| d.as_nanos().to_string()),
    })
}

/// `pipeline run --finalize DIR`: writes `_SUCCESS` into a dataset output whose parts are
/// all committed (by shards that each found others still at work), and returns it.
pub fn finalize(dir: &str) -> anyhow::Result<RunManifest> {
    if !is_url(dir) && !Path::new(dir).is_dir() {
        bail!("--finalize {dir}: no such directory; give the --output of the sharded run");
    }
    let started_at = chrono::Utc::now();
    let dataset = DatasetDir::prepare(dir)?;
    match dataset.finalize(None, started_at)? {
        Finalized::Complete(manifest) => Ok(*manifest),
        Finalized::Missing(missing) => {
            let names: Vec<String> = missing.iter().take(10).map(|&i| part_name(i)).collect();
            let more = if missing.len() > 10 { format!(" and {} more", missing.len() - 10) } else { String::new() };
            bail!(
                "{dir} is missing {} part(s): {}{more}; rerun the shards that own them (part N belongs to shard N mod SHARDS)",
                missing.len(),
                names.join(", ")
            )
        }
    }
}

/// Checks the text column and the pass-through columns in every file, and returns the kept
/// column names with the output schema.
fn plan_schema(
    files: &[InputFile],
    streams: &[BatchStream],
    options: &JobOptions,
    table: &OutputTable,
) -> anyhow::Result<(Vec<String>, Schema)> {
    let first = &streams.first().context("no input file")?.schema;
    let kept: Vec<String> = match &options.pass_through {
        Some(columns) => columns.clone(),
        None => first.fields().iter().map(|f| f.name().clone()).collect(),
    };
    if options.pass_through.is_some() {
        let mut seen = std::collections::HashSet::new();
        if let Some(twice) = kept.iter().find(|name| !seen.insert(name.as_str())) {
            bail!("--pass-through names the column `{twice}` twice; name each column once");
        }
    }
    for (file, stream) in files.iter().zip(streams) {
        let schema = &stream.schema;
        refuse_ambiguous_columns(file, schema, &kept, &options.text_column)?;
        match schema.field_with_name(&options.text_column) {
            Err(_) => bail!(
                "{} has no text column `{}`{}; its columns are: {} (choose one with --text-column)",
                file,
                options.text_column,
                did_you_mean(&options.text_column, schema),
                column_list(schema)
            ),
            Ok(field) if !is_text_type(field.data_type()) => bail!(
                "{}: text column `{}` has type {}, expected a string column (choose one with --text-column)",
                file,
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
                    "{} has no column `{name}` to pass through{}; its columns are: {}",
                    file,
                    did_you_mean(name, schema),
                    column_list(schema)
                ),
                (Some(a), Some(b)) => bail!(
                    "{}: column `{name}` is {} there but {} in the first input file; convert one of them, \
                     or leave the column out with --pass-through",
                    file,
                    a.data_type(),
                    b.data_type()
                ),
                (Some(_), None) => bail!("{}: column `{name}` is missing from the first input file", file),
            }
        }
    }
    // Every kept column was found in every file above, the first included.
    let mut fields: Vec<FieldRef> =
        kept.iter().map(|name| first.field_with_name(name).map(|f| Arc::new(f.clone()))).collect::<Result<_, _>>()?;
    // Every output name is refused, not only this run's: a reader would take a passed-through
    // `attention_entropy` or `contribution` for the model's.
    if let Some(name) = kept.iter().find(|name| runtime::output_table::RESERVED_NAMES.contains(&name.as_str())) {
        bail!("input column `{name}` collides with an output column; leave it out with --pass-through");
    }
    fields.extend(table.fields());
    Ok((kept, Schema::new(fields)))
}

/// A column read by name (kept or the text) must be the only one of that name in `file`.
fn refuse_ambiguous_columns(file: &InputFile, schema: &Schema, kept: &[String], text: &str) -> anyhow::Result<()> {
    let mut seen = std::collections::HashSet::new();
    for name in schema.fields().iter().map(|f| f.name()) {
        if !seen.insert(name) && (kept.contains(name) || name == text) {
            let count = schema.fields().iter().filter(|f| f.name() == name).count();
            bail!(
                "{file} has {count} columns named `{name}`, so the name does not say which one to read; rename all \
                 but one, or (if it is not the text column) name the columns to keep with --pass-through"
            );
        }
    }
    Ok(())
}

pub fn model_sha256(package: &ModelPackage) -> anyhow::Result<String> {
    let graph = std::fs::read(package.graph_path())
        .with_context(|| format!("cannot read {}", package.graph_path().display()))?;
    Ok(format!("{:x}", Sha256::digest(&graph)))
}

/// The schema metadata of every output (`pipeline run`'s files and the Python module's
/// tables): which model, labels and options made it, so that the report and SQL can tell
/// runs apart.
pub fn table_metadata(
    package: &ModelPackage,
    model_sha256: &str,
    classifier: &Classifier,
    attention: AttentionOutput,
) -> anyhow::Result<std::collections::HashMap<String, String>> {
    let mut metadata = std::collections::HashMap::new();
    metadata.insert("model.variant".to_owned(), package.manifest.variant.clone());
    metadata.insert(MODEL_SHA256.to_owned(), model_sha256.to_owned());
    metadata.insert(MODEL_LABELS.to_owned(), serde_json::to_string(&package.manifest.labels)?);
    metadata.insert("pipeline.max_tokens".to_owned(), classifier.max_tokens().to_string());
    metadata.insert("pipeline.long_documents".to_owned(), classifier.long_documents().to_string());
    metadata.insert("pipeline.version".to_owned(), env!("CARGO_PKG_VERSION").to_owned());
    metadata.insert("pipeline.backend".to_owned(), classifier.backend().describe());
    metadata.insert(ATTENTION_ENCODING.to_owned(), attention.to_string());
    Ok(metadata)
}

/// The run was stopped through [`JobOptions::cancel`]; its output was not published (a
/// dataset keeps the parts it committed, for a rerun to resume from).
#[derive(Debug, Clone, Copy)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the run was interrupted; its output was not published")
    }
}

impl std::error::Error for Interrupted {}

/// A timestamp as `_SUCCESS` and the run summary write it: RFC 3339 in UTC, to the millisecond.
pub fn rfc3339(time: chrono::DateTime<chrono::Utc>) -> String {
    time.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

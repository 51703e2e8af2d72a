//! `pipeline run` as phases: the options (`spec`), the checks made before any work
//! (`preflight`), the plan (`plan`: columns, schema, units, resume), the stages (see
//! `stages`), then the output and the summary published together (`summary`).
//!
//! The output is one Parquet file, or a dataset: a directory of parts, one per unit of work
//! (see `units` and `dataset`), which a rerun resumes and which shards share.
//!
//! Input rows travel in chunks: a chunk's documents are tokenized in parallel, sorted by
//! length into model batches (less padding), run in parallel, and written back in input
//! order. Memory is bounded by the chunk size and the queue depth, never by the corpus.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::bail;

use batch_io::atomic_file::{temp_beside, write_failed};
use batch_io::inputs::{InputFiles, resolve_input_files};
use batch_io::object_storage::is_url;
use batch_io::source::DATA_EXTENSIONS;
use runtime::classifier::{BatchLimit, Classifier};
use runtime::inference::{Device, NullBackend};
use runtime::output::OutputTable;
use runtime::package::ModelPackage;

use crate::sinks::Output;
use crate::sinks::dataset::{DatasetDir, Finalized, Run, RunManifest};
use crate::sinks::delta::ShardCommit;
use batch_io::progress::{Progress, Unit};

use crate::stages::{Line, WriteStage, run_line};
use crate::units::part_name;

mod metadata;
pub mod options;
pub(crate) mod plan;
mod preflight;
pub mod spec;
pub(crate) mod summary;

pub use metadata::{model_sha256, table_metadata};
pub use options::{InvalidOption, OptionValue, RunOption, Scope};
pub use spec::{OutputFormat, RUN_OPTIONS, Reporting, RunSpec};
pub use summary::{JobSummary, PartsSummary, TableCommit};

pub use crate::stages::Interrupted;
use crate::timestamps::rfc3339;

use plan::{DeltaPlan, Plan};

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

/// Runs the job, reporting it where `spec.reporting` says (lineage at the start and the end,
/// metrics at the end); a reporting failure is logged and never changes the result.
pub fn run_job(package: &ModelPackage, spec: &RunSpec) -> anyhow::Result<JobSummary> {
    spec.check()?;
    if spec.backend.device == Device::Cuda && (spec.batch_size.is_none() || spec.chunk_rows.is_none()) {
        tracing::info!(
            "on CUDA: batches of {} documents, chunks of {} rows (a GPU's defaults; {} and {} set others)",
            spec.batch_size(),
            spec.chunk_rows(),
            batch_io::spelling::name("batch_size"),
            batch_io::spelling::name("chunk_rows")
        );
    }
    // Listed and hashed once, for the run and for its lineage (a failure is the run's).
    let input = resolve_input_files(&spec.input, DATA_EXTENSIONS);
    let model_sha256 = model_sha256(package);
    let files = input.as_ref().ok().map(|input| input.files.as_slice());
    let watch = crate::reporting::RunWatch::start(spec, files, model_sha256.as_deref().ok());
    let new_directory = !is_url(&spec.output) && !Path::new(&spec.output).exists();
    let result = match (input, model_sha256) {
        (Ok(input), Ok(model_sha256)) => run_stages(package, spec, input, &model_sha256, watch.outputs_checked()),
        (Err(error), _) | (_, Err(error)) => Err(error),
    };
    if result.is_err() && new_directory {
        // A dataset directory this run made and left empty (refused mid-run before any part):
        // nothing to resume from. One that holds parts stays, for the rerun.
        let _ = std::fs::remove_dir(&spec.output);
    }
    watch.finish(&result);
    result
}

/// The run itself; `outputs_checked` is set once every output path has passed its checks
/// (before that, not even a metrics file may be written).
fn run_stages(
    package: &ModelPackage,
    spec: &RunSpec,
    input: InputFiles,
    model_sha256: &str,
    outputs_checked: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<JobSummary> {
    let started = Instant::now();
    let started_at = chrono::Utc::now();
    let dataset = spec.output_format == OutputFormat::Delta || is_dataset(&spec.output);
    preflight::check_outputs(spec, &input, package, dataset)?;
    outputs_checked.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut files = input.files;
    if dataset && spec.output_format == OutputFormat::Parquet {
        let earlier = DatasetDir::earlier_inputs_at(&spec.output)?;
        files = plan::earlier_inputs_first(files, &earlier)?;
    }
    let classifier = open_classifier(package, spec)?;
    let table = OutputTable::for_model(classifier.optional_columns(spec.embedding), spec.attention)
        .abstaining_below(spec.min_confidence)
        .with_token_spans(classifier.gives_token_spans() && spec.files_hold_the_text())
        .without(&spec.drop)?;
    let mut plan = Plan::make(&files, spec, &table, &classifier, package, model_sha256, dataset)?;
    let (output, dataset_dir) = plan.open_output(spec)?;

    let mut metrics_file =
        spec.metrics_json.as_deref().map(|path| anyhow::Ok((temp_beside(path)?, path))).transpose()?;
    let rows_to_do = plan.rows_to_do();
    let output_columns = plan.layout.schema().fields().iter().map(|f| f.name().clone()).collect();
    let writer = WriteStage {
        output,
        layout: plan.layout,
        partitioning: plan.partitioning,
        kept_columns: &plan.kept_columns,
        table,
        labels: &package.manifest.labels,
        assemble_threads: rayon::current_num_threads(),
        progress: Progress::new("", Unit::Rows, rows_to_do),
        panic_after_first_chunk: spec.panic_after_first_chunk,
    };
    let line = Line {
        files: &files,
        footers: &plan.footers,
        units: &plan.todo,
        columns: &plan.read_columns,
        classifier: &classifier,
        text_column: &spec.text_column,
        batch_limit: BatchLimit { documents: spec.batch_size(), tokens: spec.max_batch_tokens },
        chunk_rows: spec.chunk_rows(),
        min_confidence: spec.min_confidence,
        cancel: spec.cancel.as_deref(),
    };
    let (written, stage_seconds) = run_line(&line, writer)?;
    // Told to stop after the last chunk: nothing is published or committed.
    line.check_cancelled()?;
    let parts = match (&plan.run, &dataset_dir, &written.output) {
        (Some(run), Some(dir), Output::Parts { committed, .. }) => {
            let (complete, table) = match &plan.delta {
                None => (matches!(dir.finalize(Some(run), started_at)?, Finalized::Complete(_)), None),
                Some(delta) => (true, Some(commit_to_table(delta, dir, run, spec)?)),
            };
            Some(PartsSummary {
                shard: spec.shard,
                written: *committed,
                skipped: plan.skipped,
                total: run.fingerprint.parts,
                complete,
                table,
            })
        }
        _ => None,
    };
    let seconds = started.elapsed().as_secs_f64();
    let counts = written.counts;
    let summary = JobSummary {
        output: spec.output.clone(),
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
        output_columns,
        passed_through: plan.kept_columns.clone(),
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

/// Adds this shard's staged parts to the Delta table (see [`crate::sinks::delta`]).
fn commit_to_table(delta: &DeltaPlan, dir: &DatasetDir, run: &Run, spec: &RunSpec) -> anyhow::Result<TableCommit> {
    let parts = dir.staged_parts(run, delta.units.keys().copied())?;
    if spec.kill_before_commit {
        // A real SIGKILL: no handler, no clean-up, nothing flushed.
        let _ = std::process::Command::new("kill").args(["-9", &std::process::id().to_string()]).status();
        std::thread::sleep(std::time::Duration::from_secs(60));
    }
    let started = Instant::now();
    let committed = delta.table.commit(&ShardCommit {
        staging_name: delta.staging_name.clone(),
        parts: &parts,
        units: &delta.units,
        files: &delta.files,
        unit_files: &delta.unit_files,
        shard_key: delta.shard_key.clone(),
        shard_index: spec.shard.index,
    })?;
    let (version, added) = committed.map_or((None, 0), |(version, added)| (Some(version), added));
    Ok(TableCommit { version, parts: added, seconds: started.elapsed().as_secs_f64() })
}

/// The package opened for this run: on the backend asked for, or (`--null-model`) on a
/// stand-in that costs nothing.
fn open_classifier(package: &ModelPackage, spec: &RunSpec) -> anyhow::Result<Classifier> {
    let classifier = if spec.null_model {
        let backend = Arc::new(NullBackend::for_manifest(&package.manifest)?);
        Classifier::with_backend(package.clone(), backend, spec.max_tokens)?
    } else {
        Classifier::open(package.clone(), &spec.backend, spec.max_tokens)?
    };
    classifier.with_long_documents(spec.long_documents()?)
}

/// `pipeline finalize DIR`: writes `_SUCCESS` into a dataset output whose parts are
/// all committed (by shards that each found others still at work), and returns it.
pub fn finalize(dir: &str) -> anyhow::Result<RunManifest> {
    if !is_url(dir) && !Path::new(dir).is_dir() {
        if Path::new(dir).exists() {
            bail!("{dir} is a file, not a dataset to finalize; give the --output directory of the sharded run");
        }
        bail!("{dir}: no such directory to finalize; give the --output of the sharded run");
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

//! `pipeline run`: classify every document of the input.

use std::path::PathBuf;

use batch_io::command_line::{logs_are_json, print_report, say};
use clap::Args;
use flags::{at_least_one, thread_count};
use pipeline::job::spec::defaults;
use pipeline::job::{RunSpec, run_job};
use pipeline::scheduler::{ShardCount, shard_from_environment};

use crate::args::RunOptionFlags;

#[derive(Args)]
pub struct RunArgs {
    /// A Parquet, Arrow IPC, CSV, TSV, JSON Lines or text file (one document a line), a
    /// directory of them, or a glob; the text formats by their extension.
    #[arg(long)]
    input: String,
    /// Model package: a directory, or its prefix in object storage (s3://bucket/models/san/,
    /// downloaded once into a cache; see PIPELINE_MODEL_CACHE). Default: the embedded IMDB
    /// SAN model.
    #[arg(long)]
    model: Option<PathBuf>,
    /// A Parquet file (`*.parquet`), or a dataset: a directory (a path ending in `/`, or
    /// without `.parquet`) of parts, one per unit of work, with `_SUCCESS` written last. A
    /// rerun into a dataset resumes: parts already committed are skipped.
    #[arg(long, default_value = defaults::OUTPUT)]
    output: String,
    /// The run's options, one flag per row of their table (`pipeline/src/job/spec.rs`).
    #[command(flatten)]
    options: RunOptionFlags,
    /// Dataset outputs: N shards, this one numbered by its array-job scheduler
    /// (JOB_COMPLETION_INDEX of a Kubernetes Indexed Job, SLURM_ARRAY_TASK_ID,
    /// AWS_BATCH_JOB_ARRAY_INDEX, CLOUD_RUN_TASK_INDEX); `auto` also takes N from it (Slurm,
    /// AWS Batch and Cloud Run give it; Kubernetes does not).
    #[arg(long, value_name = "N|auto", conflicts_with = "shard")]
    shards: Option<ShardCount>,
    /// The old name of --chunk-rows (it named rows, not a long document's token windows);
    /// still read, with a warning, until the next release.
    #[arg(long, value_parser = at_least_one, hide = true, conflicts_with = "chunk_rows")]
    window: Option<usize>,
    /// Worker threads (default: all cores; at most 1024).
    #[arg(long, value_parser = thread_count)]
    threads: Option<usize>,
    /// Print each stage's busy time at the end (on stderr), so the bottleneck shows.
    #[arg(long)]
    profile: bool,
    /// Test hook: panic after the first chunk is written (exercises exit code 70 and the
    /// clean-up).
    #[arg(long, hide = true)]
    panic_after_first_chunk: bool,
    /// Test hook: with a Delta output, SIGKILL this process after its parts are written and
    /// before it commits them.
    #[arg(long, hide = true)]
    kill_before_commit: bool,
    /// Bench hook: replace inference by a stand-in that costs nothing (outputs of the right
    /// shapes, varied weights), to measure the pipeline's own ceiling.
    #[arg(long, hide = true)]
    null_model: bool,
}

pub fn run(args: RunArgs) -> anyhow::Result<()> {
    // This process only classifies: each batch's blocks are worth keeping for the next.
    crate::memory::keep_freed_batches();
    if let Some(threads) = args.threads {
        rayon::ThreadPoolBuilder::new().num_threads(threads).build_global()?;
    }
    let mut spec = RunSpec { output: args.output, ..RunSpec::new(args.input) };
    args.options.apply(&mut spec)?;
    if let Some(rows) = args.window {
        tracing::warn!(
            "--window is now --chunk-rows (rows read together, not token windows); the old name goes in the next release"
        );
        spec.chunk_rows = Some(rows);
    }
    if let Some(count) = args.shards {
        spec.shard = shard_from_environment(count, &|name| std::env::var(name).ok())?;
        tracing::info!("shard {}, from the scheduler's environment", spec.shard);
    }
    // No `cancel`: a signal ends the process (batch_io::command_line), removing its temporaries.
    spec.panic_after_first_chunk = args.panic_after_first_chunk;
    spec.kill_before_commit = args.kill_before_commit;
    spec.null_model = args.null_model;
    if let Err(invalid) = spec.check() {
        match args.options.environment_variable_of(invalid.option) {
            Some(variable) => anyhow::bail!("{invalid} (from {variable}: change or unset it)"),
            None => return Err(invalid.into()),
        }
    }
    let (_guard, package) = runtime::model_source::open(args.model.as_deref())?;
    let summary = run_job(&package, &spec)?;
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

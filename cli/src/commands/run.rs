//! `pipeline run`: classify every document of the input.

use std::path::PathBuf;

use batch_io::choice::Choice;
use batch_io::command_line::{logs_are_json, print_report, say};
use clap::Args;
use flags::{at_least_one, choice, thread_count};
use pipeline::job::spec::defaults;
use pipeline::job::{OutputFormat, Reporting, RunSpec, run_job};
use pipeline::scheduler::{ShardCount, shard_from_environment};
use pipeline::units::Shard;
use runtime::output::AttentionEncoding;

use crate::args::{BackendFlags, LongDocumentFlags};

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
    /// Dataset outputs: take only shard I of N (units whose number is I modulo N).
    #[arg(long, value_name = "I/N", conflicts_with = "shards")]
    shard: Option<Shard>,
    /// Dataset outputs: N shards, this one numbered by its array-job scheduler
    /// (JOB_COMPLETION_INDEX of a Kubernetes Indexed Job, SLURM_ARRAY_TASK_ID,
    /// AWS_BATCH_JOB_ARRAY_INDEX, CLOUD_RUN_TASK_INDEX); `auto` also takes N from it (Slurm,
    /// AWS Batch and Cloud Run give it; Kubernetes does not).
    #[arg(long, value_name = "N|auto")]
    shards: Option<ShardCount>,
    /// Dataset outputs: the most rows in one part (parts never cross a row group).
    #[arg(long, default_value_t = defaults::ROWS_PER_PART, value_parser = at_least_one)]
    rows_per_part: usize,
    /// Dataset outputs: write each part's rows into Hive-style directories by these columns'
    /// values (`prediction=pos/part-00000.parquet`), as DuckDB, Polars, Spark and `pipeline
    /// sql` read them; the columns leave the files. Any output or passed-through column of
    /// text, whole numbers or true/false.
    #[arg(long, value_delimiter = ',', value_name = "COLUMN,...")]
    partition_by: Vec<String>,
    /// Dataset outputs: delete another run's parts (and its _SUCCESS) instead of refusing.
    #[arg(long)]
    overwrite: bool,
    /// `delta`: --output is a Delta Lake table (a directory or a storage prefix, created if
    /// new). Each shard commits its parts to the table once (a Delta `txn` per input unit);
    /// every run is incremental: input files already in the table are skipped, new ones
    /// classified and appended.
    #[arg(long, value_parser = choice::<OutputFormat>(), default_value = OutputFormat::Parquet.name())]
    output_format: OutputFormat,
    #[arg(long, default_value = defaults::TEXT_COLUMN)]
    text_column: String,
    /// Input columns to copy to the output, comma-separated (default: all).
    #[arg(long, value_delimiter = ',')]
    pass_through: Option<Vec<String>>,
    #[command(flatten)]
    backend: BackendFlags,
    /// Documents per inference batch (default: 64 on a CPU, 1024 with --device cuda).
    #[arg(long, value_parser = at_least_one)]
    batch_size: Option<usize>,
    /// Also cap each inference batch at this many padded tokens (documents × the longest
    /// document); a document longer than that runs alone. Default: no cap.
    #[arg(long, value_parser = at_least_one)]
    max_batch_tokens: Option<usize>,
    /// Rows read, length-sorted and written together (a chunk), which bounds memory (default:
    /// 2048 on a CPU, 8192 with --device cuda).
    #[arg(long, value_parser = at_least_one, conflicts_with = "window")]
    chunk_rows: Option<usize>,
    /// The old name of --chunk-rows (it named rows, not a long document's token windows);
    /// still read, with a warning, until the next release.
    #[arg(long, value_parser = at_least_one, hide = true)]
    window: Option<usize>,
    /// Token limit per document (default: the model's).
    #[arg(long, value_parser = at_least_one)]
    max_tokens: Option<usize>,
    #[command(flatten)]
    long_documents: LongDocumentFlags,
    /// How much attention and explanation to write: the hops summed per token as bytes
    /// relative to the heaviest and the contributions as signed bytes (compact); that, every
    /// hop's own weights as bytes and each hop's entropy (hops); every hop, their summary
    /// and the contributions as floats (full); only the summary and the contributions as
    /// floats (summary); each hop's and the summary's N heaviest weights with the rest 0
    /// (top-k:N); or none of them. Every hop's weights are most of an output's size.
    #[arg(long, value_name = "compact|hops|full|summary|top-k:N|none", default_value_t = AttentionEncoding::default())]
    attention: AttentionEncoding,
    /// Output columns to leave out, comma-separated (e.g. `contribution`); a column of
    /// bytes takes its scale with it. Input columns are chosen with --pass-through.
    #[arg(long, value_delimiter = ',', value_name = "COLUMN,...")]
    drop: Vec<String>,
    /// Also write the sentence embedding fed to the classifier.
    #[arg(long)]
    embedding: bool,
    /// Abstain below this probability: a row whose most probable class is less likely than P
    /// gets a null `prediction` and `abstained` = true, and keeps its probabilities and
    /// explanations. Pick P from `pipeline eval`'s accuracy at each coverage.
    #[arg(long, value_name = "P", value_parser = flags::probability)]
    min_confidence: Option<f32>,
    /// Worker threads (default: all cores; at most 1024).
    #[arg(long, value_parser = thread_count)]
    threads: Option<usize>,
    /// Print each stage's busy time at the end (on stderr), so the bottleneck shows.
    #[arg(long)]
    profile: bool,
    /// Also write the run summary as JSON to this file.
    #[arg(long)]
    metrics_json: Option<PathBuf>,
    /// The name the run reports under: the Pushgateway's `job`, OpenLineage's job name.
    #[arg(long, default_value = defaults::JOB_NAME)]
    job_name: String,
    /// PUT the run's figures to this Prometheus Pushgateway (http://host:9091), grouped by
    /// --job-name and shard; a failed run POSTs its exit code and keeps the last success.
    /// A Pushgateway that is down or refuses is a warning, never a failed run.
    #[arg(long, value_name = "URL")]
    metrics_push: Option<String>,
    /// Write the same figures to this file for node_exporter's textfile collector (*.prom),
    /// replaced whole.
    #[arg(long, value_name = "PATH")]
    metrics_textfile: Option<PathBuf>,
    /// Send OpenLineage START and COMPLETE/FAIL events to this endpoint (POST
    /// URL/api/v1/lineage; OPENLINEAGE_ENDPOINT, OPENLINEAGE_API_KEY and the parent run in
    /// OPENLINEAGE_PARENT_ID / OPENLINEAGE_ROOT_PARENT_ID are read as OpenLineage's clients
    /// read them). A lineage service that is down is a warning, never a failed run.
    #[arg(long, value_name = "URL", env = "OPENLINEAGE_URL")]
    openlineage_url: Option<String>,
    /// The OpenLineage namespace of the job.
    #[arg(long, env = "OPENLINEAGE_NAMESPACE", default_value = defaults::OPENLINEAGE_NAMESPACE)]
    openlineage_namespace: String,
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
    if let Some(threads) = args.threads {
        rayon::ThreadPoolBuilder::new().num_threads(threads).build_global()?;
    }
    if args.window.is_some() {
        tracing::warn!(
            "--window is now --chunk-rows (rows read together, not token windows); the old name goes in the next release"
        );
    }
    let shard = match (args.shard, args.shards) {
        (Some(shard), _) => shard,
        (None, Some(count)) => {
            let shard = shard_from_environment(count, &|name| std::env::var(name).ok())?;
            tracing::info!("shard {shard}, from the scheduler's environment");
            shard
        }
        (None, None) => Shard::WHOLE,
    };
    let (_guard, package) = runtime::model_source::open(args.model.as_deref())?;
    let mut spec = RunSpec {
        output: args.output,
        text_column: args.text_column,
        pass_through: args.pass_through,
        backend: args.backend.options(),
        batch_size: args.batch_size,
        max_batch_tokens: args.max_batch_tokens,
        chunk_rows: args.chunk_rows.or(args.window),
        max_tokens: args.max_tokens,
        long_documents: args.long_documents.mode()?,
        attention: args.attention,
        drop: args.drop,
        embedding: args.embedding,
        min_confidence: args.min_confidence,
        metrics_json: args.metrics_json,
        panic_after_first_chunk: args.panic_after_first_chunk,
        null_model: args.null_model,
        kill_before_commit: args.kill_before_commit,
        shard,
        rows_per_part: args.rows_per_part,
        partition_by: args.partition_by,
        overwrite: args.overwrite,
        output_format: args.output_format,
        reporting: Reporting {
            job_name: args.job_name,
            metrics_push: args.metrics_push,
            metrics_textfile: args.metrics_textfile,
            ..Reporting::default()
        },
        // No `cancel`: a signal ends the process (batch_io::command_line), removing its temporaries.
        ..RunSpec::new(args.input)
    };
    spec.reporting.set_openlineage(args.openlineage_url, Some(args.openlineage_namespace));
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

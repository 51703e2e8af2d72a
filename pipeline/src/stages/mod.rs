//! `pipeline run` as a line of stages, each on its own thread, joined by bounded queues so
//! that memory is bounded by the queue depth and never by the corpus:
//!
//! `read` (each unit of work's record batches, only the columns the output needs) →
//! `tokenize` (all cores) → `infer` (all cores) → `assemble` (output columns built and
//! encoded as a row group, several chunks at once, one per thread) → `write` (row groups
//! appended in input order; with a dataset output, each unit's part committed as soon as its
//! last chunk is written).
//!
//! While one chunk is inferred, the next is tokenized and earlier ones are assembled, so the
//! stages hide behind one another and the slowest sets the pace. A stage that fails
//! returns its error and drops its ends of the queues; its neighbours see a closed queue and
//! stop, so the line stops promptly, and the first error in stage order is the run's.

mod assemble;
mod infer;
mod read;
mod tokenize;
mod write;

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use batch_io::source::InputFile;
use parquet::arrow::arrow_reader::ArrowReaderMetadata;
use runtime::classifier::{BatchLimit, Classifier, EncodedTexts, TextCounts};
use runtime::output::DocumentPrediction;
use serde::Serialize;

use crate::units::WorkUnit;

pub use write::{WriteStage, Written};

/// Chunks waiting between two stages.
const QUEUE_DEPTH: usize = 2;

/// How long each stage was busy (working, not waiting on a queue), in seconds; for
/// `assemble`, which runs on several threads, the mean over those that had work. A stage busy for
/// nearly the whole run is the bottleneck.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct StageSeconds {
    pub read: f64,
    pub tokenize: f64,
    pub infer: f64,
    pub assemble: f64,
    pub write: f64,
}

/// One chunk of input rows on its way down the line.
pub struct Chunk {
    /// Index into the input files.
    pub file: usize,
    /// The chunk's first row within its file.
    pub first_row: usize,
    /// The unit of work it belongs to (an index into `Line::units`), and whether it is that
    /// unit's last chunk (a unit with no rows still sends one, empty).
    pub unit: usize,
    pub ends_unit: bool,
    pub batch: RecordBatch,
}

impl Chunk {
    /// `FILE rows A..B`, for errors.
    pub fn describe(&self, files: &[InputFile]) -> String {
        let file = files.get(self.file).map(ToString::to_string).unwrap_or_default();
        format!("{file} rows {}..{}", self.first_row, self.first_row + self.batch.num_rows())
    }
}

/// A chunk after tokenization.
pub struct Tokenized {
    pub chunk: Chunk,
    pub encoded: EncodedTexts,
}

/// A chunk after inference.
pub struct Inferred {
    pub chunk: Chunk,
    pub predictions: Vec<Option<DocumentPrediction>>,
    pub counts: TextCounts,
}

/// What the line needs besides the writer.
pub struct Line<'a> {
    pub files: &'a [InputFile],
    /// Each file's Parquet footer, as the plan read it (`None` for Arrow IPC).
    pub footers: &'a [Option<ArrowReaderMetadata>],
    /// The units this run does, in order.
    pub units: &'a [WorkUnit],
    /// The input columns read (the text column and the pass-through columns).
    pub columns: &'a [String],
    pub classifier: &'a Classifier,
    pub text_column: &'a str,
    pub batch_limit: BatchLimit,
    /// Rows per chunk (record batch).
    pub chunk_rows: usize,
    /// `--min-confidence`, to count the rows that abstain.
    pub min_confidence: Option<f32>,
    /// Set to stop the run: the read and infer stages stop with [`Interrupted`]
    /// at their next chunk, so a run stops within one chunk's inference, not after the chunks
    /// already read.
    pub cancel: Option<&'a std::sync::atomic::AtomicBool>,
}

impl Line<'_> {
    /// [`Interrupted`] once the run has been told to stop.
    pub fn check_cancelled(&self) -> anyhow::Result<()> {
        if self.cancel.is_some_and(|cancel| cancel.load(std::sync::atomic::Ordering::Relaxed)) {
            return Err(Interrupted.into());
        }
        Ok(())
    }
}

/// Runs the whole line and returns what the write stage wrote, with each stage's busy time.
/// The output is not published here: the caller does that only when every stage succeeded.
pub fn run_line(line: &Line<'_>, writer: WriteStage<'_>) -> anyhow::Result<(Written, StageSeconds)> {
    let (to_tokenize, read_chunks) = sync_channel::<Chunk>(QUEUE_DEPTH);
    let (to_infer, tokenized) = sync_channel::<Tokenized>(QUEUE_DEPTH);
    let (to_write, inferred) = sync_channel::<Inferred>(QUEUE_DEPTH);
    std::thread::scope(|scope| {
        let read = spawn(scope, "read", move || read::run(line, &to_tokenize));
        let tokenize = spawn(scope, "tokenize", move || tokenize::run(line, read_chunks, &to_infer));
        let infer = spawn(scope, "infer", move || infer::run(line, tokenized, &to_write));
        let written = writer.run(line, inferred);
        let read = join(read)?;
        let tokenize = join(tokenize)?;
        let infer = join(infer)?;
        let (written, write) = written?;
        let busy = |d: Duration| d.as_secs_f64();
        let seconds = StageSeconds {
            read: busy(read),
            tokenize: busy(tokenize),
            infer: busy(infer),
            assemble: busy(write.assemble),
            write: busy(write.write),
        };
        Ok((written, seconds))
    })
}

type Stage<'scope> = std::thread::ScopedJoinHandle<'scope, anyhow::Result<Duration>>;

fn spawn<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    name: &str,
    work: impl FnOnce() -> anyhow::Result<Duration> + Send + 'scope,
) -> anyhow::Result<Stage<'scope>> {
    Ok(std::thread::Builder::new().name(name.to_owned()).spawn_scoped(scope, work)?)
}

/// A stage's busy time, or its error. A panic has already ended the process (see
/// `batch_io::command_line`), so a failed join is only reported.
fn join(stage: anyhow::Result<Stage<'_>>) -> anyhow::Result<Duration> {
    match stage?.join() {
        Ok(result) => result,
        Err(_) => anyhow::bail!("a pipeline stage panicked"),
    }
}

/// Sends `item` downstream; `false` when the next stage has stopped (it failed, and its
/// error is the one reported), so this stage should stop too.
fn pass_on<T>(queue: &SyncSender<T>, item: T) -> bool {
    queue.send(item).is_ok()
}

/// Runs `work` and adds its duration to `busy`.
fn timed<T>(busy: &mut Duration, work: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let result = work();
    *busy += started.elapsed();
    result
}

/// Receives the next item; `None` once the previous stage has finished or stopped.
fn next<T>(queue: &Receiver<T>) -> Option<T> {
    queue.recv().ok()
}

/// The run was stopped through [`crate::job::spec::RunSpec::cancel`]; its output was not published (a
/// dataset keeps the parts it committed, for a rerun to resume from).
#[derive(Debug, Clone, Copy)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the run was interrupted; its output was not published")
    }
}

impl std::error::Error for Interrupted {}

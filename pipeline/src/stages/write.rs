//! The write stage: chunks handed to the assemble stage's threads in input order, and their
//! row groups appended in that same order: to the one output file, or to its unit's part of a
//! dataset output, committed as soon as the unit's last chunk is written.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::time::Duration;

use anyhow::Context;
use runtime::classifier::TextCounts;
use runtime::output::OutputTable;

use super::assemble::{Assembler, EncodedChunk, Job};
use super::{Inferred, Line, next, timed};
use crate::sinks::partitions::Partitioning;
use crate::sinks::{Output, ParquetLayout};
use batch_io::progress::Progress;

/// The most chunks assembled at once. Each thread holds a chunk's predictions and the
/// columns built from them, so the count is capped rather than one per core. With the default
/// compact attention and contributions, a thread assembled about 8,300 IMDB docs/s in
/// null-model runs on 2 shared cores, so twelve are needed to keep up with the 50,000 docs/s
/// asked of one H100 (its machine has 16 cores).
const MOST_ASSEMBLE_THREADS: usize = 12;

/// Everything the write stage needs, set up before the line starts.
pub struct WriteStage<'a> {
    pub output: Output,
    pub layout: ParquetLayout,
    /// `--partition-by`: the rows split into directories, and the files' layout.
    pub partitioning: Option<Partitioning>,
    /// Input columns copied to the output, in order.
    pub kept_columns: &'a [String],
    pub table: OutputTable,
    pub labels: &'a [String],
    /// Threads that assemble chunks at once (from 1 to [`MOST_ASSEMBLE_THREADS`]).
    pub assemble_threads: usize,
    pub progress: Progress,
    /// Test hook: panic after the first chunk is written (see `RunSpec`).
    pub panic_after_first_chunk: bool,
}

/// What the write stage wrote: the output (a single file still unpublished) and the totals.
pub struct Written {
    pub output: Output,
    pub rows: usize,
    pub counts: TextCounts,
}

/// How long the assemble threads (averaged over those that had work) and the writing thread
/// were busy.
pub struct WriteSeconds {
    pub assemble: Duration,
    pub write: Duration,
}

/// A chunk out with the assemble threads, waiting for its turn to be appended.
struct Pending {
    unit: usize,
    ends_unit: bool,
    rows: usize,
    counts: TextCounts,
    /// Where its row group will arrive; `None` for a chunk without rows, which still opens
    /// (and, if it ends the unit, commits) an empty unit's part.
    row_group: Option<Receiver<anyhow::Result<EncodedChunk>>>,
}

impl WriteStage<'_> {
    pub fn run(self, line: &Line<'_>, chunks: Receiver<Inferred>) -> anyhow::Result<(Written, WriteSeconds)> {
        let WriteStage {
            output,
            layout: format,
            partitioning,
            kept_columns,
            table,
            labels,
            assemble_threads,
            progress,
            panic_after_first_chunk,
        } = self;
        let threads = assemble_threads.clamp(1, MOST_ASSEMBLE_THREADS);
        // The files' layout: the output's, or without the partition columns.
        let file_format = partitioning.as_ref().map_or(&format, Partitioning::layout);
        let assembler = Assembler {
            format: &format,
            partitioning: partitioning.as_ref(),
            encoder: file_format.row_group_encoder()?,
            kept_columns,
            table: &table,
            labels,
            vocabulary: line.classifier.vocabulary(),
            files: line.files,
        };
        let (to_assemble, jobs) = sync_channel::<Job>(threads);
        let jobs = Mutex::new(jobs);
        let mut appender = Appender {
            output,
            format: file_format,
            progress,
            panic_after_first_chunk,
            rows: 0,
            counts: TextCounts::default(),
        };
        std::thread::scope(|scope| {
            // Owned by this closure, so that however it returns the queue closes and the
            // assemble threads stop before the scope waits for them.
            let to_assemble = to_assemble;
            let pool = (0..threads)
                .map(|i| {
                    std::thread::Builder::new()
                        .name(format!("assemble-{i}"))
                        .spawn_scoped(scope, || assembler.serve(&jobs))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let write = appender.run(line, &chunks, to_assemble, threads);
            let (mut assemble, mut working) = (Duration::ZERO, 0u32);
            for thread in pool {
                let busy = thread.join().map_err(|_| anyhow::anyhow!("an assemble thread panicked"))?;
                assemble += busy;
                working += u32::from(!busy.is_zero());
            }
            // The mean over the threads that had work: a run of fewer chunks than threads
            // leaves some idle, and counting them would hide a busy stage.
            let seconds = WriteSeconds { assemble: assemble / working.max(1), write: write? };
            Ok(seconds)
        })
        .map(|seconds| (Written { output: appender.output, rows: appender.rows, counts: appender.counts }, seconds))
    }
}

/// The writing thread's side: hands chunks out, and appends their row groups in order.
struct Appender<'a> {
    output: Output,
    format: &'a ParquetLayout,
    progress: Progress,
    panic_after_first_chunk: bool,
    rows: usize,
    counts: TextCounts,
}

impl Appender<'_> {
    /// Keeps at most `most_out` chunks out at once (bounding memory), and returns how long
    /// it was busy appending.
    fn run(
        &mut self,
        line: &Line<'_>,
        chunks: &Receiver<Inferred>,
        to_assemble: SyncSender<Job>,
        most_out: usize,
    ) -> anyhow::Result<Duration> {
        let mut busy = Duration::ZERO;
        let mut out = VecDeque::with_capacity(most_out);
        // The index of the next row group within its file or part.
        let mut next_row_group = 0;
        while let Some(chunk) = next(chunks) {
            if out.len() >= most_out
                && let Some(oldest) = out.pop_front()
            {
                self.append(line, oldest, &mut busy)?;
            }
            let rows = chunk.chunk.batch.num_rows();
            let pending = Pending {
                unit: chunk.chunk.unit,
                ends_unit: chunk.chunk.ends_unit,
                rows,
                counts: chunk.counts,
                row_group: (rows > 0).then(|| hand_out(&to_assemble, chunk, next_row_group)).transpose()?,
            };
            next_row_group += usize::from(rows > 0);
            if pending.ends_unit && self.output.has_parts() {
                next_row_group = 0;
            }
            out.push_back(pending);
        }
        for pending in out {
            self.append(line, pending, &mut busy)?;
        }
        self.progress.finish();
        Ok(busy)
    }

    /// Waits for `pending`'s row group (not counted as busy), then appends it.
    fn append(&mut self, line: &Line<'_>, pending: Pending, busy: &mut Duration) -> anyhow::Result<()> {
        let row_group = match pending.row_group {
            Some(encoded) => encoded.recv().map_err(|_| anyhow::anyhow!("an assemble thread stopped"))??,
            None => Vec::new(),
        };
        let unit = line.units.get(pending.unit).context("a chunk names a unit not in the run")?;
        timed(busy, || self.output.append(unit, pending.ends_unit, self.format, row_group))?;
        self.rows += pending.rows;
        self.counts.add(pending.counts);
        self.progress.advance(pending.rows);
        if self.panic_after_first_chunk {
            injected_panic();
        }
        Ok(())
    }
}

/// Queues `chunk` for the assemble threads as row group `row_group` of its file; returns
/// where its row group will arrive.
fn hand_out(
    to_assemble: &SyncSender<Job>,
    chunk: Inferred,
    row_group: usize,
) -> anyhow::Result<Receiver<anyhow::Result<EncodedChunk>>> {
    let (done, encoded) = sync_channel(1);
    match to_assemble.send(Job { chunk, row_group, done }) {
        Ok(()) => Ok(encoded),
        Err(_) => anyhow::bail!("the assemble threads stopped"),
    }
}

/// The test hook of `RunSpec::panic_after_first_chunk`.
#[allow(clippy::panic)] // panicking is the point
fn injected_panic() -> ! {
    panic!("--panic-after-first-chunk was given");
}

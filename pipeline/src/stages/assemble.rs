//! The assemble stage: each chunk's output columns built beside its pass-through columns and
//! encoded as one Parquet row group, several chunks at once, one per thread. The write stage
//! hands the chunks out in input order and appends their row groups in that order.

use std::sync::Mutex;
use std::sync::mpsc::{Receiver, SyncSender};
use std::time::Duration;

use anyhow::Context;
use arrow::array::{ArrayRef, RecordBatch};
use batch_io::source::InputFile;
use parquet::arrow::arrow_writer::{ArrowColumnChunk, ArrowRowGroupWriterFactory, compute_leaves};
use runtime::output::OutputTable;
use runtime::text::Vocabulary;

use super::{Inferred, timed};
use crate::sinks::ParquetLayout;
use crate::sinks::partitions::Partitioning;

pub use crate::sinks::EncodedChunk;

/// One chunk to assemble, and where to send its row group.
pub struct Job {
    pub chunk: Inferred,
    /// The row group's index within its file or part.
    pub row_group: usize,
    pub done: SyncSender<anyhow::Result<EncodedChunk>>,
}

/// What every assembling thread shares.
pub struct Assembler<'a> {
    /// The whole output's layout, which the chunk's columns are built in.
    pub format: &'a ParquetLayout,
    /// `--partition-by`: how the rows split into directories, without the partition columns.
    pub partitioning: Option<&'a Partitioning>,
    /// Encodes the files' row groups: of `format`, or of the partitioning's layout.
    pub encoder: ArrowRowGroupWriterFactory,
    /// Input columns copied to the output, in order.
    pub kept_columns: &'a [String],
    pub table: &'a OutputTable,
    pub labels: &'a [String],
    pub vocabulary: &'a Vocabulary,
    pub files: &'a [InputFile],
}

impl Assembler<'_> {
    /// One assembling thread: takes jobs until the write stage closes the queue, and returns
    /// how long it was busy.
    pub fn serve(&self, jobs: &Mutex<Receiver<Job>>) -> Duration {
        let mut busy = Duration::ZERO;
        loop {
            // The lock is held only while waiting for the next job, never while encoding.
            let job = match jobs.lock() {
                Ok(jobs) => jobs.recv(),
                Err(_) => break,
            };
            let Ok(Job { chunk, row_group, done }) = job else { break };
            let rows = chunk.chunk.describe(self.files);
            let encoded = timed(&mut busy, || self.encode(chunk, row_group).with_context(|| rows));
            // An error here means the write stage has stopped, with its own error.
            let _ = done.send(encoded);
        }
        busy
    }

    /// Takes the chunk by value, so that its predictions are freed before encoding.
    fn encode(&self, inferred: Inferred, row_group: usize) -> anyhow::Result<EncodedChunk> {
        let Inferred { chunk, predictions, .. } = inferred;
        let mut columns: Vec<ArrayRef> = self
            .kept_columns
            .iter()
            .map(|name| chunk.batch.column_by_name(name).cloned())
            .collect::<Option<_>>()
            .context("a pass-through column vanished")?;
        columns.extend(self.table.build(&predictions, self.labels, self.vocabulary)?);
        drop((chunk, predictions));
        // Checks that the columns fit the schema and have the same length.
        let batch = RecordBatch::try_new(self.format.schema().clone(), columns)?;
        match self.partitioning {
            None => Ok(vec![(String::new(), self.encode_rows(&batch, row_group)?)]),
            Some(partitioning) => partitioning
                .split(&batch)?
                .into_iter()
                .map(|(directory, rows)| Ok((directory, self.encode_rows(&rows, row_group)?)))
                .collect(),
        }
    }

    /// `batch` as one row group of the files' layout.
    fn encode_rows(&self, batch: &RecordBatch, row_group: usize) -> anyhow::Result<Vec<ArrowColumnChunk>> {
        let mut writers = self.encoder.create_column_writers(row_group)?;
        let mut leaf_writers = writers.iter_mut();
        for (field, column) in batch.schema_ref().fields().iter().zip(batch.columns()) {
            for leaf in compute_leaves(field, column)? {
                leaf_writers.next().context("the output schema has fewer Parquet columns than leaves")?.write(&leaf)?;
            }
        }
        Ok(writers.into_iter().map(|writer| writer.close()).collect::<Result<_, _>>()?)
    }
}

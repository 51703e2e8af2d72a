//! The write stage: each window's output columns assembled next to its pass-through columns
//! and appended as a row group, in input order: to the one output file, or to its unit's
//! part of a dataset output, committed as soon as the unit's last window is written.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::Path;
use std::sync::mpsc::Receiver;

use std::time::{Duration, Instant};

use anyhow::Context;
use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::SchemaRef;
use batch_io::atomic_file::write_failed;
use batch_io::command_line::logs_are_json;
use batch_io::publish::{Destination, Sink};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use parquet::arrow::ArrowSchemaConverter;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Type as PhysicalType, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use runtime::classifier::TextCounts;
use runtime::output_table::OutputTable;

use super::{Inferred, Line, next, timed};
use crate::dataset::DatasetDir;
use crate::units::WorkUnit;

/// Where the write stage writes.
pub enum Output {
    /// One Parquet file, published by the caller once every stage succeeded.
    File(OutputFile),
    /// One part per unit of work in this dataset output, each published when complete.
    Parts { dir: DatasetDir, current: Option<OutputFile>, committed: usize },
}

impl Output {
    pub fn parts(dir: DatasetDir) -> Self {
        Output::Parts { dir, current: None, committed: 0 }
    }

    fn write(
        &mut self,
        unit: &WorkUnit,
        ends_unit: bool,
        schema: &SchemaRef,
        batch: &RecordBatch,
    ) -> anyhow::Result<()> {
        match self {
            Output::File(file) => file.write(batch),
            Output::Parts { dir, current, committed } => {
                let part = match current {
                    Some(part) => part,
                    None => current.insert(OutputFile::create(&dir.part(unit.index), schema.clone())?),
                };
                part.write(batch)?;
                if ends_unit && let Some(part) = current.take() {
                    part.finish()?;
                    *committed += 1;
                }
                Ok(())
            }
        }
    }
}

/// Everything the write stage needs, set up before the line starts.
pub struct WriteStage<'a> {
    pub output: Output,
    pub schema: SchemaRef,
    /// Input columns copied to the output, in order.
    pub kept_columns: &'a [String],
    pub table: OutputTable,
    pub labels: &'a [String],
    pub progress: Progress,
    /// Test hook: panic after the first window is written (see `JobOptions`).
    pub panic_after_first_window: bool,
}

/// What the write stage wrote: the output (a single file still unpublished) and the totals.
pub struct Written {
    pub output: Output,
    pub rows: usize,
    pub counts: TextCounts,
}

impl WriteStage<'_> {
    pub fn run(mut self, line: &Line<'_>, windows: Receiver<Inferred>) -> anyhow::Result<(Written, Duration)> {
        let mut busy = Duration::ZERO;
        let (mut rows, mut counts) = (0, TextCounts::default());
        while let Some(Inferred { window, predictions, counts: window_counts }) = next(&windows) {
            timed(&mut busy, || {
                let describe = || window.describe(line.files);
                let mut columns: Vec<ArrayRef> = self
                    .kept_columns
                    .iter()
                    .map(|name| window.batch.column_by_name(name).cloned())
                    .collect::<Option<_>>()
                    .with_context(|| format!("{}: a pass-through column vanished", describe()))?;
                columns.extend(self.table.build(&predictions, self.labels).with_context(describe)?);
                let unit = line.units.get(window.unit).context("a window names a unit not in the run")?;
                let batch = RecordBatch::try_new(self.schema.clone(), columns)?;
                self.output.write(unit, window.ends_unit, &self.schema, &batch)
            })?;
            rows += window.batch.num_rows();
            counts.add(window_counts);
            self.progress.advance(window.batch.num_rows(), rows);
            if self.panic_after_first_window {
                injected_panic();
            }
        }
        self.progress.finish();
        Ok((Written { output: self.output, rows, counts }, busy))
    }
}

/// The test hook of `JobOptions::panic_after_first_window`.
#[allow(clippy::panic)] // panicking is the point
fn injected_panic() -> ! {
    panic!("--panic-after-first-window was given");
}

/// An output Parquet file (or part): written to a [`Sink`] and made visible whole by
/// [`OutputFile::finish`]; dropped early, it leaves nothing a reader can see.
pub struct OutputFile {
    target: String,
    writer: ArrowWriter<Sink>,
}

impl OutputFile {
    pub fn create(destination: &Destination, schema: SchemaRef) -> anyhow::Result<Self> {
        let sink = Sink::create(destination)?;
        let sorted: BTreeMap<&String, &String> = schema.metadata().iter().collect();
        let key_values: Vec<KeyValue> = sorted.into_iter().map(|(k, v)| KeyValue::new(k.clone(), v.clone())).collect();
        let mut properties = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_key_value_metadata(Some(key_values));
        // Float leaves (probabilities, attention, embeddings) almost never repeat a value: a
        // dictionary for them is built only to be thrown away, and page statistics of
        // weights help no reader. Both cost the write stage most of its time.
        let parquet_schema = ArrowSchemaConverter::new().convert(&schema)?;
        // Lists of floats (attention, probabilities, embeddings) are also left uncompressed:
        // zstd shrank the default model's attention by 4 % and cost the write stage about a
        // third of its time (RESULTS.md, #14).
        for column in parquet_schema.columns() {
            if column.physical_type() == PhysicalType::FLOAT {
                properties = properties
                    .set_column_dictionary_enabled(column.path().clone(), false)
                    .set_column_statistics_enabled(column.path().clone(), EnabledStatistics::Chunk);
                if column.max_rep_level() > 0 {
                    properties = properties.set_column_compression(column.path().clone(), Compression::UNCOMPRESSED);
                }
            }
        }
        let properties = properties.build();
        let writer = ArrowWriter::try_new(sink, schema, Some(properties))?;
        Ok(Self { target: destination.to_string(), writer })
    }

    fn write(&mut self, batch: &RecordBatch) -> anyhow::Result<()> {
        let target = Path::new(&self.target);
        self.writer.write(batch).map_err(|e| write_failed(target, &e))?;
        // Each window becomes (at least) one row group, so memory stays bounded.
        self.writer.flush().map_err(|e| write_failed(target, &e))
    }

    pub fn finish(self) -> anyhow::Result<()> {
        let sink = self.writer.into_inner().map_err(|e| write_failed(Path::new(&self.target), &e))?;
        sink.publish()
    }
}

/// A bar on a terminal; a log line every ten seconds otherwise.
pub struct Progress {
    bar: Option<ProgressBar>,
    last_log: Instant,
    total: Option<usize>,
}

impl Progress {
    pub fn new(total: Option<usize>) -> Self {
        let bar = (std::io::stderr().is_terminal() && !logs_are_json()).then(|| {
            let bar = ProgressBar::with_draw_target(total.map(|t| t as u64), ProgressDrawTarget::stderr());
            if let Ok(style) =
                ProgressStyle::with_template("[{elapsed_precise}] [{bar:40}] {pos}/{len} docs {per_sec} eta {eta}")
            {
                bar.set_style(style.progress_chars("=> "));
            }
            bar
        });
        Self { bar, last_log: Instant::now(), total }
    }

    /// `rows` more are written, `done` in all.
    fn advance(&mut self, rows: usize, done: usize) {
        match &self.bar {
            Some(bar) => bar.inc(rows as u64),
            None if self.last_log.elapsed() >= Duration::from_secs(10) => {
                self.last_log = Instant::now();
                let total = self.total.map(|t| format!("/{t}")).unwrap_or_default();
                tracing::info!(rows_done = done, rows_total = self.total, "{done}{total} rows done");
            }
            None => {}
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

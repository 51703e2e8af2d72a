//! The write stage: each window's output columns assembled next to its pass-through columns
//! and appended to the output Parquet file as a row group, in input order.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use anyhow::Context;
use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::SchemaRef;
use batch_io::atomic_file::{TempFile, temp_beside, write_failed};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use parquet::arrow::ArrowSchemaConverter;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Type as PhysicalType, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use runtime::classifier::TextCounts;
use runtime::output_table::OutputTable;

use super::{Inferred, next, timed};

/// Everything the write stage needs, set up before the line starts.
pub struct WriteStage<'a> {
    pub output: OutputFile,
    pub schema: SchemaRef,
    /// Input columns copied to the output, in order.
    pub kept_columns: &'a [String],
    pub table: OutputTable,
    pub labels: &'a [String],
    pub progress: Progress,
    /// Test hook: panic after the first window is written (see `JobOptions`).
    pub panic_after_first_window: bool,
}

/// What the write stage wrote: the unpublished output and the totals.
pub struct Written {
    pub output: OutputFile,
    pub rows: usize,
    pub counts: TextCounts,
}

impl WriteStage<'_> {
    pub fn run(mut self, files: &[PathBuf], windows: Receiver<Inferred>) -> anyhow::Result<(Written, Duration)> {
        let mut busy = Duration::ZERO;
        let (mut rows, mut counts) = (0, TextCounts::default());
        while let Some(Inferred { window, predictions, counts: window_counts }) = next(&windows) {
            timed(&mut busy, || {
                let describe = || window.describe(files);
                let mut columns: Vec<ArrayRef> = self
                    .kept_columns
                    .iter()
                    .map(|name| window.batch.column_by_name(name).cloned())
                    .collect::<Option<_>>()
                    .with_context(|| format!("{}: a pass-through column vanished", describe()))?;
                columns.extend(self.table.build(&predictions, self.labels).with_context(describe)?);
                self.output.write(&RecordBatch::try_new(self.schema.clone(), columns)?)
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

/// The output Parquet file: written under a temporary name beside the target and renamed
/// into place by [`OutputFile::finish`]; dropped early, it leaves nothing behind.
pub struct OutputFile {
    target: PathBuf,
    writer: ArrowWriter<TempFile>,
}

impl OutputFile {
    pub fn create(target: &Path, schema: SchemaRef) -> anyhow::Result<Self> {
        let temp = temp_beside(target)?;
        let sorted: BTreeMap<&String, &String> = schema.metadata().iter().collect();
        let key_values: Vec<KeyValue> = sorted.into_iter().map(|(k, v)| KeyValue::new(k.clone(), v.clone())).collect();
        let mut properties = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_key_value_metadata(Some(key_values));
        // Float leaves (probabilities, attention, embeddings) almost never repeat a value: a
        // dictionary for them is built only to be thrown away, and page statistics of
        // weights help no reader. Both cost the write stage most of its time.
        let parquet_schema = ArrowSchemaConverter::new().convert(&schema)?;
        for column in parquet_schema.columns() {
            if column.physical_type() == PhysicalType::FLOAT {
                properties = properties
                    .set_column_dictionary_enabled(column.path().clone(), false)
                    .set_column_statistics_enabled(column.path().clone(), EnabledStatistics::Chunk);
            }
        }
        let properties = properties.build();
        let writer = ArrowWriter::try_new(temp, schema, Some(properties))?;
        Ok(Self { target: target.to_path_buf(), writer })
    }

    fn write(&mut self, batch: &RecordBatch) -> anyhow::Result<()> {
        self.writer.write(batch).map_err(|e| write_failed(&self.target, &e))?;
        // Each window becomes (at least) one row group, so memory stays bounded.
        self.writer.flush().map_err(|e| write_failed(&self.target, &e))
    }

    pub fn finish(self) -> anyhow::Result<()> {
        let temp = self.writer.into_inner().map_err(|e| write_failed(&self.target, &e))?;
        temp.publish(&self.target)
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
        let bar = std::io::stderr().is_terminal().then(|| {
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
                tracing::info!("{done}{total} rows done");
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

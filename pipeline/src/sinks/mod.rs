//! Where the write stage writes: one Parquet file, or one part per unit of work in a dataset
//! output (`dataset`; one file per partition directory with `--partition-by`, `partitions`),
//! which a Delta table output (`delta`) then commits. Each file is made visible
//! whole by [`OutputFile::finish`]; dropped early, it leaves nothing a reader can see. Row
//! groups arrive already encoded (by the assemble stage), and are only appended here.

pub mod dataset;
pub mod delta;
pub mod partitions;

use std::collections::BTreeMap;
use std::path::Path;

use arrow::datatypes::SchemaRef;
use batch_io::atomic_file::write_failed;
use batch_io::publish::{Destination, Sink};
use parquet::arrow::ArrowSchemaConverter;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_writer::{ArrowColumnChunk, ArrowRowGroupWriterFactory};
use parquet::basic::{Compression, LogicalType, Type as PhysicalType, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::SerializedFileWriter;

use runtime::output::columns::{ATTENTION_ENTROPY, TOKEN_SPANS};
use runtime::output::keys;

use crate::sinks::dataset::DatasetDir;
use crate::sinks::partitions::Partitioning;
use crate::units::WorkUnit;

/// A chunk's rows, encoded: a row group for each partition directory it has rows in ("" for
/// the output itself), each as its column chunks in schema order.
pub type EncodedChunk = Vec<(String, Vec<ArrowColumnChunk>)>;

/// zstd's level for the columns that are compressed (tokens, passed-through columns): 6 keeps
/// the tokens 15 % smaller than level 1 for a few percent of the write stage (RESULTS.md, #27).
const ZSTD_LEVEL: i32 = 6;
/// zstd's level for lists of bytes (`--attention compact`'s weights and pushes) and for
/// `token_spans`: level 1 packs them a little tighter than 6 (0.58 against 0.61 of their size
/// on IMDB test's attention; 3.85 against 3.83 MB of spans) in a seventh of the time, which
/// was a fifth of the default run's CPU (#34).
const ZSTD_LEVEL_BYTES: i32 = 1;
/// zstd's level for the text column, the largest of the default output (half of it): 12 on
/// whole pages kept IMDB test's text 7 % smaller than 6 (#50), for about 1.5 s of one core
/// over the 25,000 reviews.
const ZSTD_LEVEL_TEXT: i32 = 12;
/// Pages of up to this many bytes: the text of a chunk in one page, which zstd compresses
/// better whole than in 1 MiB pieces (#50).
const PAGE_BYTES: usize = 8 << 20;

/// What the Parquet settings of a run's files depend on besides the schema.
#[derive(Debug, Clone, Default)]
pub struct LayoutHints {
    /// Most weights in the float lists are 0 (`--attention top-k:N`), which zstd squeezes to
    /// almost nothing, so they are compressed after all.
    pub sparse_floats: bool,
    /// The text column, when the files hold it: every value differs, so no dictionary.
    pub text_column: Option<String>,
}

/// How every output file of a run is laid out: its schema and its Parquet settings.
#[derive(Debug, Clone)]
pub struct ParquetLayout {
    schema: SchemaRef,
    properties: WriterProperties,
}

impl ParquetLayout {
    pub fn new(schema: SchemaRef, hints: &LayoutHints) -> anyhow::Result<Self> {
        let sorted: BTreeMap<&String, &String> = schema.metadata().iter().collect();
        let key_values: Vec<KeyValue> = sorted.into_iter().map(|(k, v)| KeyValue::new(k.clone(), v.clone())).collect();
        let mut properties = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(ZSTD_LEVEL)?))
            .set_data_page_size_limit(PAGE_BYTES)
            .set_key_value_metadata(Some(key_values));
        // Float leaves (probabilities, attention, embeddings) almost never repeat a value: a
        // dictionary for them is built only to be thrown away, and page statistics of
        // weights help no reader. Both cost the write stage most of its time.
        let parquet_schema = ArrowSchemaConverter::new().convert(&schema)?;
        // Lists of floats (attention, probabilities, embeddings) are also left uncompressed:
        // zstd shrank the default model's attention by 4 % and cost the write stage about a
        // third of its time (RESULTS.md, #14).
        for column in parquet_schema.columns() {
            let name = column.path().parts().first().map(String::as_str);
            let small_integers = matches!(column.logical_type_ref(), Some(LogicalType::Integer(int)) if int.bit_width == 8)
                || name == Some(TOKEN_SPANS.name);
            if column.max_rep_level() > 0 && small_integers {
                properties = properties.set_column_compression(
                    column.path().clone(),
                    Compression::ZSTD(ZstdLevel::try_new(ZSTD_LEVEL_BYTES)?),
                );
            }
            if column.physical_type() == PhysicalType::FLOAT {
                properties = properties
                    .set_column_dictionary_enabled(column.path().clone(), false)
                    .set_column_statistics_enabled(column.path().clone(), EnabledStatistics::Chunk);
                // A hop's entropies are a few values a row: compressing them costs nothing.
                if column.max_rep_level() > 0 && !hints.sparse_floats && name != Some(ATTENTION_ENTROPY.name) {
                    properties = properties.set_column_compression(column.path().clone(), Compression::UNCOMPRESSED);
                }
            }
        }
        if let Some(text) = hints.text_column.as_deref().filter(|text| schema.index_of(text).is_ok()) {
            let path = parquet::schema::types::ColumnPath::from(text);
            properties = properties
                .set_column_dictionary_enabled(path.clone(), false)
                .set_column_compression(path, Compression::ZSTD(ZstdLevel::try_new(ZSTD_LEVEL_TEXT)?));
        }
        Ok(Self { schema, properties: properties.build() })
    }

    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Makes the column writers of each row group. It holds only the schema and the settings,
    /// so one serves every file and part of the run; parquet makes it from a file writer, so
    /// it is taken from one that writes nowhere.
    pub fn row_group_encoder(&self) -> anyhow::Result<ArrowRowGroupWriterFactory> {
        let writer = ArrowWriter::try_new(std::io::sink(), self.schema.clone(), Some(self.properties.clone()))?;
        let (_, factory) = writer.into_serialized_writer()?;
        Ok(factory)
    }
}

/// The write stage's destination.
pub enum Output {
    /// One Parquet file, published by the caller once every stage succeeded.
    File(OutputFile),
    /// One part per unit of work in this dataset output, each published when complete.
    /// `part_inputs[f]` is the identity of input file `f` (JSON), which each part read from
    /// it carries in its metadata. `open`: the current unit's files, by directory.
    Parts {
        dir: DatasetDir,
        open: BTreeMap<String, OutputFile>,
        committed: usize,
        part_inputs: Vec<String>,
        /// Boxed: its layout is large, and the single file's variant needs none.
        partitioning: Option<Box<Partitioning>>,
    },
}

impl Output {
    pub fn parts(dir: DatasetDir, part_inputs: Vec<String>, partitioning: Option<Partitioning>) -> Self {
        Output::Parts {
            dir,
            open: BTreeMap::new(),
            committed: 0,
            part_inputs,
            partitioning: partitioning.map(Box::new),
        }
    }

    /// Whether each unit of work has a file of its own (so row groups count from 0 per unit).
    pub fn has_parts(&self) -> bool {
        matches!(self, Output::Parts { .. })
    }

    /// Appends one chunk's row groups (none for a chunk without rows), in input order; the
    /// last chunk of a unit commits that unit's part: all of its files, each of which says how
    /// many there are, or, for a unit without rows, one empty file.
    pub fn append(
        &mut self,
        unit: &WorkUnit,
        ends_unit: bool,
        format: &ParquetLayout,
        chunk: EncodedChunk,
    ) -> anyhow::Result<()> {
        let (dir, open, committed, part_inputs, partitioning) = match self {
            Output::File(file) => return chunk.into_iter().try_for_each(|(_, row_group)| file.append(row_group)),
            Output::Parts { dir, open, committed, part_inputs, partitioning } => {
                (dir, open, committed, part_inputs, partitioning)
            }
        };
        if let Some(partitioning) = partitioning {
            let new = chunk.iter().filter(|(directory, _)| !open.contains_key(directory)).count();
            partitioning.check_directories(open.len() + new)?;
        }
        let input = part_inputs.get(unit.file);
        for (directory, row_group) in chunk {
            let part = match open.entry(directory) {
                std::collections::btree_map::Entry::Occupied(slot) => slot.into_mut(),
                std::collections::btree_map::Entry::Vacant(slot) => {
                    let part = OutputFile::part(dir, slot.key(), unit, input, format)?;
                    slot.insert(part)
                }
            };
            part.append(row_group)?;
        }
        if !ends_unit {
            return Ok(());
        }
        if open.is_empty() {
            let directory = partitioning.as_ref().map(|p| p.empty_unit_directory()).unwrap_or_default();
            open.insert(directory.clone(), OutputFile::part(dir, &directory, unit, input, format)?);
        }
        let files = open.len();
        for (_, mut part) in std::mem::take(open) {
            if partitioning.is_some() {
                part.writer.append_key_value_metadata(KeyValue::new(keys::PART_FILES.to_owned(), files.to_string()));
            }
            part.finish()?;
        }
        *committed += 1;
        Ok(())
    }
}

/// An output Parquet file (or part), written to a [`Sink`].
pub struct OutputFile {
    target: String,
    writer: SerializedFileWriter<Sink>,
}

impl OutputFile {
    pub fn create(destination: &Destination, format: &ParquetLayout) -> anyhow::Result<Self> {
        let sink = Sink::create(destination)?;
        let writer = ArrowWriter::try_new(sink, format.schema.clone(), Some(format.properties.clone()))?;
        // The Arrow writer adds the Arrow schema to the file's metadata; row groups are then
        // encoded elsewhere and appended to the file writer underneath.
        let (writer, _) = writer.into_serialized_writer()?;
        Ok(Self { target: destination.to_string(), writer })
    }

    /// A file of `unit`'s part in `directory`, which says which unit it holds and the input
    /// it was read from.
    fn part(
        dir: &DatasetDir,
        directory: &str,
        unit: &WorkUnit,
        input: Option<&String>,
        format: &ParquetLayout,
    ) -> anyhow::Result<Self> {
        let mut part = OutputFile::create(&dir.part(directory, unit.index)?, format)?;
        part.writer.append_key_value_metadata(KeyValue::new(keys::PART_UNIT.to_owned(), unit.index.to_string()));
        if let Some(input) = input {
            part.writer.append_key_value_metadata(KeyValue::new(keys::PART_INPUT.to_owned(), input.clone()));
        }
        Ok(part)
    }

    /// Appends one row group, given as its column chunks in schema order.
    fn append(&mut self, chunks: Vec<ArrowColumnChunk>) -> anyhow::Result<()> {
        let failed = |e: parquet::errors::ParquetError| write_failed(Path::new(&self.target), &e);
        let mut row_group = self.writer.next_row_group().map_err(failed)?;
        for chunk in chunks {
            chunk.append_to_row_group(&mut row_group).map_err(failed)?;
        }
        row_group.close().map_err(failed)?;
        Ok(())
    }

    pub fn finish(self) -> anyhow::Result<()> {
        let sink = self.writer.into_inner().map_err(|e| write_failed(Path::new(&self.target), &e))?;
        sink.publish()
    }
}

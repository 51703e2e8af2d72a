//! Where the write stage writes: one Parquet file, or one part per unit of work in a dataset
//! output (`dataset`; one file per partition directory with `--partition-by`, `partitions`),
//! which a Delta table output (`delta`) then commits. Each file is made visible
//! whole by [`OutputFile::finish`]; dropped early, it leaves nothing a reader can see. Row
//! groups arrive already encoded (by the assemble stage), and are only appended here.

pub mod dataset;
pub mod delta;
pub mod layout;
pub mod partitions;

use std::collections::BTreeMap;
use std::path::Path;

use batch_io::atomic_file::write_failed;
use batch_io::publish::{Destination, Sink};
use parquet::arrow::arrow_writer::ArrowColumnChunk;
use parquet::file::metadata::KeyValue;
use parquet::file::writer::SerializedFileWriter;

use runtime::output::keys;

use crate::sinks::dataset::DatasetDir;
use crate::sinks::partitions::Partitioning;

use crate::units::WorkUnit;
pub use layout::{LayoutHints, ParquetLayout};

/// A chunk's rows, encoded: a row group for each partition directory it has rows in ("" for
/// the output itself), each as its column chunks in schema order.
pub type EncodedChunk = Vec<(String, Vec<ArrowColumnChunk>)>;

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
        let writer = format.file_writer(sink)?;
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

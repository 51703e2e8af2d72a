//! The plan of a run, made once every check has passed: which columns are read and kept,
//! the output's schema and metadata, the units of work this shard owns, and (for a dataset)
//! the run's fingerprint and the units an earlier attempt already committed.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use anyhow::Context;
use parquet::arrow::arrow_reader::ArrowReaderMetadata;

use batch_io::publish::Destination;
use batch_io::source::{BatchStream, InputFile, RowSpan, open_span};
use runtime::classifier::Classifier;
use runtime::output::{OutputTable, keys};
use runtime::package::ModelPackage;

use super::metadata::table_metadata;
use super::preflight::plan_schema;
use super::spec::{OutputFormat, RunSpec};
use crate::sinks::dataset::{
    Committed, DatasetDir, InputIdentity, Run, RunFingerprint, inputs_sha256, towards_prediction,
};
use crate::sinks::delta::{DeltaOutput, FileKey, UnitKey, shard_key, unit_key};
use crate::sinks::partitions::{self, Partitioning};
use crate::sinks::{LayoutHints, Output, OutputFile, ParquetLayout};
use crate::units::{FileLayout, WorkUnit, plan_units};

pub struct Plan {
    /// Input columns copied to the output.
    pub kept_columns: Vec<String>,
    /// Input columns read: the kept ones and the text.
    pub read_columns: Vec<String>,
    pub layout: ParquetLayout,
    /// `--partition-by`: how rows split into directories, and the files' layout.
    pub partitioning: Option<Partitioning>,
    /// The units this process is to do.
    pub todo: Vec<WorkUnit>,
    /// Every unit of the run, every shard's (a Delta table knows a file as done once all of its
    /// units are committed).
    all_units: Vec<WorkUnit>,
    /// Units of this shard an earlier attempt committed.
    pub skipped: usize,
    /// A dataset output: the run's fingerprint and inputs.
    pub run: Option<Run>,
    /// Rows per input file, where its footer says.
    file_rows: Vec<Option<usize>>,
    /// Each Parquet input's footer, read once here for every unit of the file.
    pub footers: Vec<Option<ArrowReaderMetadata>>,
    /// A Delta table output: where the parts are staged and what this shard commits.
    pub delta: Option<DeltaPlan>,
}

/// What a shard of a Delta table output commits once its parts are written.
pub struct DeltaPlan {
    pub table: DeltaOutput,
    /// The staging directory's name under the table root.
    pub staging_name: String,
    /// This shard's units that the table does not hold yet, with their `txn` keys.
    pub units: BTreeMap<usize, UnitKey>,
    /// The input files of this shard's units, by input index, as the table knows them.
    pub files: BTreeMap<usize, FileKey>,
    /// Each of those units' input file (its index in `files`).
    pub unit_files: BTreeMap<usize, usize>,
    pub shard_key: String,
}

impl Plan {
    /// Checks every file's schema (all of them, before anything is written) and plans the
    /// units; `dataset`: the output is a dataset of parts.
    pub fn make(
        files: &[InputFile],
        spec: &RunSpec,
        table: &OutputTable,
        classifier: &Classifier,
        package: &ModelPackage,
        model_sha256: &str,
        dataset: bool,
    ) -> anyhow::Result<Self> {
        let streams: Vec<BatchStream> = files
            .iter()
            .map(|f| open_span(f, spec.chunk_rows(), None, RowSpan::Whole))
            .collect::<anyhow::Result<_>>()?;
        let (kept_columns, output_schema) = plan_schema(files, &streams, spec, table)?;
        let mut read_columns = kept_columns.clone();
        if !read_columns.contains(&spec.text_column) {
            read_columns.push(spec.text_column.clone());
        }
        let mut metadata = table_metadata(package, model_sha256, classifier, spec, table)?;
        // A single file is one unit per input; a dataset splits them into parts.
        let layouts: Vec<FileLayout> =
            streams.iter().map(|s| if dataset { s.row_groups.clone() } else { None }).collect();
        if dataset && spec.shard.count > 1 {
            warn_of_files_read_whole(files, &streams);
        }
        let units = plan_units(&layouts, spec.rows_per_part);
        let todo: Vec<WorkUnit> = units.iter().filter(|u| spec.shard.owns(u)).copied().collect();
        let run = dataset
            .then(|| {
                let inputs = files.iter().map(input_identity).collect::<anyhow::Result<Vec<_>>>()?;
                let fingerprint = RunFingerprint {
                    input_count: files.len(),
                    inputs_sha256: inputs_sha256(&inputs),
                    model_sha256: model_sha256.to_owned(),
                    text_column: spec.text_column.clone(),
                    pass_through: kept_columns.clone(),
                    max_tokens: classifier.max_tokens(),
                    long_documents: classifier.long_documents().to_string(),
                    attention: spec.attention.to_string(),
                    embedding: spec.embedding,
                    min_confidence: spec.min_confidence.map(|p| p.to_string()),
                    contribution_towards: metadata
                        .get(keys::CONTRIBUTION_TOWARDS)
                        .cloned()
                        .unwrap_or_else(towards_prediction),
                    // As a set: `--drop a,b` and `--drop b,a,a` are the same run.
                    dropped: spec.drop.iter().cloned().collect::<std::collections::BTreeSet<_>>().into_iter().collect(),
                    partition_by: spec.partition_by.clone(),
                    columns: table.names(),
                    rows_per_part: spec.rows_per_part,
                    parts: units.len(),
                };
                anyhow::Ok(Run { fingerprint, inputs })
            })
            .transpose()?;
        if let Some(run) = &run {
            metadata.insert(keys::RUN_FINGERPRINT.to_owned(), serde_json::to_string(&run.fingerprint)?);
        }
        if !spec.partition_by.is_empty() {
            metadata
                .insert(keys::PARTITION_BY.to_owned(), partitions::metadata_value(&spec.partition_by, &output_schema)?);
        }
        let hints = LayoutHints {
            sparse_floats: spec.attention.is_sparse(),
            text_column: kept_columns.contains(&spec.text_column).then(|| spec.text_column.clone()),
        };
        let layout = ParquetLayout::new(Arc::new(output_schema.with_metadata(metadata)), &hints)?;
        let partitioning = (!spec.partition_by.is_empty())
            .then(|| Partitioning::new(&spec.partition_by, layout.schema(), &hints))
            .transpose()?;
        let file_rows = streams.iter().map(|s| s.rows).collect();
        let footers = streams.into_iter().map(|s| s.footer).collect();
        Ok(Self {
            kept_columns,
            read_columns,
            layout,
            partitioning,
            todo,
            all_units: units,
            skipped: 0,
            run,
            file_rows,
            footers,
            delta: None,
        })
    }

    /// Creates the output: one file, or a dataset whose committed parts (of this very run)
    /// are taken off the units to do.
    pub fn open_output(&mut self, spec: &RunSpec) -> anyhow::Result<(Output, Option<DatasetDir>)> {
        let Some(run) = self.run.clone() else {
            let destination = Destination::parse(&spec.output)?;
            return Ok((Output::File(OutputFile::create(&destination, &self.layout)?), None));
        };
        let owned = self.todo.len();
        let dir = match spec.output_format {
            OutputFormat::Parquet => DatasetDir::prepare(&spec.output)?,
            OutputFormat::Delta => {
                let (staging, delta) = self.plan_delta(spec, &run)?;
                self.delta = Some(delta);
                DatasetDir::prepare(&staging)?
            }
        };
        let unit_files: Vec<usize> = self.all_units.iter().map(|u| u.file).collect();
        match dir.committed(&run, &unit_files, spec.overwrite)? {
            Committed::Complete => self.todo.clear(),
            Committed::Partial { committed } => self.todo.retain(|u| committed.binary_search(&u.index).is_err()),
        }
        self.skipped = owned - self.todo.len();
        let part_inputs = run.inputs.iter().map(serde_json::to_string).collect::<Result<_, _>>()?;
        Ok((Output::parts(dir.clone(), part_inputs, self.partitioning.clone()), Some(dir)))
    }

    /// A Delta table output: the table checked (or created) before any work, this shard's
    /// units already in it taken off the units to do, and where the rest are staged.
    fn plan_delta(&mut self, spec: &RunSpec, run: &Run) -> anyhow::Result<(String, DeltaPlan)> {
        let table = DeltaOutput::at(&spec.output)?;
        let input_of =
            |unit: &WorkUnit| run.inputs.get(unit.file).context("a unit names an input the run does not have");
        // Each file this shard reads, with the keys of all its units (every shard's); this
        // shard's units, with their keys and files.
        let read_here: BTreeSet<usize> = self.todo.iter().map(|u| u.file).collect();
        let todo: BTreeSet<usize> = self.todo.iter().map(|u| u.index).collect();
        let (mut files, mut units, mut unit_files) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
        for unit in self.all_units.iter().filter(|u| read_here.contains(&u.file)) {
            let input = input_of(unit)?;
            let key = unit_key(unit, input, &run.fingerprint)?;
            let file = match files.entry(unit.file) {
                Entry::Occupied(slot) => slot.into_mut(),
                Entry::Vacant(slot) => {
                    let rows = self.file_rows.get(unit.file).copied().flatten();
                    slot.insert(FileKey::new(input, rows, &run.fingerprint)?)
                }
            };
            file.units.push(key.clone());
            if todo.contains(&unit.index) {
                units.insert(unit.index, key);
                unit_files.insert(unit.index, unit.file);
            }
        }
        let checked: Vec<&FileKey> = files.values().collect();
        let in_table = table.prepare(self.layout.schema(), spec.rows_per_part, &units, &checked)?;
        units.retain(|index, key| {
            let file = unit_files.get(index).and_then(|f| files.get(f));
            !in_table.units.contains(key) && !file.is_some_and(|file| in_table.files.contains(&file.key))
        });
        unit_files.retain(|index, _| units.contains_key(index));
        self.todo.retain(|unit| units.contains_key(&unit.index));
        let (staging_name, staging) = table.staging(run)?;
        let shard_key = shard_key(&run.fingerprint, spec.shard)?;
        Ok((staging, DeltaPlan { table, staging_name, units, files, unit_files, shard_key }))
    }

    /// The rows of the units still to do, when every file's footer says.
    pub fn rows_to_do(&self) -> Option<usize> {
        self.todo
            .iter()
            .map(|u| match u.span {
                RowSpan::InRowGroup { rows, .. } => Some(rows),
                RowSpan::Whole => self.file_rows.get(u.file).copied().flatten(),
            })
            .sum()
    }
}

/// The input files with those an earlier run into a dataset output read first, in its order
/// (`earlier`: their locations), then the new ones as given: each earlier file keeps the
/// units it had, so that its committed parts are this run's, and only the new files are
/// classified.
pub(crate) fn earlier_inputs_first(files: Vec<InputFile>, earlier: &[String]) -> anyhow::Result<Vec<InputFile>> {
    if earlier.is_empty() {
        return Ok(files);
    }
    let mut ranked = Vec::with_capacity(files.len());
    for (given, file) in files.into_iter().enumerate() {
        let location = input_identity(&file)?.location;
        let rank = earlier.iter().position(|e| *e == location).unwrap_or(earlier.len() + given);
        ranked.push((rank, file));
    }
    ranked.sort_by_key(|(rank, _)| *rank);
    Ok(ranked.into_iter().map(|(_, file)| file).collect())
}

/// An input file's identity for the run fingerprint: its resolved path (or URL), size and
/// modification time (or ETag).
pub(crate) fn input_identity(file: &InputFile) -> anyhow::Result<InputIdentity> {
    let path = match file {
        InputFile::Local(path) => path,
        InputFile::Remote(object) => {
            return Ok(InputIdentity {
                location: object.url.clone(),
                size: object.meta.size,
                version: object.version(),
            });
        }
    };
    let meta = std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    let modified = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
    let location = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    Ok(InputIdentity {
        location: location.display().to_string(),
        size: meta.len(),
        version: modified.map_or_else(String::new, |d| d.as_nanos().to_string()),
    })
}

/// Sharding splits units, and a file without row groups (Arrow IPC, CSV, JSON Lines, text) is
/// one: say so, rather than leave shards idle without a word.
fn warn_of_files_read_whole(files: &[InputFile], streams: &[BatchStream]) {
    let whole: Vec<String> =
        files.iter().zip(streams).filter(|(_, s)| s.row_groups.is_none()).map(|(f, _)| f.to_string()).collect();
    if !whole.is_empty() {
        tracing::warn!(
            "{} input file(s) ({}{}) are read whole, each one unit of work: one part, on one shard, whatever \
             --rows-per-part says; split them, or convert them to Parquet, to spread them over parts and shards",
            whole.len(),
            whole.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
            if whole.len() > 3 { ", …" } else { "" }
        );
    }
}

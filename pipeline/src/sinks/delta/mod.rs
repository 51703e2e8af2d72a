//! Delta Lake output (`--output-format delta`): the parts are written as for a dataset, into
//! `run-<id>/` under the table's root, then each shard adds its parts to the table in one
//! commit of the table's log.
//!
//! Exactly once: the commit carries a Delta `txn` per unit of work (its input file as the run
//! saw it, its rows, the model and every option that changes the output) and one for the shard
//! (the run fingerprint and the shard). A run first asks the table which of its units' `txn`s
//! are there, and neither classifies nor adds those again: delta-rs does not deduplicate at
//! commit time, and this check is what makes a retried, resumed or re-run shard add nothing
//! twice. Two writers racing to add the same unit conflict in the log (delta-rs fails the
//! second commit on a `txn` the first one wrote), and the second then finds it committed.
//! The same check makes every run into a table incremental: files already committed are
//! skipped, new ones classified and appended. A file is known by its location: once all of a
//! file's units are in the table, a commit also carries a `txn` for the file (its location and
//! the run's options) whose version is its row count; a run skips such a file whole, and
//! refuses it before any work where its rows have changed (they would be added twice).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use anyhow::{Context, bail};
use arrow::datatypes::{Field, Schema};
use delta_table::{DeltaLocation, TABLE_PROPERTY_KEYS, local_file, signed};
use deltalake_core::kernel::engine::arrow_conversion::TryFromArrow;
use deltalake_core::kernel::transaction::{CommitBuilder, CommitProperties, TransactionError};
use deltalake_core::kernel::{Action, Add, StructType, Transaction};
use deltalake_core::operations::create::CreateBuilder;
use deltalake_core::protocol::{DeltaOperation, SaveMode};
use deltalake_core::{DeltaTable, DeltaTableError};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use serde::Serialize;
use url::Url;

use batch_io::locations::DELTA_LOG;
use batch_io::object_storage::{block_on, request_failed};
use batch_io::source::RowSpan;
use batch_io::spelling;

use crate::sinks::dataset::{InputIdentity, Run, RunFingerprint, StagedPart};
use crate::units::WorkUnit;

mod transactions;

use transactions::Transactions;

/// The table property that fixes how files split into units: with another split, the same
/// rows would be other units, and would be added again.
const ROWS_PER_PART_PROPERTY: &str = "pipeline.rows_per_part";

/// The table properties a run writes with: [`TABLE_PROPERTY_KEYS`] from the output's
/// schema metadata, and `--rows-per-part`.
fn table_properties(schema: &Schema, rows_per_part: usize) -> BTreeMap<String, String> {
    let mut properties: BTreeMap<String, String> = TABLE_PROPERTY_KEYS
        .iter()
        .filter_map(|key| schema.metadata().get(*key).map(|value| ((*key).to_owned(), value.clone())))
        .collect();
    properties.insert(ROWS_PER_PART_PROPERTY.to_owned(), rows_per_part.to_string());
    properties
}

/// How many times a commit that lost a race for the next log version is tried again.
const COMMIT_RETRIES: usize = 30;

/// A Delta table as a run's output: its location ([`DeltaLocation`], shared with the readers)
/// and what writing to it takes.
pub struct DeltaOutput(DeltaLocation);

impl std::ops::Deref for DeltaOutput {
    type Target = DeltaLocation;

    fn deref(&self) -> &DeltaLocation {
        &self.0
    }
}

/// A unit's key in the table's log: the `txn` appId that says it is committed.
pub type UnitKey = String;

impl DeltaOutput {
    /// The table at `location` (a local directory, created if its parent exists, or a storage
    /// URL); it need not be a table yet.
    pub fn at(location: &str) -> anyhow::Result<Self> {
        DeltaLocation::at(location).map(Self)
    }

    /// The committed transactions of `table`, read once.
    fn transactions<'t>(&self, table: &'t DeltaTable) -> anyhow::Result<Transactions<'t>> {
        Transactions::of(table, self.store.as_ref(), &self.log_dir()?)
            .with_context(|| format!("cannot read the transactions of the Delta table {}", self.location))
    }

    /// Where this run's parts go before they are committed: the directory's name, `run-<id>`,
    /// and its location under the table's root.
    pub fn staging(&self, run: &Run) -> anyhow::Result<(String, String)> {
        let name = format!("run-{}", short_digest(&run.fingerprint)?);
        let location = format!("{}/{name}", self.location.trim_end_matches('/'));
        Ok((name, location))
    }

    /// Refuses, before any work, a table that holds another schema or another model's rows
    /// (blending them would give one column two meanings); creates the table when there is
    /// none. Refuses an input file committed before with other rows than it has now. Returns
    /// which of `units`, and which of `files` whole, the table holds.
    pub fn prepare(
        &self,
        schema: &Schema,
        rows_per_part: usize,
        units: &BTreeMap<usize, UnitKey>,
        files: &[&FileKey],
    ) -> anyhow::Result<InTable> {
        // An object is not a table: writing under it as a prefix would hide the mistake.
        if let Some(prefix) = &self.remote
            && let Ok(object) = block_on(prefix.store.head(&prefix.path))?
        {
            bail!(
                "{} is an object ({} bytes), not a Delta table; give a prefix for the table",
                spelling::option_with("output", &self.location.to_string()),
                object.size
            );
        }
        let columns = delta_columns(schema)?;
        let properties = table_properties(schema, rows_per_part);
        let table = match self.load()? {
            Some(table) => table,
            None => {
                self.refuse_if_occupied()?;
                self.create(&columns, &properties)?
            }
        };
        self.check_agrees(&table, &columns, &properties)?;
        self.refuse_missing_files(&table)?;
        let transactions = self.transactions(&table)?;
        let mut in_table = InTable::default();
        for file in files {
            if self.refuse_changed_file(file, &transactions)? {
                in_table.files.insert(file.key.clone());
            }
        }
        for key in units.values() {
            if transactions.get(key)?.is_some() {
                in_table.units.insert(key.clone());
            }
        }
        Ok(in_table)
    }

    /// A table whose log lists a data file that is gone (deleted by hand, a lifecycle rule)
    /// fails every reader: say so before a rerun reports that it holds every part.
    fn refuse_missing_files(&self, table: &DeltaTable) -> anyhow::Result<()> {
        let uris: Vec<String> =
            table.get_file_uris().map_err(|e| self.failed("cannot list the files of", e))?.collect();
        let missing: Vec<&String> = match &self.remote {
            None => uris.iter().filter(|uri| !local_file(uri).is_some_and(|path| path.is_file())).collect(),
            Some(prefix) => {
                let keys: Vec<Option<ObjectPath>> = uris.iter().map(|uri| object_key(uri)).collect();
                let directories: BTreeSet<ObjectPath> = keys
                    .iter()
                    .flatten()
                    .map(|key| {
                        let mut parts: Vec<_> = key.parts().collect();
                        parts.pop();
                        ObjectPath::from_iter(parts)
                    })
                    .collect();
                let mut present = HashSet::new();
                for directory in directories {
                    let listing = block_on(prefix.store.list_with_delimiter(Some(&directory)))?
                        .map_err(|e| request_failed(&format!("cannot list {}", self.location), e))?;
                    present.extend(listing.objects.into_iter().map(|object| object.location));
                }
                uris.iter()
                    .zip(&keys)
                    .filter(|(_, key)| key.as_ref().is_none_or(|k| !present.contains(k)))
                    .map(|(uri, _)| uri)
                    .collect()
            }
        };
        if let Some(first) = missing.first() {
            bail!(
                "the Delta table {} lists {} data file(s) that are gone (the first: {first}), so its readers fail on it; it \
                 was changed outside this program. Restore the files from a backup or the bucket's versions, then run \
                 again. Removing them from the log instead (delta-rs: DeltaTable.repair(); Spark: FSCK REPAIR TABLE) \
                 loses their rows for good in this table, since it records them as added: to have them again, \
                 classify their input files into a new table",
                self.location,
                missing.len()
            );
        }
        Ok(())
    }

    /// Whether `file` is in the table whole, with the rows it has now (then none of its rows is
    /// read again, whatever its row groups: the same rows re-exported in other row groups would
    /// be other units). A file committed with `n` rows that has another number now was
    /// rewritten in place: refused, since its rows would be added twice.
    fn refuse_changed_file(&self, file: &FileKey, transactions: &Transactions<'_>) -> anyhow::Result<bool> {
        let Some(committed) = transactions.get(&file.key)? else { return Ok(false) };
        let Some(rows) = file.rows else { return Ok(committed.version == UNKNOWN_ROWS) };
        if committed.version == i64::try_from(rows).unwrap_or(i64::MAX) {
            return Ok(true);
        }
        let at = committed.at_table_version.map(|v| format!(" at version {v}")).unwrap_or_default();
        bail!(
            "{} was committed to the Delta table {}{at} with {} rows, and has {rows} now: the table knows a file by its \
             location, so its rows would be added twice. Leave committed files as they are and write new rows to a new \
             file beside them (a rerun adds that file alone), or write this run to a new table",
            file.location,
            self.location,
            committed.version,
        )
    }

    /// A location that holds files but no table is someone else's: never made into a table.
    /// What another shard creating the table at the same moment puts there (`_delta_log/`, its
    /// `run-<id>/`) does not count.
    fn refuse_if_occupied(&self) -> anyhow::Result<()> {
        let names: Vec<String> = match &self.remote {
            Some(prefix) => {
                let listing = block_on(prefix.store.list_with_delimiter(Some(&prefix.path)))?
                    .map_err(|e| request_failed(&format!("cannot list {}", self.location), e))?;
                let objects = listing.objects.iter().map(|o| o.location.clone());
                objects.chain(listing.common_prefixes).filter_map(|p| p.filename().map(str::to_owned)).collect()
            }
            None => std::fs::read_dir(&self.location)
                .with_context(|| format!("cannot list {}", self.location))?
                .filter_map(|entry| entry.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
                .collect(),
        };
        let ours = |name: &String| name == DELTA_LOG || name.starts_with("run-");
        if names.iter().any(|name| !ours(name)) {
            bail!(
                "{} holds files but is not a Delta table (it has no _delta_log); \
                 give a new or empty location, or an existing table",
                spelling::option_with("output", &self.location.to_string())
            );
        }
        Ok(())
    }

    fn create(&self, columns: &StructType, properties: &BTreeMap<String, String>) -> anyhow::Result<DeltaTable> {
        let builder = self.unloaded()?;
        let properties = properties.iter().map(|(key, value)| (key.clone(), Some(value.clone())));
        let create = CreateBuilder::new()
            .with_log_store(builder.log_store())
            .with_columns(columns.fields().cloned())
            .with_configuration(properties)
            .with_raise_if_key_not_exists(false)
            .with_comment("predictions and explanations written by `pipeline run`")
            .with_save_mode(SaveMode::Ignore)
            // A shard that loses the race to create the table must not retry its creation at
            // the next version (that would replace the table's metadata): it uses the winner's.
            .with_commit_properties(CommitProperties::default().with_max_retries(0));
        match block_on(create.into_future())? {
            Ok(table) => Ok(table),
            // Another shard created it a moment before (its version 0 won): use theirs, which
            // the caller checks like any table found.
            Err(error) => match self.load()? {
                Some(table) => Ok(table),
                None => Err(self.failed("cannot create the Delta table", error)),
            },
        }
    }

    /// The table's columns, model and split into units must be this run's.
    fn check_agrees(
        &self,
        table: &DeltaTable,
        columns: &StructType,
        properties: &BTreeMap<String, String>,
    ) -> anyhow::Result<()> {
        let snapshot = table.snapshot().map_err(|e| self.failed("cannot read", e))?;
        let theirs = snapshot.schema();
        let ours: Vec<String> = columns.fields().map(describe_field).collect();
        let found: Vec<String> = theirs.fields().map(describe_field).collect();
        if ours != found {
            let missing: Vec<&String> = ours.iter().filter(|f| !found.contains(f)).collect();
            let extra: Vec<&String> = found.iter().filter(|f| !ours.contains(f)).collect();
            bail!(
                "the Delta table {} has another schema than this run writes (this run's columns not in it: {}; its columns this run does not write: {}); \
                 write to a new table, or run with the model and options that made it",
                self.location,
                list_or_none(&missing),
                list_or_none(&extra)
            );
        }
        let configuration = snapshot.metadata().configuration();
        for (key, ours) in properties {
            let theirs = configuration.get(key);
            if theirs != Some(ours) {
                let flag = if key == ROWS_PER_PART_PROPERTY {
                    format!(" ({})", spelling::name("rows_per_part"))
                } else {
                    String::new()
                };
                bail!(
                    "the Delta table {} holds rows of another model or options: its {key}{flag} is {}, this run's {ours}; \
                     write to a new table, or run with the model and options that made it",
                    self.location,
                    theirs.map_or("unset", String::as_str),
                );
            }
        }
        Ok(())
    }

    /// Adds `parts` to the table in one commit with the units' and the shard's `txn`s,
    /// leaving out the parts whose unit the table holds. A writer that committed some of the
    /// same units first makes the commit conflict (on their `txn`s): the table is read again
    /// and the rest committed. Returns the version and how many parts it added, or `None`
    /// where the table held every part already.
    pub fn commit(&self, commit: &ShardCommit<'_>) -> anyhow::Result<Option<(u64, usize)>> {
        let mut conflicts = 0;
        loop {
            let Some(table) = self.load()? else {
                bail!("the Delta table {} disappeared during the run; rerun to commit its parts", self.location)
            };
            let snapshot = table.snapshot().map_err(|e| self.failed("cannot read", e))?;
            let log_store = table.log_store();
            let actions = self.actions(commit, &self.transactions(&table)?)?;
            let added = actions.iter().filter(|action| matches!(action, Action::Add(_))).count();
            if added == 0 {
                return Ok(None);
            }
            let operation = DeltaOperation::Write { mode: SaveMode::Append, partition_by: None, predicate: None };
            let prepared = CommitBuilder::default().with_actions(actions).with_max_retries(COMMIT_RETRIES).build(
                Some(snapshot),
                log_store,
                operation,
            );
            match block_on(prepared.into_future())? {
                Ok(done) => return Ok(Some((done.version(), added))),
                Err(DeltaTableError::Transaction { source: TransactionError::CommitConflict(conflict) })
                    if conflicts < COMMIT_RETRIES =>
                {
                    conflicts += 1;
                    tracing::info!(table = %self.location, "another writer committed some of these units first ({conflict}); committing the rest");
                }
                Err(error) => return Err(self.failed("cannot commit to the Delta table", error)),
            }
        }
    }

    /// The commit's actions: a `txn` and an `add` for every part whose unit the table does not
    /// hold, then the shard's `txn`.
    fn actions(&self, commit: &ShardCommit<'_>, transactions: &Transactions<'_>) -> anyhow::Result<Vec<Action>> {
        let mut actions = Vec::new();
        let mut added: HashSet<&UnitKey> = HashSet::new();
        let mut files: BTreeMap<&str, &FileKey> = BTreeMap::new();
        let now = chrono::Utc::now().timestamp_millis();
        for (index, part) in commit.parts {
            let Some(key) = commit.units.get(index) else { continue };
            if transactions.get(key)?.is_some() {
                continue;
            }
            added.insert(key);
            if let Some(file) = commit.unit_files.get(index).and_then(|file| commit.files.get(file)) {
                files.insert(&file.key, file);
            }
            actions.push(Action::Txn(Transaction { app_id: key.clone(), version: 1, last_updated: Some(now) }));
            actions.push(Action::Add(Add {
                path: format!("{}/{}", commit.staging_name, part.name),
                partition_values: HashMap::new(),
                size: i64::try_from(part.size).unwrap_or(i64::MAX),
                modification_time: now,
                data_change: true,
                stats: Some(format!("{{\"numRecords\":{}}}", part.rows)),
                tags: None,
                deletion_vector: None,
                base_row_id: None,
                default_row_commit_version: None,
                clustering_provider: None,
            }));
        }
        if !actions.is_empty() {
            // A file is recorded once all its units are in the table with this commit.
            for file in files.into_values() {
                let mut complete = true;
                for unit in &file.units {
                    complete &= added.contains(unit) || transactions.get(unit)?.is_some();
                }
                if complete {
                    let version = file.rows.map_or(UNKNOWN_ROWS, |rows| i64::try_from(rows).unwrap_or(i64::MAX));
                    actions.push(Action::Txn(Transaction {
                        app_id: file.key.clone(),
                        version,
                        last_updated: Some(now),
                    }));
                }
            }
            let version = i64::try_from(commit.shard_index).unwrap_or(i64::MAX);
            actions.push(Action::Txn(Transaction {
                app_id: commit.shard_key.clone(),
                version,
                last_updated: Some(now),
            }));
        }
        Ok(actions)
    }
}

/// What one shard adds to the table.
pub struct ShardCommit<'a> {
    /// The staging directory's name under the table root (`run-<id>`).
    pub staging_name: String,
    /// The shard's committed parts by unit index.
    pub parts: &'a BTreeMap<usize, StagedPart>,
    /// Each unit's key.
    pub units: &'a BTreeMap<usize, UnitKey>,
    /// The units' input files, as the table knows them, by input index.
    pub files: &'a BTreeMap<usize, FileKey>,
    /// Each unit's input file (its index in `files`).
    pub unit_files: &'a BTreeMap<usize, usize>,
    /// The `txn` appId of the run's shard.
    pub shard_key: String,
    pub shard_index: usize,
}

/// The appId of a unit: the input file's location (not its version: a file touched or
/// written again with the same rows must not add them twice), its rows, and everything else
/// that makes its output what it is (the fingerprint less the inputs).
pub fn unit_key(unit: &WorkUnit, input: &InputIdentity, run: &RunFingerprint) -> anyhow::Result<UnitKey> {
    #[derive(Serialize)]
    struct Identity<'a> {
        input: &'a str,
        first_row: usize,
        rows: Option<usize>,
        output: &'a RunFingerprint,
    }
    let rows = match unit.span {
        RowSpan::InRowGroup { rows, .. } => Some(rows),
        RowSpan::Whole => None,
    };
    let output = RunFingerprint { input_count: 0, inputs_sha256: String::new(), parts: 0, ..run.clone() };
    let identity = Identity { input: &input.location, first_row: unit.first_row, rows, output: &output };
    Ok(format!("pipeline-unit-{}", sha256_hex(serde_json::to_string(&identity)?.as_bytes())))
}

/// What a table holds of a run's units: units by key, and input files whole.
#[derive(Debug, Default)]
pub struct InTable {
    pub units: HashSet<UnitKey>,
    /// The [`FileKey::key`]s of files all of whose units are in the table, with these rows.
    pub files: HashSet<UnitKey>,
}

/// A file's `txn` version where its row count is not known up front (Arrow IPC).
const UNKNOWN_ROWS: i64 = -1;

/// An input file as the table knows it: a `txn` appId from its location and the run's options
/// (not its version or size), written once every unit of the file is in the table, whose
/// version is the file's row count where its footer says.
#[derive(Debug, Clone)]
pub struct FileKey {
    pub key: UnitKey,
    pub location: String,
    pub rows: Option<usize>,
    /// The keys of all the file's units, every shard's.
    pub units: Vec<UnitKey>,
}

impl FileKey {
    pub fn new(input: &InputIdentity, rows: Option<usize>, run: &RunFingerprint) -> anyhow::Result<Self> {
        #[derive(Serialize)]
        struct Identity<'a> {
            file: &'a str,
            output: &'a RunFingerprint,
        }
        let output = RunFingerprint { input_count: 0, inputs_sha256: String::new(), parts: 0, ..run.clone() };
        let identity = Identity { file: &input.location, output: &output };
        let key = format!("pipeline-file-{}", sha256_hex(serde_json::to_string(&identity)?.as_bytes()));
        Ok(Self { key, location: input.location.clone(), rows, units: Vec::new() })
    }
}

/// The appId of a run's shard.
pub fn shard_key(run: &RunFingerprint, shard: crate::units::Shard) -> anyhow::Result<String> {
    Ok(format!("pipeline-run-{}-shard-{}-of-{}", short_digest(run)?, shard.index, shard.count))
}

fn short_digest(run: &RunFingerprint) -> anyhow::Result<String> {
    let digest = sha256_hex(serde_json::to_string(run)?.as_bytes());
    Ok(digest.get(..16).unwrap_or(&digest).to_owned())
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    format!("{:x}", Sha256::digest(bytes))
}

/// A stored table's data file URL as a key in its store (the bucket left out).
fn object_key(uri: &str) -> Option<ObjectPath> {
    let url = Url::parse(uri).ok()?;
    ObjectPath::from_url_path(url.path()).ok()
}

/// The output's Arrow schema as Delta columns. Delta has no unsigned types: the compact
/// encoding's bytes (0-255) are declared `short`, the smallest signed type that holds them (as
/// Spark reads Parquet's UINT_8), while the files keep them as bytes. delta-rs's own mapping,
/// to `byte`, makes readers refuse every weight above 127.
fn delta_columns(schema: &Schema) -> anyhow::Result<StructType> {
    let fields: Vec<Field> =
        schema.fields().iter().map(|f| f.as_ref().clone().with_data_type(signed(f.data_type()))).collect();
    StructType::try_from_arrow(&Schema::new(fields))
        .map_err(|e| anyhow::anyhow!("the output's schema has no Delta equivalent: {e}"))
}

fn describe_field(field: &deltalake_core::kernel::StructField) -> String {
    format!("{} {}", field.name(), field.data_type())
}

fn list_or_none(items: &[&String]) -> String {
    if items.is_empty() { "none".to_owned() } else { items.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ") }
}

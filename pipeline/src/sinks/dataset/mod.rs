//! Dataset output: a directory of `part-NNNNN.parquet` files, one per unit of work, each
//! committed atomically, and `_SUCCESS` (the run manifest) written last, once every part is
//! there.
//!
//! Until `_SUCCESS` exists, what a resume checks lives in each part: its Parquet key-value
//! metadata carries the run fingerprint (a digest of the inputs with their sizes and
//! versions, the model's sha256, and every option that changes the output: a fixed size
//! however many inputs there are) and the identity of the one input file the part was read
//! from. A rerun into the same directory skips the parts already committed by the same run,
//! and refuses parts of a different run unless told to discard them.
//!
//! With `--partition-by`, a unit's part is one file per partition directory
//! (`prediction=pos/part-00007.parquet`), each of which says how many files its part has: a
//! part is committed once all of them are there.
//!
//! `_SUCCESS` lists every part's files with their row counts, and is believed only while that
//! is true:
//! a rerun or `pipeline finalize` that finds a listed part missing or changed removes it and says
//! which parts must be written again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use batch_io::atomic_file::{describe_file_type, remove_stale_temporaries, temporary_target, write_failed};
use batch_io::object_storage::{
    RemoteObject, RemotePrefix, TransientIo, block_on, is_url, remote_prefix, request_failed,
};
use batch_io::publish::{Destination, Sink};
use batch_io::source::{InputFile, parquet_footer};
use batch_io::spelling;
use object_store::ObjectStoreExt;
use serde::{Deserialize, Serialize};

use runtime::output::keys;

use batch_io::locations::in_partition_directories;

use crate::sinks::partitions::is_partition_directory;
use crate::units::{part_index, part_name};

mod fingerprint;

/// Written last; holds the [`RunManifest`].
pub const SUCCESS: &str = "_SUCCESS";

pub use fingerprint::{EarlierInputs, InputIdentity, Run, RunFingerprint, inputs_sha256, towards_prediction};

/// `_SUCCESS`: the whole run, written once every part is committed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunManifest {
    pub pipeline_version: String,
    /// When the process that completed the dataset (the last shard, or `pipeline finalize`) started,
    /// and when it wrote this file (RFC 3339, UTC); absent in files of older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    pub rows: u64,
    pub parts: Vec<PartRecord>,
    pub run: RunFingerprint,
    /// The input files (with `pipeline finalize`: those the parts were read from).
    pub inputs: Vec<InputIdentity>,
}

impl RunManifest {
    /// Why this manifest no longer tells the truth about the parts found: a file it lists is
    /// missing, holds another row count or other bytes than were committed, or the totals
    /// or the run contradict the parts. Empty while it is true.
    /// `digests` are the files' digests as they are now ([`part_digests`]).
    fn untrue(&self, parts: &BTreeMap<usize, CommittedPart>, digests: &BTreeMap<String, String>) -> Vec<String> {
        let mut found = Vec::new();
        for record in &self.parts {
            let part = record.unit().and_then(|index| parts.get(&index));
            let file = part.and_then(|part| part.files.get(&record.name));
            match (part, file) {
                (Some(part), Some(file)) => {
                    if self.changed(record, digests) {
                        found.push(format!("{} was changed after it was committed (its digest differs)", record.name));
                    } else if file.rows != record.rows || !self.holds(part) {
                        found.push(format!(
                            "{} holds {} rows of {}, where {} rows of this run were committed",
                            record.name,
                            file.rows,
                            if self.holds(part) { "this run" } else { "another run" },
                            record.rows
                        ));
                    }
                }
                _ => found.push(format!("{} ({} rows) is missing", record.name, record.rows)),
            }
        }
        let units: std::collections::BTreeSet<usize> = self.parts.iter().filter_map(PartRecord::unit).collect();
        if units.len() != self.run.parts {
            found.push(format!("it lists {} parts of {}", units.len(), self.run.parts));
        }
        let listed: u64 = self.parts.iter().map(|record| record.rows).sum();
        if self.rows != listed {
            found.push(format!("it counts {} rows where its parts hold {listed}", self.rows));
        }
        found
    }

    /// Whether `part` is one of this manifest's run: written by it, or by an earlier run with
    /// the same options that this one extended, from one of its inputs.
    fn holds(&self, part: &CommittedPart) -> bool {
        part.run == self.run
            || (part.run.same_options(&self.run) && part.input.as_ref().is_some_and(|i| self.inputs.contains(i)))
    }

    /// The parts whose bytes differ from those committed: they cannot be trusted, and are
    /// to be written again.
    fn changed_parts(&self, digests: &BTreeMap<String, String>) -> Vec<usize> {
        self.parts.iter().filter(|record| self.changed(record, digests)).filter_map(PartRecord::unit).collect()
    }

    /// Whether the part `record` lists is there with other bytes than it recorded.
    fn changed(&self, record: &PartRecord, digests: &BTreeMap<String, String>) -> bool {
        let now = digests.get(&record.name);
        record.digest.as_ref().zip(now).is_some_and(|(then, now)| then != now)
    }
}

/// One file of a part.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PartRecord {
    /// Its name under the output: `part-00007.parquet`, or with `--partition-by`
    /// `prediction=pos/part-00007.parquet`.
    pub name: String,
    pub rows: u64,
    /// What the part's bytes were when it was committed: `sha256:…` of a local file, or
    /// `etag:…` of an object (a store gives each new version a new ETag). Absent in
    /// manifests of older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

impl PartRecord {
    /// The unit whose rows the file holds, from its name (`prediction=pos/part-00007.parquet`: 7).
    pub fn unit(&self) -> Option<usize> {
        part_index(self.name.rsplit('/').next().unwrap_or(&self.name))
    }
}

/// A unit's part, as read from its files' footers.
#[derive(Debug, Clone)]
struct CommittedPart {
    run: RunFingerprint,
    /// The input file it was read from (absent in parts of older versions).
    input: Option<InputIdentity>,
    /// Its files by name under the output (one, unless the run was partitioned).
    files: BTreeMap<String, PartFile>,
    /// How many files the unit wrote, as each of them says (1 where they do not).
    expected_files: usize,
}

impl CommittedPart {
    /// Whether every file of the part is there: a run killed while publishing a partitioned
    /// part's files leaves some of them.
    fn complete(&self) -> bool {
        self.files.len() == self.expected_files
    }
}

/// One file of a committed part.
#[derive(Debug, Clone)]
struct PartFile {
    rows: u64,
    /// Where it is, for its digest ([`part_digests`]), computed only when a manifest is
    /// checked or written: reading every local part whole is not for every scan.
    file: InputFile,
}

/// A part's file, as read from its footer.
struct FooterOfPart {
    rows: u64,
    run: RunFingerprint,
    input: Option<InputIdentity>,
    /// The unit whose rows it holds (absent in parts of older versions).
    unit: Option<usize>,
    files: usize,
    file: InputFile,
}

/// A part written to a Delta table's staging directory, before the shard commits it.
#[derive(Debug, Clone)]
pub struct StagedPart {
    pub name: String,
    pub size: u64,
    pub rows: u64,
}

/// What a scan of the output does with a part whose footer cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unreadable {
    /// Refuses the output, withdrawing a `_SUCCESS` that vouched for the part.
    Refuse,
    /// Deletes the part, to be written again (`--overwrite`).
    Delete,
    /// Leaves it out of what the scan returns.
    Skip,
}

/// What [`DatasetDir::finalize`] found.
#[derive(Debug)]
pub enum Finalized {
    /// Every part is committed and `_SUCCESS` is written.
    Complete(Box<RunManifest>),
    /// These units' parts are not committed yet (another shard may still be at work).
    Missing(Vec<usize>),
}

/// Where a dataset output stands before a run.
#[derive(Debug)]
pub enum Committed {
    /// `_SUCCESS` is there, for this very run: nothing to do.
    Complete,
    /// These units' parts are committed (by this run); the rest are to do.
    Partial { committed: Vec<usize> },
}

/// A dataset output: a local directory or a prefix in a store.
#[derive(Debug, Clone)]
pub struct DatasetDir {
    place: Place,
}

#[derive(Debug, Clone)]
enum Place {
    Local(PathBuf),
    Remote(RemotePrefix),
}

impl DatasetDir {
    /// A local directory is created if needed (its parent must exist), and temporaries that a
    /// killed run left are removed (a live writer's, still locked, are kept). In a store a
    /// part is invisible until its upload completes, so there is nothing to create or remove.
    pub fn prepare(location: &str) -> anyhow::Result<Self> {
        if is_url(location) {
            return Ok(Self { place: Place::Remote(remote_prefix(location)?) });
        }
        let dir = Path::new(location);
        match std::fs::symlink_metadata(dir) {
            Ok(meta) if meta.is_dir() => {}
            Ok(meta) if meta.file_type().is_symlink() && dir.is_dir() => {}
            Ok(meta) => bail!(
                "output {} is {}; a dataset output is a directory (give a path ending in .parquet for one file)",
                dir.display(),
                describe_file_type(meta.file_type())
            ),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                let parent = match dir.parent() {
                    Some(p) if !p.as_os_str().is_empty() => p,
                    _ => Path::new("."),
                };
                if !parent.is_dir() {
                    bail!("cannot write {}: the directory {} does not exist", dir.display(), parent.display());
                }
                match std::fs::create_dir(dir) {
                    // Another shard, started at the same moment, made it first.
                    Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => {}
                    result => {
                        result.with_context(|| format!("cannot create the output directory {}", dir.display()))?
                    }
                }
            }
            Err(error) => bail!("cannot check output {}: {error}", dir.display()),
        }
        let this = Self { place: Place::Local(dir.to_path_buf()) };
        for name in this.entries()? {
            let (directory, file_name) = name.rsplit_once('/').unwrap_or(("", &name));
            if let Some(target) = temporary_target(file_name) {
                remove_stale_temporaries(&dir.join(directory).join(target))?;
            }
        }
        Ok(this)
    }

    /// The output's location, for messages.
    pub fn location(&self) -> String {
        match &self.place {
            Place::Local(dir) => dir.display().to_string(),
            Place::Remote(prefix) => prefix.url.clone(),
        }
    }

    /// Where the part of unit `index` goes: into `directory` (a partition's, or "" for the
    /// output itself), created if need be.
    pub fn part(&self, directory: &str, index: usize) -> anyhow::Result<Destination> {
        if directory.is_empty() {
            return Ok(self.destination(&part_name(index)));
        }
        if let Place::Local(dir) = &self.place {
            let partition = dir.join(directory);
            std::fs::create_dir_all(&partition).with_context(|| format!("cannot create {}", partition.display()))?;
        }
        Ok(self.destination(&format!("{directory}/{}", part_name(index))))
    }

    /// Where `name` (a path under the output) is.
    fn destination(&self, name: &str) -> Destination {
        match &self.place {
            Place::Local(dir) => Destination::Local(dir.join(name)),
            Place::Remote(prefix) => Destination::Object {
                store: prefix.store.clone(),
                // Names come from our own listing or our own escaping: valid segments.
                path: prefix.descendant(name).unwrap_or_else(|_| prefix.child(name)),
                url: prefix.child_url(name),
            },
        }
    }

    /// Every name under the output, with those inside partition directories as
    /// `name=value/…/file` (objects under other prefixes are not the output's: left out).
    fn entries(&self) -> anyhow::Result<Vec<String>> {
        let dir = match &self.place {
            Place::Remote(prefix) => {
                let mut names = prefix.list_relative()?;
                names.retain(|name| in_partition_directories(name));
                return Ok(names);
            }
            Place::Local(dir) => dir,
        };
        let mut names = Vec::new();
        let mut directories = vec![String::new()];
        while let Some(relative) = directories.pop() {
            let here = dir.join(&relative);
            for entry in std::fs::read_dir(&here).with_context(|| format!("cannot list {}", here.display()))? {
                let entry = entry.with_context(|| format!("cannot list {}", here.display()))?;
                let name = match entry.file_name().into_string() {
                    Ok(name) => name,
                    Err(name) => bail!(
                        "output {} holds {}, which is not part of a run; choose an empty or new directory",
                        dir.display(),
                        here.join(name).display()
                    ),
                };
                let name = if relative.is_empty() { name } else { format!("{relative}/{name}") };
                let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
                if is_dir && name.rsplit('/').next().is_some_and(is_partition_directory) {
                    directories.push(name);
                } else {
                    names.push(name);
                }
            }
        }
        names.sort();
        Ok(names)
    }

    /// The committed parts by unit index, and whether `_SUCCESS` is there. Report pages
    /// (`*.html`, which `pipeline report` may write beside the parts) are left alone; anything
    /// else in the directory (but a live writer's temporary) is refused: this is not a run's
    /// output.
    /// `unreadable` says what becomes of a part whose footer cannot be read.
    fn scan(&self, unreadable: Unreadable) -> anyhow::Result<(BTreeMap<usize, CommittedPart>, Option<RunManifest>)> {
        let mut parts: BTreeMap<usize, CommittedPart> = BTreeMap::new();
        let mut success = None;
        let entries = self.entries()?;
        let completed = entries.iter().any(|name| name == SUCCESS);
        for name in entries {
            let file_name = name.rsplit('/').next().unwrap_or(&name);
            let at_top = !name.contains('/');
            if name == SUCCESS {
                success = Some(self.read_manifest()?);
            } else if let Some(index) = part_index(file_name) {
                let footer = match self.read_part(&name) {
                    Ok(footer) => footer,
                    // A `_SUCCESS` over a part no reader can read would vouch for it: withdrawn.
                    // Not for an object store that did not answer: the part may be whole.
                    Err(error) if error.chain().any(|cause| cause.is::<TransientIo>()) => return Err(error),
                    Err(_) if unreadable == Unreadable::Skip => continue,
                    Err(_) if unreadable == Unreadable::Delete => {
                        tracing::warn!(
                            "{} is not a readable part; deleted it ({}), to be written again",
                            self.destination(&name),
                            spelling::flag_set("overwrite")
                        );
                        self.delete(&name)?;
                        continue;
                    }
                    Err(error) => {
                        if completed {
                            self.withdraw_success(&[format!("{name} cannot be read")])?;
                        }
                        return Err(error);
                    }
                };
                if let Some(unit) = footer.unit.filter(|&unit| unit != index) {
                    bail!(
                        "{} holds the rows of {}, not of its own unit: it was copied or renamed; delete it, \
                         and rerun to write it again",
                        self.destination(&name),
                        part_name(unit)
                    );
                }
                let file = PartFile { rows: footer.rows, file: footer.file };
                match parts.entry(index) {
                    std::collections::btree_map::Entry::Vacant(slot) => {
                        slot.insert(CommittedPart {
                            run: footer.run,
                            input: footer.input,
                            files: BTreeMap::from([(name, file)]),
                            expected_files: footer.files,
                        });
                    }
                    std::collections::btree_map::Entry::Occupied(mut slot) => {
                        let part = slot.get_mut();
                        if part.run != footer.run {
                            bail!(
                                "{} holds files of {} from two runs; delete the output, or rerun with {}",
                                self.location(),
                                part_name(index),
                                spelling::flag_set("overwrite")
                            );
                        }
                        part.files.insert(name, file);
                    }
                }
            } else if temporary_target(file_name).is_none() && !(at_top && is_report_page(&name)) {
                bail!(
                    "output {} holds {name}, which is not part of a run; choose an empty or new directory",
                    self.location()
                );
            }
        }
        Ok((parts, success))
    }

    fn input_file(&self, name: &str) -> anyhow::Result<InputFile> {
        Ok(match &self.place {
            Place::Local(dir) => InputFile::Local(dir.join(name)),
            Place::Remote(prefix) => {
                let path = prefix.descendant(name)?;
                let url = prefix.child_url(name);
                let meta = block_on(prefix.store.head(&path))?
                    .map_err(|e| request_failed(&format!("cannot read {url}"), e))?;
                InputFile::Remote(RemoteObject { store: prefix.store.clone(), meta, url })
            }
        })
    }

    fn read_part(&self, name: &str) -> anyhow::Result<FooterOfPart> {
        let file = self.input_file(name)?;
        let unreadable =
            || format!("{file} is not a readable part; delete it, or rerun with {}", spelling::flag_set("overwrite"));
        let footer = parquet_footer(&file).with_context(unreadable)?;
        let metadata = footer.file_metadata();
        let run = metadata
            .key_value_metadata()
            .and_then(|kv| kv.iter().find(|kv| kv.key == keys::RUN_FINGERPRINT))
            .and_then(|kv| kv.value.as_deref())
            .with_context(|| {
                format!(
                    "{file} was not written by `pipeline run` (no run fingerprint); choose an empty or new directory"
                )
            })?;
        let run = serde_json::from_str(run).with_context(unreadable)?;
        let value = |key: &str| {
            metadata
                .key_value_metadata()
                .and_then(|kv| kv.iter().find(|kv| kv.key == key))
                .and_then(|kv| kv.value.as_deref())
        };
        let input = value(keys::PART_INPUT).and_then(|text| serde_json::from_str(text).ok());
        let unit = value(keys::PART_UNIT).and_then(|text| text.parse().ok());
        let files = value(keys::PART_FILES).and_then(|text| text.parse().ok()).unwrap_or(1);
        let rows = u64::try_from(metadata.num_rows()).unwrap_or(0);
        Ok(FooterOfPart { rows, run, input, unit, files, file })
    }

    fn read_manifest(&self) -> anyhow::Result<RunManifest> {
        let destination = self.destination(SUCCESS);
        let text = match &destination {
            Destination::Local(path) => {
                std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?
            }
            Destination::Object { store, path, url } => {
                let read = async { store.get(path).await?.bytes().await };
                let bytes = block_on(read)?.map_err(|e| request_failed(&format!("cannot read {url}"), e))?;
                String::from_utf8_lossy(&bytes).into_owned()
            }
        };
        serde_json::from_str(&text).with_context(|| {
            format!("{destination} is not a run manifest of `pipeline run`; choose an empty or new directory")
        })
    }

    /// Deletes `name`; locally, also the partition directories it leaves empty.
    fn delete(&self, name: &str) -> anyhow::Result<()> {
        match self.destination(name) {
            Destination::Local(path) => match std::fs::remove_file(&path) {
                Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                    Err(error).with_context(|| format!("cannot delete {}", path.display()))
                }
                _ => {
                    if let Place::Local(root) = &self.place {
                        // Fails, harmlessly, at the first directory that still holds anything.
                        let mut parent = path.parent();
                        while let Some(dir) = parent.filter(|dir| *dir != root && dir.starts_with(root)) {
                            if std::fs::remove_dir(dir).is_err() {
                                break;
                            }
                            parent = dir.parent();
                        }
                    }
                    Ok(())
                }
            },
            Destination::Object { store, path, url } => {
                block_on(store.delete(&path))?.map_err(|e| request_failed(&format!("cannot delete {url}"), e))
            }
        }
    }

    /// Checks what is already in the directory against this `run`, whose unit `i` reads input
    /// `unit_files[i]`. Parts (or a `_SUCCESS`) of a different run are refused with what
    /// differs, unless `overwrite`, which deletes them. A `_SUCCESS` of this run whose parts
    /// are no longer all there is removed, and the missing parts are to do again.
    ///
    /// A complete earlier run with the same model and options, over inputs this run still
    /// reads unchanged, is extended rather than refused: its parts are this run's parts of
    /// those inputs (the plan put them first, see [`DatasetDir::earlier_input_order`]), and
    /// only the new inputs are to do. Its `_SUCCESS` stays until this run writes its own, so
    /// that a reader meanwhile sees the earlier dataset whole.
    pub fn committed(&self, run: &Run, unit_files: &[usize], overwrite: bool) -> anyhow::Result<Committed> {
        let (parts, success) = self.scan(if overwrite { Unreadable::Delete } else { Unreadable::Refuse })?;
        let mut foreign: Vec<String> = Vec::new();
        let mut extended = None;
        if let Some(manifest) = &success
            && manifest.run != run.fingerprint
        {
            let mut differences = run.option_differences(&manifest.run);
            differences.extend(run.input_differences(EarlierInputs::Extended(&manifest.inputs)));
            if differences.is_empty() {
                extended = Some(manifest);
            } else {
                foreign.push(format!("{SUCCESS}: {}", differences.join("; ")));
            }
        }
        if foreign.is_empty() {
            let expected = |index: usize| unit_files.get(index).and_then(|&file| run.inputs.get(file));
            let mismatch = parts.iter().find_map(|(&index, part)| {
                let differences = run.part_differences(&part.run, part.input.as_ref(), expected(index));
                (!differences.is_empty()).then(|| format!("{}: {}", part_name(index), differences.join("; ")))
            });
            foreign.extend(mismatch);
        }
        if !foreign.is_empty() {
            if !overwrite {
                bail!(
                    "output {} holds another run's output ({}); rerun with {} to delete it, or choose another {}",
                    self.location(),
                    foreign.join("; "),
                    spelling::flag_set("overwrite"),
                    spelling::name("output")
                );
            }
            self.clear(&parts)?;
            return Ok(Committed::Partial { committed: Vec::new() });
        }
        let mut parts = self.remove_incomplete_parts(parts)?;
        if let Some(manifest) = &success {
            let mut digests = part_digests(&parts)?;
            let untrue = manifest.untrue(&parts, &digests);
            if untrue.is_empty() && extended.is_none() {
                return Ok(Committed::Complete);
            }
            if !untrue.is_empty() {
                self.withdraw_success(&untrue)?;
                self.remove_changed_parts(manifest, &mut parts, &mut digests)?;
            }
        }
        if let Some(manifest) = extended {
            let new = run.inputs.iter().filter(|i| !manifest.inputs.contains(i)).count();
            tracing::info!(
                "{} holds the rows of {} input file(s) classified with the same model and options; classifying \
                 the {new} new one(s) and adding them to it",
                self.location(),
                manifest.inputs.len()
            );
        }
        Ok(Committed::Partial { committed: parts.keys().copied().filter(|&i| i < run.fingerprint.parts).collect() })
    }

    /// The inputs an earlier run into the output at `location` read, in its order (see
    /// [`Self::earlier_input_order`]); none where there is no output yet, which is left
    /// uncreated.
    pub fn earlier_inputs_at(location: &str) -> anyhow::Result<Vec<String>> {
        if !is_url(location) && !Path::new(location).is_dir() {
            return Ok(Vec::new());
        }
        let place = if is_url(location) {
            Place::Remote(remote_prefix(location)?)
        } else {
            Place::Local(PathBuf::from(location))
        };
        Self { place }.earlier_input_order()
    }

    /// The inputs an earlier run into this output read, in its order: those its `_SUCCESS`
    /// lists, then those its parts name, by part. A rerun over grown inputs reads these
    /// first, so that each keeps its units, and its parts stand.
    fn earlier_input_order(&self) -> anyhow::Result<Vec<String>> {
        // An unreadable part names no input; the run's check of the parts decides about it.
        let (parts, success) = self.scan(Unreadable::Skip)?;
        let mut order: Vec<String> =
            success.map(|m| m.inputs.into_iter().map(|i| i.location).collect()).unwrap_or_default();
        for input in parts.into_values().filter_map(|p| p.input) {
            if !order.contains(&input.location) {
                order.push(input.location);
            }
        }
        Ok(order)
    }

    /// Removes a `_SUCCESS` that no longer tells the truth, so that no reader trusts an
    /// incomplete output, and says why.
    fn withdraw_success(&self, untrue: &[String]) -> anyhow::Result<()> {
        tracing::warn!(
            "{}/{SUCCESS} no longer matches the parts ({}); removed it, the missing parts are written again",
            self.location(),
            untrue.join("; ")
        );
        self.delete(SUCCESS)
    }

    /// Deletes the parts changed since `manifest` committed them (and forgets them), so that
    /// they count as missing: written again by a rerun, never listed as complete.
    fn remove_changed_parts(
        &self,
        manifest: &RunManifest,
        parts: &mut BTreeMap<usize, CommittedPart>,
        digests: &mut BTreeMap<String, String>,
    ) -> anyhow::Result<()> {
        for index in manifest.changed_parts(digests) {
            let Some(part) = parts.remove(&index) else { continue };
            tracing::warn!(
                "{} changed after it was committed; deleted it, to be written again",
                self.destination(&part_name(index))
            );
            for name in part.files.keys() {
                self.delete(name)?;
                digests.remove(name);
            }
        }
        Ok(())
    }

    /// Deletes the files of parts that lack some of theirs (a run killed while publishing a
    /// partitioned part), which are then to do again, and returns the complete parts.
    fn remove_incomplete_parts(
        &self,
        parts: BTreeMap<usize, CommittedPart>,
    ) -> anyhow::Result<BTreeMap<usize, CommittedPart>> {
        let (complete, incomplete): (BTreeMap<_, _>, BTreeMap<_, _>) =
            parts.into_iter().partition(|(_, p)| p.complete());
        for (index, part) in incomplete {
            let found = part.files.len();
            let (expected, why) = (
                part.expected_files,
                if found < part.expected_files {
                    "a run stopped while publishing them"
                } else {
                    "a file was copied in beside them"
                },
            );
            tracing::warn!(
                "{} has {found} files where its run wrote {expected} ({why}); deleted them, to be written again",
                part_name(index)
            );
            for name in part.files.keys() {
                self.delete(name)?;
            }
        }
        Ok(complete)
    }

    /// Deletes `_SUCCESS` first (the output is no longer complete), then the parts.
    fn clear(&self, parts: &BTreeMap<usize, CommittedPart>) -> anyhow::Result<()> {
        self.delete(SUCCESS)?;
        for name in parts.values().flat_map(|part| part.files.keys()) {
            self.delete(name)?;
        }
        Ok(())
    }

    /// The committed parts of `units` with their sizes and rows, for a table's log: parts of
    /// another run are refused (a staging directory is this run's own).
    pub fn staged_parts(
        &self,
        run: &Run,
        units: impl Iterator<Item = usize>,
    ) -> anyhow::Result<BTreeMap<usize, StagedPart>> {
        let (parts, _) = self.scan(Unreadable::Refuse)?;
        let mut staged = BTreeMap::new();
        for index in units {
            let Some(part) = parts.get(&index) else { continue };
            if part.run != run.fingerprint {
                bail!("{} in {} belongs to another run; remove it and rerun", part_name(index), self.location());
            }
            // A table's parts are never partitioned (refused before the run): one file each.
            let Some((name, file)) = part.files.iter().next() else { continue };
            let size = match &file.file {
                InputFile::Local(path) => {
                    std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?.len()
                }
                InputFile::Remote(object) => object.meta.size,
            };
            staged.insert(index, StagedPart { name: name.clone(), size, rows: file.rows });
        }
        Ok(staged)
    }

    /// Writes `_SUCCESS` if every part of the run is committed, or says which are missing.
    /// With `run`, the parts must belong to it; without (`pipeline finalize`), to the run their
    /// footers name. A `_SUCCESS` already there is checked against the parts first.
    pub fn finalize(&self, run: Option<&Run>, started_at: chrono::DateTime<chrono::Utc>) -> anyhow::Result<Finalized> {
        let (parts, success) = self.scan(Unreadable::Refuse)?;
        // Without the run, the newest of the parts' runs: an extended dataset holds parts of
        // the earlier run too, and the newest one's units are all of them.
        let newest = parts.values().max_by_key(|p| p.run.parts);
        let fingerprint = match (run, newest, &success) {
            (Some(run), _, _) => run.fingerprint.clone(),
            (None, Some(part), _) => part.run.clone(),
            (None, None, Some(manifest)) => manifest.run.clone(),
            (None, None, None) => {
                bail!("output {} holds no parts; run `pipeline run` into it first", self.location())
            }
        };
        let mut parts = parts;
        // Computed once: checked against a `_SUCCESS` there, then written into the new one.
        let mut digests: Option<BTreeMap<String, String>> = None;
        if let Some(manifest) = success.filter(|m| m.run == fingerprint) {
            let found = digests.insert(part_digests(&parts)?);
            let untrue = manifest.untrue(&parts, found);
            if untrue.is_empty() {
                return Ok(Finalized::Complete(Box::new(manifest)));
            }
            self.withdraw_success(&untrue)?;
            self.remove_changed_parts(&manifest, &mut parts, found)?;
        }
        if let Some((index, _)) = parts.iter().find(|(_, p)| !p.run.same_options(&fingerprint)) {
            bail!(
                "{} belongs to a different run than the other parts of {}; rerun with {}",
                part_name(*index),
                self.location(),
                spelling::flag_set("overwrite")
            );
        }
        let missing: Vec<usize> =
            (0..fingerprint.parts).filter(|i| !parts.get(i).is_some_and(CommittedPart::complete)).collect();
        if !missing.is_empty() {
            return Ok(Finalized::Missing(missing));
        }
        let inputs = match run {
            Some(run) => run.inputs.clone(),
            None => {
                let mut inputs: Vec<InputIdentity> = Vec::new();
                for input in parts.values().filter_map(|p| p.input.clone()) {
                    if !inputs.contains(&input) {
                        inputs.push(input);
                    }
                }
                inputs
            }
        };
        let mut digests = match digests {
            Some(digests) => digests,
            None => part_digests(&parts)?,
        };
        let records: Vec<PartRecord> = parts
            .iter()
            .filter(|(index, _)| **index < fingerprint.parts)
            .flat_map(|(_, part)| part.files.iter())
            .map(|(name, file)| PartRecord { name: name.clone(), rows: file.rows, digest: digests.remove(name) })
            .collect();
        let manifest = RunManifest {
            pipeline_version: env!("CARGO_PKG_VERSION").to_owned(),
            started_at: Some(crate::timestamps::rfc3339(started_at)),
            finished_at: Some(crate::timestamps::rfc3339(chrono::Utc::now())),
            rows: records.iter().map(|p| p.rows).sum(),
            parts: records,
            run: fingerprint,
            inputs,
        };
        let destination = self.destination(SUCCESS);
        let mut sink = Sink::create(&destination)?;
        std::io::Write::write_all(&mut sink, serde_json::to_string_pretty(&manifest)?.as_bytes())
            .map_err(|e| write_failed(Path::new(&destination.to_string()), &e))?;
        sink.publish()?;
        Ok(Finalized::Complete(Box::new(manifest)))
    }
}

/// Each part's digest as it is now ([`part_digest`]).
fn part_digests(parts: &BTreeMap<usize, CommittedPart>) -> anyhow::Result<BTreeMap<String, String>> {
    parts
        .values()
        .flat_map(|part| part.files.iter())
        .map(|(name, file)| Ok((name.clone(), part_digest(&file.file)?)))
        .collect()
}

/// A part's bytes as they are now: the sha256 of a local file (read whole: a part damaged
/// in place keeps its size), or an object's ETag, which a store changes with every write.
fn part_digest(file: &InputFile) -> anyhow::Result<String> {
    use sha2::{Digest, Sha256};
    match file {
        InputFile::Local(path) => {
            let mut reader = std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
            let mut digest = Sha256::new();
            std::io::copy(&mut reader, &mut digest).with_context(|| format!("cannot read {}", path.display()))?;
            Ok(format!("sha256:{:x}", digest.finalize()))
        }
        InputFile::Remote(object) => Ok(match &object.meta.e_tag {
            Some(e_tag) => format!("etag:{e_tag}"),
            None => format!("size:{}:modified:{}", object.meta.size, object.meta.last_modified.to_rfc3339()),
        }),
    }
}

/// A page `pipeline report` wrote beside the parts: never read as a part, never deleted.
fn is_report_page(name: &str) -> bool {
    name.to_ascii_lowercase().ends_with(".html") && !name.starts_with('.')
}

#[cfg(test)]
mod tests;

//! Dataset output: a directory of `part-NNNNN.parquet` files, one per unit of work, each
//! committed atomically, and `_SUCCESS` (the run manifest) written last, once every part is
//! there.
//!
//! Until `_SUCCESS` exists, what a resume checks lives in each part: its Parquet key-value
//! metadata carries the run fingerprint (inputs with their sizes and versions, the model's
//! sha256, and every option that changes the output). A rerun into the same directory skips
//! the parts already committed by the same run, and refuses parts of a different run unless
//! told to discard them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use batch_io::atomic_file::{describe_file_type, remove_stale_temporaries, temporary_target, write_failed};
use batch_io::object_storage::{RemoteObject, RemotePrefix, block_on, is_url, remote_prefix, request_failed};
use batch_io::publish::{Destination, Sink};
use batch_io::source::{InputFile, parquet_footer};
use object_store::ObjectStoreExt;
use serde::{Deserialize, Serialize};

use crate::units::{part_index, part_name};

/// The key of the run fingerprint in each part's Parquet metadata.
pub const FINGERPRINT_KEY: &str = "pipeline.run";
/// Written last; holds the [`RunManifest`].
pub const SUCCESS: &str = "_SUCCESS";

/// One input file as the run saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputIdentity {
    pub location: String,
    pub size: u64,
    /// Modification time (local files, in nanoseconds) or ETag (object stores).
    pub version: String,
}

/// What makes two runs the same run: a part written by one may stand in for the other's.
/// Batch size, window, threads and backend are left out: results do not depend on them
/// (predictions identical, probabilities within 1e-5, tested in CI).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunFingerprint {
    pub inputs: Vec<InputIdentity>,
    pub model_sha256: String,
    pub text_column: String,
    pub pass_through: Vec<String>,
    pub max_tokens: usize,
    pub embedding: bool,
    pub rows_per_part: usize,
    /// Units in the whole run, over all shards.
    pub parts: usize,
}

impl RunFingerprint {
    /// What differs between this run and `earlier`, as phrases a user can act on.
    pub fn differences(&self, earlier: &RunFingerprint) -> Vec<String> {
        let mut found = Vec::new();
        let before: BTreeMap<&str, &InputIdentity> = earlier.inputs.iter().map(|i| (i.location.as_str(), i)).collect();
        let now: BTreeMap<&str, &InputIdentity> = self.inputs.iter().map(|i| (i.location.as_str(), i)).collect();
        for (location, input) in &now {
            match before.get(location) {
                None => found.push(format!("input {location} is new")),
                Some(old) if old.size != input.size => {
                    found.push(format!("input {location} changed size ({} → {} bytes)", old.size, input.size))
                }
                Some(old) if old.version != input.version => {
                    found.push(format!("input {location} changed (version {} → {})", old.version, input.version))
                }
                Some(_) => {}
            }
        }
        for location in before.keys().filter(|l| !now.contains_key(*l)) {
            found.push(format!("input {location} is no longer read"));
        }
        if self.model_sha256 != earlier.model_sha256 {
            found.push(format!(
                "the model differs (sha256 {} → {})",
                short(&earlier.model_sha256),
                short(&self.model_sha256)
            ));
        }
        let mut option = |name: &str, old: String, new: String| {
            if old != new {
                found.push(format!("{name} was {old}, now {new}"));
            }
        };
        option("--text-column", earlier.text_column.clone(), self.text_column.clone());
        option("the pass-through columns", earlier.pass_through.join(","), self.pass_through.join(","));
        option("--max-tokens", earlier.max_tokens.to_string(), self.max_tokens.to_string());
        option("--embedding", earlier.embedding.to_string(), self.embedding.to_string());
        option("--rows-per-part", earlier.rows_per_part.to_string(), self.rows_per_part.to_string());
        if found.is_empty() && self.parts != earlier.parts {
            found.push(format!("the run had {} parts, now {}", earlier.parts, self.parts));
        }
        found
    }
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

/// `_SUCCESS`: the whole run, written once every part is committed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunManifest {
    pub pipeline_version: String,
    pub rows: u64,
    pub parts: Vec<PartRecord>,
    pub run: RunFingerprint,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PartRecord {
    pub name: String,
    pub rows: u64,
}

/// A committed part, as read from its footer.
#[derive(Debug, Clone)]
struct CommittedPart {
    rows: u64,
    run: RunFingerprint,
}

/// What [`DatasetDir::finalize`] found.
#[derive(Debug)]
pub enum Finalized {
    /// Every part is committed and `_SUCCESS` is written.
    Complete(RunManifest),
    /// These units' parts are not committed yet (another shard may still be at work).
    Missing(Vec<usize>),
}

/// Where a dataset output stands before a run.
#[derive(Debug)]
pub enum Progress {
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
                std::fs::create_dir(dir)
                    .with_context(|| format!("cannot create the output directory {}", dir.display()))?;
            }
            Err(error) => bail!("cannot check output {}: {error}", dir.display()),
        }
        let this = Self { place: Place::Local(dir.to_path_buf()) };
        for name in this.entries()? {
            if let Some(target) = temporary_target(&name) {
                remove_stale_temporaries(&dir.join(target))?;
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

    /// Where the part of unit `index` goes.
    pub fn part(&self, index: usize) -> Destination {
        self.destination(&part_name(index))
    }

    fn destination(&self, name: &str) -> Destination {
        match &self.place {
            Place::Local(dir) => Destination::Local(dir.join(name)),
            Place::Remote(prefix) => Destination::Object {
                store: prefix.store.clone(),
                path: prefix.child(name),
                url: prefix.child_url(name),
            },
        }
    }

    fn entries(&self) -> anyhow::Result<Vec<String>> {
        let dir = match &self.place {
            Place::Remote(prefix) => return prefix.list_names(),
            Place::Local(dir) => dir,
        };
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
            let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
            match entry.file_name().into_string() {
                Ok(name) => names.push(name),
                Err(name) => bail!(
                    "output {} holds {}, which is not part of a run; choose an empty or new directory",
                    dir.display(),
                    name.to_string_lossy()
                ),
            }
        }
        names.sort();
        Ok(names)
    }

    /// The committed parts by unit index, and whether `_SUCCESS` is there. Anything else in
    /// the directory (but a live writer's temporary) is refused: this is not a run's output.
    fn scan(&self) -> anyhow::Result<(BTreeMap<usize, CommittedPart>, Option<RunManifest>)> {
        let mut parts = BTreeMap::new();
        let mut success = None;
        for name in self.entries()? {
            if name == SUCCESS {
                success = Some(self.read_manifest()?);
            } else if let Some(index) = part_index(&name) {
                parts.insert(index, self.read_part(&name)?);
            } else if temporary_target(&name).is_none() {
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
                let path = prefix.child(name);
                let url = prefix.child_url(name);
                let meta =
                    block_on(prefix.store.head(&path)).map_err(|e| request_failed(&format!("cannot read {url}"), e))?;
                InputFile::Remote(RemoteObject { store: prefix.store.clone(), meta, url })
            }
        })
    }

    fn read_part(&self, name: &str) -> anyhow::Result<CommittedPart> {
        let file = self.input_file(name)?;
        let unreadable = || format!("{file} is not a readable part; delete it, or rerun with --overwrite");
        let footer = parquet_footer(&file).with_context(unreadable)?;
        let metadata = footer.file_metadata();
        let run = metadata
            .key_value_metadata()
            .and_then(|kv| kv.iter().find(|kv| kv.key == FINGERPRINT_KEY))
            .and_then(|kv| kv.value.as_deref())
            .with_context(|| {
                format!(
                    "{file} was not written by `pipeline run` (no run fingerprint); choose an empty or new directory"
                )
            })?;
        let run = serde_json::from_str(run).with_context(unreadable)?;
        Ok(CommittedPart { rows: u64::try_from(metadata.num_rows()).unwrap_or(0), run })
    }

    fn read_manifest(&self) -> anyhow::Result<RunManifest> {
        let destination = self.destination(SUCCESS);
        let text = match &destination {
            Destination::Local(path) => {
                std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?
            }
            Destination::Object { store, path, url } => {
                let read = async { store.get(path).await?.bytes().await };
                let bytes = block_on(read).map_err(|e| request_failed(&format!("cannot read {url}"), e))?;
                String::from_utf8_lossy(&bytes).into_owned()
            }
        };
        serde_json::from_str(&text).with_context(|| {
            format!("{destination} is not a run manifest of `pipeline run`; choose an empty or new directory")
        })
    }

    fn delete(&self, name: &str) -> anyhow::Result<()> {
        match self.destination(name) {
            Destination::Local(path) => match std::fs::remove_file(&path) {
                Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                    Err(error).with_context(|| format!("cannot delete {}", path.display()))
                }
                _ => Ok(()),
            },
            Destination::Object { store, path, url } => {
                block_on(store.delete(&path)).map_err(|e| request_failed(&format!("cannot delete {url}"), e))
            }
        }
    }

    /// Checks what is already in the directory against this `run`. Parts (or a `_SUCCESS`) of
    /// a different run are refused with what differs, unless `overwrite`, which deletes them.
    pub fn progress(&self, run: &RunFingerprint, overwrite: bool) -> anyhow::Result<Progress> {
        let (parts, success) = self.scan()?;
        let mut foreign: Vec<String> = Vec::new();
        if let Some(manifest) = &success {
            foreign.extend(run.differences(&manifest.run));
        }
        if foreign.is_empty()
            && let Some((index, part)) = parts.iter().find(|(_, p)| p.run != *run)
        {
            let mut differences = run.differences(&part.run);
            if differences.is_empty() {
                differences.push("its run fingerprint differs".to_owned());
            }
            foreign.push(format!("{}: {}", part_name(*index), differences.join("; ")));
        }
        if !foreign.is_empty() {
            if !overwrite {
                bail!(
                    "output {} holds another run's output ({}); rerun with --overwrite to delete it, or choose another --output",
                    self.location(),
                    foreign.join("; ")
                );
            }
            self.clear(parts.keys().copied())?;
            return Ok(Progress::Partial { committed: Vec::new() });
        }
        if success.is_some() {
            return Ok(Progress::Complete);
        }
        Ok(Progress::Partial { committed: parts.keys().copied().filter(|&i| i < run.parts).collect() })
    }

    /// Deletes `_SUCCESS` first (the output is no longer complete), then the parts.
    fn clear(&self, parts: impl Iterator<Item = usize>) -> anyhow::Result<()> {
        self.delete(SUCCESS)?;
        for index in parts {
            self.delete(&part_name(index))?;
        }
        Ok(())
    }

    /// Writes `_SUCCESS` if every part of the run is committed, or says which are missing.
    /// With `run`, the parts must belong to it; without (`--finalize`), to the run their
    /// footers name.
    pub fn finalize(&self, run: Option<&RunFingerprint>) -> anyhow::Result<Finalized> {
        let (parts, success) = self.scan()?;
        let run = match (run, parts.values().next()) {
            (Some(run), _) => run.clone(),
            (None, Some(part)) => part.run.clone(),
            (None, None) => match success {
                Some(manifest) => return Ok(Finalized::Complete(manifest)),
                None => bail!("output {} holds no parts; run `pipeline run` into it first", self.location()),
            },
        };
        if let Some(manifest) = success.filter(|m| m.run == run) {
            return Ok(Finalized::Complete(manifest));
        }
        if let Some((index, _)) = parts.iter().find(|(_, p)| p.run != run) {
            bail!(
                "{} belongs to a different run than the other parts of {}; rerun with --overwrite",
                part_name(*index),
                self.location()
            );
        }
        let missing: Vec<usize> = (0..run.parts).filter(|i| !parts.contains_key(i)).collect();
        if !missing.is_empty() {
            return Ok(Finalized::Missing(missing));
        }
        let records: Vec<PartRecord> =
            parts.iter().map(|(index, part)| PartRecord { name: part_name(*index), rows: part.rows }).collect();
        let manifest = RunManifest {
            pipeline_version: env!("CARGO_PKG_VERSION").to_owned(),
            rows: records.iter().map(|p| p.rows).sum(),
            parts: records,
            run,
        };
        let destination = self.destination(SUCCESS);
        let mut sink = Sink::create(&destination)?;
        std::io::Write::write_all(&mut sink, serde_json::to_string_pretty(&manifest)?.as_bytes())
            .map_err(|e| write_failed(Path::new(&destination.to_string()), &e))?;
        sink.publish()?;
        Ok(Finalized::Complete(manifest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> RunFingerprint {
        RunFingerprint {
            inputs: vec![
                InputIdentity { location: "s3://corpus/a.parquet".into(), size: 100, version: "\"etag-1\"".into() },
                InputIdentity { location: "s3://corpus/b.parquet".into(), size: 200, version: "\"etag-2\"".into() },
            ],
            model_sha256: "0123456789abcdef0123".into(),
            text_column: "text".into(),
            pass_through: vec!["id".into()],
            max_tokens: 512,
            embedding: false,
            rows_per_part: 2500,
            parts: 4,
        }
    }

    #[test]
    fn the_same_run_has_no_differences() {
        assert!(run().differences(&run()).is_empty());
    }

    #[test]
    fn a_changed_input_is_named_with_what_changed() {
        let earlier = run();
        let mut now = run();
        now.inputs[0].size = 150;
        now.inputs[1].version = "\"etag-3\"".into();
        let found = now.differences(&earlier);
        assert_eq!(
            found,
            vec![
                "input s3://corpus/a.parquet changed size (100 → 150 bytes)".to_owned(),
                "input s3://corpus/b.parquet changed (version \"etag-2\" → \"etag-3\")".to_owned(),
            ]
        );
        now.inputs.pop();
        now.inputs.push(InputIdentity { location: "s3://corpus/c.parquet".into(), size: 1, version: "x".into() });
        let found = now.differences(&earlier).join("; ");
        assert!(found.contains("input s3://corpus/c.parquet is new"), "{found}");
        assert!(found.contains("input s3://corpus/b.parquet is no longer read"), "{found}");
    }

    #[test]
    fn a_changed_model_or_option_is_named() {
        let earlier = run();
        let mut now = run();
        now.model_sha256 = "fedcba9876543210fedc".into();
        now.max_tokens = 256;
        now.embedding = true;
        assert_eq!(
            now.differences(&earlier),
            vec![
                "the model differs (sha256 0123456789ab → fedcba987654)".to_owned(),
                "--max-tokens was 512, now 256".to_owned(),
                "--embedding was false, now true".to_owned(),
            ]
        );
    }
}

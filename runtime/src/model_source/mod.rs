//! Where a model package comes from: a local directory, a prefix in object storage
//! (downloaded once into a cache), or the default model compiled into the program.
//! `pipeline run`, `pipeline inspect` and the Python module open models the same way.

use std::path::Path;

use anyhow::Context;

use batch_io::atomic_file::TempDir;

use crate::package::ModelPackage;

pub mod embedded;
pub mod remote;

pub use embedded::Unpacked;

/// Opens `location` (a directory or an object-storage URL), or the embedded default model
/// when there is none. The guard, when there is one, keeps the unpacked default model's
/// temporary directory alive.
pub fn open(location: Option<&Path>) -> anyhow::Result<(Option<Unpacked>, ModelPackage)> {
    match location {
        Some(url) if url.to_str().is_some_and(batch_io::object_storage::is_url) => {
            Ok((None, remote::open(&url.to_string_lossy())?))
        }
        Some(dir) => Ok((None, ModelPackage::open(dir)?)),
        // The content-addressed cache entry, so that a killed run leaves no 14 MB copy behind.
        None => embedded::cached(),
    }
}

/// The file in a cache entry that records each package file's sha256, written before the
/// entry is published and checked before it is used: a file lost or changed in place (a
/// full disk, a hand edit, a same-size replacement) is never read as the package.
const DIGESTS_FILE: &str = "SHA256SUMS";

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    format!("{:x}", Sha256::digest(bytes))
}

/// Writes [`DIGESTS_FILE`] for `names` in `dir`.
fn write_digests(dir: &Path, names: &[&str]) -> anyhow::Result<()> {
    let mut sums = String::new();
    for name in names {
        let path = dir.join(name);
        let bytes = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        sums.push_str(&format!("{}  {name}\n", sha256_hex(&bytes)));
    }
    let path = dir.join(DIGESTS_FILE);
    std::fs::write(&path, sums).with_context(|| format!("cannot write {}", path.display()))
}

/// Whether every file [`DIGESTS_FILE`] lists in `dir` is there with its recorded content, and
/// it lists all of `names`.
fn digests_match(dir: &Path, names: &[&str]) -> bool {
    let Ok(sums) = std::fs::read_to_string(dir.join(DIGESTS_FILE)) else { return false };
    let listed: Vec<(&str, &str)> = sums.lines().filter_map(|line| line.split_once("  ")).collect();
    names.iter().all(|name| listed.iter().any(|(_, listed_name)| listed_name == name))
        && listed.iter().all(|(digest, name)| {
            !name.contains('/') && std::fs::read(dir.join(name)).is_ok_and(|bytes| sha256_hex(&bytes) == *digest)
        })
}

/// Removes a cache entry that failed its check, so that a fresh copy can take its place;
/// when it cannot be removed, says which directory to delete.
fn remove_damaged_entry(entry: &Path) -> anyhow::Result<()> {
    let Ok(meta) = std::fs::symlink_metadata(entry) else { return Ok(()) };
    tracing::warn!(cache = %entry.display(), "the model cache entry is damaged (a file is missing or changed); replacing it");
    let removed = if meta.is_dir() { std::fs::remove_dir_all(entry) } else { std::fs::remove_file(entry) };
    removed.with_context(|| {
        format!("the model cache entry {} is damaged and cannot be removed; delete it and run again", entry.display())
    })
}

/// Renames a package unpacked or downloaded into `staging` to the cache entry `entry`, and
/// opens it. Another process may have published the same entry meanwhile: theirs is as good.
fn publish_cache_entry(staging: TempDir, entry: &Path) -> anyhow::Result<ModelPackage> {
    if let Err(error) = staging.publish(entry) {
        return ModelPackage::open(entry).map_err(|_| error);
    }
    ModelPackage::open(entry)
}

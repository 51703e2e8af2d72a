//! `--model s3://…/` (or gs://, az://, https://): a model package in object storage,
//! downloaded once into a local cache and reused while its objects are unchanged.
//!
//! The cache entry is named by a digest of the package's URL and of each file's size and
//! version (ETag), so a package replaced in the bucket is fetched again, and one left alone
//! is read from disk. Files are downloaded into a temporary directory, checked against the
//! sizes the store gave, opened as a package, and only then renamed into place: a killed
//! download is never taken for a package.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use batch_io::object_storage::{block_on, remote_prefix, request_failed};
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt};
use runtime::package::{GRAPH_FILE, MANIFEST_FILE, ModelPackage, TOKENIZER_FILE};

/// The package at `url`, from the cache when its files are unchanged.
pub fn open(url: &str) -> anyhow::Result<ModelPackage> {
    let prefix = remote_prefix(url)?;
    let names = [MANIFEST_FILE, TOKENIZER_FILE, GRAPH_FILE];
    let metas: Vec<ObjectMeta> = names
        .iter()
        .map(|name| {
            block_on(prefix.store.head(&prefix.child(name)))
                .map_err(|e| request_failed(&format!("--model {url}: cannot read {}", prefix.child_url(name)), e))
        })
        .collect::<anyhow::Result<_>>()?;
    let entry = cache_dir()?.join(entry_name(&prefix.url, &metas));
    if let Ok(package) = ModelPackage::open(&entry) {
        tracing::info!(model = url, cache = %entry.display(), "model package unchanged since it was downloaded; using the cached copy");
        return Ok(package);
    }
    let staging = batch_io::atomic_file::temp_dir_beside(&entry)
        .with_context(|| format!("cannot make a directory for the model in {}", entry.display()))?;
    for (name, meta) in names.iter().zip(&metas) {
        download(&prefix.store, meta, &prefix.child_url(name), &staging.path().join(name))?;
    }
    ModelPackage::open(staging.path()).with_context(|| format!("--model {url} is not a model package"))?;
    let package = super::publish_cache_entry(staging, &entry)?;
    tracing::info!(model = url, cache = %entry.display(), "model package downloaded");
    Ok(package)
}

/// `$PIPELINE_MODEL_CACHE`, else `$XDG_CACHE_HOME/attention-classifier/models`, else
/// `~/.cache/attention-classifier/models`.
pub(crate) fn cache_dir() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("PIPELINE_MODEL_CACHE") {
        return Ok(PathBuf::from(dir));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))
        .context("no cache directory for downloaded models: set PIPELINE_MODEL_CACHE (or HOME)")?;
    Ok(base.join("attention-classifier").join("models"))
}

/// A name for the cache entry that changes when the URL or any file's size or version does.
fn entry_name(url: &str, metas: &[ObjectMeta]) -> String {
    use sha2::{Digest, Sha256};
    let mut digest = Sha256::new();
    digest.update(url.as_bytes());
    for meta in metas {
        let version = meta.e_tag.clone().unwrap_or_else(|| meta.last_modified.to_rfc3339());
        digest.update(b"\0");
        digest.update(meta.size.to_le_bytes());
        digest.update(version.as_bytes());
    }
    format!("{:x}", digest.finalize())
}

/// Downloads one object to `path`, refusing one whose length differs from the size listed.
fn download(store: &std::sync::Arc<dyn ObjectStore>, meta: &ObjectMeta, url: &str, path: &Path) -> anyhow::Result<()> {
    let bytes = block_on(async { store.get(&meta.location).await?.bytes().await })
        .map_err(|e| request_failed(&format!("cannot download {url}"), e))?;
    anyhow::ensure!(
        bytes.len() as u64 == meta.size,
        "{url} came back with {} bytes where the store listed {}; it may have been replaced during the download, so run again",
        bytes.len(),
        meta.size
    );
    let mut file = std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(&bytes).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

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

use crate::package::{GRAPH_FILE, MANIFEST_FILE, ModelPackage, TOKENIZER_FILE};
use anyhow::Context;
use batch_io::object_storage::{block_on, remote_prefix, request_failed};
use batch_io::spelling;
use object_store::{GetOptions, ObjectMeta, ObjectStore, ObjectStoreExt};

/// The package at `url`, from the cache when its files are unchanged.
pub fn open(url: &str) -> anyhow::Result<ModelPackage> {
    let prefix = remote_prefix(url)?;
    let names = [MANIFEST_FILE, TOKENIZER_FILE, GRAPH_FILE];
    let metas: Vec<ObjectMeta> = names
        .iter()
        .map(|name| {
            block_on(prefix.store.head(&prefix.child(name)))?.map_err(|e| {
                let model = spelling::option_with("model", url);
                request_failed(&format!("{model}: cannot read {}", prefix.child_url(name)), e)
            })
        })
        .collect::<anyhow::Result<_>>()?;
    let entry = cache_dir()?.join(entry_name(&prefix.url, &metas));
    if super::digests_match(&entry, &names)
        && let Ok(package) = ModelPackage::open(&entry)
    {
        tracing::info!(model = url, cache = %entry.display(), "model package unchanged since it was downloaded; using the cached copy");
        return Ok(package);
    }
    super::remove_damaged_entry(&entry)?;
    let staging = batch_io::atomic_file::temp_dir_beside(&entry)
        .with_context(|| format!("cannot make a directory for the model in {}", entry.display()))?;
    for (name, meta) in names.iter().zip(&metas) {
        download(&prefix.store, meta, &prefix.child_url(name), &staging.path().join(name))?;
    }
    ModelPackage::open(staging.path())
        .with_context(|| format!("{} is not a model package", spelling::option_with("model", url)))?;
    super::write_digests(staging.path(), &names)?;
    let package = super::publish_cache_entry(staging, &entry)?;
    tracing::info!(model = url, cache = %entry.display(), "model package downloaded");
    Ok(package)
}

/// `$PIPELINE_MODEL_CACHE`, else `$XDG_CACHE_HOME/attention-classifier/models`, else
/// `~/.cache/attention-classifier/models`; a variable set to the empty string counts as unset
/// (it would otherwise mean the current directory). Something other than a directory there
/// is an error that names where the path came from.
pub(crate) fn cache_dir() -> anyhow::Result<PathBuf> {
    let set = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty()).map(PathBuf::from);
    let (dir, origin) = if let Some(dir) = set("PIPELINE_MODEL_CACHE") {
        (dir, "PIPELINE_MODEL_CACHE")
    } else if let Some(base) = set("XDG_CACHE_HOME") {
        (base.join("attention-classifier").join("models"), "XDG_CACHE_HOME")
    } else if let Some(home) = set("HOME") {
        (home.join(".cache").join("attention-classifier").join("models"), "HOME")
    } else {
        anyhow::bail!("no cache directory for downloaded models: set PIPELINE_MODEL_CACHE (or HOME)");
    };
    match std::fs::metadata(&dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => anyhow::bail!(
            "the model cache {} (from {origin}) is not a directory; point PIPELINE_MODEL_CACHE at a directory",
            dir.display()
        ),
        Err(_) if std::fs::symlink_metadata(&dir).is_ok() => anyhow::bail!(
            "the model cache {} (from {origin}) is a link to nothing; point PIPELINE_MODEL_CACHE at a directory",
            dir.display()
        ),
        Err(_) => {}
    }
    Ok(dir)
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

/// Downloads one object to `path`: the version listed (`If-Match` on its ETag, and the ETag
/// that comes back compared), so that an object replaced between the listing and the
/// download is never cached under the old version's name.
fn download(store: &std::sync::Arc<dyn ObjectStore>, meta: &ObjectMeta, url: &str, path: &Path) -> anyhow::Result<()> {
    let options = GetOptions { if_match: meta.e_tag.clone(), ..GetOptions::default() };
    let replaced = || {
        anyhow::Error::new(batch_io::object_storage::TransientIo(format!(
            "{url} was replaced while it was being downloaded; run again to download the new version"
        )))
    };
    let bytes = block_on(async {
        let result = store.get_opts(&meta.location, options).await?;
        let e_tag = result.meta.e_tag.clone();
        Ok::<_, object_store::Error>((e_tag, result.bytes().await?))
    })?;
    let bytes = match bytes {
        Ok((e_tag, _)) if meta.e_tag.is_some() && e_tag != meta.e_tag => return Err(replaced()),
        Ok((_, bytes)) => bytes,
        Err(object_store::Error::Precondition { .. }) => return Err(replaced()),
        Err(e) => return Err(request_failed(&format!("cannot download {url}"), e)),
    };
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use batch_io::object_storage::TransientIo;
    use object_store::memory::InMemory;
    use object_store::path::Path as ObjectPath;

    use super::*;

    #[test]
    fn an_object_replaced_between_listing_and_download_is_never_cached_as_the_listed_version() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let key = ObjectPath::from("models/tiny/model.onnx");
        block_on(store.put(&key, b"version one".to_vec().into())).unwrap().unwrap();
        let listed = block_on(store.head(&key)).unwrap().unwrap();
        // The same size, so a length check alone would take it for the listed version.
        block_on(store.put(&key, b"version two".to_vec().into())).unwrap().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.onnx");
        let error = download(&store, &listed, "s3://models/tiny/model.onnx", &path).unwrap_err();
        assert!(format!("{error:#}").contains("was replaced while it was being downloaded"), "{error:#}");
        assert!(error.chain().any(|cause| cause.is::<TransientIo>()), "a rerun fetches the new version: exit 75");
        assert!(!path.exists());

        let current = block_on(store.head(&key)).unwrap().unwrap();
        download(&store, &current, "s3://models/tiny/model.onnx", &path).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"version two");
    }
}

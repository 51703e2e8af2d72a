//! Where a model package comes from: a local directory, a prefix in object storage
//! (downloaded once into a cache), or the default model compiled into the program.
//! `pipeline run`, `pipeline inspect` and the Python module open models the same way.

use std::path::Path;

use batch_io::atomic_file::TempDir;

use runtime::package::ModelPackage;

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
        None => {
            let (guard, package) = embedded::unpack()?;
            Ok((Some(guard), package))
        }
    }
}

/// Renames a package unpacked or downloaded into `staging` to the cache entry `entry`, and
/// opens it. Another process may have published the same entry meanwhile: theirs is as good.
fn publish_cache_entry(staging: TempDir, entry: &Path) -> anyhow::Result<ModelPackage> {
    if let Err(error) = staging.publish(entry) {
        return ModelPackage::open(entry).map_err(|_| error);
    }
    ModelPackage::open(entry)
}

//! The IMDB SAN package (trained from pre-trained word vectors) committed under
//! `fixtures/default-model`, compiled into the binary so that `--model` can be left out
//! wherever the binary runs.

use crate::package::{GRAPH_FILE, MANIFEST_FILE, ModelPackage, TOKENIZER_FILE};
use anyhow::Context;
use batch_io::atomic_file::{Registration, temp_dir_beside};

const FILES: [(&str, &[u8]); 3] = [
    (GRAPH_FILE, include_bytes!("../../../fixtures/default-model/model.onnx")),
    (TOKENIZER_FILE, include_bytes!("../../../fixtures/default-model/tokenizer.json")),
    (MANIFEST_FILE, include_bytes!("../../../fixtures/default-model/manifest.json")),
];

/// The unpacked package's directory, removed when dropped, and on a signal or a panic
/// (it is registered as a live temporary).
pub struct Unpacked {
    _registration: Registration,
    _dir: tempfile::TempDir,
}

/// Unpacks the embedded package into a temporary directory that lives as long as the guard.
pub fn unpack() -> anyhow::Result<(Unpacked, ModelPackage)> {
    let dir = tempfile::Builder::new().prefix("pipeline-default-model-").tempdir().context(
        "cannot unpack the default model: it needs one writable directory, the model cache \
             (PIPELINE_MODEL_CACHE, XDG_CACHE_HOME or ~/.cache; in a container with a read-only root, \
             mount a volume at /home/pipeline/.cache, as deploy/kubernetes-indexed-job.yaml does) \
             or the temporary directory (TMPDIR); or pass --model",
    )?;
    let registration = Registration::new(dir.path());
    for (name, bytes) in FILES {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes)
            .with_context(|| format!("cannot unpack the embedded model into {}", path.display()))?;
    }
    let package = ModelPackage::open(dir.path())?;
    Ok((Unpacked { _registration: registration, _dir: dir }, package))
}

/// The embedded package written once into the model cache (see [`super::remote::cache_dir`]) and
/// reused: no process, killed or not, leaves a 14 MB temporary copy behind. The entry is named by a digest of the
/// files, so a new build's model never reads an old one's, and is compared with them before
/// use: a damaged entry is written again. Where the cache cannot be written (a read-only home
/// directory, as in many containers), the package is unpacked into a temporary directory as
/// `pipeline` does, and the guard keeps it.
pub fn cached() -> anyhow::Result<(Option<Unpacked>, ModelPackage)> {
    match write_cache_entry() {
        Ok(package) => Ok((None, package)),
        Err(error) => {
            tracing::warn!(
                "the model cache cannot be used ({error:#}); unpacking the default model into a temporary directory"
            );
            let (guard, package) = unpack()?;
            Ok((Some(guard), package))
        }
    }
}

fn write_cache_entry() -> anyhow::Result<ModelPackage> {
    let entry = super::remote::cache_dir()?.join(entry_name());
    let intact = FILES.iter().all(|(name, bytes)| std::fs::read(entry.join(name)).is_ok_and(|found| found == *bytes));
    if intact {
        return ModelPackage::open(&entry);
    }
    super::remove_damaged_entry(&entry)?;
    let staging = temp_dir_beside(&entry)
        .with_context(|| format!("cannot make a directory for the embedded model in {}", entry.display()))?;
    for (name, bytes) in FILES {
        let path = staging.path().join(name);
        std::fs::write(&path, bytes)
            .with_context(|| format!("cannot unpack the embedded model into {}", path.display()))?;
    }
    super::publish_cache_entry(staging, &entry)
}

/// `embedded-<sha256 of the files>`, computed once per process (14 MB to hash).
fn entry_name() -> &'static str {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        use sha2::{Digest, Sha256};
        let mut digest = Sha256::new();
        for (name, bytes) in FILES {
            digest.update(name.as_bytes());
            digest.update(bytes.len().to_le_bytes());
            digest.update(bytes);
        }
        format!("embedded-{:x}", digest.finalize())
    })
}

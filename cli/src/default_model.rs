//! The IMDB SAN package (trained from pre-trained word vectors) committed under
//! `fixtures/default-model`, compiled into the binary so that `--model` can be left out
//! wherever the binary runs.

use anyhow::Context;
use batch_io::atomic_file::Registration;
use runtime::package::{GRAPH_FILE, MANIFEST_FILE, ModelPackage, TOKENIZER_FILE};

const FILES: [(&str, &[u8]); 3] = [
    (GRAPH_FILE, include_bytes!("../../fixtures/default-model/model.onnx")),
    (TOKENIZER_FILE, include_bytes!("../../fixtures/default-model/tokenizer.json")),
    (MANIFEST_FILE, include_bytes!("../../fixtures/default-model/manifest.json")),
];

/// The unpacked package's directory, removed when dropped, and on a signal or a panic
/// (it is registered as a live temporary).
pub struct Unpacked {
    _registration: Registration,
    _dir: tempfile::TempDir,
}

/// Unpacks the embedded package into a temporary directory that lives as long as the guard.
pub fn unpack() -> anyhow::Result<(Unpacked, ModelPackage)> {
    let dir = tempfile::Builder::new()
        .prefix("pipeline-default-model-")
        .tempdir()
        .context("cannot unpack the embedded model into the temporary directory (is TMPDIR writable?)")?;
    let registration = Registration::new(dir.path());
    for (name, bytes) in FILES {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes)
            .with_context(|| format!("cannot unpack the embedded model into {}", path.display()))?;
    }
    let package = ModelPackage::open(dir.path())?;
    Ok((Unpacked { _registration: registration, _dir: dir }, package))
}

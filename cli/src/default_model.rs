//! The IMDB SAN package (trained from pre-trained word vectors) committed under
//! `fixtures/default-model`, compiled into the binary so that `--model` can be left out
//! wherever the binary runs.

use pipeline::package::{GRAPH_FILE, MANIFEST_FILE, ModelPackage, TOKENIZER_FILE};

const FILES: [(&str, &[u8]); 3] = [
    (GRAPH_FILE, include_bytes!("../../fixtures/default-model/model.onnx")),
    (TOKENIZER_FILE, include_bytes!("../../fixtures/default-model/tokenizer.json")),
    (MANIFEST_FILE, include_bytes!("../../fixtures/default-model/manifest.json")),
];

/// Unpacks the embedded package into a temporary directory that lives as long as the guard.
pub fn unpack() -> anyhow::Result<(tempfile::TempDir, ModelPackage)> {
    let dir = tempfile::Builder::new().prefix("pipeline-default-model-").tempdir()?;
    for (name, bytes) in FILES {
        std::fs::write(dir.path().join(name), bytes)?;
    }
    let package = ModelPackage::open(dir.path())?;
    Ok((dir, package))
}

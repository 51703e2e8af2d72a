//! What the SQL library's tests query: a real `pipeline run` output.

use std::path::{Path, PathBuf};

use pipeline::job::{RunSpec, run_job};
use runtime::inference::BackendOptions;
use runtime::package::ModelPackage;
use test_support::repo_root;

/// `pipeline run` with the tiny model over the fixture reviews, written to `dir` (through the
/// pipeline library, so the table has the real output schema).
pub fn make_predictions(dir: &Path, with_embedding: bool) -> anyhow::Result<PathBuf> {
    let output = dir.join("predictions.parquet");
    let package = ModelPackage::open(&repo_root().join("fixtures/tiny-san"))?;
    let spec = RunSpec {
        output: output.display().to_string(),
        backend: BackendOptions::default(),
        batch_size: Some(32),
        chunk_rows: Some(128),
        attention: runtime::output::AttentionEncoding::Full,
        embedding: with_embedding,
        ..RunSpec::new(repo_root().join("fixtures/reviews.parquet").display().to_string())
    };
    run_job(&package, &spec)?;
    Ok(output)
}

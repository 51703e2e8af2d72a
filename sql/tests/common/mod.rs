//! What the SQL tests share: the repository root and a real `pipeline run` output to query.

use std::path::{Path, PathBuf};

use pipeline::job::{JobOptions, run_job};
use runtime::inference::BackendOptions;
use runtime::package::ModelPackage;
pub use test_support::repo_root;

/// `pipeline run` with the tiny model over the fixture reviews, written to `dir` (through the
/// pipeline library, so the table has the real output schema).
pub fn make_predictions(dir: &Path, with_embedding: bool) -> anyhow::Result<PathBuf> {
    let output = dir.join("predictions.parquet");
    let package = ModelPackage::open(&repo_root().join("fixtures/tiny-san"))?;
    let options = JobOptions {
        input: repo_root().join("fixtures/reviews.parquet").display().to_string(),
        output: output.display().to_string(),
        text_column: "text".into(),
        pass_through: None,
        backend: BackendOptions::default(),
        batch_size: 32,
        max_batch_tokens: None,
        window: 128,
        max_tokens: None,
        long_documents: runtime::long_documents::LongDocuments::default(),
        attention: runtime::output_table::AttentionOutput::Full,
        with_embedding,
        metrics_json: None,
        panic_after_first_window: false,
        null_model: false,
        cancel: None,
        shard: pipeline::units::Shard::WHOLE,
        rows_per_part: 2500,
        overwrite: false,
    };
    run_job(&package, &options)?;
    Ok(output)
}

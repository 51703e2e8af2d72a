//! How a run records itself in every output's schema metadata (`pipeline run`'s files and
//! the Python module's tables): which model, labels and options made it, so that the report
//! and SQL can tell runs apart.

use std::collections::HashMap;

use anyhow::Context;
use sha2::{Digest, Sha256};

use runtime::classifier::Classifier;
use runtime::output::columns::TOKEN_SPANS;
use runtime::output::encoding::Explanation;
use runtime::output::keys;
use runtime::output::{OutputTable, PushesTowards};
use runtime::package::{ModelCard, ModelPackage};

use super::spec::RunSpec;

/// The sha256 of the package's graph, as the metadata and a dataset's fingerprint record it.
pub fn model_sha256(package: &ModelPackage) -> anyhow::Result<String> {
    let graph = std::fs::read(package.graph_path())
        .with_context(|| format!("cannot read {}", package.graph_path().display()))?;
    Ok(format!("{:x}", Sha256::digest(&graph)))
}

/// The schema metadata of every output of `table`: which model, labels and options made it.
pub fn table_metadata(
    package: &ModelPackage,
    model_sha256: &str,
    classifier: &Classifier,
    spec: &RunSpec,
    table: &OutputTable,
) -> anyhow::Result<HashMap<String, String>> {
    let attention = spec.attention;
    let entries = [
        (keys::MODEL_VARIANT, package.manifest.variant.clone()),
        (keys::MODEL_SHA256, model_sha256.to_owned()),
        (keys::MODEL_LABELS, serde_json::to_string(&package.manifest.labels)?),
        (keys::MODEL_CARD, serde_json::to_string(&ModelCard::of(&package.manifest))?),
        (keys::MAX_TOKENS, classifier.max_tokens().to_string()),
        (keys::LONG_DOCUMENTS, classifier.long_documents().to_string()),
        (keys::VERSION, env!("CARGO_PKG_VERSION").to_owned()),
        (keys::BACKEND, classifier.backend().describe()),
        (keys::ATTENTION_ENCODING, attention.to_string()),
    ];
    let mut metadata: HashMap<String, String> =
        entries.into_iter().map(|(key, value)| (key.to_owned(), value)).collect();
    if table.has(&TOKEN_SPANS) {
        metadata.insert(keys::TOKEN_SPANS_TEXT.to_owned(), spec.text_column.clone());
    }
    if let Some(threshold) = spec.min_confidence {
        metadata.insert(keys::MIN_CONFIDENCE.to_owned(), threshold.to_string());
    }
    if classifier.optional_columns(false).contribution && attention.keeps(Explanation::Contribution) {
        let towards = PushesTowards::of_labels(&package.manifest.labels);
        metadata.insert(keys::CONTRIBUTION_TOWARDS.to_owned(), towards.metadata_value());
    }
    Ok(metadata)
}

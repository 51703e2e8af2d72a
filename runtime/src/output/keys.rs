//! The schema-metadata keys of an output table: written by `pipeline run` and the Python
//! module, read by the report, SQL tables and a resuming dataset. Keys under `model.` and
//! `pipeline.` belong to us: the Python module drops an input's own before adding these.

/// The package's variant (`san`, `han`, ...).
pub const MODEL_VARIANT: &str = "model.variant";
/// The model graph's sha256.
pub const MODEL_SHA256: &str = "model.sha256";
/// The model's labels, as a JSON list in probability order.
pub const MODEL_LABELS: &str = "model.labels";
/// The model's card ([`crate::package::ModelCard`]), as JSON.
pub const MODEL_CARD: &str = "model.card";
/// The token limit the run used.
pub const MAX_TOKENS: &str = "pipeline.max_tokens";
/// The `--long-documents` choice, as [`crate::long_documents::LongDocuments`] spells it.
pub const LONG_DOCUMENTS: &str = "pipeline.long_documents";
/// The version of the program that wrote the table.
pub const VERSION: &str = "pipeline.version";
/// The backend that ran the model (`tract`, `ort-cpu`, `ort-cuda`).
pub const BACKEND: &str = "pipeline.backend";
/// The `--attention` encoding, as [`super::AttentionEncoding`] spells it.
pub const ATTENTION_ENCODING: &str = "pipeline.attention";
/// The text column whose characters `token_spans` count (written only with that column).
pub const TOKEN_SPANS_TEXT: &str = "pipeline.token_spans_text";
/// `--min-confidence`: below it a row abstains (no `prediction`, `abstained` true). Absent
/// when the run did not abstain.
pub const MIN_CONFIDENCE: &str = "pipeline.min_confidence";
/// Which class the `contribution` pushes are towards ([`super::PushesTowards`]): `label:NAME`
/// (two classes: the second) or `prediction` (each row's).
pub const CONTRIBUTION_TOWARDS: &str = "pipeline.contribution_towards";
/// A dataset part: the run fingerprint, as JSON.
pub const RUN_FINGERPRINT: &str = "pipeline.run";
/// A dataset part: the input file it was read from, as JSON.
pub const PART_INPUT: &str = "pipeline.part_input";
/// A dataset part: the index of the unit of work it holds, so a part copied or renamed over a
/// sibling still says which rows it holds.
pub const PART_UNIT: &str = "pipeline.part_unit";
/// A dataset part with `--partition-by`: how many files (one per partition directory) its
/// unit wrote, so that a part whose publishing was cut short is known incomplete. Absent: 1.
pub const PART_FILES: &str = "pipeline.part_files";
/// `--partition-by`: the columns that left the files for their directory names
/// (`prediction=pos/`), with their types, as a JSON list of `[name, type]` pairs
/// (`[["prediction","Utf8"]]`), so that readers give them back typed.
pub const PARTITION_BY: &str = "pipeline.partition_by";

/// The partition columns and types [`PARTITION_BY`] records in `metadata`; none where it
/// records none, or a type this version cannot read (those columns are read as text).
pub fn recorded_partitions(
    metadata: &std::collections::HashMap<String, String>,
) -> Vec<(String, arrow::datatypes::DataType)> {
    let Some(pairs) = metadata.get(PARTITION_BY).and_then(|v| serde_json::from_str::<Vec<(String, String)>>(v).ok())
    else {
        return Vec::new();
    };
    pairs
        .into_iter()
        .map(|(name, type_name)| {
            let data_type = type_name.parse().unwrap_or(arrow::datatypes::DataType::Utf8);
            (name, data_type)
        })
        .collect()
}

/// Whether `key` is one of ours rather than an input's (a pandas schema, say).
pub fn is_ours(key: &str) -> bool {
    key.starts_with("model.") || key.starts_with("pipeline.")
}

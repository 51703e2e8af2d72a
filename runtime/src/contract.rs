//! The package contract, checked when a package is opened for inference, so that a package
//! whose parts do not belong together fails at once with the files named, never with a
//! panic or a quietly wrong table later:
//! - the graph's outputs against the manifest: one probability per label, as many attention
//!   rows as `attention_heads`, an embedding of `embedding_dim`. The graph's dimensions may
//!   be symbolic, so they are read from a one-token probe run;
//! - the tokenizer against the graph: every id it can produce (and the padding id) must be a
//!   row of the graph's embedding table;
//! - the manifest's labels, and the tokenizer's vocabulary digest, against those `pipeline train`
//!   recorded in the graph's metadata.

use std::collections::HashSet;
use std::path::Path;

use anyhow::{Context, bail};
use tokenizers::Tokenizer;
use tract_onnx::prelude::Framework;

use crate::inference::{InferenceBackend, ModelInputs, ModelOutputs};
use crate::package::{InputLayout, MANIFEST_FILE, ModelPackage, tensor};
use crate::text::{VOCABULARY_DIGEST_KEY, Vocabulary};

/// The optional columns a graph's outputs fill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GraphOutputs {
    /// `attention`: a flat model with an `attention` output, or a hierarchical one (word ×
    /// sentence weights).
    pub attention: bool,
    /// `contribution`: the graph has a `contribution` output `[batch, classes, seq]`.
    pub contribution: bool,
}

/// Runs a one-token document through `backend` and checks every output's shape against the
/// manifest.
pub fn check_graph_outputs(package: &ModelPackage, backend: &dyn InferenceBackend) -> anyhow::Result<GraphOutputs> {
    let graph = package.graph_path();
    let manifest_path = package.dir.join(MANIFEST_FILE);
    let manifest = &package.manifest;
    let names = backend.output_names();
    let has = |name: &str| names.iter().any(|n| n == name);
    if !has(tensor::PROBS) {
        bail!(
            "{} does not match the package contract: it has outputs {names:?}, but `probs` is required",
            graph.display()
        );
    }
    let hierarchical = manifest.input_layout == InputLayout::SentencesWords;
    if hierarchical {
        let missing: Vec<&str> =
            [tensor::WORD_ATTENTION, tensor::SENTENCE_ATTENTION].into_iter().filter(|n| !has(n)).collect();
        if !missing.is_empty() {
            bail!(
                "{} does not match the package contract: a hierarchical model needs outputs {}, it has {names:?}",
                graph.display(),
                missing.join(" and ")
            );
        }
    }
    let has_attention = has(tensor::ATTENTION);
    if !hierarchical && has_attention != manifest.attention_heads.is_some() {
        let graph_has = if has_attention { "has an `attention` output" } else { "has no `attention` output" };
        bail!(
            "{} does not match {}: the manifest says attention_heads = {:?} but the graph {graph_has}",
            graph.display(),
            manifest_path.display(),
            manifest.attention_heads,
        );
    }

    let pad = manifest.padding_id;
    let probe = match manifest.input_layout {
        InputLayout::Tokens => ModelInputs::right_padded(&[[pad]], pad),
        InputLayout::SentencesWords => ModelInputs::sentences_padded(&[(&[pad][..], &[1][..])], pad),
    };
    let outputs = backend
        .run(&probe)
        .with_context(|| format!("{} fails on a one-token document; is it a model package graph?", graph.display()))?;
    let shape = |name: &str| -> anyhow::Result<&[usize]> { Ok(outputs_get(&outputs, name, &graph)?.shape.as_slice()) };

    let probs = outputs_get(&outputs, tensor::PROBS, &graph)?;
    if probs.data.iter().any(|p| !p.is_finite()) {
        bail!("{} returns probabilities that are not finite (NaN); the model is broken, retrain it", graph.display());
    }
    match probs.shape.as_slice() {
        [1, classes] if *classes == manifest.labels.len() => {}
        [1, classes] => bail!(
            "{} outputs {classes} class probabilities, but {} lists {} labels ({}); the labels must name the \
             graph's `probs` columns in order",
            graph.display(),
            manifest_path.display(),
            manifest.labels.len(),
            manifest.labels.join(", ")
        ),
        other => bail!("{}: `probs` has shape {other:?} for one document, expected [1, classes]", graph.display()),
    }
    if has_attention && !hierarchical {
        match (shape(tensor::ATTENTION)?, manifest.attention_heads) {
            ([1, rows, 1], Some(heads)) if *rows == heads => {}
            ([1, rows, 1], Some(heads)) => bail!(
                "{} outputs {rows} attention rows (hops or heads), but {} says attention_heads = {heads}",
                graph.display(),
                manifest_path.display()
            ),
            (other, _) => bail!(
                "{}: `attention` has shape {other:?} for one one-token document, expected [1, heads, 1]",
                graph.display()
            ),
        }
    }
    if hierarchical {
        if manifest.attention_heads.is_some_and(|heads| heads != 1) {
            bail!(
                "{} says attention_heads = {:?}, but a hierarchical model has one attention row (words × sentences)",
                manifest_path.display(),
                manifest.attention_heads
            );
        }
        let words = shape(tensor::WORD_ATTENTION)?;
        let sentences = shape(tensor::SENTENCE_ATTENTION)?;
        if words != [1, 1, 1] || sentences != [1, 1] {
            bail!(
                "{}: for one one-word sentence `word_attention` has shape {words:?} (expected [1, 1, 1]) and \
                 `sentence_attention` {sentences:?} (expected [1, 1])",
                graph.display()
            );
        }
    }
    if has(tensor::EMBEDDING) {
        match shape(tensor::EMBEDDING)? {
            [1, dim] if *dim == manifest.embedding_dim => {}
            other => bail!(
                "{}: `embedding` has shape {other:?} for one document, but {} says embedding_dim = {}",
                graph.display(),
                manifest_path.display(),
                manifest.embedding_dim
            ),
        }
    }
    let has_contribution = has(tensor::CONTRIBUTION);
    if has_contribution && hierarchical {
        bail!(
            "{}: a hierarchical model's `contribution` output is not supported (its tokens are words of sentences); \
             export the graph without it",
            graph.display()
        );
    }
    if has_contribution {
        match shape(tensor::CONTRIBUTION)? {
            [1, classes, 1] if *classes == manifest.labels.len() => {}
            other => bail!(
                "{}: `contribution` has shape {other:?} for one one-token document, expected [1, {}, 1] (one row \
                 per label)",
                graph.display(),
                manifest.labels.len()
            ),
        }
    }
    Ok(GraphOutputs { attention: has_attention || hierarchical, contribution: has_contribution })
}

fn outputs_get<'a>(
    outputs: &'a ModelOutputs,
    name: &str,
    graph: &Path,
) -> anyhow::Result<&'a crate::inference::OutputTensor> {
    outputs.get(name).with_context(|| format!("{} returned no `{name}` output", graph.display()))
}

/// Checks the manifest's labels against the graph's metadata, and that every id `tokenizer`
/// can produce, and the manifest's padding id, index a row of the graph's embedding table.
/// A graph whose table or labels cannot be found (not written by `pipeline train`) is not checked.
pub fn check_labels_and_vocabulary(package: &ModelPackage, tokenizer: &Tokenizer) -> anyhow::Result<()> {
    let graph = package.graph_path();
    let model = tract_onnx::onnx()
        .proto_model_for_path(&graph)
        .with_context(|| format!("{} is not a readable ONNX graph", graph.display()))?;
    check_labels(package, &model)?;
    // The table check first: a tokenizer of another size is named as such.
    if let Some(rows) = embedding_rows(&model) {
        check_ids_index_the_table(package, tokenizer, rows)?;
    }
    check_vocabulary_digest(package, &model, tokenizer)
}

/// Every id `tokenizer` can produce, and the manifest's padding id, must be one of the
/// embedding table's `rows`.
fn check_ids_index_the_table(package: &ModelPackage, tokenizer: &Tokenizer, rows: usize) -> anyhow::Result<()> {
    let graph = package.graph_path();
    let largest_id = tokenizer.get_vocab(true).into_values().max().unwrap_or(0);
    if !usize::try_from(largest_id).is_ok_and(|id| id < rows) {
        bail!(
            "{} produces token ids up to {largest_id}, but the embedding table of {} has {rows} rows: the \
             tokenizer belongs to another model. Use the {} exported with this graph",
            package.tokenizer_path().display(),
            graph.display(),
            crate::package::TOKENIZER_FILE
        );
    }
    let pad = package.manifest.padding_id;
    if !usize::try_from(pad).is_ok_and(|id| id < rows) {
        bail!(
            "{} has padding_id {pad}, which is not a row of the embedding table of {} ({rows} rows)",
            package.dir.join(MANIFEST_FILE).display(),
            graph.display()
        );
    }
    Ok(())
}

/// Operators that move token ids around without changing them: an id tensor stays one
/// through them (HAN reshapes and gathers its ids before the embedding lookup).
const ID_PRESERVING: [&str; 9] =
    ["Reshape", "Gather", "Cast", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Slice", "Transpose"];

/// The labels `pipeline train` recorded in the graph's metadata (`labels`, a JSON list) must be the
/// manifest's, in the same order: manifest labels swapped by hand would invert every
/// prediction. A graph without that metadata (not written by `pipeline train`) is not checked.
fn check_labels(package: &ModelPackage, model: &tract_onnx::pb::ModelProto) -> anyhow::Result<()> {
    let Some(recorded) = model.metadata_props.iter().find(|p| p.key == "labels") else { return Ok(()) };
    let Ok(graph_labels) = serde_json::from_str::<Vec<String>>(&recorded.value) else { return Ok(()) };
    let manifest = &package.manifest;
    if graph_labels != manifest.labels {
        let same_set = {
            let (mut a, mut b) = (graph_labels.clone(), manifest.labels.clone());
            a.sort();
            b.sort();
            a == b
        };
        let hint = if same_set { " (the same labels in another order: every prediction would be swapped)" } else { "" };
        bail!(
            "{} lists the labels [{}], but {} was exported with the labels [{}]{hint}; the manifest's labels must \
             name the graph's `probs` columns in order: restore them as the graph records them",
            package.dir.join(MANIFEST_FILE).display(),
            manifest.labels.join(", "),
            package.graph_path().display(),
            graph_labels.join(", ")
        );
    }
    Ok(())
}

/// The tokenizer's vocabulary must be the one `pipeline train` recorded in the graph's metadata
/// ([`VOCABULARY_DIGEST_KEY`]): another package's tokenizer of the same size passes the
/// embedding-table check, yet maps most words to other rows and classifies garbage. Graphs
/// exported before the digest existed are not checked.
fn check_vocabulary_digest(
    package: &ModelPackage,
    model: &tract_onnx::pb::ModelProto,
    tokenizer: &Tokenizer,
) -> anyhow::Result<()> {
    let Some(recorded) = model.metadata_props.iter().find(|p| p.key == VOCABULARY_DIGEST_KEY) else { return Ok(()) };
    let found = Vocabulary::of(tokenizer).digest();
    if found != recorded.value {
        bail!(
            "{} is not the tokenizer {} was exported with: its vocabulary (sha256 {found}) differs from the one \
             recorded in the graph ({}), so words would be looked up in the wrong rows. Use the {} exported with \
             this graph",
            package.tokenizer_path().display(),
            package.graph_path().display(),
            recorded.value,
            crate::package::TOKENIZER_FILE
        );
    }
    Ok(())
}

/// Rows of the embedding table: the smallest first dimension of a 2-D initializer that a
/// `Gather` indexes with token ids. `None` when the graph has no such lookup.
fn embedding_rows(model: &tract_onnx::pb::ModelProto) -> Option<usize> {
    let graph_proto = model.graph.as_ref()?;
    let tables: std::collections::HashMap<&str, &[i64]> = graph_proto
        .initializer
        .iter()
        .filter(|t| t.dims.len() == 2)
        .map(|t| (t.name.as_str(), t.dims.as_slice()))
        .collect();
    let mut ids: HashSet<&str> = HashSet::from([tensor::INPUT_IDS]);
    let mut rows: Option<usize> = None;
    // ONNX nodes are stored in topological order.
    for node in &graph_proto.node {
        let (Some(data), indices) = (node.input.first(), node.input.get(1)) else { continue };
        let op = node.op_type.as_str();
        if op == "Gather"
            && indices.is_some_and(|i| ids.contains(i.as_str()))
            && let Some(dims) = tables.get(data.as_str())
            && let Some(&first) = dims.first()
        {
            let table_rows = usize::try_from(first).unwrap_or(0);
            rows = Some(rows.map_or(table_rows, |r| r.min(table_rows)));
            continue;
        }
        if ID_PRESERVING.contains(&op) && ids.contains(data.as_str()) {
            ids.extend(node.output.iter().map(String::as_str));
        }
    }
    rows
}

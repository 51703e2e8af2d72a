//! Golden graphs: every variant, built from a fixed seed and emitted to ONNX, must give the
//! same outputs on a fixed padded batch, and be made of the same ops, as the graphs recorded
//! in `fixtures/golden-graphs/` (written by the emission code before it was last reworked).
//! This guards changes to how graphs are emitted, not what the models compute: those are the
//! parity tests.
//!
//! `GOLDEN_GRAPHS=write cargo test --release --workspace --test it golden_graphs` records them
//! anew; do that only for a change that means to alter the graphs, and say so in its commit.

use std::collections::BTreeMap;
use std::path::PathBuf;

use burn::prelude::*;
use clap::ValueEnum;
use runtime::inference::{InferenceBackend, ModelInputs, TractBackend};
use serde::{Deserialize, Serialize};
use test_support::repo_root;
use tract_onnx::pb::ModelProto;
use training::layers::embedding::InitialWords;
use training::models::PooledValues;
use training::models::{ModelConfig, ModelFlags, Network, Variant, VariantVisitor};
use training::onnx::GraphBuilder;

const VOCAB: usize = 40;
const CLASSES: usize = 3;
/// Outputs may move by float rounding when ops are emitted in a different but equal form.
const TOLERANCE: f32 = 1e-5;

/// What is recorded of one variant's graph.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Golden {
    /// How many nodes of each op type the graph has.
    ops: BTreeMap<String, usize>,
    inputs: Vec<String>,
    /// Each output's name, shape and values on [`inputs`].
    outputs: Vec<(String, Vec<usize>, Vec<f32>)>,
}

fn golden_path(variant: Variant) -> PathBuf {
    repo_root().join("fixtures/golden-graphs").join(format!("{}.json", variant.name()))
}

fn flags() -> ModelFlags {
    ModelFlags {
        embedding_dim: Some(6),
        buckets: Some(64),
        ngrams: 2,
        feature_weights: training::models::ngram::FeatureWeights::None,
        members: Some(1),
        encoder: training::models::Encoder::Bilstm,
        conv_width: 3,
        lstm_hidden: 4,
        gru_hidden: 4,
        attention_dim: 5,
        hops: 2,
        heads: 2,
        attention_scale: training::models::lama::AttentionScale::None,
        averaging_dim: 3,
        layers: 2,
        feed_forward_dim: 8,
        sentence_words: 4,
        filters: 3,
        kernel_widths: vec![2, 3],
        mlp_hidden: 7,
        dropout: Some(0.1),
        penalty: Some(1.0),
        pooled_values: Some(PooledValues::States),
    }
}

/// Three documents of 9, 1 and 5 tokens (ids 2.. so that none is padding), right-padded; or,
/// for hierarchical variants, cut into sentences of at most `sentence_words`.
fn batch(sentence_words: Option<usize>) -> ModelInputs {
    let documents: Vec<Vec<i64>> = [9usize, 1, 5]
        .iter()
        .enumerate()
        .map(|(d, &len)| (0..len).map(|t| 2 + ((d * 7 + t * 3) % (VOCAB - 2)) as i64).collect())
        .collect();
    match sentence_words {
        None => ModelInputs::right_padded(&documents, 0),
        Some(words) => {
            let lengths: Vec<Vec<usize>> =
                documents.iter().map(|ids| ids.chunks(words).map(<[i64]>::len).collect()).collect();
            let views: Vec<(&[i64], &[usize])> =
                documents.iter().zip(&lengths).map(|(ids, l)| (ids.as_slice(), l.as_slice())).collect();
            ModelInputs::sentences_padded(&views, 0)
        }
    }
}

/// Builds the variant from a fixed seed, emits its graph and runs it with tract.
struct Record;

impl VariantVisitor for Record {
    type Output = Golden;

    fn visit<C: ModelConfig>(self, variant: Variant) -> Golden {
        let _seeded = crate::burn_random_generator();
        let device = Device::flex().autodiff();
        device.seed(11);
        let config = C::from(&flags());
        config.validate().expect("valid tiny flags");
        let model = config.init(&InitialWords::random(VOCAB), CLASSES, &device);
        let mut g = GraphBuilder::new(variant.name());
        model.emit(&mut g);
        let proto: ModelProto = g.into_model(&[]);
        let graph = proto.graph.as_ref().expect("a graph");
        check_names(variant, graph);
        let mut ops = BTreeMap::new();
        for node in &graph.node {
            *ops.entry(node.op_type.clone()).or_insert(0) += 1;
        }
        let inputs = graph.input.iter().map(|i| i.name.clone()).collect();

        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("model.onnx");
        std::fs::write(&path, prost::Message::encode_to_vec(&proto)).expect("write graph");
        let tract = TractBackend::open(&path).expect("tract opens the graph");
        let results = tract.run(&batch(config.sentence_words())).expect("tract runs the graph");
        let outputs = tract
            .output_names()
            .iter()
            .map(|name| (name.clone(), results[name].shape.clone(), results[name].data.clone()))
            .collect();
        Golden { ops, inputs, outputs }
    }
}

/// Node names say which layer a node comes from (`san.attention.softmax`), and are unique.
fn check_names(variant: Variant, graph: &tract_onnx::pb::GraphProto) {
    let prefix = format!("{}.", variant.name());
    let mut seen = std::collections::HashSet::new();
    for node in &graph.node {
        assert!(seen.insert(node.name.as_str()), "{}: node name {} repeats", variant.name(), node.name);
        let is_output = node.op_type == "Identity" && node.name.ends_with("_out");
        assert!(is_output || node.name.starts_with(&prefix), "{}: node {} is not scoped", variant.name(), node.name);
    }
    if variant == Variant::San {
        for name in ["san.attention.softmax", "san.bilstm.forward.lstm", "san.head.output.matmul"] {
            assert!(seen.contains(name), "san: no node {name}");
        }
    }
}

#[test]
fn every_variant_emits_the_recorded_graph() {
    let write = std::env::var("GOLDEN_GRAPHS").is_ok_and(|v| v == "write");
    for &variant in Variant::value_variants() {
        let actual = variant.visit(Record);
        let path = golden_path(variant);
        if write {
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("golden dir");
            std::fs::write(&path, serde_json::to_string_pretty(&actual).expect("json") + "\n").expect("write golden");
            println!("recorded {}", path.display());
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}; record it with GOLDEN_GRAPHS=write", path.display()));
        let expected: Golden = serde_json::from_str(&text).expect("golden json");
        let name = variant.name();
        assert_eq!(actual.ops, expected.ops, "{name}: the graph's ops changed");
        assert_eq!(actual.inputs, expected.inputs, "{name}: the graph's inputs changed");
        assert_eq!(actual.outputs.len(), expected.outputs.len(), "{name}: the graph's outputs changed");
        for ((a_name, a_shape, a_values), (e_name, e_shape, e_values)) in actual.outputs.iter().zip(&expected.outputs) {
            assert_eq!((a_name, a_shape), (e_name, e_shape), "{name}: output {e_name} changed");
            let worst = a_values.iter().zip(e_values).map(|(a, e)| (a - e).abs()).fold(0.0f32, f32::max);
            assert!(worst <= TOLERANCE, "{name}: output {e_name} moved by {worst}");
            println!("{name}: {e_name} {e_shape:?} max |Δ| = {worst:.1e}");
        }
    }
    assert!(!write, "golden graphs recorded; run again without GOLDEN_GRAPHS=write to check them");
}

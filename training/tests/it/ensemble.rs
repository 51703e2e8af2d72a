//! `pipeline combine`'s package: the tiny `ngram` and `san` of the parity tests (same corpus,
//! seed and vocabulary) joined into one graph, checked against its members run alone, on tract
//! and ONNX Runtime, and batch against single rows.

use std::sync::OnceLock;

use runtime::inference::{InferenceBackend, ModelOutputs, TractBackend};
use runtime::package::ModelPackage;
use test_support::repo_root;
use training::data::corpus::Columns;
use training::ensemble::{CombineRequest, combine};

use crate::parity::{check_alone_equals_batch, max_abs_diff, mixed_length_batch, ngram, ort_backend, san};

const TOLERANCE: f32 = 1e-4;

struct Combined {
    _dir: tempfile::TempDir,
    package: ModelPackage,
    weights: Vec<f32>,
}

fn request(members: Vec<std::path::PathBuf>, out: std::path::PathBuf) -> CombineRequest {
    CombineRequest {
        members,
        train: repo_root().join("fixtures/imdb-train-600.parquet"),
        valid: None,
        columns: Columns { text: "text".into(), label: "label".into() },
        // As the parity tests trained them.
        valid_fraction: 0.2,
        out,
        force: false,
    }
}

/// The tiny ngram and SAN combined, once for every test in this file.
fn combined() -> &'static Combined {
    static CELL: OnceLock<Combined> = OnceLock::new();
    CELL.get_or_init(|| {
        let members = vec![ngram::model().package.dir.clone(), san::model().package.dir.clone()];
        let dir = tempfile::tempdir().expect("temporary directory");
        let report = combine(&request(members, dir.path().join("ensemble"))).expect("combining two tiny models");
        let package = ModelPackage::open(&report.package).expect("the ensemble's package opens");
        let weights = package.manifest.hyper_parameters["members"]
            .as_array()
            .expect("members listed")
            .iter()
            .map(|m| m["weight"].as_f64().expect("a weight") as f32)
            .collect();
        Combined { _dir: dir, package, weights }
    })
}

fn run(package: &ModelPackage, inputs: &runtime::inference::ModelInputs) -> ModelOutputs {
    TractBackend::open(&package.graph_path()).expect("tract opens the graph").run(inputs).expect("tract run")
}

#[test]
fn the_ensemble_gives_the_weighted_sum_of_its_members() {
    let ensemble = combined();
    let manifest = &ensemble.package.manifest;
    assert_eq!(manifest.variant, "ensemble");
    assert_eq!(manifest.training.members, 2);
    assert!(ensemble.weights.iter().all(|&w| w >= 0.0) && ensemble.weights.iter().any(|&w| w > 0.0));
    println!("weights {:?}", ensemble.weights);
    let (ngram, san) = (&ngram::model().package, &san::model().package);
    assert_eq!(manifest.attention_heads, san.manifest.attention_heads, "the ngram has no attention rows");
    assert_eq!(manifest.embedding_dim, ngram.manifest.embedding_dim + san.manifest.embedding_dim);

    let (inputs, _) = mixed_length_batch(&ensemble.package);
    let together = run(&ensemble.package, &inputs);
    let alone = [run(ngram, &inputs), run(san, &inputs)];
    let classes = manifest.labels.len();
    let (batch, seq) = (inputs.shape[0], inputs.shape[1]);

    // probs = softmax(Σ wₘ ln pₘ): the members' logits up to a constant a softmax ignores.
    let mut expected = Vec::with_capacity(batch * classes);
    for row in 0..batch {
        let mut scores: Vec<f32> = (0..classes)
            .map(|c| {
                let member = |m: usize| alone[m]["probs"].data[row * classes + c].ln();
                ensemble.weights[0] * member(0) + ensemble.weights[1] * member(1)
            })
            .collect();
        let max = scores.iter().copied().fold(f32::MIN, f32::max);
        scores.iter_mut().for_each(|s| *s = (*s - max).exp());
        let total: f32 = scores.iter().sum();
        expected.extend(scores.iter().map(|s| s / total));
    }
    let probs_diff = max_abs_diff(&expected, &together["probs"].data);
    println!("max |Δprobs| against the members' weighted sum = {probs_diff:.2e}");
    assert!(probs_diff <= TOLERANCE, "probs differ from the members' weighted sum by {probs_diff}");

    // Each token's push is the weighted sum of its pushes in the members: exact, as theirs are.
    let pushes: Vec<f32> = (0..batch * classes * seq)
        .map(|i| {
            ensemble.weights[0] * alone[0]["contribution"].data[i]
                + ensemble.weights[1] * alone[1]["contribution"].data[i]
        })
        .collect();
    let largest = pushes.iter().fold(0.0f32, |m, c| m.max(c.abs()));
    let pushes_diff = max_abs_diff(&pushes, &together["contribution"].data);
    assert!(largest > 1e-3, "the pushes are all about zero; the comparison is too weak");
    assert!(pushes_diff <= TOLERANCE * largest.max(1.0), "contribution differs by {pushes_diff}");

    // The SAN's hops are the ensemble's attention rows; the embeddings sit side by side.
    assert_eq!(together["attention"].data, alone[1]["attention"].data);
    let width = [&alone[0], &alone[1]].map(|a| a["embedding"].shape[1]);
    for row in 0..batch {
        let joined = together["embedding"].row(row).expect("row");
        assert_eq!(joined[..width[0]], *alone[0]["embedding"].row(row).expect("row"));
        assert_eq!(joined[width[0]..], *alone[1]["embedding"].row(row).expect("row"));
    }
}

#[test]
fn the_ensemble_runs_alike_on_tract_and_onnx_runtime() {
    let package = &combined().package;
    let (inputs, sequences) = mixed_length_batch(package);
    let tract = run(package, &inputs);
    let ort = ort_backend(&package.graph_path()).run(&inputs).expect("onnxruntime run");
    for output in ["probs", "contribution", "attention", "embedding"] {
        let diff = max_abs_diff(&tract[output].data, &ort[output].data);
        let largest = tract[output].data.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        println!("{output}: max |tract − onnxruntime| = {diff:.2e}");
        assert!(diff <= TOLERANCE * largest.max(1.0), "{output} differs between tract and ONNX Runtime by {diff}");
    }
    check_alone_equals_batch(&TractBackend::open(&package.graph_path()).expect("tract"), &inputs, &sequences);
    check_alone_equals_batch(&ort_backend(&package.graph_path()), &inputs, &sequences);
}

#[test]
fn members_whose_validation_split_is_not_rebuilt_are_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir.path().join("ensemble");
    let members = vec![ngram::model().package.dir.clone(), san::model().package.dir.clone()];
    // The members held out a fifth: a split of 0.3 would score them on documents they learned.
    let error = match combine(&CombineRequest { valid_fraction: 0.3, ..request(members, out.clone()) }) {
        Ok(_) => panic!("an ensemble was fitted on another split than its members held out"),
        Err(error) => format!("{error:#}"),
    };
    assert!(error.contains("--valid-fraction"), "the error should say what to pass: {error}");
    assert!(error.contains(&ngram::model().package.dir.display().to_string()), "the error names the member: {error}");
    assert!(!out.exists(), "a refused ensemble left {} behind", out.display());
    assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 0, "staging left behind");
}

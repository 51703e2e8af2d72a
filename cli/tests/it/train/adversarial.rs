//! `pipeline train --adversarial / --virtual-adversarial [--unlabelled]` as a user runs them:
//! SAN trains on perturbed embeddings and records how, with unlabelled documents for the
//! virtual adversary; what cannot work is refused before any data is read, with nothing written.

use super::*;

fn manifest(package: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(package.join("manifest.json")).expect("manifest"))
        .expect("manifest JSON")
}

#[test]
fn san_trains_on_perturbed_embeddings_and_unlabelled_documents() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let corpus = fixture("imdb-train-600.parquet");
    let reviews = fixture("reviews.parquet").display().to_string();
    let model = dir.path().join("model");
    let trained =
        train(&corpus, &model, &["--adversarial", "0.3", "--virtual-adversarial", "0.2", "--unlabelled", &reviews]);
    assert!(trained.status.success(), "{}", stderr(&trained));
    let written = manifest(&model);
    let training = &written["hyper_parameters"]["training"];
    assert_eq!(training["adversarial"], 0.3, "{training}");
    assert_eq!(training["virtual_adversarial"], 0.2, "{training}");
    assert_eq!(written["hyper_parameters"]["unlabelled"]["rows"], 300, "{written}");
    assert!(stderr(&trained).contains("300 unlabelled documents"), "{}", stderr(&trained));

    // The package runs like any other.
    let output = dir.path().join("out.parquet");
    let run = pipeline()
        .args(["run", "--input"])
        .arg(&reviews)
        .arg("--output")
        .arg(&output)
        .arg("--model")
        .arg(&model)
        .output()
        .expect("run pipeline");
    assert!(run.status.success(), "{}", stderr(&run));

    // A plain model of the same settings records neither.
    let plain = dir.path().join("plain");
    assert!(train(&corpus, &plain, &[]).status.success());
    let training = &manifest(&plain)["hyper_parameters"]["training"];
    assert!(training.get("adversarial").is_none() && training.get("virtual_adversarial").is_none(), "{training}");
}

#[test]
fn what_cannot_train_on_perturbed_embeddings_is_refused_up_front() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let corpus = fixture("imdb-train-600.parquet");
    let out = dir.path().join("model");
    let reviews = fixture("reviews.parquet").display().to_string();
    let cnn = pipeline()
        .args(["train", "--variant", "cnn", "--train"])
        .arg(&corpus)
        .arg("--out")
        .arg(&out)
        .args(["--adversarial", "0.3"])
        .output()
        .expect("run pipeline");
    assert!(!cnn.status.success() && stderr(&cnn).contains("--variant san only"), "{}", stderr(&cnn));
    for (flags, expected) in [
        (vec!["--adversarial", "0"], "--adversarial must be a positive number"),
        (vec!["--virtual-adversarial", "NaN"], "--virtual-adversarial must be a positive number"),
        (vec!["--unlabelled", reviews.as_str()], "--unlabelled needs a --teacher"),
        (vec!["--adversarial", "0.3", "--unlabelled", reviews.as_str()], "--unlabelled needs a --teacher"),
    ] {
        let refused = train(&corpus, &out, &flags);
        assert!(!refused.status.success() && stderr(&refused).contains(expected), "{flags:?}: {}", stderr(&refused));
    }
    let corpus_text = corpus.display().to_string();
    let itself = train(&corpus, &out, &["--virtual-adversarial", "0.3", "--unlabelled", &corpus_text]);
    assert!(!itself.status.success() && stderr(&itself).contains("is also a labelled corpus"), "{}", stderr(&itself));
    assert_nothing_written(dir.path(), &[]);
}

//! `pipeline combine` as a user runs it: two packages trained on one corpus joined into one
//! that `pipeline run` reads like any other, and members that cannot be joined refused by name
//! with nothing written.

use super::*;
use crate::common;

/// A tiny fast-tier model with the tiny SAN's corpus settings (token limit, vocabulary).
fn train_ngram(corpus: &Path, out: &Path) -> Output {
    pipeline()
        .args(["train", "--variant", "ngram", "--train"])
        .arg(corpus)
        .arg("--out")
        .arg(out)
        .args(["--members", "1", "--buckets", "2000", "--epochs", "2", "--max-tokens", "64", "--min-count", "1"])
        .output()
        .expect("run pipeline")
}

fn combine(members: &[&Path], out: &Path, extra: &[&str]) -> Output {
    let members: Vec<String> = members.iter().map(|m| m.display().to_string()).collect();
    pipeline()
        .args(["combine", "--members", &members.join(","), "--train"])
        .arg(fixture("imdb-train-600.parquet"))
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .expect("run pipeline")
}

#[test]
fn two_packages_combine_into_one_that_runs_and_explains() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let corpus = fixture("imdb-train-600.parquet");
    let (san, ngram, ensemble) = (dir.path().join("san"), dir.path().join("ngram"), dir.path().join("ensemble"));
    let trained = train(&corpus, &san, &[]);
    assert!(trained.status.success(), "{}", stderr(&trained));
    let trained = train_ngram(&corpus, &ngram);
    assert!(trained.status.success(), "{}", stderr(&trained));

    let combined = combine(&[&ngram, &san], &ensemble, &[]);
    assert!(combined.status.success(), "{}", stderr(&combined));
    let report = String::from_utf8_lossy(&combined.stdout);
    for row in ["ngram", "equal weights", "ensemble", "expected calibration error"] {
        assert!(report.contains(row), "the report lacks {row:?}:\n{report}");
    }
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(ensemble.join("manifest.json")).expect("manifest"))
            .expect("manifest JSON");
    assert_eq!(manifest["variant"], "ensemble");
    assert_eq!(manifest["max_tokens"], 64);
    assert_eq!(manifest["hyper_parameters"]["members"].as_array().map(Vec::len), Some(2));

    let output = dir.path().join("predictions.parquet");
    let ran =
        common::pipeline(&["run"], &[("--input", &common::reviews()), ("--model", &ensemble), ("--output", &output)]);
    assert!(ran.status.success(), "{}", common::stderr(&ran));
    let batch = common::read(&output);
    assert_eq!(batch.num_rows(), 300);
    for column in ["prediction", "probabilities", "attention_summary", "contribution"] {
        assert!(batch.column_by_name(column).is_some(), "the ensemble's output lacks {column}");
    }
    let inspected = common::pipeline(&["inspect", &ensemble.display().to_string()], &[]);
    assert!(inspected.status.success(), "{}", common::stderr(&inspected));
    let card = String::from_utf8_lossy(&inspected.stdout);
    assert!(card.contains("variant:     ensemble") && card.contains("the weighted sum of 2 packages: ngram"), "{card}");
}

#[test]
fn members_trained_with_other_seeds_are_refused_by_name_and_nothing_is_written() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let corpus = fixture("imdb-train-600.parquet");
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));
    let trained = train(&corpus, &first, &[]);
    assert!(trained.status.success(), "{}", stderr(&trained));
    let trained = train(&corpus, &second, &["--seed", "8"]);
    assert!(trained.status.success(), "{}", stderr(&trained));

    let combined = combine(&[&first, &second], &dir.path().join("ensemble"), &[]);
    assert_eq!(combined.status.code(), Some(1), "{}", stderr(&combined));
    let message = stderr(&combined);
    assert!(message.contains("--seed 8") && message.contains("second"), "{message}");
    assert_nothing_written(dir.path(), &["first", "second"]);

    let alone = combine(&[&first], &dir.path().join("ensemble"), &[]);
    assert!(!alone.status.success(), "one member was combined");
    assert!(stderr(&alone).contains("at least two"), "{}", stderr(&alone));
    assert_nothing_written(dir.path(), &["first", "second"]);
}

#[test]
fn an_ensemble_teaches_a_single_model_on_unlabelled_documents() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let corpus = fixture("imdb-train-600.parquet");
    let (san, ngram, ensemble) = (dir.path().join("san"), dir.path().join("ngram"), dir.path().join("ensemble"));
    for trained in [train(&corpus, &san, &[]), train_ngram(&corpus, &ngram)] {
        assert!(trained.status.success(), "{}", stderr(&trained));
    }
    let combined = combine(&[&ngram, &san], &ensemble, &[]);
    assert!(combined.status.success(), "{}", stderr(&combined));

    let student = dir.path().join("student");
    let reviews = fixture("reviews.parquet");
    let teacher = ensemble.display().to_string();
    let taught = train(&corpus, &student, &["--teacher", &teacher, "--unlabelled", &reviews.display().to_string()]);
    assert!(taught.status.success(), "{}", stderr(&taught));
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(student.join("manifest.json")).expect("manifest"))
            .expect("manifest JSON");
    let distilled = &manifest["hyper_parameters"]["distilled"];
    assert_eq!(distilled["teacher_variant"], "ensemble", "{distilled}");
    assert_eq!(distilled["unlabelled_rows"], 300, "{distilled}");
    assert!(stderr(&taught).contains("300 unlabelled documents"), "{}", stderr(&taught));

    // The training file as unlabelled documents, and a teacher of another vocabulary.
    let refused = dir.path().join("refused");
    let again = train(&corpus, &refused, &["--teacher", &teacher, "--unlabelled", &corpus.display().to_string()]);
    assert!(!again.status.success() && stderr(&again).contains("is also a labelled corpus"), "{}", stderr(&again));
    let other = fixture("tiny-san").display().to_string();
    let foreign = train(&corpus, &refused, &["--teacher", &other]);
    assert!(
        !foreign.status.success() && stderr(&foreign).contains("vocabulary is not the one built here"),
        "{}",
        stderr(&foreign)
    );
    assert_nothing_written(dir.path(), &["san", "ngram", "ensemble", "student"]);
}

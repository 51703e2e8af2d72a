//! Where a package is written: never over an existing one without `--force`, never over a
//! training input, and logs that survive a closed stderr.

use super::*;

#[test]
fn existing_output_is_refused_without_force() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("model");
    std::fs::create_dir(&out).expect("mkdir");
    std::fs::write(out.join("keep.txt"), "mine").expect("write");
    let output = train(&fixture("imdb-train-600.parquet"), &out, &[]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("already exists") && stderr(&output).contains("--force"), "{}", stderr(&output));
    assert_eq!(std::fs::read_to_string(out.join("keep.txt")).expect("untouched"), "mine");

    // --force replaces model packages only, not a folder of someone's files.
    let output = train(&fixture("imdb-train-600.parquet"), &out, &["--force"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("holds more than a model package (keep.txt)"), "{}", stderr(&output));
    assert_eq!(std::fs::read_to_string(out.join("keep.txt")).expect("untouched"), "mine");

    // A manifest.json (valid or not) does not make a folder a package: this deleted
    // everything beside it before.
    std::fs::write(out.join("manifest.json"), "not json").expect("write");
    std::fs::write(out.join("NOTES.md"), "notes").expect("write");
    std::fs::create_dir(out.join("results")).expect("mkdir");
    let output = train(&fixture("imdb-train-600.parquet"), &out, &["--force"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("(NOTES.md, keep.txt, results)"), "{}", stderr(&output));
    for kept in ["keep.txt", "NOTES.md", "manifest.json"] {
        assert!(out.join(kept).is_file(), "{kept} was deleted");
    }
    // Only the package's own files, but not a valid package: refused too.
    for extra in ["keep.txt", "NOTES.md"] {
        std::fs::remove_file(out.join(extra)).expect("rm");
    }
    std::fs::remove_dir(out.join("results")).expect("rm");
    let output = train(&fixture("imdb-train-600.parquet"), &out, &["--force"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("is not one") && stderr(&output).contains("manifest.json"), "{}", stderr(&output));
    assert_eq!(std::fs::read_to_string(out.join("manifest.json")).expect("untouched"), "not json");
}

#[test]
fn outputs_that_are_inputs_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let corpus = dir.path().join("corpus.parquet");
    std::fs::copy(fixture("reviews.parquet"), &corpus).expect("copy");
    let before = std::fs::read(&corpus).expect("read");
    let output = pipeline()
        .args(["vectors", "--force", "--corpus"])
        .arg(&corpus)
        .arg("--out")
        .arg(&corpus)
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("is also an input"), "{}", stderr(&output));
    let eval = pipeline()
        .args(["eval", "--model"])
        .arg(fixture("tiny-san"))
        .arg("--data")
        .arg(&corpus)
        .arg("--metrics-json")
        .arg(&corpus)
        .output()
        .expect("run eval");
    assert_eq!(eval.status.code(), Some(1), "{}", stderr(&eval));
    assert_eq!(std::fs::read(&corpus).expect("read"), before, "the corpus is untouched");
    assert_nothing_written(dir.path(), &["corpus.parquet"]);
}

#[test]
fn an_out_that_cannot_be_written_is_refused_before_training() {
    let dir = tempfile::tempdir().expect("tempdir");
    let corpus = dir.path().join("small.parquet");
    write_parquet(&corpus, vec![("text", strings(&reviews(40))), ("label", strings(&labels(40)))]);
    // sysfs cannot be written, not even by root (a read-only directory can be, by root).
    let read_only = Path::new("/sys/kernel/attention-classifier-test/model");
    if std::fs::create_dir_all("/sys/kernel/attention-classifier-test").is_ok() {
        panic!("/sys is writable here; this test needs a directory nobody may write");
    }
    let output = train(&corpus, read_only, &[]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(err.contains("--out /sys/kernel/attention-classifier-test/model cannot be written"), "{err}");
    assert!(!err.contains("epoch"), "refused before the first epoch: {err}");
}

#[test]
fn logs_can_be_json_and_a_closed_stderr_does_not_stop_training() {
    let output = pipeline().args(["--log-format", "json", "train", "--bogus"]).output().expect("run pipeline");
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(err.lines().all(|line| serde_json::from_str::<serde_json::Value>(line).is_ok()), "{err}");
    assert!(err.contains("--bogus"), "{err}");

    let dir = tempfile::tempdir().expect("tempdir");
    let corpus = dir.path().join("small.parquet");
    write_parquet(&corpus, vec![("text", strings(&reviews(40))), ("label", strings(&labels(40)))]);
    let out = dir.path().join("model");
    let output = pipeline()
        .args(["--log-format", "json", "train", "--variant", "san", "--train"])
        .arg(&corpus)
        .arg("--out")
        .arg(&out)
        .args(TINY_MODEL)
        .output()
        .expect("run pipeline");
    assert!(output.status.success(), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.lines().all(|line| serde_json::from_str::<serde_json::Value>(line).is_ok()), "{err}");
    std::fs::remove_dir_all(&out).expect("clean");

    // As `pipeline train … 2>&1 | head -1`: the reader of stderr is gone from the start.
    let mut child = pipeline()
        .args(["train", "--variant", "san", "--train"])
        .arg(&corpus)
        .arg("--out")
        .arg(&out)
        .args(TINY_MODEL)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn pipeline");
    drop(child.stderr.take());
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(0));
    runtime::package::ModelPackage::open(&out).expect("a complete package");
    assert_nothing_written(dir.path(), &["small.parquet", "model"]);
}

#[test]
fn force_never_replaces_a_training_input_or_a_package_with_a_broken_tokenizer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("model");
    let corpus = fixture("imdb-train-600.parquet");
    let output = train(&corpus, &out, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let tokenizer = out.join("tokenizer.json");

    // An input inside the package that --force would replace is refused before training.
    let output = train(&corpus, &out, &["--force", "--valid", tokenizer.to_str().expect("utf-8")]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("is inside --out"), "{}", stderr(&output));

    // A package whose tokenizer is not a tokenizer is not a package to replace.
    std::fs::write(&tokenizer, "my notes").expect("write");
    let output = train(&corpus, &out, &["--force"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("tokenizer.json") && stderr(&output).contains("is not one"),
        "{}",
        stderr(&output)
    );
    assert_eq!(std::fs::read_to_string(&tokenizer).expect("untouched"), "my notes");
}

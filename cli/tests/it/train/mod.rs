//! `pipeline train` / `pipeline eval` / `pipeline vectors` as a user runs them: bad input gets
//! a clear error, a non-zero exit, and leaves no package (complete or partial) behind.

mod adversarial;
mod combine;
mod corpus_fit;
mod multi_label;
mod outputs;
mod refusals;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{Field, Schema};
use parquet::arrow::ArrowWriter;

const TINY_MODEL: [&str; 16] = [
    "--embedding-dim",
    "8",
    "--lstm-hidden",
    "4",
    "--attention-dim",
    "4",
    "--hops",
    "2",
    "--mlp-hidden",
    "8",
    "--epochs",
    "1",
    "--max-tokens",
    "64",
    "--min-count",
    "1",
];

fn pipeline() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pipeline"))
}

fn fixture(name: &str) -> PathBuf {
    test_support::repo_root().join("fixtures").join(name)
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn train(corpus: &Path, out: &Path, extra: &[&str]) -> Output {
    pipeline()
        .args(["train", "--variant", "san", "--train"])
        .arg(corpus)
        .arg("--out")
        .arg(out)
        .args(TINY_MODEL)
        .args(extra)
        .output()
        .expect("run pipeline")
}

/// The directory holds nothing but the inputs the test wrote (no package, no staging dir).
fn assert_nothing_written(dir: &Path, inputs: &[&str]) {
    let left: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|name| !inputs.contains(&name.as_str()))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

fn write_parquet(path: &Path, columns: Vec<(&str, ArrayRef)>) {
    let fields: Vec<Field> = columns.iter().map(|(n, a)| Field::new(*n, a.data_type().clone(), true)).collect();
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns.into_iter().map(|(_, a)| a).collect())
        .expect("record batch");
    let mut writer =
        ArrowWriter::try_new(std::fs::File::create(path).expect("create"), batch.schema(), None).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
}

fn strings(values: &[Option<&str>]) -> ArrayRef {
    Arc::new(StringArray::from(values.to_vec()))
}

fn reviews(n: usize) -> Vec<Option<&'static str>> {
    let texts = [
        "a wonderful , moving film",
        "dull and far too long",
        "great acting and a fine story",
        "awful plot , bad acting",
    ];
    (0..n).map(|i| Some(texts[i % 4])).collect()
}

fn labels(n: usize) -> Vec<Option<&'static str>> {
    (0..n).map(|i| Some(if i % 2 == 0 { "pos" } else { "neg" })).collect()
}

#[test]
fn missing_text_column_lists_the_columns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("model");
    let output = train(&fixture("imdb-train-600.parquet"), &out, &["--text-column", "body"]);
    assert!(!output.status.success());
    let err = stderr(&output);
    assert!(err.contains("no column `body`") && err.contains("text (Utf8)") && err.contains("label"), "{err}");
    assert_nothing_written(dir.path(), &[]);
}

#[test]
fn missing_label_column_lists_the_columns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = train(&fixture("imdb-train-600.parquet"), &dir.path().join("model"), &["--label-column", "sentiment"]);
    assert!(!output.status.success());
    let err = stderr(&output);
    assert!(err.contains("no column `sentiment`") && err.contains("id (Utf8)"), "{err}");
    assert_nothing_written(dir.path(), &[]);
}

#[test]
fn non_string_text_column_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let corpus = dir.path().join("numbers.parquet");
    write_parquet(
        &corpus,
        vec![("text", Arc::new(Int64Array::from(vec![1, 2, 3, 4]))), ("label", strings(&labels(4)))],
    );
    let output = train(&corpus, &dir.path().join("model"), &[]);
    assert!(!output.status.success());
    let err = stderr(&output);
    assert!(err.contains("text column `text` has type Int64") && err.contains("string"), "{err}");
    assert_nothing_written(dir.path(), &["numbers.parquet"]);
}

#[test]
fn single_class_corpus_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let corpus = dir.path().join("one.parquet");
    write_parquet(&corpus, vec![("text", strings(&reviews(8))), ("label", strings(&[Some("pos"); 8]))]);
    let output = train(&corpus, &dir.path().join("model"), &[]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("single class (`pos`)"), "{}", stderr(&output));
    assert_nothing_written(dir.path(), &["one.parquet"]);
}

/// An empty label is a missing one, not a class without a name: with it left out, one class
/// remains.
#[test]
fn empty_labels_are_left_out_not_a_class() {
    let dir = tempfile::tempdir().expect("tempdir");
    let corpus = dir.path().join("blank.parquet");
    let labels: Vec<Option<&str>> = (0..8).map(|i| Some(if i % 2 == 0 { "pos" } else { " " })).collect();
    write_parquet(&corpus, vec![("text", strings(&reviews(8))), ("label", strings(&labels))]);
    let output = train(&corpus, &dir.path().join("model"), &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("skipped 4 row(s)") && err.contains("empty label"), "{err}");
    assert!(err.contains("single class (`pos`)"), "{err}");
    assert_nothing_written(dir.path(), &["blank.parquet"]);
}

/// A hash table training could not hold is refused before any data is read (a failed
/// allocation would abort the process).
#[test]
fn an_ngram_table_too_large_to_train_is_refused_up_front() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = pipeline()
        .args(["train", "--variant", "ngram", "--train"])
        .arg(fixture("imdb-train-600.parquet"))
        .arg("--out")
        .arg(dir.path().join("model"))
        .args(["--buckets", "1073741824", "--members", "5"])
        .output()
        .expect("run pipeline");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("GiB to train") && err.contains("lower --buckets or --members"), "{err}");
    assert!(!err.contains("training and") && !err.contains("documents"), "data was read first: {err}");
    assert_nothing_written(dir.path(), &[]);
}

#[test]
fn empty_corpus_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let corpus = dir.path().join("empty.parquet");
    write_parquet(&corpus, vec![("text", strings(&[])), ("label", strings(&[]))]);
    let output = train(&corpus, &dir.path().join("model"), &[]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("has no usable rows"), "{}", stderr(&output));
    assert_nothing_written(dir.path(), &["empty.parquet"]);
}

#[test]
fn non_parquet_file_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let corpus = dir.path().join("reviews.csv");
    std::fs::write(&corpus, "text,label\ngood,pos\n").expect("write");
    let output = train(&corpus, &dir.path().join("model"), &[]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("reviews.csv is not a readable Parquet file"), "{}", stderr(&output));
    assert_nothing_written(dir.path(), &["reviews.csv"]);
}

#[test]
fn unreadable_file_names_the_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = train(&dir.path().join("missing.parquet"), &dir.path().join("model"), &[]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("cannot open") && stderr(&output).contains("missing.parquet"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn settings_that_would_train_a_nan_model_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let corpus = fixture("imdb-train-600.parquet");
    for rate in ["inf", "NaN"] {
        let output = train(&corpus, &dir.path().join("model"), &["--learning-rate", rate]);
        assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
        assert!(stderr(&output).contains("--learning-rate must be a positive number"), "{}", stderr(&output));
    }
    // Word vectors with NaN in them.
    let vectors = dir.path().join("nan.txt");
    std::fs::write(&vectors, "2 8\nfilm nan 0 0 0 0 0 0 0\ngreat 1 1 1 1 1 1 1 inf\n").expect("write");
    let output = train(&corpus, &dir.path().join("model"), &["--word-vectors", vectors.to_str().expect("utf-8")]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("line 2 has a value that is not finite"), "{}", stderr(&output));
    assert_nothing_written(dir.path(), &["nan.txt"]);

    let eval = pipeline()
        .args(["eval", "--batch-size", "0", "--model"])
        .arg(fixture("tiny-san"))
        .arg("--data")
        .arg(fixture("reviews.parquet"))
        .output()
        .expect("run eval");
    assert_eq!(eval.status.code(), Some(2), "{}", stderr(&eval));
}

#[test]
fn a_corpus_too_small_to_split_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let corpus = dir.path().join("two.parquet");
    write_parquet(&corpus, vec![("text", strings(&reviews(2))), ("label", strings(&labels(2)))]);
    let output = train(&corpus, &dir.path().join("model"), &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("single document (`neg`, `pos`)") && err.contains("give a --valid file"), "{err}");
    assert!(!err.contains("tokeniz"), "the split is the cause, not tokenization: {err}");
    assert_nothing_written(dir.path(), &["two.parquet"]);
}

#[test]
fn eval_refuses_labels_that_do_not_match_the_graph() {
    let dir = tempfile::tempdir().expect("tempdir");
    let model = dir.path().join("model");
    std::fs::create_dir(&model).expect("mkdir");
    for file in ["model.onnx", "tokenizer.json", "manifest.json"] {
        std::fs::copy(fixture("tiny-avg-3class").join(file), model.join(file)).expect("copy");
    }
    let manifest = std::fs::read_to_string(model.join("manifest.json")).expect("read");
    let mut manifest: serde_json::Value = serde_json::from_str(&manifest).expect("json");
    manifest["labels"] = serde_json::json!(["neg", "pos"]);
    std::fs::write(model.join("manifest.json"), manifest.to_string()).expect("write");
    let eval = pipeline()
        .args(["eval", "--model"])
        .arg(&model)
        .arg("--data")
        .arg(fixture("reviews.parquet"))
        .output()
        .expect("run eval");
    assert_eq!(eval.status.code(), Some(1), "{}", stderr(&eval));
    assert!(stderr(&eval).contains("outputs 3 class probabilities"), "{}", stderr(&eval));
}

#[test]
fn null_rows_are_skipped_counted_and_training_completes_with_force() {
    let dir = tempfile::tempdir().expect("tempdir");
    let corpus = dir.path().join("nulls.parquet");
    let mut texts = reviews(40);
    let mut label_values = labels(40);
    texts[3] = None;
    texts[10] = None;
    label_values[5] = None;
    write_parquet(&corpus, vec![("text", strings(&texts)), ("label", strings(&label_values))]);
    let out = dir.path().join("model");
    std::fs::create_dir(&out).expect("an old package to replace");
    let output = train(&corpus, &out, &["--force"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("skipped 3 row(s) with a null text, or a null, NaN or empty label"),
        "{}",
        stderr(&output)
    );
    let package = runtime::package::ModelPackage::open(&out).expect("complete package");
    assert_eq!(package.manifest.training.corpus.rows, 40);
    assert_eq!(package.manifest.training.train_rows + package.manifest.training.validation_rows, 37);
    assert_nothing_written(dir.path(), &["nulls.parquet", "model"]);

    // eval runs the exported graph and reports metrics over the labelled rows
    let eval = pipeline().args(["eval", "--model"]).arg(&out).arg("--data").arg(&corpus).output().expect("run eval");
    assert!(eval.status.success(), "{}", stderr(&eval));
    let report = String::from_utf8_lossy(&eval.stdout);
    assert!(
        report.contains("rows: 37 (skipped 3)") && report.contains("accuracy:") && report.contains("macro-F1:"),
        "{report}"
    );

    // --record keeps the figures with the package, and changes nothing else in its manifest
    let manifest = || -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).expect("read")).expect("json")
    };
    // As an older version wrote it: without fields added since, such as the training's members.
    let mut before = manifest();
    let removed = before["training"].as_object_mut().expect("training").remove("members");
    assert!(removed.is_some(), "the package records its members");
    std::fs::write(out.join("manifest.json"), serde_json::to_string_pretty(&before).expect("json")).expect("write");
    let eval = pipeline()
        .args(["eval", "--record", "holdout", "--model"])
        .arg(&out)
        .arg("--data")
        .arg(&corpus)
        .output()
        .expect("run eval");
    assert!(eval.status.success(), "{}", stderr(&eval));
    let package = runtime::package::ModelPackage::open(&out).expect("package still valid");
    let accuracy = package.manifest.metrics.get("holdout_accuracy").copied().expect("recorded accuracy");
    assert!(package.manifest.metrics.contains_key("holdout_macro_f1"));
    assert!(report.contains(&format!("accuracy: {accuracy:.4}")), "recorded {accuracy} but printed {report}");
    let mut after = manifest();
    for key in ["holdout_accuracy", "holdout_macro_f1"] {
        after["metrics"].as_object_mut().expect("metrics").remove(key);
    }
    assert_eq!(after, before, "only the recorded figures change");
    assert_nothing_written(dir.path(), &["nulls.parquet", "model"]);
    assert_eq!(
        std::fs::read_dir(&out).expect("package dir").count(),
        3,
        "the package holds its three files and no leftover temporary file"
    );
}

#[test]
fn unknown_variant_lists_the_valid_ones() {
    let output = pipeline().args(["train", "--variant", "gpt", "--train", "x", "--out", "y"]).output().expect("run");
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("possible values: san, avg, cnn, bigru, lama, lama-ctx, nal, te"),
        "{}",
        stderr(&output)
    );
}

/// `pipeline train FLAGS --train <fixture> --out <new dir>` fails saying `expected`, and
/// writes nothing.
fn assert_refused_before_training(flags: &[&str], expected: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = pipeline()
        .arg("train")
        .args(flags)
        .arg("--train")
        .arg(fixture("imdb-train-600.parquet"))
        .arg("--out")
        .arg(dir.path().join("model"))
        .output()
        .expect("run pipeline");
    assert!(!output.status.success());
    assert!(stderr(&output).contains(expected), "{flags:?}: {}", stderr(&output));
    assert_nothing_written(dir.path(), &[]);
}

#[test]
fn settings_a_variant_cannot_build_are_refused() {
    // The transformer's heads split the embedding width.
    let heads = ["--variant", "te", "--embedding-dim", "100", "--heads", "3"];
    assert_refused_before_training(&heads, "--embedding-dim (100) must be a multiple of --heads (3)");
    // Only SAN gates its pooled words.
    let gated = ["--variant", "lama", "--pooled-values", "gated-words", "--heads", "2"];
    assert_refused_before_training(&gated, "gated-words is for --variant san");
}

#[test]
fn impossible_hyper_parameters_are_refused_before_training() {
    for (variant, flag, expected) in [
        ("san", "--hops", "--hops must be at least 1"),
        ("avg", "--embedding-dim", "--embedding-dim must be at least 1"),
        ("avg", "--mlp-hidden", "--mlp-hidden must be at least 1"),
        ("cnn", "--kernel-widths", "--kernel-widths (each) must be at least 1"),
        ("cnn", "--filters", "--filters must be at least 1"),
        ("bigru", "--gru-hidden", "--gru-hidden must be at least 1"),
        ("lama", "--heads", "--heads must be at least 1"),
        ("lama-ctx", "--attention-dim", "--attention-dim must be at least 1"),
        ("nal", "--averaging-dim", "--averaging-dim must be at least 1"),
        ("te", "--layers", "--layers must be at least 1"),
    ] {
        assert_refused_before_training(&["--variant", variant, flag, "0"], expected);
    }
}

/// A window with no middle word cannot be centred on it.
#[test]
fn an_even_convolution_window_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("model");
    let output = train(&fixture("imdb-train-600.parquet"), &out, &["--encoder", "conv", "--conv-width", "4"]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("--conv-width must be odd"), "{}", stderr(&output));
    assert_nothing_written(dir.path(), &[]);
}

#[test]
fn pre_trained_word_vectors_start_the_embedding_and_are_recorded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let vectors = dir.path().join("vectors.txt");
    let output = pipeline()
        .args(["vectors", "--corpus"])
        .arg(fixture("imdb-train-600.parquet"))
        .arg("--out")
        .arg(&vectors)
        .args(["--dim", "8", "--epochs", "1", "--min-count", "2"])
        .output()
        .expect("run pipeline vectors");
    assert!(output.status.success(), "{}", stderr(&output));
    let header = std::fs::read_to_string(&vectors).expect("vectors written");
    let header = header.lines().next().expect("a header line").to_owned();
    assert!(header.ends_with(" 8"), "word2vec header `WORDS DIM`: {header}");

    let again = pipeline()
        .args(["vectors", "--corpus"])
        .arg(fixture("imdb-train-600.parquet"))
        .arg("--out")
        .arg(&vectors)
        .output()
        .expect("run pipeline vectors");
    assert!(!again.status.success());
    assert!(stderr(&again).contains("already exists; pass --force"), "{}", stderr(&again));

    let model = dir.path().join("model");
    let vectors_arg = vectors.to_string_lossy().into_owned();
    let output = train(&fixture("imdb-train-600.parquet"), &model, &["--word-vectors", &vectors_arg]);
    assert!(output.status.success(), "{}", stderr(&output));
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(model.join("manifest.json")).expect("manifest")).expect("json");
    let found = manifest["hyper_parameters"]["word_vectors"]["vocabulary_words_found"].as_u64().expect("recorded");
    assert!(found > 1000, "most of the vocabulary has a vector ({found})");
    assert_eq!(manifest["hyper_parameters"]["word_vectors"]["frozen"], false);

    let narrow = dir.path().join("narrow.txt");
    std::fs::write(&narrow, "good 0.1 0.2 0.3 0.4\nbad -0.1 0.0 0.2 0.1\n").expect("write vectors");
    let wrong_width = dir.path().join("wrong-width");
    let narrow_arg = narrow.to_string_lossy().into_owned();
    let output = train(&fixture("imdb-train-600.parquet"), &wrong_width, &["--word-vectors", &narrow_arg]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("holds 4-dimensional word vectors but --embedding-dim is 8"),
        "{}",
        stderr(&output)
    );
    assert!(!wrong_width.exists());
}

/// SAN without --word-vectors starts from skip-gram vectors trained on its training part when
/// that is enough text (a million words: 2,900 made-up documents of 400), and from random ones
/// when it is not (the 600-review fixture) or when told (--no-word-vectors); the manifest says
/// which.
#[test]
fn san_learns_its_word_vectors_from_the_training_documents_when_they_are_enough_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    let words = ["good", "great", "fine", "bad", "awful", "poor", "the", "a", "film", "plot", "and", "was"];
    let (mut texts, mut labels) = (Vec::new(), Vec::new());
    for row in 0..2900usize {
        let text: Vec<&str> = (0..400).map(|i| words[(row * 7 + i * i * 13 + i / 3) % words.len()]).collect();
        texts.push(text.join(" "));
        labels.push(if row % 2 == 0 { "pos" } else { "neg" });
    }
    let large = dir.path().join("large.parquet");
    let texts: Vec<Option<&str>> = texts.iter().map(|t| Some(t.as_str())).collect();
    let labels: Vec<Option<&str>> = labels.into_iter().map(Some).collect();
    write_parquet(&large, vec![("text", strings(&texts)), ("label", strings(&labels))]);
    let tiny: Vec<&str> = TINY_MODEL.iter().copied().filter(|a| !["--max-tokens", "64"].contains(a)).collect();
    let train_san = |corpus: &Path, out: &Path, extra: &[&str]| {
        pipeline()
            .args(["train", "--variant", "san", "--train"])
            .arg(corpus)
            .arg("--out")
            .arg(out)
            .args(&tiny)
            .args(["--max-tokens", "400"])
            .args(extra)
            .output()
            .expect("run pipeline")
    };
    let vectors_of = |model: &Path| {
        let manifest: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(model.join("manifest.json")).expect("manifest"))
                .expect("json");
        manifest["hyper_parameters"]["word_vectors"].clone()
    };

    let learned = dir.path().join("learned");
    let output = train_san(&large, &learned, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let vectors = vectors_of(&learned);
    assert_eq!(vectors["trained_on"], "training documents", "{vectors}");
    let words = vectors["words"].as_u64().expect("words recorded");
    assert!(words >= training::job::MIN_PRETRAINING_WORDS as u64, "{words}");
    assert_eq!(vectors["vocabulary_words_found"], 12, "{vectors}");

    let random = dir.path().join("random");
    let output = train_san(&large, &random, &["--no-word-vectors"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(vectors_of(&random).is_null(), "{}", vectors_of(&random));

    let small = dir.path().join("small");
    let output = train_san(&fixture("imdb-train-600.parquet"), &small, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(vectors_of(&small).is_null(), "{}", vectors_of(&small));
    assert!(stderr(&output).contains("too few to learn word vectors from"), "{}", stderr(&output));

    let both = dir.path().join("both");
    let output = train_san(&large, &both, &["--no-word-vectors", "--word-vectors", "v.txt"]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("cannot be used with"), "{}", stderr(&output));
    assert!(!both.exists());
}

#[test]
fn freezing_word_vectors_needs_word_vectors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("model");
    let output = train(&fixture("imdb-train-600.parquet"), &out, &["--freeze-word-vectors"]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("--word-vectors <FILE>"), "{}", stderr(&output));
    assert!(!out.exists());
}

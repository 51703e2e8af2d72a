//! Inputs, packages and outputs a run cannot use: refused before any work, by name, with
//! nothing written.

use std::sync::Arc;

use arrow::array::{Int64Array, StringArray};
use arrow::datatypes::Float32Type;

use super::*;

#[test]
fn missing_text_column_lists_the_columns_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.parquet");
    let output = run(&reviews(), &out, &["--text-column", "review"]);
    assert!(!output.status.success());
    let err = stderr(&output);
    assert!(err.contains("no text column `review`") && err.contains("id (Utf8), text (Utf8), label (Utf8)"), "{err}");
    assert!(files_in(dir.path()).is_empty());
}

#[test]
fn non_string_text_column_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("ints.parquet");
    write_parquet(&input, vec![("text", Arc::new(Int64Array::from(vec![1, 2])))]);
    let output = run(&input, &dir.path().join("out.parquet"), &[]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("has type Int64, expected a string column"), "{}", stderr(&output));
    assert_eq!(files_in(dir.path()), ["ints.parquet"]);
}

#[test]
fn corrupt_input_is_named_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("broken.parquet");
    std::fs::write(&input, b"PAR1 this is not really parquet").expect("write");
    let output = run(&input, &dir.path().join("out.parquet"), &[]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("broken.parquet"), "{}", stderr(&output));
    assert_eq!(files_in(dir.path()), ["broken.parquet"]);
}

#[test]
fn incomplete_or_mismatched_model_packages_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let model = dir.path().join("model");
    std::fs::create_dir(&model).expect("mkdir");
    for file in ["model.onnx", "manifest.json"] {
        std::fs::copy(tiny_model().join(file), model.join(file)).expect("copy");
    }
    let out = dir.path().join("out.parquet");
    let output = pipeline(&["run"], &[("--input", &reviews()), ("--model", &model), ("--output", &out)]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("missing tokenizer.json"), "{}", stderr(&output));

    std::fs::copy(tiny_model().join("tokenizer.json"), model.join("tokenizer.json")).expect("copy");
    let manifest = std::fs::read_to_string(model.join("manifest.json")).expect("manifest");
    let mut manifest: serde_json::Value = serde_json::from_str(&manifest).expect("json");
    manifest["attention_heads"] = serde_json::Value::Null;
    std::fs::write(model.join("manifest.json"), manifest.to_string()).expect("write");
    let output = pipeline(&["run"], &[("--input", &reviews()), ("--model", &model), ("--output", &out)]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("does not match") && stderr(&output).contains("attention_heads"),
        "{}",
        stderr(&output)
    );
    assert!(!out.exists());
}

#[test]
fn unwritable_output_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("no/such/dir/out.parquet");
    let output = run(&reviews(), &out, &[]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("cannot write") && stderr(&output).contains("no/such/dir"), "{}", stderr(&output));
}

/// An input column named like any output column is refused, whatever `--attention` writes:
/// a report would take a passed-through `attention_entropy` for the model's.
#[test]
fn input_columns_named_like_output_columns_are_refused_in_every_mode() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("input.parquet");
    let entropies = arrow::array::ListArray::from_iter_primitive::<Float32Type, _, _>(vec![Some(vec![Some(42.0)])]);
    write_parquet(
        &input,
        vec![("text", Arc::new(StringArray::from(vec!["a fine film"]))), ("attention_entropy", Arc::new(entropies))],
    );
    for mode in ["full", "none"] {
        let out = dir.path().join(format!("{mode}.parquet"));
        let output = run(&input, &out, &["--attention", mode]);
        assert_eq!(output.status.code(), Some(1), "{mode}: {}", stderr(&output));
        assert!(stderr(&output).contains("`attention_entropy` collides with an output column"), "{}", stderr(&output));
        assert!(!out.exists(), "{mode}: no output is left behind");
    }
}

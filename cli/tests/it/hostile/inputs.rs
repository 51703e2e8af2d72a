//! Input columns and options a careless user gets wrong: each refused by name, with what
//! to do.

use std::sync::Arc;

use arrow::array::{Array, DictionaryArray, Int64Array};
use arrow::datatypes::Int32Type;

use super::*;

#[test]
fn a_token_limit_of_zero_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.parquet");
    let model = package_with(dir.path(), "fixtures/tiny-san", |m| m["max_tokens"] = 0.into());
    assert_refused(&run_with_model(&model, &out, &[]), 1, &["max_tokens 0"], &out);
    let output = run(&reviews(), &out, &["--max-tokens", "0"]);
    assert_refused(&output, 2, &["--max-tokens"], &out);
    for flag in ["--batch-size", "--chunk-rows", "--threads"] {
        assert_refused(&run(&reviews(), &out, &[flag, "0"]), 2, &[flag], &out);
    }
    // Thousands of threads on two cores would look like a hang.
    assert_refused(&run(&reviews(), &out, &["--threads", "5000"]), 2, &["--threads"], &out);
    let sql = pipeline(&["sql", "SELECT 1", "--batch-size", "0"], &[]);
    assert_eq!(exit_code(&sql), Some(2), "{}", stderr(&sql));
}

#[test]
fn pass_through_naming_a_column_twice_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.parquet");
    let output = run(&reviews(), &out, &["--pass-through", "id,id"]);
    assert_refused(&output, 1, &["names the column `id` twice"], &out);
}

#[test]
fn a_dictionary_text_column_is_read_as_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("categorical.parquet");
    let texts: DictionaryArray<Int32Type> =
        vec![Some("a wonderful film"), None, Some("a wonderful film"), Some("awful")].into_iter().collect();
    write_parquet(&input, vec![("id", Arc::new(Int64Array::from(vec![1, 2, 3, 4]))), ("text", Arc::new(texts))]);
    let out = dir.path().join("out.parquet");
    let output = run(&input, &out, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let batch = read(&out);
    let predictions = strings(&batch, "prediction");
    assert!(predictions[0].is_some() && predictions[1].is_none() && predictions[3].is_some());
    assert_eq!(predictions[0], predictions[2], "the same text, the same prediction");
    let text = batch.column_by_name("text").expect("text passes through");
    assert_eq!(text.len(), 4);
}

#[test]
fn a_file_with_two_columns_of_one_name_is_named_as_such() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("twice.parquet");
    let ids: Arc<dyn Array> = Arc::new(Int64Array::from(vec![1, 2]));
    let texts: Arc<dyn Array> = Arc::new(arrow::array::StringArray::from(vec!["a fine film", "dull"]));
    let labels: Arc<dyn Array> = Arc::new(Int64Array::from(vec![1, 0]));
    write_parquet(&input, vec![("id", ids.clone()), ("id", ids), ("text", texts), ("label", labels)]);
    let out = dir.path().join("out.parquet");
    let output = run(&input, &out, &[]);
    assert_refused(&output, 1, &["twice.parquet has 2 columns named `id`", "--pass-through"], &out);
    assert!(!stderr(&output).contains("--pass-through names"), "{}", stderr(&output));
    // Leaving the column out works.
    let output = run(&input, &out, &["--pass-through", "label"]);
    assert!(output.status.success(), "{}", stderr(&output));
}

#[test]
fn finalize_refuses_every_flag_it_would_ignore_in_either_spelling() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("dataset");
    std::fs::create_dir(&out).expect("mkdir");
    let out = out.to_string_lossy().into_owned();
    for extra in [
        &["--output", "other.parquet"][..],
        &["--attention", "full"],
        &["--model", "fixtures/tiny-san"],
        &["--long-documents", "truncate"],
        &["--backend", "tract"],
        &["--batch-size", "8"],
    ] {
        // `pipeline finalize DIR`, and its old spelling `pipeline run --finalize DIR`.
        for command in [&["finalize", out.as_str()][..], &["run", "--finalize", out.as_str()]] {
            let mut args = command.to_vec();
            args.extend_from_slice(extra);
            let output = pipeline(&args, &[]);
            let err = stderr(&output);
            assert_eq!(exit_code(&output), Some(2), "{args:?}: {err}");
            assert!(err.contains("pipeline finalize") && err.contains(extra[0]), "{args:?}: {err}");
        }
    }
    assert_eq!(files_in(Path::new(&out)), Vec::<String>::new(), "nothing written");
}

#[test]
fn the_old_spelling_of_finalize_still_works_and_says_the_new_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("dataset");
    let output = run(&reviews(), &out, &["--rows-per-part", "100"]);
    assert!(output.status.success(), "{}", stderr(&output));
    std::fs::remove_file(out.join("_SUCCESS")).expect("remove _SUCCESS");
    let old = pipeline(&["run", "--threads", "1"], &[("--finalize", &out)]);
    let err = stderr(&old);
    assert!(old.status.success(), "{err}");
    assert!(err.contains("is now `pipeline finalize DIR`"), "{err}");
    assert!(String::from_utf8_lossy(&old.stdout).contains("300 rows in 3 parts"), "{err}");
    assert!(out.join("_SUCCESS").is_file());
}

#[test]
fn a_count_of_zero_says_at_least_one() {
    for flag in ["--batch-size", "--chunk-rows", "--rows-per-part", "--max-tokens", "--long-document-stride"] {
        let output = pipeline(&["run", "--input", "in.parquet", flag, "0"], &[]);
        let err = stderr(&output);
        assert_eq!(exit_code(&output), Some(2), "{flag}: {err}");
        assert!(err.contains("must be at least 1") && err.contains(flag), "{flag}: {err}");
        assert!(!err.contains("18446744073709551615"), "{flag}: {err}");
    }
    let output = pipeline(&["run", "--input", "in.parquet", "--batch-size", "lots"], &[]);
    assert_eq!(exit_code(&output), Some(2));
    assert!(stderr(&output).contains("`lots` is not a whole number"), "{}", stderr(&output));
}

#[test]
fn a_mistyped_column_gets_a_did_you_mean() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.parquet");
    let output = run(&reviews(), &out, &["--pass-through", "id,lable"]);
    assert_refused(&output, 1, &["no column `lable` to pass through (did you mean `label`?)"], &out);
    let output = run(&reviews(), &out, &["--text-column", "Txt"]);
    assert_refused(&output, 1, &["no text column `Txt` (did you mean `text`?)"], &out);
    // Nothing close: no guess.
    let output = run(&reviews(), &out, &["--pass-through", "sentiment"]);
    assert_refused(&output, 1, &["no column `sentiment` to pass through;"], &out);
}

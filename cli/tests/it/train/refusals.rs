//! `pipeline train` refuses what would train a model that cannot be trusted or used, before
//! any training: a validation set that is the training set or holds one class, a vocabulary
//! left empty, a flag the variant ignores, a destination that is no local directory. Missing
//! labels, a float column's NaN among them, are skipped and counted, never a class.

use super::*;

use arrow::array::Float64Array;

/// A corpus of `n` rows with string labels.
fn corpus(dir: &Path, name: &str, n: usize) -> PathBuf {
    let path = dir.join(name);
    write_parquet(&path, vec![("text", strings(&reviews(n))), ("label", strings(&labels(n)))]);
    path
}

/// `train` with some of [`TINY_MODEL`]'s settings given other values (a flag may appear once).
fn train_overriding(corpus: &Path, out: &Path, overrides: &[(&str, &str)]) -> Output {
    let mut args: Vec<&str> = Vec::new();
    for pair in TINY_MODEL.chunks(2) {
        let (flag, value) = (pair[0], pair[1]);
        args.extend([flag, overrides.iter().find(|(f, _)| *f == flag).map_or(value, |(_, v)| *v)]);
    }
    for (flag, value) in overrides.iter().filter(|(f, _)| !TINY_MODEL.contains(f)) {
        args.extend([*flag, *value]);
    }
    pipeline()
        .args(["train", "--variant", "san", "--train"])
        .arg(corpus)
        .arg("--out")
        .arg(out)
        .args(args)
        .output()
        .expect("run pipeline")
}

fn refused(output: &Output, needles: &[&str]) {
    let err = stderr(output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    for needle in needles {
        assert!(err.contains(needle), "expected `{needle}` in: {err}");
    }
}

#[test]
fn nan_labels_are_missing_labels_not_a_class() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("floats.parquet");
    let values: Vec<Option<f64>> =
        (0..40).map(|i| if i % 10 == 3 { Some(f64::NAN) } else { Some(f64::from(u8::from(i % 2 == 0))) }).collect();
    let labels: ArrayRef = Arc::new(Float64Array::from(values));
    write_parquet(&path, vec![("text", strings(&reviews(40))), ("label", labels)]);
    let out = dir.path().join("model");
    let output = train(&path, &out, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("skipped 4 row(s) with a null text, or a null, NaN or empty label"),
        "{}",
        stderr(&output)
    );
    let package = runtime::package::ModelPackage::open(&out).expect("package");
    assert_eq!(package.manifest.labels, ["0.0", "1.0"], "no class called NaN");
}

/// A column of structs holds no label per row, nor a list of them (a list trains multi-label).
#[test]
fn a_label_column_of_structs_is_refused_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("structs.parquet");
    let inner: ArrayRef = Arc::new(arrow::array::Int32Array::from_iter_values((0..40).map(|i| i % 2)));
    let structs: ArrayRef = Arc::new(arrow::array::StructArray::from(vec![(
        Arc::new(arrow::datatypes::Field::new("class", arrow::datatypes::DataType::Int32, false)),
        inner,
    )]));
    write_parquet(&path, vec![("text", strings(&reviews(40))), ("label", structs)]);
    refused(&train(&path, &dir.path().join("model"), &[]), &["label column `label`", "not one label per row"]);
    assert_nothing_written(dir.path(), &["structs.parquet"]);
}

#[test]
fn a_validation_set_that_cannot_validate_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let train_path = corpus(dir.path(), "train.parquet", 40);
    let same = train(&train_path, &dir.path().join("model"), &["--valid", train_path.to_str().expect("utf-8")]);
    refused(&same, &["--valid", "is the --train corpus", "--valid-fraction"]);

    let one_class = dir.path().join("valid.parquet");
    write_parquet(&one_class, vec![("text", strings(&reviews(6))), ("label", strings(&[Some("pos"); 6]))]);
    let output = train(&train_path, &dir.path().join("model"), &["--valid", one_class.to_str().expect("utf-8")]);
    refused(&output, &["valid.parquet", "holds only the class `pos`", "2 classes"]);
    assert_nothing_written(dir.path(), &["train.parquet", "valid.parquet"]);
}

#[test]
fn settings_that_train_nothing_useful_are_refused_before_training() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = corpus(dir.path(), "train.parquet", 40);
    let out = dir.path().join("model");
    let output = train_overriding(&path, &out, &[("--min-count", "1000")]);
    refused(&output, &["--min-count 1000 leaves no word in the vocabulary"]);
    refused(&train(&path, &out, &["--members", "3"]), &["--members 3", "--variant san trains one model"]);
    let output = train_overriding(&path, &out, &[("--max-tokens", "18446744073709551615")]);
    refused(&output, &["--max-tokens", "at most"]);
    let blank = dir.path().join("blank.parquet");
    write_parquet(&blank, vec![("text", strings(&[Some("   ")].repeat(40))), ("label", strings(&labels(40)))]);
    refused(&train(&blank, &out, &[]), &["hold no word", "--text-column"]);
    assert_nothing_written(dir.path(), &["train.parquet", "blank.parquet"]);
}

#[test]
fn a_storage_url_as_out_is_refused_and_no_directory_is_made() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = corpus(dir.path(), "train.parquet", 40);
    let output = pipeline()
        .current_dir(dir.path())
        .args(["train", "--variant", "san", "--train"])
        .arg(&path)
        .args(["--out", "s3://bucket/models/m/"])
        .args(TINY_MODEL)
        .output()
        .expect("run pipeline");
    refused(&output, &["--out s3://bucket/models/m/", "local directory", "--model s3://bucket/models/m/"]);
    assert_nothing_written(dir.path(), &["train.parquet"]);
}

#[test]
fn a_validation_copy_of_the_training_file_and_reserved_record_names_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let train_path = corpus(dir.path(), "train.parquet", 40);
    let copy = dir.path().join("copy.parquet");
    std::fs::copy(&train_path, &copy).expect("copy");
    let output = train(&train_path, &dir.path().join("model"), &["--valid", copy.to_str().expect("utf-8")]);
    refused(&output, &["holds the same bytes as --train"]);
    for name in ["", "train", "a b"] {
        let eval = pipeline()
            .args(["eval", "--model"])
            .arg(fixture("tiny-san"))
            .arg("--data")
            .arg(fixture("reviews.parquet"))
            .args(["--record", name])
            .output()
            .expect("eval");
        refused(&eval, &["--record", "such as test"]);
    }
    assert_nothing_written(dir.path(), &["train.parquet", "copy.parquet"]);
}

#[test]
fn a_column_that_is_not_there_names_the_flag_that_chose_it() {
    for (flag, other) in [("--text-column", "--label-column"), ("--label-column", "--text-column")] {
        let eval = pipeline()
            .args(["eval", "--model"])
            .arg(fixture("tiny-san"))
            .arg("--data")
            .arg(fixture("reviews.parquet"))
            .args([flag, "nope"])
            .output()
            .expect("eval");
        refused(&eval, &["has no column `nope`; its columns are: id", &format!("(choose another with {flag})")]);
        assert!(!stderr(&eval).contains(other), "{}", stderr(&eval));
    }
}

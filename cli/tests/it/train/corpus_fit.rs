//! `pipeline train` on a corpus that is not IMDB: a small, imbalanced, 8-class one
//! (`fixtures/topics-*.parquet`, made by `fixtures/make_topics.py`). The defaults follow the
//! corpus and say so, every class is predicted, the metrics show per-class failure, and labels
//! that cannot train are refused before training.

use super::*;

/// The fast tier at a size that trains in about a second (a small table, two members).
const SMALL_NGRAM: [&str; 6] = ["--buckets", "20000", "--members", "2", "--min-count", "1"];

fn train_ngram(out: &Path, extra: &[&str]) -> Output {
    pipeline()
        .args(["train", "--variant", "ngram", "--train"])
        .arg(fixture("topics-train.parquet"))
        .arg("--out")
        .arg(out)
        .args(SMALL_NGRAM)
        .args(extra)
        .output()
        .expect("run pipeline")
}

fn eval_json(model: &Path, metrics: &Path) -> serde_json::Value {
    let output = pipeline()
        .args(["eval", "--model"])
        .arg(model)
        .arg("--data")
        .arg(fixture("topics-test.parquet"))
        .arg("--metrics-json")
        .arg(metrics)
        .output()
        .expect("run eval");
    assert!(output.status.success(), "{}", stderr(&output));
    serde_json::from_slice(&std::fs::read(metrics).expect("metrics written")).expect("JSON")
}

/// Classes (of `per_class`) that have documents and were never predicted.
fn never_predicted(per_class: &serde_json::Value) -> Vec<String> {
    let classes = per_class.as_array().expect("per_class is a list");
    classes
        .iter()
        .filter(|c| c["predicted"] == 0 && c["support"].as_u64() > Some(0))
        .map(|c| c["label"].as_str().expect("label").to_owned())
        .collect()
}

#[test]
fn the_defaults_fit_a_small_imbalanced_corpus_and_predict_every_class() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (out, train_json) = (dir.path().join("model"), dir.path().join("train.json"));
    let output = train_ngram(&out, &["--metrics-json", train_json.to_str().expect("utf-8")]);
    assert!(output.status.success(), "{}", stderr(&output));
    let err = stderr(&output);
    // 383 training documents: batches of 32 (not 1,024), 30 epochs at most, balanced weights.
    for chosen in ["chose batch size 32 (not 1024)", "chose 30 epochs at most", "chose balanced class weights"] {
        assert!(err.contains(chosen), "{chosen}: {err}");
    }
    // The report prints macro-F1 and a per-class table.
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(report.contains("macro-F1") && report.contains("precision") && report.contains("grain"), "{report}");

    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&train_json).expect("train metrics")).expect("JSON");
    assert_eq!(summary["training"]["batch_size"], 32);
    assert!(summary["training"]["class_weights"].as_array().is_some_and(|w| w.len() == 8), "{summary}");
    assert_eq!(summary["validation"]["per_class"].as_array().map(Vec::len), Some(8));
    assert!(summary["epochs"][0].as_array().is_some_and(|e| !e.is_empty()), "{summary}");

    // On the held-out test file, every class is predicted.
    let evaluation = eval_json(&out, &dir.path().join("eval.json"));
    assert_eq!(never_predicted(&evaluation["per_class"]), Vec::<String>::new(), "{evaluation}");
    assert!(evaluation["macro_f1"].as_f64() > Some(0.7), "{evaluation}");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).expect("manifest")).expect("JSON");
    assert!(manifest["metrics"]["validation_macro_f1"].is_number(), "{manifest}");
    // The parameters counted are the graph's weights: four bytes each, most of the file.
    let graph_bytes = std::fs::metadata(out.join("model.onnx")).expect("graph").len();
    let weight_bytes = manifest["parameter_count"].as_u64().expect("parameter_count") * 4;
    assert!(weight_bytes <= graph_bytes && weight_bytes * 10 >= graph_bytes * 9, "{weight_bytes} of {graph_bytes}");
    assert!(manifest["metrics"]["validation_f1_grain"].is_number(), "{manifest}");

    // Calibrated: the temperature is in the package and the calibration error fell on
    // validation; eval reports it, and accuracy on the most confident shares, on test.
    let metric = |name: &str| manifest["metrics"][name].as_f64().unwrap_or_else(|| panic!("{name}: {manifest}"));
    assert!(metric("temperature") > 0.0 && metric("temperature") != 1.0, "{manifest}");
    assert!(metric("validation_ece") < metric("validation_ece_uncalibrated"), "{manifest}");
    assert!(summary["calibration"]["temperature"].as_f64() == Some(metric("temperature")), "{summary}");
    assert!(evaluation["ece"].as_f64().is_some_and(|ece| ece < 0.1), "{evaluation}");
    // Beside it, what chance alone makes of the error on these few test documents: a few
    // hundredths, below its 95th percentile, and said on the report as on validation.
    let chance = &evaluation["ece_by_chance"];
    assert!(chance["mean"].as_f64().is_some_and(|m| m > 0.005 && Some(m) < chance["p95"].as_f64()), "{evaluation}");
    assert!(summary["calibration"]["ece_by_chance"]["mean"].as_f64() > Some(0.0), "{summary}");
    assert!(report.contains("by chance alone"), "{report}");
    let shares: Vec<f64> =
        evaluation["coverage"].as_array().expect("coverage").iter().filter_map(|c| c["share"].as_f64()).collect();
    assert_eq!(shares, [0.5, 0.8, 0.9, 1.0]);
    assert_eq!(evaluation["coverage"][3]["accuracy"], evaluation["accuracy"]);

    // `pipeline inspect` shows it as a model card.
    let inspect = pipeline().arg("inspect").arg(&out).output().expect("run inspect");
    let card = String::from_utf8_lossy(&inspect.stdout);
    assert!(card.contains("classes:     acquisitions") && card.contains("(training documents)"), "{card}");
    assert!(card.contains("class weights balanced") && card.contains("calibrated:  temperature"), "{card}");
}

/// The old defaults' failure, forced by flags: one step, unweighted. Classes the model never
/// predicts are named in a warning, not passed over.
#[test]
fn a_class_never_predicted_is_a_warning_that_names_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("model");
    let output = train_ngram(&out, &["--class-weights", "none", "--epochs", "1", "--batch-size", "1024"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("WARN") && err.contains("class `grain` was never predicted on validation"), "{err}");
    assert!(!err.contains("chose balanced class weights"), "{err}");
    let evaluation = eval_json(&out, &dir.path().join("eval.json"));
    assert!(never_predicted(&evaluation["per_class"]).contains(&"grain".to_owned()), "{evaluation}");
}

#[test]
fn a_class_of_one_document_is_refused_without_a_validation_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let corpus = dir.path().join("one-of-a-kind.parquet");
    let mut labels = labels(12);
    labels[3] = Some("mixed");
    write_parquet(&corpus, vec![("text", strings(&reviews(12))), ("label", strings(&labels))]);
    let output = train(&corpus, &dir.path().join("model"), &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("single document (`mixed`)") && err.contains("give a --valid file"), "{err}");
    assert_nothing_written(dir.path(), &["one-of-a-kind.parquet"]);
}

#[test]
fn an_id_column_taken_for_labels_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let corpus = dir.path().join("ids.parquet");
    let ids: Vec<String> = (0..10_001).map(|i| format!("doc-{i}")).collect();
    let texts: Vec<Option<&str>> = (0..ids.len()).map(|_| Some("a short text")).collect();
    let labels: Vec<Option<&str>> = ids.iter().map(|id| Some(id.as_str())).collect();
    write_parquet(&corpus, vec![("text", strings(&texts)), ("label", strings(&labels))]);
    let output = train(&corpus, &dir.path().join("model"), &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("10001 distinct labels") && err.contains("--label-column"), "{err}");
    assert_nothing_written(dir.path(), &["ids.parquet"]);
}

#[test]
fn a_label_column_mostly_empty_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let corpus = dir.path().join("sparse.parquet");
    let labels: Vec<Option<&str>> = (0..10).map(|i| [Some("pos"), Some("neg"), None, None, None][i % 5]).collect();
    write_parquet(&corpus, vec![("text", strings(&reviews(10))), ("label", strings(&labels))]);
    let output = train(&corpus, &dir.path().join("model"), &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("6 of 10 rows have a null text, or a null") && err.contains("--label-column"), "{err}");
    assert_nothing_written(dir.path(), &["sparse.parquet"]);
}

#[test]
fn labels_differing_only_in_white_space_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let corpus = dir.path().join("spaced.parquet");
    let labels: Vec<Option<&str>> = (0..12).map(|i| [Some("pos"), Some("neg"), Some("pos ")][i % 3]).collect();
    write_parquet(&corpus, vec![("text", strings(&reviews(12))), ("label", strings(&labels))]);
    let output = train(&corpus, &dir.path().join("model"), &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("labels `pos`, `pos ` differ only in white space") && err.contains("trim"), "{err}");
    assert_nothing_written(dir.path(), &["spaced.parquet"]);
}

/// A model trained on the imbalanced corpus, run with `--min-confidence`: rows below it have
/// no prediction and `abstained` true, with their probabilities kept; tract and ONNX Runtime
/// give the same calibrated probabilities; the report and `classify()` in SQL abstain alike.
#[test]
fn below_min_confidence_a_run_abstains_on_every_backend() {
    use arrow::array::{Array, AsArray};
    let dir = tempfile::tempdir().expect("tempdir");
    let model = dir.path().join("model");
    let output = train_ngram(&model, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let library = test_support::onnxruntime_library().expect("install ONNX Runtime for tests");
    let run = |backend: &str, out: &Path| {
        let output = pipeline()
            .args(["run", "--min-confidence", "0.9", "--backend", backend])
            .args(if backend == "ort" { vec!["--ort-library".as_ref(), library.as_os_str()] } else { vec![] })
            .arg("--input")
            .arg(fixture("topics-test.parquet"))
            .arg("--model")
            .arg(&model)
            .arg("--output")
            .arg(out)
            .output()
            .expect("run pipeline");
        assert!(output.status.success(), "{}", stderr(&output));
        let file = std::fs::File::open(out).expect("output");
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file).expect("parquet");
        let schema = reader.schema().clone();
        let batches: Vec<RecordBatch> = reader.build().expect("reader").collect::<Result<_, _>>().expect("batches");
        let summary = String::from_utf8_lossy(&output.stdout).into_owned();
        (arrow::compute::concat_batches(&schema, &batches).expect("one batch"), summary)
    };
    let ((tract, summary), (ort, _)) =
        (run("tract", &dir.path().join("tract.parquet")), run("ort", &dir.path().join("ort.parquet")));
    let probabilities = |batch: &RecordBatch| -> Vec<f32> {
        let lists = batch.column_by_name("probabilities").expect("probabilities").as_list::<i32>();
        lists.values().as_primitive::<arrow::datatypes::Float32Type>().values().to_vec()
    };
    let (a, b) = (probabilities(&tract), probabilities(&ort));
    assert_eq!(a.len(), b.len());
    let diff = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
    assert!(diff <= 1e-5, "calibrated probabilities differ by {diff} between tract and ONNX Runtime");

    let abstained = tract.column_by_name("abstained").expect("an abstained column").as_boolean().clone();
    let prediction = tract.column_by_name("prediction").expect("prediction");
    let confidence = tract.column_by_name("confidence").expect("confidence");
    let confidence = confidence.as_primitive::<arrow::datatypes::Float32Type>();
    let count = (0..abstained.len()).filter(|&row| abstained.value(row)).count();
    assert!(count > 0 && count < abstained.len(), "{count} of {} rows abstained", abstained.len());
    for row in 0..abstained.len() {
        assert_eq!(abstained.value(row), confidence.value(row) < 0.9, "row {row}");
        assert_eq!(prediction.is_null(row), abstained.value(row), "row {row}");
    }
    assert!(summary.contains(&format!("of which {count} abstained")), "{summary}");
    assert_eq!(ort.column_by_name("abstained").map(|c| c.as_boolean().clone()), Some(abstained));

    let report = dir.path().join("report.html");
    let output = pipeline()
        .args(["report", "--input"])
        .arg(dir.path().join("tract.parquet"))
        .arg("--output")
        .arg(&report)
        .output()
        .expect("run report");
    assert!(output.status.success(), "{}", stderr(&output));
    let page = std::fs::read_to_string(&report).expect("report");
    let row = page.split("id=\"abstained-rows\"").nth(1).expect("an abstained row in the report");
    assert!(row.contains(&format!(">{count}<")), "{count} abstained: {row:.300}");
    // The Run section names the model from the output's `model.card`.
    let trained_on = page.split("id=\"model-trained-on\"").nth(1).expect("the model card in the report");
    assert!(trained_on.contains("topics-train.parquet") && trained_on.contains("8 classes"), "{trained_on:.300}");

    let query = format!(
        "SELECT count(*) AS n FROM '{}' WHERE classify(text, '{}').abstained",
        fixture("topics-test.parquet").display(),
        model.display()
    );
    let output =
        pipeline().args(["sql", "--min-confidence", "0.9", "--format", "json", &query]).output().expect("run sql");
    assert!(output.status.success(), "{}", stderr(&output));
    let rows = String::from_utf8_lossy(&output.stdout);
    assert!(rows.contains(&format!("\"n\":{count}")), "{count} abstained: {rows}");
}

//! Multi-label training and its output: a label column of lists (`fixtures/labels-*.parquet`,
//! made by `fixtures/make_labels.py`) trains a sigmoid per label with thresholds tuned on
//! validation; `pipeline run` writes each row's `predicted_labels` and the pushes towards
//! each; eval, SQL and the report read them; and what cannot train is refused.

use arrow::array::{Array, AsArray, ListArray};
use arrow::datatypes::{DataType, Float32Type, Int8Type};

use super::*;

/// The fast tier at a size that trains in about a second.
const SMALL_NGRAM: [&str; 6] = ["--buckets", "20000", "--members", "2", "--min-count", "1"];

fn train_multi_label(variant: &str, out: &Path, extra: &[&str]) -> Output {
    pipeline()
        .args(["train", "--variant", variant, "--label-column", "labels", "--train"])
        .arg(fixture("labels-train.parquet"))
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .expect("run pipeline")
}

fn read_batch(path: &Path) -> RecordBatch {
    let file = std::fs::File::open(path).expect("output");
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file).expect("parquet");
    let schema = reader.schema().clone();
    let batches: Vec<RecordBatch> = reader.build().expect("reader").collect::<Result<_, _>>().expect("batches");
    arrow::compute::concat_batches(&schema, &batches).expect("one batch")
}

fn list<'a>(batch: &'a RecordBatch, name: &str) -> &'a ListArray {
    batch.column_by_name(name).unwrap_or_else(|| panic!("no column {name}")).as_list::<i32>()
}

fn strings_of(lists: &ListArray, row: usize) -> Vec<String> {
    let values = lists.value(row);
    let values = arrow::compute::cast(&values, &DataType::Utf8).expect("strings");
    values.as_string::<i32>().iter().map(|v| v.expect("a label").to_owned()).collect()
}

fn floats_of(lists: &ListArray, row: usize) -> Vec<f32> {
    lists.value(row).as_primitive::<Float32Type>().values().to_vec()
}

#[test]
fn a_list_label_column_trains_a_multi_label_model_that_every_reader_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (model, train_json) = (dir.path().join("model"), dir.path().join("train.json"));
    let json_flag = ["--metrics-json", train_json.to_str().expect("utf-8")];
    let output = train_multi_label("ngram", &model, &[&SMALL_NGRAM[..], &json_flag[..]].concat());
    assert!(output.status.success(), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("holds lists of labels: training a multi-label model"), "{err}");
    assert!(err.contains("label thresholds tuned on validation"), "{err}");
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(report.contains("micro-F1") && report.contains("exact label sets"), "{report}");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(model.join("manifest.json")).expect("manifest")).expect("JSON");
    let thresholds: Vec<f64> = manifest["label_thresholds"]
        .as_array()
        .expect("label_thresholds")
        .iter()
        .map(|t| t.as_f64().expect("a number"))
        .collect();
    assert_eq!(thresholds.len(), 8);
    assert!(thresholds.iter().all(|t| (0.0..=1.0).contains(t)), "{thresholds:?}");
    assert_eq!(manifest["format_version"], 2);
    assert!(manifest["metrics"]["validation_micro_f1"].is_number(), "{manifest}");
    let inspect = pipeline().arg("inspect").arg(&model).output().expect("run inspect");
    let card = String::from_utf8_lossy(&inspect.stdout);
    assert!(card.contains("multi-label: a sigmoid per label") && card.contains("earnings ≥ 0."), "{card}");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&train_json).expect("train metrics")).expect("JSON");
    assert_eq!(summary["training"]["task"], "multi_label", "{summary}");
    assert!(summary["validation"]["micro_f1"].is_number(), "{summary}");
    assert_eq!(summary["validation"]["thresholds"].as_array().map(Vec::len), Some(8), "{summary}");

    // eval scores label sets on the test file: every label predicted, micro- and macro-F1.
    let metrics = dir.path().join("eval.json");
    let output = pipeline()
        .args(["eval", "--label-column", "labels", "--model"])
        .arg(&model)
        .arg("--data")
        .arg(fixture("labels-test.parquet"))
        .arg("--metrics-json")
        .arg(&metrics)
        .output()
        .expect("run eval");
    assert!(output.status.success(), "{}", stderr(&output));
    let evaluation: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&metrics).expect("metrics")).expect("JSON");
    assert!(evaluation["micro_f1"].as_f64() > Some(0.7), "{evaluation}");
    assert!(evaluation["macro_f1"].as_f64() > Some(0.6), "{evaluation}");
    assert!(evaluation["ece"].as_f64().is_some_and(|ece| ece < 0.1), "{evaluation}");
    let classes = evaluation["per_class"].as_array().expect("per_class");
    assert!(classes.iter().all(|c| c["predicted"].as_u64() > Some(0)), "a label never predicted: {evaluation}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("micro-F1"));

    // tract and ONNX Runtime write the same probabilities and labels.
    let library = test_support::onnxruntime_library().expect("install ONNX Runtime for tests");
    let run = |backend: &str, out: &Path, extra: &[&str]| {
        let output = pipeline()
            .args(["run", "--backend", backend])
            .args(if backend == "ort" { vec!["--ort-library".as_ref(), library.as_os_str()] } else { vec![] })
            .args(extra)
            .arg("--input")
            .arg(fixture("labels-test.parquet"))
            .arg("--model")
            .arg(&model)
            .arg("--output")
            .arg(out)
            .output()
            .expect("run pipeline");
        assert!(output.status.success(), "{}", stderr(&output));
        read_batch(out)
    };
    let tract = run("tract", &dir.path().join("tract.parquet"), &["--attention", "full"]);
    let ort = run("ort", &dir.path().join("ort.parquet"), &["--attention", "full"]);
    let (a, b) = (list(&tract, "probabilities"), list(&ort, "probabilities"));
    for row in 0..tract.num_rows() {
        let diff = floats_of(a, row).iter().zip(floats_of(b, row)).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max);
        assert!(diff <= 1e-5, "row {row}: probabilities differ by {diff} between tract and ONNX Runtime");
        assert_eq!(strings_of(list(&tract, "predicted_labels"), row), strings_of(list(&ort, "predicted_labels"), row));
    }

    // Each row's labels are those reaching their threshold (or else the most probable), and its
    // pushes towards each add up to the label's own logit less its bias: for the fast tier the
    // same number on every row.
    let labels: Vec<String> =
        manifest["labels"].as_array().expect("labels").iter().map(|l| l.as_str().expect("a label").into()).collect();
    let (predicted, pushes) = (list(&tract, "predicted_labels"), list(&tract, "label_contributions"));
    // Each bias with how far the logit read back from an f32 probability may be off: p is
    // rounded to about 6e-8, which moves ln(p / (1 − p)) by that over p(1 − p).
    let mut bias_seen: Vec<Option<(f32, f64)>> = vec![None; labels.len()];
    let mut several = 0;
    for row in 0..tract.num_rows() {
        let probabilities = floats_of(a, row);
        let given = strings_of(predicted, row);
        let reaching: Vec<String> = labels
            .iter()
            .zip(&probabilities)
            .zip(&thresholds)
            .filter(|((_, p), t)| f64::from(**p) >= **t)
            .map(|((l, _), _)| l.clone())
            .collect();
        if reaching.is_empty() {
            assert_eq!(given.len(), 1, "row {row}");
        } else {
            assert_eq!(given, reaching, "row {row}");
        }
        several += usize::from(given.len() > 1);
        let per_label = pushes.value(row);
        let per_label = per_label.as_list::<i32>();
        assert_eq!(per_label.len(), given.len(), "row {row}: one list of pushes per predicted label");
        for (k, label) in given.iter().enumerate() {
            let index = labels.iter().position(|l| l == label).expect("a model label");
            let p = f64::from(probabilities[index]);
            let logit = (p / (1.0 - p)).ln() as f32;
            let summed: f32 = per_label.value(k).as_primitive::<Float32Type>().values().iter().sum();
            let bias = logit - summed;
            let rounding = 1e-3 + 6e-8 / (p * (1.0 - p));
            match bias_seen[index] {
                Some((seen, seen_rounding)) => assert!(
                    f64::from((seen - bias).abs()) < rounding + seen_rounding,
                    "row {row}, {label}: {bias} against {seen}"
                ),
                None => bias_seen[index] = Some((bias, rounding)),
            }
        }
    }
    assert!(several > 10, "only {several} rows got more than one label");

    // The default (compact) output holds the pushes as bytes with a scale per label.
    let compact = run("tract", &dir.path().join("compact.parquet"), &[]);
    let bytes = list(&compact, "label_contributions").value(0);
    assert_eq!(bytes.as_list::<i32>().value(0).data_type(), &DataType::Int8);
    let first = bytes.as_list::<i32>().value(0);
    assert!(first.as_primitive::<Int8Type>().values().iter().any(|&b| b.unsigned_abs() == 127));
    assert_eq!(list(&compact, "label_contribution_scales").value(0).len(), bytes.len());

    // SQL reads the lists, and classify() gives the same labels.
    let output_path = dir.path().join("tract.parquet");
    let query =
        format!("SELECT count(*) AS n FROM '{}' WHERE array_has(predicted_labels, 'earnings')", output_path.display());
    let output = pipeline().args(["sql", "--format", "json", &query]).output().expect("run sql");
    assert!(output.status.success(), "{}", stderr(&output));
    let with_earnings = (0..tract.num_rows()).filter(|&row| strings_of(predicted, row).contains(&"earnings".into()));
    let rows = String::from_utf8_lossy(&output.stdout);
    assert!(rows.contains(&format!("\"n\":{}", with_earnings.count())), "{rows}");
    let query = format!(
        "SELECT classify(text, '{}')['predicted_labels'] AS got FROM '{}' LIMIT 5",
        model.display(),
        fixture("labels-test.parquet").display()
    );
    let output = pipeline().args(["sql", "--format", "json", &query]).output().expect("run sql");
    assert!(output.status.success(), "{}", stderr(&output));
    let rows = String::from_utf8_lossy(&output.stdout);
    let first = strings_of(predicted, 0).iter().map(|l| format!("\"{l}\"")).collect::<Vec<_>>().join(",");
    assert!(rows.contains(&format!("[{first}]")), "{first}: {rows}");

    // The report draws the run, and refuses lists as true labels with what to do instead.
    let report = dir.path().join("report.html");
    let output =
        pipeline().args(["report", "--input"]).arg(&output_path).arg("--output").arg(&report).output().expect("report");
    assert!(output.status.success(), "{}", stderr(&output));
    let page = std::fs::read_to_string(&report).expect("report");
    assert!(page.contains("predicted-labels"), "the report tallies the predicted labels");
    let refused = dir.path().join("refused.html");
    let output = pipeline()
        .args(["report", "--label-column", "labels", "--input"])
        .arg(&output_path)
        .arg("--output")
        .arg(&refused)
        .output()
        .expect("report");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("pipeline eval --label-column labels"), "{}", stderr(&output));
    assert!(!refused.exists());
}

/// Every variant that pools tokens into class scores trains multi-label: the graph's sigmoids
/// match burn's (the package is verified with tract before it is written).
#[test]
fn the_networks_train_multi_label_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    for variant in ["san", "han", "cnn"] {
        let out = dir.path().join(variant);
        let tiny = [
            "--embedding-dim",
            "16",
            "--lstm-hidden",
            "8",
            "--gru-hidden",
            "8",
            "--attention-dim",
            "8",
            "--hops",
            "2",
            "--mlp-hidden",
            "16",
            "--filters",
            "8",
            "--sentence-words",
            "12",
            "--epochs",
            "2",
            "--max-tokens",
            "64",
            "--min-count",
            "1",
        ];
        let output = train_multi_label(variant, &out, &tiny);
        assert!(output.status.success(), "{variant}: {}", stderr(&output));
        assert!(stderr(&output).contains("verified the graph with tract"), "{variant}: {}", stderr(&output));
        let manifest = std::fs::read_to_string(out.join("manifest.json")).expect("manifest");
        assert!(manifest.contains("label_thresholds"), "{variant}: {manifest}");
    }
}

#[test]
fn multi_label_asked_of_one_label_per_row_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("model");
    let output = pipeline()
        .args(["train", "--variant", "ngram", "--multi-label", "--train"])
        .arg(fixture("topics-train.parquet"))
        .arg("--out")
        .arg(&out)
        .args(SMALL_NGRAM)
        .output()
        .expect("run pipeline");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("--multi-label: column `label`") && err.contains("list<string>"), "{err}");
    assert_nothing_written(dir.path(), &[]);
}

#[test]
fn an_empty_label_list_is_refused_naming_its_row() {
    use arrow::array::{ListBuilder, StringBuilder};
    let dir = tempfile::tempdir().expect("tempdir");
    let corpus = dir.path().join("lists.parquet");
    let mut lists = ListBuilder::new(StringBuilder::new());
    for row in 0..12 {
        if row != 5 {
            lists.values().append_value(["pos", "neg"][row % 2]);
        }
        lists.append(true);
    }
    let lists: ArrayRef = Arc::new(lists.finish());
    write_parquet(&corpus, vec![("text", strings(&reviews(12))), ("label", lists)]);
    let output = train(&corpus, &dir.path().join("model"), &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("1 row(s) of the label column `label` hold an empty list (the first is row 5)"), "{err}");
    assert_nothing_written(dir.path(), &["lists.parquet"]);
}

/// eval refuses a corpus labelled otherwise than the model was trained.
#[test]
fn a_multi_label_model_is_not_scored_on_one_label_per_row() {
    let dir = tempfile::tempdir().expect("tempdir");
    let model = dir.path().join("model");
    let output = train_multi_label("ngram", &model, &SMALL_NGRAM);
    assert!(output.status.success(), "{}", stderr(&output));
    let output = pipeline()
        .args(["eval", "--model"])
        .arg(&model)
        .arg("--data")
        .arg(fixture("topics-test.parquet"))
        .output()
        .expect("run eval");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("the model is multi-label, but column `label` holds one label per row"), "{err}");
}

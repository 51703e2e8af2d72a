//! The attention columns of each kind of package: none, sentences (HAN), summed, sparse or
//! left out, and pushes that point the right way.

use std::fs::File;
use std::path::Path;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::Float32Type;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::*;

#[test]
fn a_package_without_attention_writes_no_attention_columns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("predictions.parquet");
    let output = run_fixture("tiny-avg", &out, &["--embedding"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let batch = read(&out);
    let schema = batch.schema();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(
        names,
        [
            "id",
            "text",
            "label",
            "prediction",
            "prediction_index",
            "confidence",
            "probabilities",
            "token_spans",
            "truncated",
            "embedding"
        ]
    );
    assert_eq!(batch.num_rows(), 300);
    assert!(probabilities(&batch).iter().all(Option::is_some), "every review is predicted");
    let embedding = batch.column_by_name("embedding").expect("embedding").as_fixed_size_list();
    assert_eq!(embedding.value_length(), 24, "the mean of 24-wide word vectors");
}

#[test]
fn a_hierarchical_package_writes_sentence_columns_that_add_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("predictions.parquet");
    let output = run_fixture("tiny-han", &out, &["--attention", "full"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let batch = read(&out);
    assert_eq!(batch.num_rows(), 300);
    let tokens = &token_lists(&batch);
    let attention = batch.column_by_name("attention").expect("attention").as_list::<i32>();
    let lengths = batch.column_by_name("sentence_lengths").expect("sentence_lengths").as_list::<i32>();
    let weights = batch.column_by_name("sentence_attention").expect("sentence_attention").as_list::<i32>();
    let mut many_sentences = 0;
    for row in 0..batch.num_rows() {
        let row_lengths = lengths.value(row);
        let row_lengths = row_lengths.as_primitive::<arrow::datatypes::Int32Type>();
        let total: i32 = row_lengths.values().iter().sum();
        assert_eq!(total as usize, tokens.value(row).len(), "row {row}: sentence lengths cover the tokens");
        assert!(row_lengths.values().iter().all(|&n| (1..=12).contains(&n)), "row {row}: 1..=12 tokens per sentence");
        let row_weights = weights.value(row);
        let row_weights = row_weights.as_primitive::<Float32Type>();
        assert_eq!(row_weights.len(), row_lengths.len());
        assert!((row_weights.values().iter().sum::<f32>() - 1.0).abs() < 1e-4, "row {row}: sentence weights sum to 1");
        let hops = attention.value(row);
        let hops = hops.as_list::<i32>();
        assert_eq!(hops.len(), 1, "one document-level row");
        let words = hops.value(0);
        let words = words.as_primitive::<Float32Type>();
        assert_eq!(words.len(), tokens.value(row).len());
        assert!((words.values().iter().sum::<f32>() - 1.0).abs() < 1e-4, "row {row}: word weights sum to 1");
        many_sentences += usize::from(row_lengths.len() > 5);
    }
    assert!(many_sentences > 100, "most reviews have several sentences ({many_sentences})");
}

#[test]
fn hierarchical_results_do_not_depend_on_batching() {
    // Batches are sorted by sentence shape, so a document's batch mates (and the padding
    // they impose on it) change with the batch size; its outputs must not.
    let dir = tempfile::tempdir().expect("tempdir");
    let outputs: Vec<RecordBatch> = [("alone", "1", "7"), ("batched", "64", "4096")]
        .iter()
        .map(|(name, batch_size, window)| {
            let out = dir.path().join(format!("{name}.parquet"));
            let output = run_fixture("tiny-han", &out, &["--batch-size", batch_size, "--chunk-rows", window]);
            assert!(output.status.success(), "{}", stderr(&output));
            read(&out)
        })
        .collect();
    let diff = max_diff(&probabilities(&outputs[0]), &probabilities(&outputs[1]));
    assert!(diff <= 1e-5, "probabilities: batch size 1 vs 64 differ by {diff}");
    let sentence_weights = |batch: &RecordBatch| -> Vec<Option<Vec<f32>>> {
        let list = batch.column_by_name("sentence_attention").expect("sentence_attention").as_list::<i32>();
        (0..list.len()).map(|i| Some(list.value(i).as_primitive::<Float32Type>().values().to_vec())).collect()
    };
    let diff = max_diff(&sentence_weights(&outputs[0]), &sentence_weights(&outputs[1]));
    assert!(diff <= 1e-5, "sentence attention: batch size 1 vs 64 differ by {diff}");
}

/// The bench's null model writes the full output table, with attention that varies.
#[test]
fn the_null_model_writes_the_whole_table_with_varied_attention() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("null.parquet");
    let output = run(
        &reviews(),
        &out,
        &["--null-model", "--attention", "full", "--metrics-json", &dir.path().join("m.json").display().to_string()],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("[null-model]"));
    let batch = read(&out);
    assert_eq!(batch.num_rows(), 300);
    let attention = batch.column_by_name("attention").expect("attention").as_list::<i32>();
    let first = attention.value(0);
    let hop = first.as_list::<i32>().value(0);
    let weights: Vec<f32> = hop.as_primitive::<Float32Type>().values().to_vec();
    assert!((weights.iter().sum::<f32>() - 1.0).abs() < 1e-4);
    assert!(weights.iter().any(|&w| (w - weights[0]).abs() > 1e-6), "attention is constant");
    let metrics: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("m.json")).expect("metrics")).expect("json");
    assert!(metrics["stage_seconds"]["write"].as_f64().is_some_and(|s| s > 0.0));
}

/// Each --attention choice writes the columns it says, and the report and SQL read them all.
#[test]
fn attention_output_can_be_summed_sparse_or_left_out_and_every_reader_copes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let full = dir.path().join("full.parquet");
    assert!(run(&reviews(), &full, &["--attention", "full"]).status.success());
    let size = |path: &Path| std::fs::metadata(path).expect("meta").len();
    let names =
        |path: &Path| -> Vec<String> { read(path).schema().fields().iter().map(|f| f.name().clone()).collect() };
    let choices = [
        ("compact", false, true),
        ("hops", true, true),
        ("summary", false, true),
        ("top-k:5", true, true),
        ("none", false, false),
    ];
    for (choice, has_hops, has_summary) in choices {
        let out = dir.path().join(format!("{choice}.parquet"));
        let output = run(&reviews(), &out, &["--attention", choice]);
        assert!(output.status.success(), "{choice}: {}", stderr(&output));
        let columns = names(&out);
        assert_eq!(columns.iter().any(|c| c == "attention"), has_hops, "{choice}: {columns:?}");
        assert_eq!(columns.iter().any(|c| c == "attention_summary"), has_summary, "{choice}: {columns:?}");
        assert!(size(&out) < size(&full) / 2, "{choice}: {} vs {} bytes", size(&out), size(&full));
        let page = dir.path().join(format!("{choice}.html"));
        let report = pipeline(&["report"], &[("--input", &out), ("--output", &page)]);
        assert!(report.status.success(), "{choice}: {}", stderr(&report));
        // The predictions are those of the full output.
        assert_eq!(strings(&read(&out), "prediction"), strings(&read(&full), "prediction"));
    }
    // top-k:5 keeps five weights per hop, the heaviest, as they were.
    let sparse = read(&dir.path().join("top-k:5.parquet"));
    let dense = read(&full);
    let hops = |batch: &RecordBatch| batch.column_by_name("attention").expect("attention").as_list::<i32>().value(0);
    let (sparse_hops, dense_hops) = (hops(&sparse), hops(&dense));
    let (sparse_hops, dense_hops) = (sparse_hops.as_list::<i32>(), dense_hops.as_list::<i32>());
    for hop in 0..dense_hops.len() {
        let kept = sparse_hops.value(hop);
        let kept = kept.as_primitive::<Float32Type>().values();
        let all = dense_hops.value(hop);
        let all = all.as_primitive::<Float32Type>().values();
        assert_eq!(kept.iter().filter(|&&w| w > 0.0).count(), 5.min(all.len()));
        let heaviest = all.iter().copied().fold(0f32, f32::max);
        assert!(kept.contains(&heaviest), "hop {hop} keeps its heaviest weight");
    }
    // hops keeps each hop as bytes relative to its heaviest token, and the exact entropy of
    // each hop, as compact (the default) does.
    let default = dir.path().join("hops.parquet");
    let compact = read(&default);
    let entropies = compact.column_by_name("attention_entropy").expect("attention_entropy").as_list::<i32>().value(0);
    let entropies = entropies.as_primitive::<Float32Type>().values();
    let compact_hops = hops(&compact);
    let compact_hops = compact_hops.as_list::<i32>();
    assert_eq!(compact_hops.len(), dense_hops.len());
    for hop in 0..dense_hops.len() {
        let bytes = compact_hops.value(hop);
        let bytes = bytes.as_primitive::<arrow::datatypes::UInt8Type>().values();
        let all = dense_hops.value(hop);
        let all = all.as_primitive::<Float32Type>().values();
        let heaviest = all.iter().copied().fold(0f32, f32::max);
        for (&byte, &weight) in bytes.iter().zip(all) {
            assert!(
                (f32::from(byte) - 255.0 * weight / heaviest).abs() <= 0.5 + 1e-3,
                "hop {hop}: {byte} for {weight}"
            );
        }
        let entropy: f32 = all.iter().filter(|&&w| w > 0.0).map(|&w| -w * w.ln()).sum();
        assert!((entropies[hop] - entropy).abs() < 1e-4, "hop {hop}: entropy {} vs {entropy}", entropies[hop]);
    }
    // Every SQL function reads the bytes.
    let query = format!(
        "SELECT top_tokens(tokens, attention_summary, 3) AS top, attention_entropy(head_attention(attention, 2)) AS h, \
         attention_html(tokens, head_attention(attention, 1)) AS a, contribution_html(tokens, contribution) AS c \
         FROM '{}' WHERE tokens IS NOT NULL",
        default.display()
    );
    let sql = pipeline(&["sql", &query, "--max-rows", "0"], &[]);
    assert!(sql.status.success(), "{}", stderr(&sql));
    assert!(String::from_utf8_lossy(&sql.stdout).contains("300 rows"), "{}", String::from_utf8_lossy(&sql.stdout));
    // Each row's `contribution_scale` gives its bytes back in logit units, to within half a
    // step: in Rust, and in the titles of SQL's contribution_html.
    let dense_pushes = dense.column_by_name("contribution").expect("contribution").as_list::<i32>().value(0);
    let dense_pushes = dense_pushes.as_primitive::<Float32Type>().values();
    let scale = compact
        .column_by_name("contribution_scale")
        .expect("contribution_scale")
        .as_primitive::<Float32Type>()
        .value(0);
    let bytes = compact.column_by_name("contribution").expect("contribution").as_list::<i32>().value(0);
    let bytes = bytes.as_primitive::<arrow::datatypes::Int8Type>().values();
    for (&byte, &push) in bytes.iter().zip(dense_pushes) {
        assert!((f32::from(byte) * scale - push).abs() <= scale / 2.0 + 1e-6, "{byte} × {scale} for {push}");
    }
    let query = format!(
        "SELECT contribution_html(tokens, contribution, contribution_scale) AS c FROM '{}' LIMIT 1",
        default.display()
    );
    let sql = pipeline(&["sql", &query, "--format", "csv", "--max-cell-width", "0"], &[]);
    assert!(sql.status.success(), "{}", stderr(&sql));
    let html = String::from_utf8_lossy(&sql.stdout).to_string();
    let titles: Vec<f32> = html.split("title=\"\"").skip(1).filter_map(|t| t.split('"').next()?.parse().ok()).collect();
    assert_eq!(titles.len(), dense_pushes.len(), "{html}");
    for (title, push) in titles.iter().zip(dense_pushes) {
        assert!((title - push).abs() <= scale / 2.0 + 1e-4, "title {title} for a push of {push}");
    }
    // A scale that is no scale is refused, not drawn as plausible titles.
    for bad in ["-1.0", "0.0", "'NaN'::double"] {
        let query = format!("SELECT contribution_html(tokens, contribution, {bad}) FROM '{}'", default.display());
        let sql = pipeline(&["sql", &query], &[]);
        assert!(!sql.status.success(), "{bad} was taken for a scale");
        assert!(stderr(&sql).contains("not a finite number above 0"), "{bad}: {}", stderr(&sql));
    }
    let output = run(&reviews(), &dir.path().join("bad.parquet"), &["--attention", "top-k:0"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
}

/// With two classes, `contribution` points at the second label on every row, and the output
/// says so: a confident `neg` row's pushes sum below zero, a confident `pos` row's above.
/// (Pushes towards each row's prediction would sum above zero on both.)
#[test]
fn two_class_pushes_point_at_the_second_label_on_every_row() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.parquet");
    // The embedded default model: confident enough for the sign of a net push to mean something.
    let output = pipeline(&["run", "--attention", "full"], &[("--input", &reviews()), ("--output", &out)]);
    assert!(output.status.success(), "{}", stderr(&output));
    let batch = read(&out);
    let file = ParquetRecordBatchReaderBuilder::try_new(File::open(&out).expect("open")).expect("parquet");
    let metadata = file.metadata().file_metadata().key_value_metadata().cloned().unwrap_or_default();
    let towards = metadata.iter().find(|kv| kv.key == "pipeline.contribution_towards").and_then(|kv| kv.value.clone());
    assert_eq!(towards.as_deref(), Some("label:pos"));
    let predictions = strings(&batch, "prediction");
    let confidence = batch.column_by_name("confidence").expect("confidence").as_primitive::<Float32Type>().clone();
    let pushes = batch.column_by_name("contribution").expect("contribution").as_list::<i32>().clone();
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    for row in (0..batch.num_rows()).filter(|&row| confidence.value(row) >= 0.6) {
        let prediction = predictions[row].clone().expect("a prediction");
        let net: f32 = pushes.value(row).as_primitive::<Float32Type>().values().iter().sum();
        assert_eq!(net > 0.0, prediction == "pos", "row {row}, predicted {prediction}: net push {net}");
        *seen.entry(prediction).or_default() += 1;
    }
    assert!(seen.len() == 2 && seen.values().all(|&n| n >= 50), "both classes, confidently: {seen:?}");
}

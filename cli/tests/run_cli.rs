//! `pipeline run` and `pipeline inspect` as a user runs them, on the committed tiny SAN
//! package (`fixtures/tiny-san`, trained by `pipeline train` on the fixture slice).

mod common;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use arrow::array::{Array, AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{Field, Float32Type, Schema};
use common::*;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};

#[test]
fn writes_predictions_with_attention_in_input_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("predictions.parquet");
    let metrics = dir.path().join("run.json");
    let output = pipeline(
        &["run", "--embedding", "--attention", "full"],
        &[("--input", &reviews()), ("--model", &tiny_model()), ("--output", &out), ("--metrics-json", &metrics)],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let summary = String::from_utf8_lossy(&output.stdout);
    assert!(
        summary.contains("300 rows (300 predicted") && summary.contains("docs/s") && summary.contains("tokens/s"),
        "{summary}"
    );

    let batch = read(&out);
    let input = read(&reviews());
    assert_eq!(strings(&batch, "id"), strings(&input, "id"), "rows must keep the input order");
    let labels = ["neg", "pos"];
    let tokens = &token_lists(&batch);
    let attention = batch.column_by_name("attention").expect("attention").as_list::<i32>();
    let summaries = batch.column_by_name("attention_summary").expect("summary").as_list::<i32>();
    let predictions = strings(&batch, "prediction");
    for (row, probs) in probabilities(&batch).into_iter().enumerate() {
        let probs = probs.expect("every review is predicted");
        assert!((probs.iter().sum::<f32>() - 1.0).abs() < 1e-5);
        let best = if probs[1] > probs[0] { 1 } else { 0 };
        assert_eq!(predictions[row].as_deref(), Some(labels[best]));
        let n_tokens = tokens.value(row).len();
        assert!(n_tokens > 0, "every review has tokens");
        let heads = attention.value(row);
        let heads = heads.as_list::<i32>();
        assert_eq!(heads.len(), 3, "one row per attention hop");
        for hop in 0..heads.len() {
            let weights = heads.value(hop);
            let weights = weights.as_primitive::<Float32Type>();
            assert_eq!(weights.len(), n_tokens, "attention is unpadded");
            assert!((weights.values().iter().sum::<f32>() - 1.0).abs() < 1e-4);
        }
        let summary = summaries.value(row);
        assert!((summary.as_primitive::<Float32Type>().values().iter().sum::<f32>() - 1.0).abs() < 1e-4);
    }
    let embedding = batch.column_by_name("embedding").expect("embedding column with --embedding");
    assert_eq!(embedding.as_fixed_size_list().value_length(), 48);

    let parquet_metadata =
        ParquetRecordBatchReaderBuilder::try_new(File::open(&out).expect("open")).expect("parquet").metadata().clone();
    // Lists of floats are stored uncompressed (zstd barely shrinks weights); the rest is zstd
    // (Parquet does not record the level).
    for column in parquet_metadata.row_group(0).columns() {
        let path = column.column_path().string();
        let floats = ["probabilities", "attention", "contribution", "embedding"].iter().any(|c| path.starts_with(c));
        let expected = if floats { Compression::UNCOMPRESSED } else { Compression::ZSTD(ZstdLevel::default()) };
        assert_eq!(column.compression(), expected, "{path}");
    }
    let metadata = parquet_metadata.file_metadata().key_value_metadata().cloned().unwrap_or_default();
    let keys: Vec<&str> = metadata.iter().map(|kv| kv.key.as_str()).collect();
    for key in ["model.variant", "model.sha256", "model.labels", "pipeline.version"] {
        assert!(keys.contains(&key), "metadata lacks {key}: {keys:?}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&metrics).expect("metrics")).expect("json");
    assert_eq!(json["rows"], 300);
    assert_timestamps(&json, "started_at", "finished_at");
    assert_eq!(files_in(dir.path()), ["predictions.parquet", "run.json"], "no temporary file is left");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&out).expect("metadata").permissions().mode() & 0o777;
        assert_eq!(mode, 0o644, "the output is readable by others, not private like a temporary file");
    }
}

/// Batch size, window (and so how many windows are in flight between the stages), and
/// threads change how the work is cut and scheduled, never the results.
#[test]
fn results_do_not_depend_on_batch_size_token_budget_chunk_rows_or_threads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let reference = dir.path().join("reference.parquet");
    assert!(run(&reviews(), &reference, &["--batch-size", "64", "--chunk-rows", "4096"]).status.success());
    let reference = read(&reference);
    let settings: [&[&str]; 5] = [
        &["--batch-size", "1", "--chunk-rows", "7"],
        &["--max-batch-tokens", "700"],
        &["--batch-size", "300", "--max-batch-tokens", "1", "--chunk-rows", "50"],
        &["--batch-size", "5", "--chunk-rows", "1", "--threads", "1"],
        &["--batch-size", "300", "--chunk-rows", "300", "--threads", "2"],
    ];
    for (i, args) in settings.into_iter().enumerate() {
        let out = dir.path().join(format!("{i}.parquet"));
        let output = run(&reviews(), &out, args);
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        let batch = read(&out);
        // Every document's tokens differ, so equal token columns mean the rows are in order.
        assert_eq!(token_lists(&batch), token_lists(&reference), "{args:?}: rows moved");
        assert_eq!(strings(&batch, "prediction"), strings(&reference, "prediction"), "{args:?}: predictions differ");
        let diff = max_diff(&probabilities(&batch), &probabilities(&reference));
        assert!(diff <= 1e-5, "{args:?}: probabilities differ by {diff}");
    }
}

/// Chunks are assembled several at once but appended in input order (checked above), one
/// row group each; `--window`, the old name of `--chunk-rows`, still sets it, with a warning.
#[test]
fn each_chunk_is_one_row_group() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("chunks.parquet");
    for flag in ["--chunk-rows", "--window"] {
        let output = run(&reviews(), &out, &[flag, "7", "--threads", "4"]);
        assert!(output.status.success(), "{}", stderr(&output));
        assert_eq!(stderr(&output).contains("--window is now --chunk-rows"), flag == "--window", "{}", stderr(&output));
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&out).expect("open")).expect("parquet");
        let rows: Vec<i64> = reader.metadata().row_groups().iter().map(|group| group.num_rows()).collect();
        let mut expected = vec![7; 300 / 7];
        expected.push(300 % 7);
        assert_eq!(rows, expected, "{flag}");
    }
    let output = run(&reviews(), &out, &["--chunk-rows", "7", "--window", "8"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
}

#[test]
fn profile_names_each_stage_and_the_bottleneck() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = run(&reviews(), &dir.path().join("p.parquet"), &["--profile"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let profile = stderr(&output);
    for stage in ["read", "tokenize", "infer", "assemble", "write"] {
        assert!(profile.lines().any(|l| l.trim_start().starts_with(stage)), "{stage} missing: {profile}");
    }
    assert_eq!(profile.matches("<- the bottleneck").count(), 1, "{profile}");
}

#[test]
fn tract_and_onnx_runtime_agree() {
    let dir = tempfile::tempdir().expect("tempdir");
    let library = test_support::onnxruntime_library().expect("install ONNX Runtime for tests");
    let (tract, ort) = (dir.path().join("tract.parquet"), dir.path().join("ort.parquet"));
    assert!(run(&reviews(), &tract, &[]).status.success());
    let home = tempfile::tempdir().expect("HOME");
    let output = Command::new(env!("CARGO_BIN_EXE_pipeline"))
        .args(["run", "--backend", "ort", "--input"])
        .arg(reviews())
        .arg("--model")
        .arg(tiny_model())
        .arg("--output")
        .arg(&ort)
        .arg("--ort-library")
        .arg(&library)
        .env("HOME", home.path())
        .env_remove("XDG_CACHE_HOME")
        .env_remove(runtime::inference::TELEMETRY_OFF_VARIABLE)
        .output()
        .expect("run pipeline");
    assert!(output.status.success(), "{}", stderr(&output));
    let diff = max_diff(&probabilities(&read(&tract)), &probabilities(&read(&ort)));
    assert!(diff <= 1e-5, "tract and ORT differ by {diff}");
    // ONNX Runtime's telemetry (a device id and an event store under ~/.cache/Microsoft) is off:
    // the run wrote its output and nothing in the user's home.
    let written: Vec<_> = std::fs::read_dir(home.path()).expect("home").collect();
    assert!(written.is_empty(), "the run wrote into HOME: {written:?}");
}

#[test]
fn null_empty_and_overlong_texts_are_counted_per_row() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("odd.parquet");
    let long = "a great film . ".repeat(100);
    let texts = StringArray::from(vec![Some("a fine film"), None, Some(""), Some("   "), Some(long.as_str())]);
    write_parquet(&input, vec![("id", Arc::new(Int64Array::from(vec![1, 2, 3, 4, 5]))), ("text", Arc::new(texts))]);
    let out = dir.path().join("out.parquet");
    let output = run(&input, &out, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let summary = String::from_utf8_lossy(&output.stdout);
    assert!(summary.contains("5 rows (2 predicted, 1 null, 2 empty, 1 in windows, 0 truncated)"), "{summary}");
    let batch = read(&out);
    assert_eq!(batch.num_rows(), 5, "every input row is kept");
    let predictions = strings(&batch, "prediction");
    assert!(predictions[0].is_some() && predictions[4].is_some());
    assert!(predictions[1].is_none() && predictions[2].is_none() && predictions[3].is_none());
    let tokens = &token_lists(&batch);
    assert_eq!(tokens.value(4).len(), 400, "a text over the limit is read whole, in windows");
    let truncated = batch.column_by_name("truncated").expect("truncated").as_boolean();
    assert!(!truncated.value(4) && truncated.is_null(1));

    // --long-documents truncate cuts it at the model's limit, and says so.
    let output = run(&input, &out, &["--long-documents", "truncate"]);
    let summary = String::from_utf8_lossy(&output.stdout);
    assert!(summary.contains("5 rows (2 predicted, 1 null, 2 empty, 0 in windows, 1 truncated)"), "{summary}");
    let batch = read(&out);
    let tokens = &token_lists(&batch);
    assert_eq!(tokens.value(4).len(), 256, "overlong text truncated to the model's limit");
    let truncated = batch.column_by_name("truncated").expect("truncated").as_boolean();
    assert!(truncated.value(4) && !truncated.value(0));
}

/// Windows cover the whole document: attention comes back over every token, each hop still
/// a distribution; head-tail keeps the end of the text; the flags check each other.
#[test]
fn long_documents_are_read_in_windows_or_by_head_and_tail() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("long.parquet");
    // 300 tokens of praise, then 300 of scorn: a cut at 256 sees only the praise.
    let long = format!("{}{}", "a wonderful film . ".repeat(75), "an awful , boring mess . ".repeat(50));
    let texts = StringArray::from(vec![Some(long.as_str()), Some("a fine film")]);
    write_parquet(&input, vec![("id", Arc::new(Int64Array::from(vec![1, 2]))), ("text", Arc::new(texts))]);
    let out = dir.path().join("out.parquet");
    let output = run(&input, &out, &["--long-document-stride", "100", "--attention", "full"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let batch = read(&out);
    assert_eq!(strings_of_list(&batch, "tokens", 0).len(), 600);
    let attention = batch.column_by_name("attention").expect("attention").as_list::<i32>().value(0);
    let hops = attention.as_list::<i32>();
    for hop in 0..hops.len() {
        let weights = hops.value(hop);
        let weights = weights.as_primitive::<Float32Type>();
        assert_eq!(weights.len(), 600);
        let mass: f32 = weights.values().iter().sum();
        assert!((mass - 1.0).abs() < 1e-3, "hop {hop} sums to {mass}");
        // The last window covers the scorn at the end.
        assert!(weights.values()[400..].iter().any(|&w| w > 0.0));
    }

    let whole = strings_of_list(&batch, "tokens", 0);
    let output = run(&input, &out, &["--long-documents", "head-tail", "--attention", "full"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let kept = strings_of_list(&read(&out), "tokens", 0);
    assert_eq!(kept.len(), 256);
    assert_eq!(kept[..64], whole[..64], "the first quarter of the limit");
    assert_eq!(kept[64..], whole[600 - 192..], "the rest from the end");

    let output = run(&input, &out, &["--long-documents", "truncate", "--long-document-stride", "10"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("need --long-documents windows"), "{}", stderr(&output));
    let output = run(&input, &out, &["--long-document-stride", "300"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("window stride is 300"), "{}", stderr(&output));
}

fn strings_of_list(batch: &arrow::array::RecordBatch, column: &str, row: usize) -> Vec<String> {
    let list = match column {
        "tokens" => token_lists(batch).value(row),
        _ => batch.column_by_name(column).expect("column").as_list::<i32>().value(row),
    };
    list.as_string::<i32>().iter().map(|t| t.unwrap_or_default().to_owned()).collect()
}

#[test]
fn reads_arrow_ipc_directories_and_globs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let inputs = dir.path().join("in");
    std::fs::create_dir(&inputs).expect("mkdir");
    let texts: Arc<dyn Array> = Arc::new(StringArray::from(vec!["a wonderful film", "a dull , awful film"]));
    write_parquet(&inputs.join("part-1.parquet"), vec![("text", texts.clone())]);
    let schema = Arc::new(Schema::new(vec![Field::new("text", texts.data_type().clone(), true)]));
    let mut ipc =
        arrow::ipc::writer::FileWriter::try_new(File::create(inputs.join("part-2.arrow")).expect("create"), &schema)
            .expect("ipc writer");
    ipc.write(&RecordBatch::try_new(schema, vec![texts]).expect("batch")).expect("write");
    ipc.finish().expect("finish");

    let out = dir.path().join("dir.parquet");
    let output = run(&inputs, &out, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(read(&out).num_rows(), 4);
    let pattern = format!("{}/*.arrow", inputs.display());
    let out = dir.path().join("glob.parquet");
    let output = pipeline(&["run", "--input", &pattern], &[("--model", &tiny_model()), ("--output", &out)]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(read(&out).num_rows(), 2);
}

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

#[test]
fn inspect_shows_the_package() {
    let output = pipeline(&["inspect", &tiny_model().to_string_lossy()], &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("variant:     san") && text.contains("labels:      neg, pos"), "{text}");
    assert!(text.contains("outputs:     probs, attention, embedding") && text.contains("parameters:  99082"), "{text}");
}

#[test]
fn cuda_requests_fail_clearly_without_a_cuda_runtime() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.parquet");
    let output = run(&reviews(), &out, &["--backend", "tract", "--device", "cuda"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("tract backend runs on the CPU only"), "{}", stderr(&output));
    // The default backend never meets a GPU request with tract: it needs ONNX Runtime.
    let output = run(&reviews(), &out, &["--device", "cuda"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(!stderr(&output).contains("[tract]") && !out.exists(), "{}", stderr(&output));

    // The CPU wheel installed for the tests has no CUDA provider: a clear error, never a
    // silent fall-back to the CPU. (With onnxruntime-gpu on a GPU machine this would run.)
    let library = test_support::onnxruntime_library().expect("install ONNX Runtime for tests");
    let output = pipeline(
        &["run", "--backend", "ort", "--device", "cuda"],
        &[("--input", &reviews()), ("--model", &tiny_model()), ("--output", &out), ("--ort-library", &library)],
    );
    assert!(!output.status.success());
    assert!(stderr(&output).contains("CUDA execution provider is not available"), "{}", stderr(&output));
    // Before it, the run says which of the GPU's defaults it took.
    assert!(stderr(&output).contains("batches of 1024 documents, chunks of 8192 rows"), "{}", stderr(&output));
    assert!(!out.exists());
}

#[test]
fn embedded_default_model_runs_without_a_model_flag() {
    // The README's first command, with the output redirected.
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("predictions.parquet");
    let output = pipeline(&["run"], &[("--input", &reviews()), ("--output", &out)]);
    assert!(output.status.success(), "{}", stderr(&output));
    let batch = read(&out);
    let (predicted, truth) = (strings(&batch, "prediction"), strings(&batch, "label"));
    let correct = predicted.iter().zip(&truth).filter(|(p, t)| p == t).count();
    let accuracy = correct as f64 / truth.len() as f64;
    assert!(accuracy > 0.8, "the IMDB model gets only {accuracy:.3} of the fixture reviews right");

    let inspect = pipeline(&["inspect"], &[]);
    assert!(inspect.status.success(), "{}", stderr(&inspect));
    let text = String::from_utf8_lossy(&inspect.stdout);
    assert!(text.contains("embedded default") && text.contains("attention:   8 heads"), "{text}");
}

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

/// A fake `python3` that records that it ran and says onnxruntime lives in `capi`.
fn fake_python(dir: &Path, capi: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("bin dir");
    let script = bin.join("python3");
    let marker = dir.join("python-ran");
    std::fs::write(&script, format!("#!/bin/sh\ntouch '{}'\necho '{}'\n", marker.display(), capi.display()))
        .expect("script");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    bin
}

#[test]
fn python_is_asked_for_onnx_runtime_only_when_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let library = test_support::onnxruntime_library().expect("install ONNX Runtime for tests");
    let capi = dir.path().join("capi");
    std::fs::create_dir(&capi).expect("capi");
    std::os::unix::fs::symlink(&library, capi.join("libonnxruntime.so.1.32.0")).expect("symlink");
    let bin = fake_python(dir.path(), &capi);
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let run_ort = |library: &str, out: &Path| {
        Command::new(env!("CARGO_BIN_EXE_pipeline"))
            .args(["run", "--backend", "ort", "--ort-library", library, "--input"])
            .arg(reviews())
            .arg("--model")
            .arg(tiny_model())
            .arg("--output")
            .arg(out)
            .env("PATH", &path)
            .env_remove("ORT_DYLIB_PATH")
            .output()
            .expect("run pipeline")
    };

    // A path is used as it is: Python is not run.
    let explicit = run_ort(&library.display().to_string(), &dir.path().join("explicit.parquet"));
    assert!(explicit.status.success(), "{}", stderr(&explicit));
    assert!(!dir.path().join("python-ran").exists(), "python3 ran although a library path was given");

    // `python` asks the python3 on PATH, and uses the library it names.
    let asked = run_ort("python", &dir.path().join("python.parquet"));
    assert!(asked.status.success(), "{}", stderr(&asked));
    assert!(dir.path().join("python-ran").exists(), "python3 was not asked");

    // A python3 whose answer holds no library is a clear error.
    std::fs::remove_file(capi.join("libonnxruntime.so.1.32.0")).expect("remove");
    let missing = run_ort("python", &dir.path().join("missing.parquet"));
    assert_eq!(missing.status.code(), Some(1));
    assert!(stderr(&missing).contains("pip install onnxruntime"), "{}", stderr(&missing));
    assert!(!dir.path().join("missing.parquet").exists());
}

/// With no `--backend`, ONNX Runtime runs where its library is found, and tract, saying so,
/// where it is not.
#[test]
fn the_default_backend_is_onnx_runtime_where_its_library_is_found_else_tract() {
    let dir = tempfile::tempdir().expect("tempdir");
    let library = test_support::onnxruntime_library().expect("install ONNX Runtime for tests");
    let run_default = |library: Option<&Path>, out: &Path| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_pipeline"));
        command.current_dir(dir.path()).args(["run", "--input"]).arg(reviews()).arg("--model").arg(tiny_model());
        command.arg("--output").arg(out).env_remove("ORT_DYLIB_PATH").env("PATH", "/usr/bin:/bin");
        if let Some(library) = library {
            command.env("ORT_DYLIB_PATH", library);
        }
        command.output().expect("run pipeline")
    };
    let found = run_default(Some(&library), &dir.path().join("ort.parquet"));
    assert!(found.status.success(), "{}", stderr(&found));
    assert!(String::from_utf8_lossy(&found.stdout).contains("[ort-cpu]"), "{}", String::from_utf8_lossy(&found.stdout));
    let missing = run_default(None, &dir.path().join("tract.parquet"));
    assert!(missing.status.success(), "{}", stderr(&missing));
    // With the default target directory the tests' own copy sits next to the binary
    // (target/onnxruntime), where the default backend rightly finds it.
    let beside_binary = Path::new(env!("CARGO_BIN_EXE_pipeline"))
        .ancestors()
        .skip(1)
        .take(3)
        .any(|dir| dir.join("onnxruntime").join(runtime::inference::LIBRARY_FILE).is_file());
    let expected = if beside_binary { "[ort-cpu]" } else { "[tract]" };
    assert!(String::from_utf8_lossy(&missing.stdout).contains(expected), "expected {expected}");
    if !beside_binary {
        assert!(stderr(&missing).contains("using tract"), "{}", stderr(&missing));
    }
    // A library named in ORT_DYLIB_PATH must work: auto does not hide a wrong one behind tract.
    let wrong = run_default(Some(&dir.path().join("no-such-library.so")), &dir.path().join("wrong.parquet"));
    assert_eq!(wrong.status.code(), Some(1), "{}", stderr(&wrong));
    assert!(stderr(&wrong).contains("ORT_DYLIB_PATH"), "{}", stderr(&wrong));
    let diff = max_diff(
        &probabilities(&read(&dir.path().join("ort.parquet"))),
        &probabilities(&read(&dir.path().join("tract.parquet"))),
    );
    assert!(diff <= 1e-5, "the two defaults differ by {diff}");
}

#[test]
fn tf32_without_cuda_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.parquet");
    let output = run(&reviews(), &out, &["--tf32"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("--tf32 applies to CUDA only"), "{}", stderr(&output));
    assert!(!out.exists());
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

#[path = "run/input_formats.rs"]
mod input_formats;

#[path = "run/dropped_columns.rs"]
mod dropped_columns;

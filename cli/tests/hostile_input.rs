//! The batch-job contract under careless or hostile use: every case ends with exit code 1
//! (2 for usage errors), a message naming the file, column or row, and no existing file
//! touched. Each test here reproduces a case that once broke that contract. Newer cases are
//! grouped by subject under `hostile/`.

mod common;

#[path = "hostile/delta.rs"]
mod delta;
#[path = "hostile/outputs.rs"]
mod outputs;
#[path = "hostile/secrets.rs"]
mod secrets;
#[path = "hostile/sql.rs"]
mod sql;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Array, DictionaryArray, Int64Array};
use arrow::datatypes::Int32Type;
use common::*;
use serde_json::Value;

fn exit_code(output: &Output) -> Option<i32> {
    output.status.code()
}

/// A copy of a fixture package whose manifest `edit` changes.
fn package_with(dir: &Path, source: &str, edit: impl FnOnce(&mut Value)) -> PathBuf {
    let model = dir.join("model");
    std::fs::create_dir(&model).expect("mkdir");
    for file in ["model.onnx", "manifest.json", "tokenizer.json"] {
        std::fs::copy(repo_root().join(source).join(file), model.join(file)).expect("copy");
    }
    let text = std::fs::read_to_string(model.join("manifest.json")).expect("manifest");
    let mut manifest: Value = serde_json::from_str(&text).expect("json");
    edit(&mut manifest);
    std::fs::write(model.join("manifest.json"), manifest.to_string()).expect("write");
    model
}

fn run_with_model(model: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["run"];
    args.extend_from_slice(extra);
    pipeline(&args, &[("--input", &reviews()), ("--model", model), ("--output", out)])
}

/// Asserts a refusal: exit code `code`, every one of `needles` in the message, no output.
fn assert_refused(output: &Output, code: i32, needles: &[&str], out: &Path) {
    let err = stderr(output);
    assert_eq!(exit_code(output), Some(code), "{err}");
    for needle in needles {
        assert!(err.contains(needle), "expected `{needle}` in: {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
    assert!(!out.exists(), "{} was written", out.display());
}

fn sha(path: &Path) -> Vec<u8> {
    std::fs::read(path).expect("read")
}

#[test]
fn labels_that_do_not_match_the_graph_are_refused_when_the_package_opens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.parquet");
    // A 3-class graph with two labels (this panicked at `labels[best]`).
    let model = package_with(dir.path(), "fixtures/tiny-avg-3class", |m| m["labels"] = serde_json::json!(["a", "b"]));
    let output = run_with_model(&model, &out, &[]);
    assert_refused(&output, 1, &["outputs 3 class probabilities", "lists 2 labels", "manifest.json"], &out);
    // The same package, inspected, is refused too.
    let inspect = pipeline(&["inspect", &model.to_string_lossy()], &[]);
    assert_refused(&inspect, 1, &["outputs 3 class probabilities"], &out);
    std::fs::remove_dir_all(&model).expect("clean");

    // A 2-class graph with three labels (accepted before, metadata listing 3 labels).
    let model = package_with(dir.path(), "fixtures/tiny-san", |m| m["labels"] = serde_json::json!(["a", "b", "c"]));
    assert_refused(&run_with_model(&model, &out, &[]), 1, &["outputs 2 class probabilities", "lists 3 labels"], &out);
    std::fs::remove_dir_all(&model).expect("clean");

    let model = package_with(dir.path(), "fixtures/tiny-san", |m| m["labels"] = serde_json::json!(["x", "x"]));
    assert_refused(&run_with_model(&model, &out, &[]), 1, &["label `x` twice"], &out);
}

#[test]
fn attention_heads_that_do_not_match_the_graph_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.parquet");
    let model = package_with(dir.path(), "fixtures/tiny-san", |m| m["attention_heads"] = 8.into());
    let output = run_with_model(&model, &out, &[]);
    assert_refused(&output, 1, &["outputs 3 attention rows", "attention_heads = 8"], &out);

    // Without an `attention` output at all, the message reads as English.
    std::fs::remove_dir_all(&model).expect("clean");
    let model = package_with(dir.path(), "fixtures/tiny-avg", |m| m["attention_heads"] = 2.into());
    let output = run_with_model(&model, &out, &[]);
    assert_refused(&output, 1, &["the graph has no `attention` output"], &out);

    // A hierarchical model has one attention row.
    std::fs::remove_dir_all(&model).expect("clean");
    let model = package_with(dir.path(), "fixtures/tiny-han", |m| m["attention_heads"] = 3.into());
    assert_refused(&run_with_model(&model, &out, &[]), 1, &["attention_heads = Some(3)", "one attention row"], &out);
}

#[test]
fn no_output_is_written_over_the_model_package() {
    let dir = tempfile::tempdir().expect("tempdir");
    let model = package_with(dir.path(), "fixtures/tiny-san", |_| {});
    let before: Vec<Vec<u8>> = files_in(&model).iter().map(|f| sha(&model.join(f))).collect();
    let graph = model.join("model.onnx");
    assert_refused(
        &run_with_model(&model, &graph, &[]),
        1,
        &["model package", "is one of the input files"],
        &dir.path().join("none"),
    );
    let out = dir.path().join("out.parquet");
    let manifest = model.join("manifest.json");
    let output = pipeline(
        &["run"],
        &[("--input", &reviews()), ("--model", &model), ("--output", &out), ("--metrics-json", &manifest)],
    );
    assert_refused(&output, 1, &["--metrics-json", "model package"], &out);
    // A package that classify() reads in a query.
    let query = format!("SELECT classify(text, '{}').prediction AS p FROM '{}'", model.display(), reviews().display());
    let output = pipeline(&["sql", &query, "--format", "csv"], &[("--output", &graph)]);
    assert_eq!(exit_code(&output), Some(1), "{}", stderr(&output));
    let after: Vec<Vec<u8>> = files_in(&model).iter().map(|f| sha(&model.join(f))).collect();
    assert_eq!(before, after, "the package is untouched");
}

#[test]
fn a_tokenizer_from_another_package_is_refused_naming_both_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.parquet");
    let model = package_with(dir.path(), "fixtures/tiny-san", |_| {});
    std::fs::copy(repo_root().join("fixtures/default-model/tokenizer.json"), model.join("tokenizer.json"))
        .expect("copy");
    let output = run_with_model(&model, &out, &[]);
    assert_refused(&output, 1, &["tokenizer.json produces token ids up to", "model.onnx has", "rows"], &out);
}

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
fn the_input_is_never_the_output() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::create_dir(&data).expect("mkdir");
    let input = data.join("reviews.parquet");
    std::fs::copy(reviews(), &input).expect("copy");
    let before = sha(&input);

    let output = run(&input, &input, &[]);
    assert_eq!(exit_code(&output), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("is one of the input files"), "{}", stderr(&output));
    // The same file reached through `..` and a symlink.
    let roundabout = data.join("../data/reviews.parquet");
    assert_eq!(exit_code(&run(&input, &roundabout, &[])), Some(1));
    #[cfg(unix)]
    {
        let link = dir.path().join("link.parquet");
        std::os::unix::fs::symlink(&input, &link).expect("symlink");
        assert_eq!(exit_code(&run(&input, &link, &[])), Some(1));
    }

    // An output inside an input directory or glob would be read back by a rerun.
    let inside = data.join("predictions.parquet");
    let output = run(&data, &inside, &[]);
    assert_refused(&output, 1, &["a rerun would read it back as input"], &inside);
    let pattern = format!("{}/*.parquet", data.display());
    let output = pipeline(&["run", "--input", &pattern], &[("--model", &tiny_model()), ("--output", &inside)]);
    assert_refused(&output, 1, &["a rerun would read it back as input"], &inside);
    // Anything else inside the input directory would be taken for part of it by its readers;
    // beside the directory is fine.
    let inside = data.join("predictions.out");
    let output = run(&data, &inside, &[]);
    assert_refused(&output, 1, &["inside the input directory"], &inside);
    let beside = dir.path().join("predictions.out");
    let output = run(&data, &beside, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(sha(&input), before, "the input is untouched");
}

#[test]
fn metrics_json_is_checked_before_any_work() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("reviews.parquet");
    std::fs::copy(reviews(), &input).expect("copy");
    let before = sha(&input);
    let out = dir.path().join("out.parquet");
    let with_metrics = |metrics: &Path| {
        pipeline(
            &["run"],
            &[("--input", &input), ("--model", &tiny_model()), ("--output", &out), ("--metrics-json", metrics)],
        )
    };

    assert_refused(&with_metrics(&out), 1, &["--metrics-json", "is also --output"], &out);
    assert_refused(&with_metrics(&input), 1, &["--metrics-json", "is one of the input files"], &out);
    assert_eq!(sha(&input), before);
    // Inside a dataset output it could replace a part or `_SUCCESS`.
    let dataset = dir.path().join("dataset");
    std::fs::create_dir(&dataset).expect("mkdir");
    let output = pipeline(
        &["run"],
        &[
            ("--input", &input),
            ("--model", &tiny_model()),
            ("--output", &dataset),
            ("--metrics-json", &dataset.join("_SUCCESS")),
        ],
    );
    assert_refused(&output, 1, &["--metrics-json", "inside the dataset output"], &out);
    assert!(files_in(&dataset).is_empty(), "nothing is written into the dataset");
    std::fs::remove_dir(&dataset).expect("rmdir");
    // An unwritable metrics location fails before the predictions are committed.
    let output = with_metrics(&dir.path().join("missing/run.json"));
    assert_refused(&output, 1, &["missing"], &out);
    assert_eq!(files_in(dir.path()), ["reviews.parquet"]);
}

#[cfg(unix)]
#[test]
fn devices_and_fifos_are_never_replaced_or_read_as_missing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("pipe");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let output = run(&reviews(), &fifo, &[]);
    assert_eq!(exit_code(&output), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("is a FIFO (named pipe), not a regular file"), "{}", stderr(&output));
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::symlink_metadata(&fifo).expect("meta").file_type().is_fifo(), "the FIFO is still a FIFO");

    let output = run(Path::new("/dev/null"), &dir.path().join("out.parquet"), &[]);
    assert_eq!(exit_code(&output), Some(1));
    assert!(stderr(&output).contains("/dev/null is a character device"), "{}", stderr(&output));
    let output = run(&fifo, &dir.path().join("out.parquet"), &[]);
    assert!(stderr(&output).contains("is a FIFO"), "{}", stderr(&output));

    // A device as output: checked without opening it, and left as it is.
    let output = run(&reviews(), Path::new("/dev/null"), &[]);
    assert_eq!(exit_code(&output), Some(1));
    assert!(stderr(&output).contains("/dev/null is a character device"), "{}", stderr(&output));
    assert!(std::fs::metadata("/dev/null").expect("meta").file_type().is_char_device());

    let sql = pipeline(&["sql", "SELECT 1 AS one"], &[("--output", Path::new("/dev/null"))]);
    assert_eq!(exit_code(&sql), Some(1), "{}", stderr(&sql));
    assert!(std::fs::metadata("/dev/null").expect("meta").file_type().is_char_device());
}

#[test]
fn sql_never_writes_over_a_table_it_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let table = dir.path().join("p.parquet");
    std::fs::copy(reviews(), &table).expect("copy");
    let before = sha(&table);
    let registered = format!("p={}", table.display());
    let output = pipeline(&["sql", "SELECT id FROM p", "--table", &registered], &[("--output", &table)]);
    assert_eq!(exit_code(&output), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("is one of the input files"), "{}", stderr(&output));
    // A path named in the query itself.
    let query = format!("SELECT id FROM '{}'", table.display());
    let output = pipeline(&["sql", &query], &[("--output", &table)]);
    assert_eq!(exit_code(&output), Some(1), "{}", stderr(&output));
    assert_eq!(sha(&table), before);
    assert_eq!(files_in(dir.path()), ["p.parquet"]);
}

#[test]
fn a_deeply_nested_query_is_refused_instead_of_overflowing_the_stack() {
    // About 8 KB of SQL; this aborted the process (exit 134) before.
    let sum = vec!["1"; 4000].join(" + ");
    let output = pipeline(&["sql", &format!("SELECT {sum} AS total")], &[]);
    assert_eq!(exit_code(&output), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("nests expressions more than 500 deep"), "{}", stderr(&output));
    // Far larger (400 KB of SQL, read from stdin), still a clear refusal.
    let mut child = Command::new(env!("CARGO_BIN_EXE_pipeline"))
        .arg("sql")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let sum = vec!["1"; 200_000].join("+");
    std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), format!("SELECT {sum}").as_bytes())
        .expect("write the query");
    let output = child.wait_with_output().expect("wait");
    assert_eq!(exit_code(&output), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("nests expressions more than 500 deep"), "{}", stderr(&output));
    // A deep but reasonable query still runs.
    let sum = vec!["1"; 400].join(" + ");
    let output = pipeline(&["sql", &format!("SELECT {sum} AS total"), "--format", "csv"], &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "total\n400\n");
}

#[test]
fn inspect_refuses_a_graph_that_is_not_a_package_graph() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A real ONNX graph, but another model's: the AVG baseline's, with no attention output.
    let model = package_with(dir.path(), "fixtures/tiny-san", |_| {});
    std::fs::copy(repo_root().join("fixtures/tiny-avg/model.onnx"), model.join("model.onnx")).expect("copy");
    let output = pipeline(&["inspect", &model.to_string_lossy()], &[]);
    assert_eq!(exit_code(&output), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("model.onnx"), "{}", stderr(&output));
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

/// Starts a slow `pipeline run` (one document per window over 3,000 rows) into `out`.
fn slow_run(dir: &Path, out: &Path) -> std::process::Child {
    slow_run_with(dir, out, &[])
}

/// Waits for the run's temporary output to appear beside `out`; returns its path.
fn wait_for_temporary(out: &Path) -> PathBuf {
    let dir = out.parent().expect("parent");
    let started = Instant::now();
    loop {
        let found = files_in(dir).into_iter().find(|name| name.ends_with(".partial"));
        if let Some(name) = found {
            return dir.join(name);
        }
        assert!(started.elapsed() < Duration::from_secs(60), "no temporary output appeared");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn partials(dir: &Path) -> Vec<String> {
    files_in(dir).into_iter().filter(|name| name.ends_with(".partial")).collect()
}

#[cfg(unix)]
#[test]
fn signals_remove_the_unfinished_output_and_a_rerun_clears_what_kill_9_left() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).expect("mkdir");
    let out = out_dir.join("predictions.parquet");
    for (signal, code) in [("TERM", 143), ("INT", 130)] {
        let child = slow_run(dir.path(), &out);
        let temporary = wait_for_temporary(&out);
        let sent = Command::new("kill").args([&format!("-{signal}"), &child.id().to_string()]).status();
        assert!(sent.expect("kill").success());
        let output = child.wait_with_output().expect("wait");
        assert_eq!(output.status.code(), Some(code), "SIG{signal}: {}", stderr(&output));
        assert!(!temporary.exists(), "SIG{signal} left {}", temporary.display());
        assert!(partials(&out_dir).is_empty() && !out.exists(), "SIG{signal}: {:?}", files_in(&out_dir));
    }

    // kill -9 cannot be handled: the temporary stays, unlocked, until the next run removes it.
    let mut child = slow_run(dir.path(), &out);
    let temporary = wait_for_temporary(&out);
    child.kill().expect("SIGKILL");
    child.wait().expect("wait");
    assert!(temporary.exists(), "SIGKILL leaves the temporary");
    let output = run(&reviews(), &out, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(partials(&out_dir).is_empty(), "the rerun removed what the killed run left: {:?}", files_in(&out_dir));
    assert!(out.is_file());
}

#[test]
fn a_panic_is_reported_as_an_internal_error_and_removes_the_output() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.parquet");
    let output = run(&reviews(), &out, &["--chunk-rows", "10", "--panic-after-first-chunk"]);
    let err = stderr(&output);
    assert_eq!(exit_code(&output), Some(70), "{err}");
    // The report names where it panicked (file and line; the backtrace names the functions).
    assert!(err.contains("internal error, please report") && err.contains("at pipeline/src/stages/write.rs:"), "{err}");
    assert!(err.contains("pipeline::stages::write::injected_panic"), "{err}");
    assert!(err.contains("removed the unfinished"), "{err}");
    assert!(files_in(dir.path()).is_empty(), "{:?}", files_in(dir.path()));
}

/// A file that decodes for its first windows and fails in a later one: the failing stage
/// stops the whole line, the run names the file and rows, and nothing is left behind.
#[test]
fn a_file_that_fails_mid_run_stops_every_stage_and_leaves_no_output() {
    use parquet::file::properties::WriterProperties;
    use parquet::file::reader::{FileReader, SerializedFileReader};

    let dir = tempfile::tempdir().expect("tempdir");
    let inputs = dir.path().join("inputs");
    std::fs::create_dir(&inputs).expect("inputs dir");
    let texts: Vec<String> =
        (0..3000).map(|i| format!("review {i}: a fine film, well acted and {} long", i % 97)).collect();
    let good = inputs.join("a.parquet");
    write_parquet(&good, vec![("text", Arc::new(arrow::array::StringArray::from(texts.clone())))]);
    // Three row groups; the last one's text page is then overwritten with noise.
    let bad = inputs.join("b.parquet");
    let batch = read(&good);
    let properties = WriterProperties::builder().set_max_row_group_row_count(Some(1000)).build();
    let file = std::fs::File::create(&bad).expect("create");
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), Some(properties)).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
    let reader = SerializedFileReader::new(std::fs::File::open(&bad).expect("open")).expect("parquet");
    let last = reader.metadata().row_group(2).column(0);
    let (start, length) = (last.data_page_offset() as usize, last.compressed_size() as usize);
    let mut bytes = std::fs::read(&bad).expect("read");
    for byte in &mut bytes[start + 8..start + length.min(400)] {
        *byte = byte.wrapping_mul(31).wrapping_add(7);
    }
    std::fs::write(&bad, bytes).expect("corrupt");

    let out = dir.path().join("out.parquet");
    let output = pipeline(
        &["run", "--chunk-rows", "500", "--text-column", "text"],
        &[("--input", &inputs), ("--model", &tiny_model()), ("--output", &out)],
    );
    assert_refused(&output, 1, &["b.parquet rows 2000..2500"], &out);
    assert!(partials(dir.path()).is_empty(), "temporaries left: {:?}", partials(dir.path()));
}

/// A copy of the fixture package `source` whose graph `edit` changes.
fn package_with_graph(dir: &Path, source: &str, edit: impl FnOnce(&mut tract_onnx::pb::ModelProto)) -> PathBuf {
    use prost::Message;
    let model = package_with(dir, source, |_| {});
    let bytes = std::fs::read(model.join("model.onnx")).expect("graph");
    let mut graph = tract_onnx::pb::ModelProto::decode(bytes.as_slice()).expect("protobuf");
    edit(&mut graph);
    std::fs::write(model.join("model.onnx"), graph.encode_to_vec()).expect("write graph");
    model
}

#[test]
fn an_existing_file_that_is_not_parquet_is_never_replaced() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, content) in [("essay.txt", &b"my essay, three weeks of work"[..]), ("notes.parquet", b"not parquet")] {
        let target = dir.path().join(name);
        std::fs::write(&target, content).expect("write");
        let output = run(&reviews(), &target, &[]);
        let err = stderr(&output);
        assert_eq!(exit_code(&output), Some(1), "{name}: {err}");
        assert!(err.contains("is not a Parquet file") && err.contains(name), "{err}");
        assert_eq!(std::fs::read(&target).expect("read"), content, "{name} untouched");
    }
    // Parquet's magic at the start alone is not enough: a file must end with it too.
    let fake = dir.path().join("fake.parquet");
    std::fs::write(&fake, b"PAR1 and then a diary").expect("write");
    let output = run(&reviews(), &fake, &[]);
    assert_eq!(exit_code(&output), Some(1), "{}", stderr(&output));
    assert_eq!(std::fs::read(&fake).expect("read"), b"PAR1 and then a diary");
    // pipeline sql writing Parquet keeps to the same rule.
    let essay = dir.path().join("essay.txt");
    let output = pipeline(&["sql", "SELECT 1 AS v", "--format", "parquet"], &[("--output", &essay)]);
    assert_eq!(exit_code(&output), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("is not a Parquet file"), "{}", stderr(&output));
    assert_eq!(std::fs::read(&essay).expect("read"), b"my essay, three weeks of work");
    // An earlier output, and an empty file, are replaced as before.
    let out = dir.path().join("out.parquet");
    assert!(run(&reviews(), &out, &[]).status.success());
    assert!(run(&reviews(), &out, &[]).status.success());
    let empty = dir.path().join("empty.parquet");
    std::fs::write(&empty, b"").expect("write");
    assert!(run(&reviews(), &empty, &[]).status.success());
    assert_eq!(read(&empty).num_rows(), 300);
}

/// A copy of `fixtures/tiny-san` whose graph output `name` becomes `name + (sqrt(100 - tokens) -
/// sqrt(100 - tokens))`: NaN for a document of more than 100 tokens, unchanged otherwise, so
/// the one-token probe when the package opens passes. (NaN put into the embedding never
/// arrives: tract's activations clamp it away.)
fn package_with_nan_past_100_tokens(dir: &Path, name: &str) -> PathBuf {
    use tract_onnx::pb::{NodeProto, TensorProto};
    package_with_graph(dir, "fixtures/tiny-san", |graph| {
        let body = graph.graph.as_mut().expect("graph");
        let node = |op: &str, inputs: &[&str], output: &str| NodeProto {
            op_type: op.to_owned(),
            input: inputs.iter().map(|i| (*i).to_owned()).collect(),
            output: vec![output.to_owned()],
            name: output.to_owned(),
            ..Default::default()
        };
        let raw = format!("{name}_raw");
        let producer = body.node.iter_mut().find(|n| n.output.iter().any(|o| o == name)).expect("output node");
        for output in &mut producer.output {
            if output == name {
                output.clone_from(&raw);
            }
        }
        for (initializer, values) in [("hundred", None), ("axis_one", Some(vec![1])), ("axis_two", Some(vec![2]))] {
            body.initializer.push(TensorProto {
                name: initializer.to_owned(),
                data_type: if values.is_some() { 7 } else { 1 },
                dims: vec![1],
                float_data: if values.is_some() { vec![] } else { vec![100.0] },
                int64_data: values.unwrap_or_default(),
                ..Default::default()
            });
        }
        let mut mask = node("Cast", &["attention_mask"], "mask_float");
        mask.attribute.push(tract_onnx::pb::AttributeProto {
            name: "to".to_owned(),
            r#type: 2,
            i: 1,
            ..Default::default()
        });
        // [batch, 1] for probs; [batch, 1, 1] for outputs of rank 3.
        let rank_three = name != "probs";
        body.node.extend([
            mask,
            node("ReduceSum", &["mask_float", "axis_one"], "tokens"),
            node("Sub", &["hundred", "tokens"], "room"),
            node("Sqrt", &["room"], "root"),
            node("Sub", &["root", "root"], "nan_past_100"),
        ]);
        if rank_three {
            body.node.push(node("Unsqueeze", &["nan_past_100", "axis_two"], "nan_past_100_3d"));
        }
        let nan = if rank_three { "nan_past_100_3d" } else { "nan_past_100" };
        body.node.push(node("Add", &[&raw, nan], name));
    })
}

/// The first fixture review of more than 100 tokens, as the tiny SAN's tokenizer counts them.
fn first_review_past_100_tokens(dir: &Path) -> usize {
    let finite = dir.join("finite.parquet");
    assert!(run_with_model(&repo_root().join("fixtures/tiny-san"), &finite, &[]).status.success());
    read(&finite)
        .column_by_name("token_spans")
        .map(|tokens| {
            let tokens = tokens.as_any().downcast_ref::<arrow::array::ListArray>().expect("list");
            (0..tokens.len()).find(|&row| tokens.value_length(row) > 100).expect("a long review")
        })
        .expect("tokens")
}

#[test]
fn probabilities_that_are_not_finite_stop_the_run_naming_the_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let model = package_with_nan_past_100_tokens(dir.path(), "probs");
    let out = dir.path().join("out.parquet");
    let output = run_with_model(&model, &out, &["--backend", "tract", "--chunk-rows", "1000"]);
    let long = first_review_past_100_tokens(dir.path());
    assert_refused(&output, 1, &["not finite", "reviews.parquet", &format!("row(s) {long},")], &out);
}

#[test]
fn attention_or_contributions_that_are_not_finite_stop_the_run_naming_the_rows() {
    // These were written as NaN floats, or as bytes of 0 in compact output: "no push".
    let dir = tempfile::tempdir().expect("tempdir");
    let long = first_review_past_100_tokens(dir.path());
    for (name, what) in [("attention", "attention weights"), ("contribution", "contributions")] {
        let model = package_with_nan_past_100_tokens(dir.path(), name);
        for attention in ["compact", "full"] {
            let out = dir.path().join("out.parquet");
            let output =
                run_with_model(&model, &out, &["--backend", "tract", "--chunk-rows", "1000", "--attention", attention]);
            let needles = [what, "not finite", "reviews.parquet", &format!("row(s) {long},")];
            assert_refused(&output, 1, &needles, &out);
        }
        std::fs::remove_dir_all(&model).expect("clean");
    }
}

#[test]
fn manifest_labels_that_contradict_the_graph_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.parquet");
    // The same two labels swapped: every prediction would be inverted.
    let model = package_with(dir.path(), "fixtures/tiny-san", |m| m["labels"] = serde_json::json!(["pos", "neg"]));
    assert_refused(
        &run_with_model(&model, &out, &[]),
        1,
        &["exported with the labels [neg, pos]", "another order", "manifest.json"],
        &out,
    );
    std::fs::remove_dir_all(&model).expect("clean");
    let model = package_with(dir.path(), "fixtures/tiny-san", |m| m["labels"] = serde_json::json!(["bad", "good"]));
    assert_refused(&run_with_model(&model, &out, &[]), 1, &["exported with the labels [neg, pos]"], &out);
}

#[test]
fn an_input_declared_with_two_to_the_forty_elements_is_bad_input() {
    let dir = tempfile::tempdir().expect("tempdir");
    let model = package_with_graph(dir.path(), "fixtures/tiny-san", |graph| {
        use tract_onnx::pb::tensor_shape_proto::dimension::Value;
        let body = graph.graph.as_mut().expect("graph");
        for input in &mut body.input {
            let Some(tract_onnx::pb::type_proto::Value::TensorType(tensor)) =
                input.r#type.as_mut().and_then(|t| t.value.as_mut())
            else {
                panic!("a tensor input")
            };
            for dim in &mut tensor.shape.as_mut().expect("shape").dim {
                dim.value = Some(Value::DimValue(1 << 40));
            }
        }
    });
    let out = dir.path().join("out.parquet");
    let output = run_with_model(&model, &out, &["--backend", "tract"]);
    assert_refused(&output, 1, &["model.onnx", "`input_ids` with a fixed dimension of 1099511627776"], &out);
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
fn plain_http_is_bad_input_not_a_transient_failure() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.parquet");
    let output = pipeline(&["run", "--input", "http://127.0.0.1:9/reviews.parquet"], &[("--output", &out)]);
    assert_refused(&output, 1, &["plain http:// is not supported", "https://"], &out);
}

/// `pipeline` with S3 pointed at a loopback port nothing listens on (every request refused,
/// a transient failure) and a storage retry budget of `retry_seconds`.
fn pipeline_on_a_dead_store(retry_seconds: &str) -> Command {
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("port").port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_pipeline"));
    command
        .env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}"))
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env("PIPELINE_STORAGE_RETRY_SECONDS", retry_seconds);
    command
}

#[test]
fn storage_retries_last_as_long_as_their_budget() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.parquet");
    let attempt = |budget: &str| {
        let started = Instant::now();
        let output = pipeline_on_a_dead_store(budget)
            .args(["run", "--input", "s3://corpus/in/reviews.parquet", "--output"])
            .arg(&out)
            .output()
            .expect("run pipeline");
        (output, started.elapsed())
    };
    let (output, took) = attempt("6");
    assert_refused(&output, 75, &["s3://corpus/in/reviews.parquet", "rerunning later may succeed"], &out);
    assert!(took >= Duration::from_secs(5) && took < Duration::from_secs(60), "retried for {took:?}");
    let (output, _) = attempt("soon");
    assert_refused(&output, 1, &["PIPELINE_STORAGE_RETRY_SECONDS is `soon`"], &out);
}

/// [`slow_run`] with more arguments.
fn slow_run_with(dir: &Path, out: &Path, extra: &[&str]) -> std::process::Child {
    let data = dir.join("many");
    if !data.exists() {
        std::fs::create_dir(&data).expect("mkdir");
        for i in 0..10 {
            std::fs::copy(reviews(), data.join(format!("part-{i}.parquet"))).expect("copy");
        }
    }
    Command::new(env!("CARGO_BIN_EXE_pipeline"))
        .args(["run", "--chunk-rows", "1", "--batch-size", "1"])
        .args(extra)
        .arg("--input")
        .arg(&data)
        .arg("--model")
        .arg(tiny_model())
        .arg("--output")
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn")
}

#[cfg(unix)]
#[test]
fn a_closed_stderr_neither_kills_the_run_nor_leaves_a_partial() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).expect("mkdir");
    let out = out_dir.join("predictions.parquet");
    // As `pipeline run … 2>&1 | head -1`: the reader of stderr goes away at once. The run
    // logs as it goes, and --profile writes to stderr at the end.
    let mut child = slow_run_with(dir.path(), &out, &["--profile"]);
    drop(child.stderr.take());
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(0));
    assert_eq!(read(&out).num_rows(), 3000);
    assert!(partials(&out_dir).is_empty(), "{:?}", files_in(&out_dir));
}

fn assert_json_lines(text: &str) {
    assert!(!text.trim().is_empty(), "no log at all");
    for line in text.lines() {
        assert!(serde_json::from_str::<Value>(line).is_ok(), "not a JSON line: {line}\nin: {text}");
    }
}

#[cfg(unix)]
#[test]
fn json_logs_carry_usage_errors_and_signals_and_human_logs_to_a_pipe_have_no_colour() {
    let output = pipeline(&["--log-format", "json", "run", "--bogus"], &[]);
    assert_eq!(exit_code(&output), Some(2));
    assert_json_lines(&stderr(&output));
    assert!(stderr(&output).contains("--bogus"), "{}", stderr(&output));
    let output = pipeline(&["run", "--log-format=json", "--batch-size", "0"], &[]);
    assert_eq!(exit_code(&output), Some(2));
    assert_json_lines(&stderr(&output));
    // Help is still help.
    let output = pipeline(&["--log-format", "json", "run", "--help"], &[]);
    assert_eq!(exit_code(&output), Some(0));
    assert!(String::from_utf8_lossy(&output.stdout).contains("--input"));

    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("predictions.parquet");
    let child = slow_run_with(dir.path(), &out, &["--log-format", "json"]);
    wait_for_temporary(&out);
    let sent = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    assert!(sent.expect("kill").success());
    let output = child.wait_with_output().expect("wait");
    assert_eq!(exit_code(&output), Some(143));
    let err = stderr(&output);
    assert_json_lines(&err);
    assert!(err.contains("stopped by signal 15") && err.contains("removed the unfinished"), "{err}");

    // Human logs into a pipe (as every test's): plain text, no escape codes.
    let output = run(&reviews(), &out, &["--profile"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(!stderr(&output).contains('\u{1b}'), "{:?}", stderr(&output));
    assert!(!stderr(&output).is_empty());
}

/// Runs `command` for at most `limit`; `None` if it had to be killed.
fn output_within(mut command: Command, limit: Duration) -> Option<Output> {
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(child.wait_with_output().expect("output"))
}

#[test]
fn deeply_bracketed_queries_are_refused_at_once_and_shallow_ones_run() {
    let nested = |depth: usize, open: &str, close: &str| {
        let mut expression = "1".to_owned();
        for _ in 0..depth {
            expression = format!("{open}{expression}{close}");
        }
        format!("SELECT {expression} AS v")
    };
    let sql = |query: &str, extra: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_pipeline"));
        command.arg("sql").arg(query).args(extra);
        output_within(command, Duration::from_secs(30)).expect("an answer within 30 s, not a spin")
    };
    // These spun at 100 % CPU for ever; now they run.
    for query in [nested(49, "CAST(", " AS BIGINT)"), nested(48, "ARRAY[", "]")] {
        let output = sql(&query, &["--format", "csv"]);
        assert!(output.status.success(), "{}", stderr(&output));
    }
    // Past the bracket limit, a refusal at once.
    for query in [nested(65, "CAST(", " AS BIGINT)"), nested(65, "ARRAY[", "]"), nested(65, "(", ")")] {
        let output = sql(&query, &[]);
        assert_eq!(exit_code(&output), Some(1), "{}", stderr(&output));
        assert!(stderr(&output).contains("nests brackets 65 deep, more than the 64 allowed"), "{}", stderr(&output));
    }
    // Nested scalar subqueries double the planning time at each level: refused past 16.
    let mut query = "SELECT 1 AS v".to_owned();
    for _ in 0..20 {
        query = format!("SELECT ({query}) AS v");
    }
    let output = sql(&query, &[]);
    assert_eq!(exit_code(&output), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("nests subqueries more than 16 deep"), "{}", stderr(&output));
    // Brackets in a string literal or a comment are not nesting.
    let deep = "(".repeat(70);
    let output = sql(&format!("SELECT '{deep}' AS s -- {deep}\n"), &["--format", "csv"]);
    assert!(output.status.success(), "{}", stderr(&output));
    // Shallow nesting still runs.
    let output = sql(&nested(8, "CAST(", " AS BIGINT)"), &["--format", "csv"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "v\n1\n");
}

#[test]
fn a_syntax_error_inside_nested_calls_ends_within_the_parse_deadline() {
    let sql = |query: &str| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_pipeline"));
        command.arg("sql").arg(query);
        let started = Instant::now();
        let output = output_within(command, Duration::from_secs(30)).expect("an answer within 30 s, not a spin");
        (output, started.elapsed())
    };
    // Twenty calls deep, unclosed: the parser backtracks about 3x per level (10 of these
    // pairs spun for minutes), so it is stopped at its deadline.
    let (output, took) = sql(&format!("SELECT {}1", "POSITION(CAST(".repeat(10)));
    assert_eq!(exit_code(&output), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("the SQL parser gave up after 5 s"), "{}", stderr(&output));
    assert!(took < Duration::from_secs(15), "took {took:?}");
    // A shallow syntax error is reported by the parser itself, at once.
    let (output, took) = sql("SELECT CAST(1");
    assert_eq!(exit_code(&output), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("Expected: AS"), "{}", stderr(&output));
    assert!(took < Duration::from_secs(4), "took {took:?}");
}

#[test]
fn ctes_that_double_at_each_link_are_refused_before_planning() {
    let chain = |links: usize| {
        let mut query = "WITH a0 AS (SELECT 1 AS x)".to_owned();
        for i in 1..=links {
            query.push_str(&format!(", a{i} AS (SELECT p.x FROM a{} p JOIN a{} q ON p.x = q.x)", i - 1, i - 1));
        }
        format!("{query} SELECT count(*) AS n FROM a{links}")
    };
    let sql = |query: &str| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_pipeline"));
        command.arg("sql").arg(query).args(["--format", "csv"]);
        output_within(command, Duration::from_secs(30)).expect("an answer within 30 s")
    };
    // 2^14 table reads once expanded: planning this took minutes.
    let output = sql(&chain(14));
    assert_eq!(exit_code(&output), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("reads tables 16384 times once its CTEs are expanded"), "{}", stderr(&output));
    // 2^4 is fine, and gives the right answer.
    let output = sql(&chain(4));
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "n\n1\n");
}

#[test]
fn an_unreachable_store_named_in_a_query_is_transient() {
    let output = pipeline_on_a_dead_store("2")
        .args(["sql", "SELECT count(*) FROM 's3://corpus/out/'"])
        .output()
        .expect("run pipeline");
    assert_eq!(exit_code(&output), Some(75), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("cannot list s3://corpus/out") && err.contains("rerunning later may succeed"), "{err}");
    assert_eq!(err.matches("rerunning later").count(), 1, "said once: {err}");
}

#[test]
fn a_model_on_an_unreachable_store_is_transient() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.parquet");
    let output = pipeline_on_a_dead_store("2")
        .args(["run", "--model", "s3://models/san/", "--input"])
        .arg(reviews())
        .arg("--output")
        .arg(&out)
        .env("PIPELINE_MODEL_CACHE", dir.path().join("cache"))
        .output()
        .expect("run pipeline");
    assert_refused(&output, 75, &["--model s3://models/san/", "rerunning later may succeed"], &out);
    assert!(!dir.path().join("cache").exists() || files_in(&dir.path().join("cache")).is_empty(), "nothing cached");
}

#[test]
fn onnx_runtime_is_never_loaded_from_the_working_directory() {
    let planted = tempfile::tempdir().expect("tempdir");
    let library = planted.path().join("target/onnxruntime/libonnxruntime.so.1.32.0");
    std::fs::create_dir_all(library.parent().expect("parent")).expect("mkdir");
    std::fs::write(&library, b"not a library: loading this would run an attacker's code").expect("plant");
    let outputs = tempfile::tempdir().expect("tempdir");
    let out = outputs.path().join("out.parquet");
    // `ort` names the library it tries (before: the planted one, "could not load"); `auto`
    // runs on tract, or on a library beside the binary, never on the planted one.
    for backend in ["ort", "auto"] {
        let output = Command::new(env!("CARGO_BIN_EXE_pipeline"))
            .current_dir(planted.path())
            .env_remove("ORT_DYLIB_PATH")
            .args(["run", "--backend", backend, "--input"])
            .arg(reviews())
            .arg("--model")
            .arg(tiny_model())
            .arg("--output")
            .arg(&out)
            .output()
            .expect("run pipeline");
        let err = stderr(&output);
        assert!(
            !err.contains(&*planted.path().to_string_lossy()),
            "{backend}: the planted library was looked at: {err}"
        );
        if backend == "auto" {
            assert!(output.status.success(), "{err}");
            assert_eq!(read(&out).num_rows(), 300);
        }
    }
}

#[test]
fn finalize_refuses_every_flag_it_would_ignore() {
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
        let mut args = vec!["run", "--finalize", &out];
        args.extend_from_slice(extra);
        let output = pipeline(&args, &[]);
        let err = stderr(&output);
        assert_eq!(exit_code(&output), Some(2), "{extra:?}: {err}");
        assert!(err.contains("--finalize") && err.contains(extra[0]), "{extra:?}: {err}");
    }
    assert_eq!(files_in(Path::new(&out)), Vec::<String>::new(), "nothing written");
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

/// `pipeline run` of the embedded default model from `dir/cwd`, with `TMPDIR=dir/tmp`,
/// `HOME=dir/home` and `PIPELINE_MODEL_CACHE=cache`.
fn default_model_run(dir: &Path, cache: &std::ffi::OsStr, input: &Path, out: &Path) -> Command {
    for sub in ["cwd", "tmp", "home"] {
        std::fs::create_dir_all(dir.join(sub)).expect("mkdir");
    }
    let mut command = Command::new(env!("CARGO_BIN_EXE_pipeline"));
    command
        .current_dir(dir.join("cwd"))
        .env("TMPDIR", dir.join("tmp"))
        .env("HOME", dir.join("home"))
        .env_remove("XDG_CACHE_HOME")
        .env("PIPELINE_MODEL_CACHE", cache)
        .args(["run", "--input"])
        .arg(input)
        .arg("--output")
        .arg(out);
    command
}

#[test]
fn the_default_model_is_unpacked_once_into_the_cache_and_never_left_in_tmpdir() {
    let dir = tempfile::tempdir().expect("tempdir");
    let outputs = tempfile::tempdir().expect("tempdir");
    let out = outputs.path().join("out.parquet");
    // An empty PIPELINE_MODEL_CACHE is unset: the cache under HOME, nothing in the current directory.
    let output = default_model_run(dir.path(), "".as_ref(), &reviews(), &out).output().expect("run");
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(files_in(&dir.path().join("cwd")), Vec::<String>::new());
    let entries = files_in(&dir.path().join("home/.cache/attention-classifier/models"));
    assert!(entries.len() == 1 && entries[0].starts_with("embedded-"), "{entries:?}");
    assert_eq!(files_in(&dir.path().join("tmp")), Vec::<String>::new());

    // kill -9 mid-run leaves no copy of the model behind (each was 14 MB, for ever).
    let input = outputs.path().join("many.parquet");
    many_reviews(&input, 30, 1000);
    let mut child = default_model_run(dir.path(), "".as_ref(), &input, &outputs.path().join("killed.parquet"))
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    std::thread::sleep(Duration::from_millis(1500));
    child.kill().expect("kill -9");
    child.wait().expect("wait");
    let left: Vec<String> = files_in(&dir.path().join("tmp"))
        .into_iter()
        .filter(|name| name.starts_with("pipeline-default-model"))
        .collect();
    assert_eq!(left, Vec::<String>::new(), "copies of the default model left in TMPDIR");

    // A damaged entry (a file lost) is written again, not "Directory not empty".
    let entry = dir.path().join("home/.cache/attention-classifier/models").join(&entries[0]);
    std::fs::remove_file(entry.join("tokenizer.json")).expect("lose a file");
    std::fs::remove_file(&out).expect("clean");
    let output = default_model_run(dir.path(), "".as_ref(), &reviews(), &out).output().expect("run");
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(entry.join("tokenizer.json").is_file());
}

#[test]
fn a_model_cache_that_is_not_a_directory_is_named_by_its_variable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"not a directory").expect("write");
    let dangling = dir.path().join("dangling");
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).expect("symlink");
    for (cache, what) in [(&file, "is not a directory"), (&dangling, "is a link to nothing")] {
        let out = dir.path().join("out.parquet");
        // The default model still runs, from a temporary copy, and says why.
        let output = default_model_run(dir.path(), cache.as_os_str(), &reviews(), &out).output().expect("run");
        let err = stderr(&output);
        assert!(output.status.success(), "{err}");
        assert!(err.contains("PIPELINE_MODEL_CACHE") && err.contains(what), "{err}");
        assert!(!err.contains("File exists"), "{err}");
        std::fs::remove_file(&out).expect("clean");
    }
    assert_eq!(std::fs::read(&file).expect("read"), b"not a directory", "untouched");
}

#[test]
fn sql_and_the_report_refuse_outputs_of_different_runs_in_one_location() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mixed = dir.path().join("mixed");
    std::fs::create_dir(&mixed).expect("mkdir");
    assert!(run(&reviews(), &mixed.join("a-compact.parquet"), &["--attention", "compact"]).status.success());
    assert!(run(&reviews(), &mixed.join("b-full.parquet"), &["--attention", "full"]).status.success());
    let location = format!("{}/", mixed.display());
    // SQL took the first file's schema and cast the other's float weights to bytes, exit 0.
    let query = format!("SELECT id, top_tokens(tokens, attention_summary, 3) FROM '{location}'");
    let output = pipeline(&["sql", &query], &[]);
    let err = stderr(&output);
    assert_eq!(exit_code(&output), Some(1), "{err}");
    for needle in ["a-compact.parquet", "b-full.parquet", "different runs", "--attention `full`", "separate tables"] {
        assert!(err.contains(needle), "expected `{needle}` in: {err}");
    }
    // A table of one run's files still reads.
    let query = format!("SELECT count(*) AS n FROM '{}'", mixed.join("a-compact.parquet").display());
    assert!(pipeline(&["sql", &query], &[]).status.success());

    // The report blended them, and outputs of another model, into one tally.
    let html = dir.path().join("report.html");
    let output = pipeline(&["report", "--input", &location, "--output", &html.to_string_lossy()], &[]);
    assert_refused(&output, 1, &["a-compact.parquet", "b-full.parquet", "different runs"], &html);
    std::fs::remove_file(mixed.join("b-full.parquet")).expect("clean");
    let other_model = mixed.join("c-avg.parquet");
    assert!(run_fixture("tiny-avg-3class", &other_model, &[]).status.success());
    let output = pipeline(&["report", "--input", &location, "--output", &html.to_string_lossy()], &[]);
    assert_refused(&output, 1, &["c-avg.parquet", "different runs", "report on each run's output separately"], &html);
    std::fs::remove_file(&other_model).expect("clean");
    let output = pipeline(&["report", "--input", &location, "--output", &html.to_string_lossy()], &[]);
    assert!(output.status.success(), "{}", stderr(&output));
}

#[test]
fn a_tokenizer_of_another_package_with_the_same_size_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let model = package_with(dir.path(), "fixtures/tiny-san", |_| {});
    // Another package's vocabulary of the same size: the same words under other ids (a
    // seed changes most of them; here two are swapped), so the embedding-table check passes.
    let path = model.join("tokenizer.json");
    let mut tokenizer: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
    let vocab = tokenizer["model"]["vocab"].as_object_mut().expect("vocab");
    let (good, bad) = (vocab["good"].clone(), vocab["bad"].clone());
    vocab.insert("good".to_owned(), bad);
    vocab.insert("bad".to_owned(), good);
    std::fs::write(&path, tokenizer.to_string()).expect("write");
    let out = dir.path().join("out.parquet");
    let needles = ["tokenizer.json is not the tokenizer", "model.onnx was exported with", "vocabulary"];
    assert_refused(&run_with_model(&model, &out, &[]), 1, &needles, &out);
    assert_refused(&pipeline(&["inspect", &model.to_string_lossy()], &[]), 1, &needles, &out);
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

/// The peak resident memory (VmHWM) of `command` in MiB, read from /proc while it runs, and its exit status.
fn peak_rss_mib(command: &mut Command) -> (std::process::ExitStatus, u64) {
    let mut child = command.stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("spawn");
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak_kib = 0u64;
    loop {
        if let Ok(status) = std::fs::read_to_string(&status_file)
            && let Some(line) = status.lines().find(|line| line.starts_with("VmHWM:"))
        {
            let kib = line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or(0);
            peak_kib = peak_kib.max(kib);
        }
        if let Some(status) = child.try_wait().expect("wait") {
            return (status, peak_kib / 1024);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn memory_is_bounded_by_the_text_in_flight_not_by_documents() {
    // 96 documents of 100,000 tokens each, read as one window of documents, peaked at
    // 1,277 MiB before the window was bounded by its text too (390 MiB after; 48 documents
    // took 717 MiB before, 372 MiB after: memory grew with the documents, now it does not).
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("long.parquet");
    let text = "a good film , truly great . ".repeat(100_000 / 7);
    let texts: Vec<String> = (0..96).map(|i| format!("{i} {text}")).collect();
    let ids: Arc<dyn Array> = Arc::new(Int64Array::from_iter_values(0..96));
    write_parquet(&input, vec![("id", ids), ("text", Arc::new(arrow::array::StringArray::from(texts)))]);
    let out = dir.path().join("out.parquet");
    let mut command = Command::new(env!("CARGO_BIN_EXE_pipeline"));
    command.args(["run", "--backend", "tract", "--threads", "2", "--input"]).arg(&input);
    command.arg("--model").arg(tiny_model()).arg("--output").arg(&out);
    let (status, peak) = peak_rss_mib(&mut command);
    assert!(status.success());
    assert_eq!(read(&out).num_rows(), 96);
    eprintln!("peak RSS {peak} MiB");
    assert!(peak < 600, "peak RSS {peak} MiB");
}

#[test]
fn a_delta_table_on_an_unreachable_store_is_transient() {
    let output = pipeline_on_a_dead_store("2")
        .args(["run", "--output-format", "delta", "--output", "s3://lake/predictions/", "--model"])
        .arg(tiny_model())
        .arg("--input")
        .arg(reviews())
        .output()
        .expect("run pipeline");
    assert_eq!(exit_code(&output), Some(75), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("cannot list s3://lake/predictions/") && err.contains("rerunning later may succeed"), "{err}");
}

//! `pipeline sql` as a user runs it: tables from flags or the default, output formats and
//! files, the query on stdin, and errors that leave nothing behind. The SQL library's own
//! tests live here too (`slt_files`, `bad_input`): they query a real `pipeline run`
//! output, which only the crates above `sql` can make.

mod bad_input;
mod predictions;
mod slt_files;

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use arrow::array::{AsArray, RecordBatch};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use test_support::repo_root;

fn reviews_table() -> String {
    format!("reviews={}", repo_root().join("fixtures/reviews.parquet").display())
}

fn pipeline_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pipeline")).current_dir(dir).args(args).output().expect("run pipeline")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list")
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    names.sort();
    names
}

#[test]
fn csv_to_stdout_with_a_registered_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = pipeline_in(
        dir.path(),
        &[
            "sql",
            "SELECT label, count(*) AS n FROM reviews GROUP BY label ORDER BY label",
            "--table",
            &reviews_table(),
            "--format",
            "csv",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "label,n\nneg,150\npos,150\n");
}

#[test]
fn default_table_is_predictions_parquet_and_table_output_is_readable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = pipeline_in(
        dir.path(),
        &[
            "run",
            "--input",
            &repo_root().join("fixtures/reviews.parquet").display().to_string(),
            "--model",
            &repo_root().join("fixtures/tiny-san").display().to_string(),
        ],
    );
    assert!(run.status.success(), "{}", text(&run.stderr));
    let out = pipeline_in(
        dir.path(),
        &[
            "sql",
            "SELECT id, prediction, top_tokens(tokens, attention_summary, 3) AS top FROM predictions ORDER BY id LIMIT 50",
            "--max-rows",
            "5",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert!(shown.contains("│ id") || shown.contains("id"), "{shown}");
    assert!(shown.contains("top"), "{shown}");
    assert!(shown.ends_with("50 rows, 5 shown (--max-rows 0 shows all)\n"), "{shown}");
}

#[test]
fn parquet_output_file_from_a_query_on_stdin() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new(env!("CARGO_BIN_EXE_pipeline"))
        .current_dir(dir.path())
        .args(["sql", "--table", &reviews_table(), "--output", "out.parquet"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"SELECT id, classify(text) AS c FROM reviews WHERE label = 'pos' ORDER BY id LIMIT 7")
        .expect("write query");
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("7 rows -> out.parquet"), "{}", text(&out.stderr));
    let file = File::open(dir.path().join("out.parquet")).expect("output written");
    let batches: Vec<RecordBatch> = ParquetRecordBatchReaderBuilder::try_new(file)
        .expect("parquet")
        .build()
        .expect("reader")
        .map(|b| b.expect("batch"))
        .collect();
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    assert_eq!(rows, 7);
    let predictions = batches[0].column_by_name("c").expect("struct column").as_struct();
    assert!(predictions.column_by_name("prediction").is_some());
    assert_eq!(entries(dir.path()), vec!["out.parquet"], "no temporary file left behind");
}

#[test]
fn a_failing_query_leaves_no_output_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = pipeline_in(dir.path(), &["sql", "SELECT top_tokens(['a'], [1.0], -1)", "--output", "out.json"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("top_tokens: k must be 0 or more"), "{}", text(&out.stderr));
    assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));
}

#[test]
fn json_lines_with_nested_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = pipeline_in(dir.path(), &["sql", "SELECT 1 AS id, ['a', 'b'] AS tokens", "--format", "json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "{\"id\":1,\"tokens\":[\"a\",\"b\"]}\n");
}

#[test]
fn bad_tables_and_outputs_are_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let readme = repo_root().join("fixtures/README.md");
    let cases: Vec<(Vec<String>, String)> = vec![
        (
            vec!["--table".into(), format!("notes={}", readme.display())],
            format!("{} is not a Parquet file", readme.display()),
        ),
        (vec!["--table".into(), "reviews".into()], "expected NAME=PATH".into()),
        (vec!["--table".into(), "1x=a.parquet".into()], "table name `1x`".into()),
        (vec!["--table".into(), "r=missing.parquet".into()], "missing.parquet does not exist".into()),
        (vec!["--output".into(), "out.xlsx".into()], "cannot tell the format of out.xlsx".into()),
        (vec!["--format".into(), "parquet".into()], "--format parquet needs --output".into()),
    ];
    for (flags, expected) in cases {
        let mut args = vec!["sql".to_owned(), "SELECT 1".to_owned()];
        args.extend(flags.iter().cloned());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = pipeline_in(dir.path(), &args);
        assert!(!out.status.success(), "{flags:?} should fail");
        assert!(text(&out.stderr).contains(&expected), "{flags:?}: {}", text(&out.stderr));
    }
    assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));
}

#[test]
fn a_syntax_error_is_said_in_words() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = pipeline_in(dir.path(), &["sql", "SELEC 1"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("the query is not valid SQL: Expected"), "{err}");
    assert!(!err.contains("ParserError(") && !err.contains("\\\""), "{err}");
}

#[test]
fn a_stride_past_the_models_limit_is_blamed_on_the_flag_not_the_package() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = pipeline_in(dir.path(), &["sql", "SELECT classify('good movie')", "--long-document-stride", "401"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("classify: --long-document-stride 401: give a stride from 1 to the token limit (400)"),
        "{err}"
    );
    assert!(!err.contains("cannot load model package"), "{err}");
}

#[test]
fn a_reader_that_stops_early_is_not_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new(env!("CARGO_BIN_EXE_pipeline"))
        .current_dir(dir.path())
        .args(["sql", "SELECT text FROM reviews", "--table", &reviews_table(), "--format", "csv"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut first = [0u8; 5];
    std::io::Read::read_exact(&mut child.stdout.take().expect("stdout"), &mut first).expect("read");
    // The pipe's reading end is closed here, long before the 300 reviews are written.
    let out = child.wait_with_output().expect("wait");
    assert_eq!(&first, b"text\n");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
}

#[test]
fn classify_gives_the_same_answers_on_tract_and_onnx_runtime() {
    let dir = tempfile::tempdir().expect("tempdir");
    let library = test_support::onnxruntime_library().expect("install ONNX Runtime for tests");
    let query =
        "SELECT id, classify(text).prediction AS p, round(classify(text).confidence, 4) AS c FROM reviews ORDER BY id";
    let table = reviews_table();
    let run = |extra: &[&str]| {
        let mut args = vec!["sql", query, "--table", &table, "--format", "csv"];
        args.extend_from_slice(extra);
        let out = pipeline_in(dir.path(), &args);
        assert!(out.status.success(), "{extra:?}: {}", text(&out.stderr));
        text(&out.stdout)
    };
    let tract = run(&[]);
    let ort = run(&["--backend", "ort", "--ort-library", &library.display().to_string()]);
    assert_eq!(tract.lines().count(), 301, "a header and 300 reviews");
    assert_eq!(tract, ort);
}

/// Headers name what a person asked for, and long lists show their first items and a count.
#[test]
fn results_read_as_a_person_asked_for_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = repo_root().join("fixtures/reviews.parquet");
    let query = format!(
        "SELECT id, classify(text)['prediction'], string_to_array(text, ' ') AS words, avg(length(text)) OVER () \
         FROM '{}' ORDER BY id LIMIT 2",
        path.display()
    );
    let out = pipeline_in(dir.path(), &["sql", &query]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    let header = table.lines().nth(1).expect("header line");
    assert!(header.contains("┆ prediction ┆") && header.contains("avg(length(text))"), "{table}");
    assert!(!header.contains("fixtures/reviews.parquet"), "no path in the headers: {table}");
    assert!(table.contains(" more]"), "a long list shows its first items and counts the rest: {table}");
    assert!(table.contains("values cut at 60 characters (--max-cell-width 0 shows them whole)"), "{table}");

    let whole = pipeline_in(dir.path(), &["sql", &query, "--max-cell-width", "0"]);
    assert!(!text(&whole.stdout).contains(" more]") && !text(&whole.stdout).contains("values cut"));

    let json = pipeline_in(dir.path(), &["sql", &query, "--format", "json"]);
    let first: serde_json::Value =
        serde_json::from_str(text(&json.stdout).lines().next().expect("a row")).expect("a JSON object");
    assert!(first["prediction"].is_string(), "a struct field is a plain key: {first}");

    // Columns of one name from two tables keep their tables, so that no JSON key is lost.
    let join =
        format!("SELECT a.id, b.id FROM '{0}' a JOIN '{0}' b ON a.id = b.id ORDER BY a.id LIMIT 1", path.display());
    let json = pipeline_in(dir.path(), &["sql", &join, "--format", "json"]);
    assert!(json.status.success(), "{}", text(&json.stderr));
    let row: serde_json::Value = serde_json::from_str(text(&json.stdout).trim()).expect("a JSON object");
    assert!(row["a.id"].is_string() && row["b.id"].is_string(), "{row}");
}

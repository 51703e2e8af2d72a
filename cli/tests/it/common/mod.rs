//! Helpers shared by the tests that run the `pipeline` binary as a user does.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use arrow::array::{Array, AsArray, ListArray, RecordBatch, StringArray};
use arrow::datatypes::{Field, Float32Type, Schema};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::properties::WriterProperties;

pub mod http_sink;
pub mod s3_server;
pub use test_support::repo_root;

pub fn tiny_model() -> PathBuf {
    repo_root().join("fixtures/tiny-san")
}

pub fn reviews() -> PathBuf {
    repo_root().join("fixtures/reviews.parquet")
}

pub fn pipeline(args: &[&str], paths: &[(&str, &Path)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pipeline"));
    command.args(args);
    for (flag, path) in paths {
        command.arg(flag).arg(path);
    }
    command.output().expect("run pipeline")
}

/// `pipeline run` of `input` into `output` with the tiny model and `extra` flags, to run,
/// spawn or give an environment.
pub fn run_command(input: &Path, output: &Path, extra: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pipeline"));
    command.arg("run").args(extra);
    command.arg("--input").arg(input).arg("--model").arg(tiny_model()).arg("--output").arg(output);
    command
}

pub fn run(input: &Path, output: &Path, extra: &[&str]) -> Output {
    run_command(input, output, extra).output().expect("run pipeline")
}

/// `pipeline run` of the fixture package `fixtures/<package>` on the 300 fixture reviews.
pub fn run_fixture(package: &str, output: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["run"];
    args.extend_from_slice(extra);
    let model = repo_root().join("fixtures").join(package);
    pipeline(&args, &[("--input", &reviews()), ("--model", &model), ("--output", output)])
}

/// `pipeline finalize DIR`.
pub fn finalize(dir: &Path) -> Output {
    pipeline(&["finalize", &dir.display().to_string()], &[])
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The whole file as one batch, with the file's schema metadata.
pub fn read(path: &Path) -> RecordBatch {
    let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(path).expect("output exists")).expect("parquet");
    let schema = builder.schema().clone();
    let batches: Vec<RecordBatch> = builder.build().expect("reader").map(|b| b.expect("batch")).collect();
    let batch = arrow::compute::concat_batches(&batches[0].schema(), &batches).expect("concat");
    batch.with_schema(schema).expect("the file's schema")
}

/// Each row's tokens: the `tokens` strings, or read back from `token_spans` in the text
/// column the file's metadata names, as every reader reads them.
pub fn token_lists(batch: &RecordBatch) -> ListArray {
    if let Some(tokens) = batch.column_by_name("tokens") {
        return tokens.as_list::<i32>().clone();
    }
    let schema = batch.schema();
    let text = schema.metadata().get(runtime::output::keys::TOKEN_SPANS_TEXT).expect("tokens or token spans");
    let texts = arrow::compute::cast(batch.column_by_name(text).expect("the text"), &arrow::datatypes::DataType::Utf8)
        .expect("text");
    let spans = batch.column_by_name("token_spans").expect("token_spans").as_list::<i32>();
    runtime::output::read::tokens_from_spans(texts.as_string::<i32>(), spans, "test", 0).expect("spans read back")
}

pub fn probabilities(batch: &RecordBatch) -> Vec<Option<Vec<f32>>> {
    let list: &ListArray = batch.column_by_name("probabilities").expect("column").as_list::<i32>();
    (0..list.len())
        .map(|i| list.is_valid(i).then(|| list.value(i).as_primitive::<Float32Type>().values().to_vec()))
        .collect()
}

pub fn strings(batch: &RecordBatch, name: &str) -> Vec<Option<String>> {
    let column = batch.column_by_name(name).unwrap_or_else(|| panic!("column {name}"));
    column.as_string::<i32>().iter().map(|s| s.map(str::to_owned)).collect()
}

pub fn write_parquet(path: &Path, columns: Vec<(&str, Arc<dyn Array>)>) {
    let fields: Vec<Field> = columns.iter().map(|(n, a)| Field::new(*n, a.data_type().clone(), true)).collect();
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns.into_iter().map(|(_, a)| a).collect())
        .expect("batch");
    let mut writer = ArrowWriter::try_new(File::create(path).expect("create"), batch.schema(), None).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
}

pub fn max_diff(a: &[Option<Vec<f32>>], b: &[Option<Vec<f32>>]) -> f32 {
    assert_eq!(a.len(), b.len());
    let mut worst = 0.0f32;
    for (x, y) in a.iter().zip(b) {
        match (x, y) {
            (Some(x), Some(y)) => x.iter().zip(y).for_each(|(p, q)| worst = worst.max((p - q).abs())),
            (None, None) => {}
            _ => panic!("a row is null in one output only"),
        }
    }
    worst
}

pub fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The fixture reviews `copies` times over (ids made unique), in row groups of `group` rows.
pub fn many_reviews(path: &Path, copies: usize, group: usize) {
    let batch = read(&reviews());
    let ids = strings(&batch, "id");
    let texts = strings(&batch, "text");
    let (mut all_ids, mut all_texts) = (Vec::new(), Vec::new());
    for copy in 0..copies {
        for (id, text) in ids.iter().zip(&texts) {
            all_ids.push(format!("{}-{copy}", id.as_deref().expect("id")));
            all_texts.push(text.clone());
        }
    }
    let ids: Arc<dyn Array> = Arc::new(StringArray::from(all_ids));
    let texts: Arc<dyn Array> = Arc::new(StringArray::from(all_texts));
    let batch = RecordBatch::try_from_iter(vec![("id", ids), ("text", texts)]).expect("batch");
    let properties = WriterProperties::builder().set_max_row_group_row_count(Some(group)).build();
    let file = File::create(path).expect("create");
    let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(properties)).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
}

/// Rows `from..from + rows` of the fixture reviews as their own file, in row groups of `group`.
pub fn reviews_slice(path: &Path, from: usize, rows: usize, group: usize) {
    let batch = read(&reviews()).slice(from, rows);
    let properties = WriterProperties::builder().set_max_row_group_row_count(Some(group)).build();
    let file = File::create(path).expect("create");
    let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(properties)).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
}

/// (id, prediction, probabilities) per row, sorted by id; no id may appear twice.
pub fn rows_by_id(batch: &RecordBatch) -> Vec<(String, String, Vec<f32>)> {
    let mut rows: Vec<(String, String, Vec<f32>)> = strings(batch, "id")
        .into_iter()
        .zip(strings(batch, "prediction"))
        .zip(probabilities(batch))
        .map(|((id, p), q)| (id.expect("id"), p.expect("prediction"), q.expect("probabilities")))
        .collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    let mut ids: Vec<&String> = rows.iter().map(|r| &r.0).collect();
    ids.dedup();
    assert_eq!(ids.len(), rows.len(), "an id appears twice");
    rows
}

/// Two outputs hold the same rows (in any order): same ids and predictions, probabilities
/// within 1e-5.
pub fn assert_same_rows(a: &RecordBatch, b: &RecordBatch) {
    let (a, b) = (rows_by_id(a), rows_by_id(b));
    assert_eq!(a.len(), b.len(), "row counts");
    for (x, y) in a.iter().zip(&b) {
        assert_eq!((&x.0, &x.1), (&y.0, &y.1));
        let worst = x.2.iter().zip(&y.2).map(|(p, q)| (p - q).abs()).fold(0.0f32, f32::max);
        assert!(worst <= 1e-5, "{}: probabilities differ by {worst}", x.0);
    }
}

/// `value[start]` and `value[end]` are RFC 3339 UTC timestamps (`2026-11-25T14:20:00.123Z`),
/// the start no later than the end.
pub fn assert_timestamps(value: &serde_json::Value, start: &str, end: &str) {
    let stamp = |key: &str| {
        let text = value[key].as_str().unwrap_or_else(|| panic!("`{key}` is a string: {value}")).to_owned();
        let shape: String = text.chars().map(|c| if c.is_ascii_digit() { '9' } else { c }).collect();
        assert_eq!(shape, "9999-99-99T99:99:99.999Z", "`{key}` = {text}");
        text
    };
    assert!(stamp(start) <= stamp(end), "{value}");
}

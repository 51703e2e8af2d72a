//! CSV, TSV, JSON Lines and plain-text inputs give the predictions the Parquet of the same
//! rows gives, in `pipeline run` and `pipeline sql` alike; a file of no format we read says
//! what it looks like.

use std::path::Path;

use arrow::record_batch::RecordBatch;

use crate::common::*;

/// The fixture reviews written as `name` (its extension says the format).
fn reviews_as(dir: &Path, name: &str) -> std::path::PathBuf {
    let batch = read(&reviews());
    let path = dir.join(name);
    let file = std::fs::File::create(&path).expect("create");
    match name.rsplit_once('.').map(|(_, extension)| extension) {
        Some("csv") => write_csv(file, &batch, b','),
        Some("tsv") => write_csv(file, &batch, b'\t'),
        Some("jsonl") => {
            let mut writer = arrow::json::LineDelimitedWriter::new(file);
            writer.write(&batch).expect("write jsonl");
            writer.finish().expect("finish jsonl");
        }
        Some("txt") => {
            // One review a line: the fixture's reviews hold no line breaks.
            let texts: Vec<String> = strings(&batch, "text").into_iter().map(|t| t.expect("text")).collect();
            assert!(texts.iter().all(|t| !t.contains('\n')));
            std::fs::write(&path, texts.join("\n") + "\n").expect("write txt");
        }
        other => panic!("no writer for {other:?}"),
    }
    path
}

fn write_csv(file: std::fs::File, batch: &RecordBatch, delimiter: u8) {
    let mut writer = arrow::csv::WriterBuilder::new().with_header(true).with_delimiter(delimiter).build(file);
    writer.write(batch).expect("write csv");
}

#[test]
fn text_formats_give_the_predictions_of_the_same_rows_in_parquet() {
    let dir = tempfile::tempdir().expect("tempdir");
    let reference = dir.path().join("reference.parquet");
    assert!(run_fixture_model(&reviews(), &reference).status.success());
    let expected = read(&reference);
    for name in ["reviews.csv", "reviews.tsv", "reviews.jsonl", "reviews.txt"] {
        let input = reviews_as(dir.path(), name);
        let out = dir.path().join(format!("{name}.parquet"));
        let output = run_fixture_model(&input, &out);
        assert!(output.status.success(), "{name}: {}", stderr(&output));
        let batch = read(&out);
        assert_eq!(strings(&batch, "prediction"), strings(&expected, "prediction"), "{name}");
        assert!(max_diff(&probabilities(&batch), &probabilities(&expected)) < 1e-6, "{name}");
        // Every input column comes through; a text file's lines are its `text` column.
        let columns: Vec<&str> = if name.ends_with(".txt") { vec!["text"] } else { vec!["id", "text", "label"] };
        for column in columns {
            assert_eq!(strings(&batch, column), strings(&expected, column), "{name}: {column}");
        }
    }
}

fn run_fixture_model(input: &Path, out: &Path) -> std::process::Output {
    pipeline(&["run"], &[("--input", input), ("--model", &tiny_model()), ("--output", out)])
}

#[test]
fn pipeline_sql_reads_csv_and_json_lines_by_their_extension() {
    let dir = tempfile::tempdir().expect("tempdir");
    let csv = reviews_as(dir.path(), "reviews.csv");
    let jsonl = reviews_as(dir.path(), "reviews.jsonl");
    let query = format!(
        "SELECT (SELECT count(*) FROM '{}' c JOIN '{}' j ON c.id = j.id AND c.text = j.text WHERE c.label = 'pos') \
         AS same",
        csv.display(),
        jsonl.display()
    );
    let output = pipeline(&["sql", &query, "--format", "csv"], &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout).lines().last(), Some("150"));
}

#[test]
fn a_file_of_no_known_format_says_what_it_looks_like_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let csv = reviews_as(dir.path(), "reviews.csv");
    let misnamed = dir.path().join("reviews.data");
    std::fs::rename(&csv, &misnamed).expect("rename");
    let out = dir.path().join("out.parquet");
    let output = run_fixture_model(&misnamed, &out);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("reviews.data looks like CSV: name it *.csv"), "{}", stderr(&output));
    assert!(!out.exists());
}

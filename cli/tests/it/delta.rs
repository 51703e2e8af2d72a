//! `pipeline run --output-format delta`: a Delta Lake table that holds each input row once,
//! whatever the retries, kills, concurrent shards and reruns; read back by delta-rs's Python
//! reader from PyPI and by `pipeline sql`.

use std::path::Path;
use std::process::{Command, Output};

use crate::common::s3_server::S3Server;
use crate::common::{many_reviews, pipeline, read, rows_by_id, run, stderr, strings};
use anyhow::Context;

/// What delta-rs's Python reader finds in a table: its version and (id, prediction) rows.
struct TableRead {
    version: i64,
    rows: Vec<(String, String)>,
}

fn read_table(location: &str, env: &[(&str, String)]) -> Option<TableRead> {
    let reader = test_support::lakehouse_checks_python().context("no deltalake reader");
    let python = test_support::or_skip("reading the table with deltalake", reader)?;
    let script = r#"
import json, os, sys
import deltalake
options = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
table = deltalake.DeltaTable(sys.argv[1], storage_options=options or None)
# Every column, so that each type must read (compact weights above 127 included).
data = table.to_pyarrow_table()
rows = sorted(zip(data["id"].to_pylist(), data["prediction"].to_pylist()))
summary = data["attention_summary"].to_pylist() if "attention_summary" in data.column_names else []
top = max((max(row) for row in summary if row), default=None)
print(json.dumps({"version": table.version(), "rows": rows, "top_summary_byte": top}), flush=True)
# deltalake 1.6 can abort in its runtime's teardown at exit ("terminate called without an
# active exception") once everything is read and printed: leave without the teardown.
os._exit(0)
"#;
    let output = Command::new(python)
        .args(["-c", script, location])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("run python");
    assert!(output.status.success(), "deltalake could not read {location}: {}", stderr(&output));
    let value: serde_json::Value = serde_json::from_slice(&output.stdout).expect("json");
    let rows: Vec<(String, String)> = value["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|row| (row[0].as_str().expect("id").to_owned(), row[1].as_str().unwrap_or("null").to_owned()))
        .collect();
    if !rows.is_empty() {
        // Compact weights are bytes relative to the heaviest token: 255 somewhere in every row.
        assert_eq!(value["top_summary_byte"].as_i64(), Some(255), "compact weights read whole");
    }
    Some(TableRead { version: value["version"].as_i64().expect("version"), rows })
}

/// (id, prediction) of a plain `pipeline run` of `input` into one Parquet file.
fn expected_rows(input: &Path, dir: &Path) -> Vec<(String, String)> {
    let file = dir.join("expected.parquet");
    let output = run(input, &file, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    rows_by_id(&read(&file)).into_iter().map(|(id, prediction, _)| (id, prediction)).collect()
}

fn delta(input: &Path, table: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["--output-format", "delta", "--rows-per-part", "150"];
    args.extend_from_slice(extra);
    run(input, table, &args)
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn a_table_holds_each_row_once_through_a_kill_before_commit_and_reruns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("reviews.parquet");
    many_reviews(&input, 2, 150);
    // A space in the path: the log percent-encodes it, every reader must decode it.
    let table = dir.path().join("my table");

    // Killed with SIGKILL after its 4 parts are written, before the commit.
    let killed = delta(&input, &table, &["--kill-before-commit"]);
    assert_eq!(killed.status.code(), None, "killed by a signal: {}", stderr(&killed));
    let staged: Vec<_> = std::fs::read_dir(&table)
        .expect("table dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("run-"))
        .collect();
    assert_eq!(staged.len(), 1, "one staging directory: {staged:?}");
    let parts = crate::common::files_in(&table.join(&staged[0]));
    assert_eq!(parts.iter().filter(|p| p.starts_with("part-")).count(), 4, "{parts:?}");
    if let Some(before) = read_table(table.to_str().expect("utf-8"), &[]) {
        assert!(before.rows.is_empty(), "nothing committed before the kill: {} rows", before.rows.len());
    }

    // The report reads what the log lists: nothing yet, though 4 parts lie staged.
    let page = dir.path().join("report.html");
    let report = |table: &Path| pipeline(&["report"], &[("--input", table), ("--output", &page)]);
    let early = report(&table);
    assert_eq!(early.status.code(), Some(1), "{}", stderr(&early));
    assert!(stderr(&early).contains("holds no data files yet"), "{}", stderr(&early));
    assert!(!page.exists(), "no page for an empty table");

    // The rerun writes nothing again and commits the 4 parts.
    let rerun = delta(&input, &table, &[]);
    assert!(rerun.status.success(), "{}", stderr(&rerun));
    let reported = report(&table);
    assert!(reported.status.success(), "{}", stderr(&reported));
    let html = std::fs::read_to_string(&page).expect("a page");
    assert!(html.contains("<th>rows</th><td class=\"num\">600</td>"), "the table's rows, once each");
    assert!(stdout(&rerun).contains("0 parts written, 4 already staged or in the table"), "{}", stdout(&rerun));
    assert!(stdout(&rerun).contains("4 part(s) committed to the Delta table at version 1"), "{}", stdout(&rerun));
    let expected = expected_rows(&input, dir.path());
    assert_eq!(expected.len(), 600);
    let Some(after) = read_table(table.to_str().expect("utf-8"), &[]) else { return };
    assert_eq!(after.rows, expected, "every row once, with the predictions of a plain run");
    assert_eq!(after.version, 1);

    // After success, a rerun adds nothing.
    let again = delta(&input, &table, &[]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(stdout(&again).contains("the Delta table held every part already"), "{}", stdout(&again));
    let last = read_table(table.to_str().expect("utf-8"), &[]).expect("read");
    assert_eq!((last.version, last.rows.len()), (1, 600));

    // `pipeline sql` reads the table by its location: the log's files only.
    let query = format!("SELECT count(*) AS n, count(DISTINCT id) AS ids FROM '{}'", table.display());
    let sql = pipeline(&["sql", &query], &[]);
    assert!(sql.status.success(), "{}", stderr(&sql));
    let printed = stdout(&sql);
    assert!(printed.contains("600") && !printed.contains("1200"), "{printed}");
}

#[test]
fn two_shards_commit_concurrently_and_each_row_lands_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("reviews.parquet");
    many_reviews(&input, 2, 150);
    let table = dir.path().join("table");
    // Both shards at once, each from its own thread.
    let (first, second) = std::thread::scope(|scope| {
        let first = scope.spawn(|| delta(&input, &table, &["--shard", "0/2"]));
        let second = scope.spawn(|| delta(&input, &table, &["--shard", "1/2"]));
        (first.join().expect("shard 0"), second.join().expect("shard 1"))
    });
    assert!(first.status.success() && second.status.success(), "{}\n{}", stderr(&first), stderr(&second));
    let Some(read) = read_table(table.to_str().expect("utf-8"), &[]) else { return };
    assert_eq!(read.rows, expected_rows(&input, dir.path()));
    // Created once, then one commit per shard.
    assert_eq!(read.version, 2);

    // Two attempts of the same whole run at once (a retry racing its first try): both exit 0,
    // one commit wins, the other finds its units committed.
    let twice = dir.path().join("twice");
    let (a, b) = std::thread::scope(|scope| {
        let a = scope.spawn(|| delta(&input, &twice, &[]));
        let b = scope.spawn(|| delta(&input, &twice, &[]));
        (a.join().expect("a"), b.join().expect("b"))
    });
    assert!(a.status.success() && b.status.success(), "{}\n{}", stderr(&a), stderr(&b));
    let read = read_table(twice.to_str().expect("utf-8"), &[]).expect("read");
    assert_eq!(read.rows, expected_rows(&input, dir.path()), "each row once");
    assert_eq!(read.version, 1, "one create, one commit");
}

#[test]
fn a_new_input_file_is_appended_and_the_committed_ones_are_skipped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let inputs = dir.path().join("daily");
    std::fs::create_dir(&inputs).expect("mkdir");
    let table = dir.path().join("table");
    // Day 1: two files.
    for (name, copies) in [("day1-a.parquet", 1), ("day1-b.parquet", 1)] {
        many_reviews(&inputs.join(name), copies, 300);
        rename_ids(&inputs.join(name), name);
    }
    let day1 = delta(&inputs, &table, &[]);
    assert!(day1.status.success(), "{}", stderr(&day1));
    assert!(stdout(&day1).contains("4 parts written"), "{}", stdout(&day1));
    // Day 2: one more file in the same place.
    many_reviews(&inputs.join("day2.parquet"), 1, 300);
    rename_ids(&inputs.join("day2.parquet"), "day2.parquet");
    let day2 = delta(&inputs, &table, &[]);
    assert!(day2.status.success(), "{}", stderr(&day2));
    assert!(stdout(&day2).contains("2 parts written"), "only the new file's: {}", stdout(&day2));
    // A file written again (a new modification time) with the same rows is not added twice.
    let day1 = inputs.join("day1-a.parquet");
    let bytes = std::fs::read(&day1).expect("read");
    std::fs::write(&day1, bytes).expect("rewrite");
    let day3 = delta(&inputs, &table, &[]);
    assert!(day3.status.success(), "{}", stderr(&day3));
    assert!(stdout(&day3).contains("0 parts written"), "{}", stdout(&day3));
    let Some(read) = read_table(table.to_str().expect("utf-8"), &[]) else { return };
    assert_eq!(read.rows.len(), 900);
    let mut ids: Vec<&String> = read.rows.iter().map(|(id, _)| id).collect();
    ids.dedup();
    assert_eq!(ids.len(), 900, "each file's rows once");
}

/// Prefixes the ids of a `many_reviews` file with `name`, so files do not share ids.
fn rename_ids(path: &Path, name: &str) {
    let batch = read(path);
    let ids: Vec<String> = strings(&batch, "id").into_iter().map(|id| format!("{name}:{}", id.expect("id"))).collect();
    let texts = strings(&batch, "text");
    crate::common::write_parquet(
        path,
        vec![
            ("id", std::sync::Arc::new(arrow::array::StringArray::from(ids))),
            ("text", std::sync::Arc::new(arrow::array::StringArray::from(texts))),
        ],
    );
}

#[test]
fn a_table_of_another_schema_or_a_location_that_is_not_a_table_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let table = dir.path().join("table");
    let first = delta(&crate::common::reviews(), &table, &["--attention", "compact"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let log_before = crate::common::files_in(&table.join("_delta_log"));

    let other = delta(&crate::common::reviews(), &table, &["--attention", "full"]);
    assert_eq!(other.status.code(), Some(1), "{}", stderr(&other));
    let message = stderr(&other);
    assert!(message.contains("has another schema than this run writes"), "{message}");
    assert!(message.contains("write to a new table"), "{message}");
    assert_eq!(crate::common::files_in(&table.join("_delta_log")), log_before, "nothing committed");

    // Another split into units would make the same rows other units: refused.
    let split = run(&crate::common::reviews(), &table, &["--output-format", "delta", "--rows-per-part", "100"]);
    assert_eq!(split.status.code(), Some(1), "{}", stderr(&split));
    assert!(
        stderr(&split).contains("pipeline.rows_per_part (--rows-per-part) is 150, this run's 100"),
        "{}",
        stderr(&split)
    );
    // Figures written into the table's log would break it: refused, and the log left alone.
    let entry = table.join("_delta_log").join(&log_before[0]);
    let before = std::fs::read(&entry).expect("log entry");
    for flag in ["--metrics-textfile", "--metrics-json"] {
        let refused = delta(&crate::common::reviews(), &table, &[flag, entry.to_str().expect("utf-8")]);
        assert_eq!(refused.status.code(), Some(1), "{flag}: {}", stderr(&refused));
        assert!(stderr(&refused).contains("is inside the Delta table"), "{}", stderr(&refused));
    }
    assert_eq!(std::fs::read(&entry).expect("log entry"), before, "the log entry is untouched");
    assert_eq!(crate::common::files_in(&table.join("_delta_log")), log_before, "nothing committed");

    // A directory of loose Parquet parts is not a table, and is not made into one.
    let parts = dir.path().join("parts");
    let plain = run(&crate::common::reviews(), &parts, &[]);
    assert!(plain.status.success(), "{}", stderr(&plain));
    let before = crate::common::files_in(&parts);
    let refused = delta(&crate::common::reviews(), &parts, &[]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("is not a Delta table"), "{}", stderr(&refused));
    assert_eq!(crate::common::files_in(&parts), before, "left as it was");

    // A .parquet path is one file, not a table.
    let file = delta(&crate::common::reviews(), &dir.path().join("t.parquet"), &[]);
    assert_eq!(file.status.code(), Some(1), "{}", stderr(&file));
    assert!(
        stderr(&file).contains("--output") && stderr(&file).contains("give a path without .parquet"),
        "{}",
        stderr(&file)
    );
}

#[test]
fn a_table_in_object_storage_is_committed_once_and_read_back() {
    let Some(server) = S3Server::start("a_table_in_object_storage_is_committed_once_and_read_back") else { return };
    server.put("in/reviews.parquet", &crate::common::reviews());
    let table = format!("s3://{}/tables/predictions", crate::common::s3_server::BUCKET);
    let args = [
        "run",
        "--input",
        &format!("s3://{}/in/reviews.parquet", crate::common::s3_server::BUCKET),
        "--output",
        &table,
    ];
    let mut args: Vec<&str> = args.to_vec();
    args.extend(["--output-format", "delta"]);
    let first = server.run(&args);
    assert!(first.status.success(), "{}", stderr(&first));
    let again = server.run(&args);
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(stdout(&again).contains("the Delta table held every part already"), "{}", stdout(&again));

    let dir = tempfile::tempdir().expect("tempdir");
    let expected = expected_rows(&crate::common::reviews(), dir.path());
    if let Some(read) = read_table(&table, &server.env()) {
        assert_eq!(read.rows, expected);
        assert_eq!(read.version, 1);
    }
    let sql = server.sql(&[&format!("SELECT count(*) AS n FROM '{table}'")]);
    assert!(sql.status.success(), "{}", stderr(&sql));
    assert!(stdout(&sql).contains("300"), "{}", stdout(&sql));

    // An object is not a table, and nothing is written under it as a prefix.
    server.put("notes/readme", &crate::common::reviews());
    let object = format!("s3://{}/notes/readme", crate::common::s3_server::BUCKET);
    let input = format!("s3://{}/in/reviews.parquet", crate::common::s3_server::BUCKET);
    let refused = server.run(&["run", "--input", &input, "--output", &object, "--output-format", "delta"]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("is an object"), "{}", stderr(&refused));
    assert_eq!(server.list("notes/"), vec!["notes/readme".to_owned()]);
}

//! `--partition-by`: directories per value that DuckDB, Polars, SQL and the report read
//! back typed, repaired whole, and refused where they cannot work.

use std::process::Command;

use arrow::array::Array;

use super::*;

/// Every file under `dir`'s partition directories, as names relative to it.
fn partition_files(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            for file in files_in(&path) {
                found.push(format!("{}/{file}", path.file_name().expect("name").to_string_lossy()));
            }
        }
    }
    found.sort();
    found
}

/// (prediction, rows) of a single-file run of the fixture, by prediction.
fn predictions_of_a_single_run(dir: &Path) -> Vec<(String, u64)> {
    let single = dir.join("single.parquet");
    assert!(run(&reviews(), &single, &[]).status.success());
    let mut counts = std::collections::BTreeMap::new();
    for prediction in strings(&read(&single), "prediction") {
        *counts.entry(prediction.expect("a prediction")).or_insert(0u64) += 1;
    }
    counts.into_iter().collect()
}

#[test]
fn a_partitioned_dataset_reads_back_in_duckdb_polars_and_sql_with_its_column() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let output = run(&reviews(), &out, &["--rows-per-part", "100", "--partition-by", "prediction"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let files = partition_files(&out);
    assert_eq!(files.len(), 6, "{files:?}");
    assert!(files.iter().all(|f| f.starts_with("prediction=neg/part-") || f.starts_with("prediction=pos/part-")));
    let first = read(&out.join(&files[0]));
    assert!(first.schema().index_of("prediction").is_err(), "the column lives in the directory names");
    // A rerun finds it complete, and believes its _SUCCESS.
    let success = modified(&out.join("_SUCCESS"));
    let output = run(&reviews(), &out, &["--rows-per-part", "100", "--partition-by", "prediction"]);
    assert!(String::from_utf8_lossy(&output.stdout).contains("0 parts written, 3 already committed"));
    assert!(!stderr(&output).contains("WARN"), "{}", stderr(&output));
    assert_eq!(modified(&out.join("_SUCCESS")), success);
    let expected = predictions_of_a_single_run(dir.path());
    let expected_text: Vec<String> = expected.iter().map(|(p, n)| format!("{p} {n}")).collect();

    let output = Command::new(env!("CARGO_BIN_EXE_pipeline"))
        .current_dir(dir.path())
        .args(["sql", "SELECT prediction, count(*) AS n FROM 'out/' GROUP BY prediction ORDER BY prediction"])
        .args(["--format", "csv"])
        .output()
        .expect("sql");
    assert!(output.status.success(), "{}", stderr(&output));
    let csv = String::from_utf8_lossy(&output.stdout).replace(',', " ");
    assert_eq!(csv.lines().skip(1).map(str::to_owned).collect::<Vec<_>>(), expected_text, "pipeline sql");

    let reader = test_support::lakehouse_checks_python();
    let Some(python) = test_support::or_skip("reading a partitioned dataset with DuckDB and Polars", reader) else {
        return;
    };
    let script = r#"
import sys, duckdb, polars as pl
glob = sys.argv[1] + "/**/*.parquet"
for prediction, n in duckdb.sql(f"SELECT prediction, count(*) FROM read_parquet('{glob}', hive_partitioning=true) GROUP BY 1 ORDER BY 1").fetchall():
    print("duckdb", prediction, n)
frame = pl.read_parquet(glob, hive_partitioning=True)
for prediction, n in frame.group_by("prediction").len().sort("prediction").rows():
    print("polars", prediction, n)
# The token spans, one whole number a token, read as any list column.
print("tokens duckdb", duckdb.sql(f"SELECT sum(len(token_spans)) FROM read_parquet('{glob}')").fetchall()[0][0])
print("tokens polars", frame["token_spans"].list.len().sum())
"#;
    let output = Command::new(python).args(["-c", script, &out.to_string_lossy()]).output().expect("python");
    assert!(output.status.success(), "{}", stderr(&output));
    let printed = String::from_utf8_lossy(&output.stdout).into_owned();
    for reader in ["duckdb", "polars"] {
        let lines: Vec<String> =
            printed.lines().filter_map(|l| l.strip_prefix(reader)).map(|l| l.trim().to_owned()).collect();
        assert_eq!(lines, expected_text, "{reader}: {printed}");
    }
    let single = token_lists(&read(&dir.path().join("single.parquet")));
    let tokens: i32 = (0..single.len()).map(|row| single.value_length(row)).sum();
    assert!(printed.contains(&format!("tokens duckdb {tokens}\n")), "{tokens}: {printed}");
    assert!(printed.contains(&format!("tokens polars {tokens}\n")), "{tokens}: {printed}");
}

#[test]
fn partition_columns_read_back_typed_with_their_nulls_in_sql_and_the_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let args = ["--partition-by", "abstained,prediction", "--min-confidence", "0.9"];
    let output = run(&reviews(), &out, &args);
    assert!(output.status.success(), "{}", stderr(&output));
    let summary = String::from_utf8_lossy(&output.stdout).into_owned();
    let abstained: usize = summary
        .split(" abstained")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no abstained count: {summary}"));
    assert!(abstained > 0, "{summary}");
    assert!(out.join("abstained=true/prediction=__HIVE_DEFAULT_PARTITION__").is_dir());
    let query = "SELECT arrow_typeof(abstained) AS t, count(*) AS n FROM 'out/' WHERE abstained AND prediction IS NULL GROUP BY 1";
    let output = Command::new(env!("CARGO_BIN_EXE_pipeline"))
        .current_dir(dir.path())
        .args(["sql", query, "--format", "csv"])
        .output()
        .expect("sql");
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout).lines().nth(1), Some(format!("Boolean,{abstained}").as_str()));
    let page = dir.path().join("report.html");
    let output = pipeline(&["report"], &[("--input", &out), ("--output", &page)]);
    assert!(output.status.success(), "{}", stderr(&output));
    // One partition's directory still has its columns for the report, which reads them from the
    // whole path; DataFusion cannot, and pipeline sql says which directory has them.
    let output = pipeline(&["report"], &[("--input", &out.join("abstained=true")), ("--output", &page)]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).starts_with(&format!("{abstained} rows")));
    let output = Command::new(env!("CARGO_BIN_EXE_pipeline"))
        .current_dir(dir.path())
        .args(["sql", "SELECT count(*) FROM 'out/**/*.parquet'"])
        .output()
        .expect("sql");
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stderr(&output).contains("lack the column(s) abstained, prediction"), "{}", stderr(&output));
    assert!(stderr(&output).contains("give the dataset's directory (out/)"), "{}", stderr(&output));
}

#[test]
fn a_partitioned_part_missing_a_file_is_written_again_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let args = ["--rows-per-part", "100", "--partition-by", "prediction"];
    assert!(run(&reviews(), &out, &args).status.success());
    let complete = partition_files(&out);
    // As if killed between publishing a part's two files.
    std::fs::remove_file(out.join("prediction=pos/part-00001.parquet")).expect("rm");
    std::fs::remove_file(out.join("_SUCCESS")).expect("rm");
    let finalized = finalize(&out);
    assert!(stderr(&finalized).contains("missing 1 part(s): part-00001.parquet"), "{}", stderr(&finalized));
    let output = run(&reviews(), &out, &args);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stderr(&output).contains("part-00001.parquet has 1 files where its run wrote 2"), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("1 part written, 2 already committed"));
    assert_eq!(partition_files(&out), complete);
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("_SUCCESS")).expect("_SUCCESS")).expect("json");
    assert_eq!(manifest["rows"], 300);
    assert_eq!(manifest["parts"].as_array().expect("parts").len(), 6);
}

#[test]
fn partitioning_that_cannot_work_is_refused_before_any_work() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let cases: [(&[&str], &str); 6] = [
        (&["--partition-by", "confidence"], "--partition-by confidence: its values are Float32"),
        (&["--partition-by", "topic"], "--partition-by topic: the run writes no such column"),
        (&["--partition-by", "label,"], "--partition-by label,: an empty name"),
        (&["--partition-by", "a=b"], "--partition-by a=b: its name holds characters a directory name escapes"),
        (&["--partition-by", "prediction", "--output-format", "delta"], "a Delta table keeps its own partitioning"),
        (&["--partition-by", "prediction", "--drop", "prediction"], "--drop prediction"),
    ];
    for (args, expected) in cases {
        let output = run(&reviews(), &out, args);
        assert!(!output.status.success(), "{args:?}");
        assert!(stderr(&output).contains(expected), "{args:?}: {}", stderr(&output));
        assert!(!out.exists(), "{args:?}: nothing made");
    }
    // A value too long for a directory name is found mid-run: the directory the run made goes.
    let output = run(&reviews(), &out, &["--partition-by", "text"]);
    assert!(stderr(&output).contains("over the 255 a file system allows"), "{}", stderr(&output));
    assert!(!out.exists(), "the empty output directory is removed");
    let single = dir.path().join("one.parquet");
    let output = run(&reviews(), &single, &["--partition-by", "prediction"]);
    assert!(stderr(&output).contains("--partition-by needs a dataset output"), "{}", stderr(&output));
    assert!(!single.exists());
    // A dataset written without partitions is not rewritten with them by accident.
    assert!(run(&reviews(), &out, &["--rows-per-part", "100"]).status.success());
    let output = run(&reviews(), &out, &["--rows-per-part", "100", "--partition-by", "prediction"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("--partition-by was not set, now prediction"), "{}", stderr(&output));
}

#[test]
fn a_partitioned_dataset_grows_by_its_new_input_files_and_the_report_reads_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (input, new) = grown_inputs(dir.path());
    let out = dir.path().join("out");
    let args = ["--rows-per-part", "50", "--partition-by", "label,prediction"];
    assert!(run(&input, &out, &args).status.success());
    std::fs::copy(&new, input.join("a.parquet")).expect("copy");
    let output = run(&input, &out, &args);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("2 parts written, 4 already committed, of 6 in all"));
    let page = dir.path().join("report.html");
    let output = pipeline(&["report"], &[("--input", &out), ("--output", &page)]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        String::from_utf8_lossy(&output.stdout).starts_with("300 rows"),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
}

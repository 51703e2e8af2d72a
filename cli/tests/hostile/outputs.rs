//! Outputs land only where the user meant: never inside a Delta table or a dataset being read
//! (its log, its staged parts, beside its parts), and never over a file that is not an
//! earlier output of the same kind.

use super::*;

/// A Delta table of the 300 fixture reviews in two parts, at `dir/table`.
pub fn delta_table(dir: &Path) -> PathBuf {
    let table = dir.join("table");
    let output = run(&reviews(), &table, &["--output-format", "delta", "--rows-per-part", "150"]);
    assert!(output.status.success(), "{}", stderr(&output));
    table
}

pub fn count_rows(table: &Path) -> String {
    let location = format!("t={}", table.display());
    let output = pipeline(&["sql", "SELECT count(*) AS n FROM t", "--format", "csv", "--table", &location], &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    String::from_utf8_lossy(&output.stdout).lines().nth(1).unwrap_or_default().to_owned()
}

#[test]
fn nothing_is_written_inside_a_table_or_dataset_being_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let table = delta_table(dir.path());
    let log = table.join("_delta_log");
    let commit = log.join("00000000000000000001.json");
    let before = sha(&commit);
    let table_arg = format!("t={}", table.display());
    for target in [commit.clone(), log.join("00000000000000000099.json"), table.join("report.html")] {
        let page = pipeline(&["report"], &[("--input", &table), ("--output", &target)]);
        assert_eq!(exit_code(&page), Some(1), "{}", stderr(&page));
        assert!(stderr(&page).contains("inside"), "{}", stderr(&page));
        let query =
            pipeline(&["sql", "SELECT id FROM t", "--format", "csv", "--table", &table_arg], &[("--output", &target)]);
        assert_eq!(exit_code(&query), Some(1), "{}", stderr(&query));
        assert!(stderr(&query).contains("inside"), "{}", stderr(&query));
    }
    // Word vectors and an evaluation's figures, likewise.
    let vectors = pipeline(&["vectors"], &[("--corpus", &reviews()), ("--out", &table.join("vectors.txt"))]);
    assert_refused(&vectors, 1, &["inside the Delta table"], &table.join("vectors.txt"));
    // A plain run into the table's log, and a dataset into the table's directory.
    let into_log = run(&reviews(), &log.join("x.parquet"), &[]);
    assert_refused(&into_log, 1, &["inside the Delta table"], &log.join("x.parquet"));
    let into_table = run(&reviews(), &table.join("more"), &[]);
    assert_refused(&into_table, 1, &["inside the Delta table"], &table.join("more"));
    let parquet_into_table = run(&reviews(), &table, &[]);
    assert_eq!(exit_code(&parquet_into_table), Some(1), "{}", stderr(&parquet_into_table));
    assert!(stderr(&parquet_into_table).contains("is a Delta table: add --output-format delta"));
    assert_eq!(sha(&commit), before, "the commit is untouched");
    assert!(!log.join("00000000000000000099.json").exists(), "no gap in the log");
    assert_eq!(count_rows(&table), "300", "the table still reads");

    // A Parquet dataset read by the report or SQL: nothing beside or among its parts.
    let dataset = dir.path().join("dataset");
    assert!(run(&reviews(), &dataset, &["--rows-per-part", "150"]).status.success());
    let page = pipeline(&["report"], &[("--input", &dataset), ("--output", &dataset.join("report.html"))]);
    assert_refused(&page, 1, &["inside the input directory"], &dataset.join("report.html"));
    let beside = dir.path().join("report.html");
    let page = pipeline(&["report"], &[("--input", &dataset), ("--output", &beside)]);
    assert!(page.status.success(), "beside the dataset is fine: {}", stderr(&page));
}

#[test]
fn side_files_replace_only_an_earlier_output_of_their_kind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let essay: &[u8] = b"Chapter one. It was a bright cold day in April, and the clocks were striking thirteen.\n";
    let out = dir.path().join("out.parquet");
    let path_of = |name: &str| dir.path().join(name);
    for name in ["essay.prom", "essay.json", "README.md", "page.html"] {
        std::fs::write(path_of(name), essay).expect("write");
    }
    let run_flag = |flag: &str, target: &Path| run(&reviews(), &out, &[flag, target.to_str().expect("utf-8")]);
    for (flag, name) in [("--metrics-textfile", "essay.prom"), ("--metrics-json", "essay.json")] {
        let output = run_flag(flag, &path_of(name));
        assert_refused(&output, 1, &[flag, name, "Move or delete it"], &out);
    }
    for format in ["csv", "json", "table", "parquet"] {
        let output = pipeline(&["sql", "SELECT 1 AS v", "--format", format], &[("--output", &path_of("README.md"))]);
        assert_eq!(exit_code(&output), Some(1), "{format}: {}", stderr(&output));
        assert!(stderr(&output).contains("README.md exists and is not"), "{}", stderr(&output));
    }
    let page = pipeline(&["report"], &[("--input", &reviews()), ("--output", &path_of("page.html"))]);
    assert_eq!(exit_code(&page), Some(1), "{}", stderr(&page));
    for name in ["essay.prom", "essay.json", "README.md", "page.html"] {
        assert_eq!(std::fs::read(path_of(name)).expect("read"), essay, "{name} untouched");
    }
    // The two metrics flags on one file would write each other's figures.
    let both = path_of("figures.out");
    let output = run(
        &reviews(),
        &out,
        &["--metrics-json", both.to_str().expect("utf-8"), "--metrics-textfile", both.to_str().expect("utf-8")],
    );
    assert_refused(&output, 1, &["--metrics-json and --metrics-textfile both name"], &both);

    // Earlier outputs of each kind are replaced, run after run.
    let (prom, json) = (path_of("run.prom"), path_of("run.json"));
    for _ in 0..2 {
        let flags =
            ["--metrics-textfile", prom.to_str().expect("utf-8"), "--metrics-json", json.to_str().expect("utf-8")];
        let output = run(&reviews(), &out, &flags);
        assert!(output.status.success(), "{}", stderr(&output));
        for format in ["csv", "json", "table"] {
            let target = path_of(&format!("result.{format}"));
            let output = pipeline(&["sql", "SELECT 1 AS v", "--format", format], &[("--output", &target)]);
            assert!(output.status.success(), "{format}: {}", stderr(&output));
        }
    }
    // `-` is no file of that name: stdout for SQL, refused for a run, a report, the metrics files.
    let model = tiny_model();
    let model = model.to_str().expect("utf-8");
    for args in [
        vec!["report", "--output", "-"],
        vec!["run", "--model", model, "--metrics-json", "-"],
        vec!["run", "--model", model, "--metrics-textfile", "-"],
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_pipeline"))
            .current_dir(dir.path())
            .args(&args)
            .arg("--input")
            .arg(reviews())
            .output()
            .expect("run");
        assert_eq!(exit_code(&output), Some(1), "{args:?}: {}", stderr(&output));
        assert!(!dir.path().join("-").exists(), "{args:?} wrote a file named -");
    }
    let output = Command::new(env!("CARGO_BIN_EXE_pipeline"))
        .current_dir(dir.path())
        .args(["sql", "SELECT 7 AS v", "--format", "csv", "--output", "-"])
        .output()
        .expect("sql");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "v\n7\n", "{}", stderr(&output));
    let output = Command::new(env!("CARGO_BIN_EXE_pipeline"))
        .current_dir(dir.path())
        .args(["run", "--model"])
        .arg(tiny_model())
        .arg("--input")
        .arg(reviews())
        .args(["--output", "-"])
        .output()
        .expect("run");
    assert_eq!(exit_code(&output), Some(1), "{}", stderr(&output));
    assert!(!dir.path().join("-").exists(), "no file or directory named -");
}

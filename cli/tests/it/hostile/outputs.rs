//! Outputs land only where the user meant: never inside a Delta table or a dataset being read
//! (its log, its staged parts, beside its parts), and never over a file that is not an
//! earlier output of the same kind.

use std::process::Command;

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

//! Runs killed, parts lost or damaged, and other runs' output: a rerun repairs what it
//! wrote, and refuses, by name, what it did not.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::*;

#[test]
fn another_runs_output_is_refused_unless_overwrite() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    assert!(run(&reviews(), &out, &["--rows-per-part", "100", "--shard", "0/2"]).status.success());
    let before = files_in(&out);
    let output = run(&reviews(), &out, &["--rows-per-part", "100", "--shard", "1/2", "--max-tokens", "50"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("--max-tokens was"), "{}", stderr(&output));
    assert!(stderr(&output).contains("--overwrite"), "{}", stderr(&output));
    assert_eq!(files_in(&out), before, "nothing touched");

    let output = run(&reviews(), &out, &["--rows-per-part", "100", "--max-tokens", "50", "--overwrite"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("3 parts written, 0 already committed"));

    // A directory holding anything else is not a run's output.
    let other = dir.path().join("notes");
    std::fs::create_dir(&other).expect("mkdir");
    std::fs::write(other.join("todo.txt"), b"mine").expect("write");
    let output = run(&reviews(), &other, &["--overwrite"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("holds todo.txt, which is not part of a run"), "{}", stderr(&output));
    assert_eq!(files_in(&other), vec!["todo.txt"]);
}

#[test]
fn shard_specs_and_single_file_outputs_are_checked_before_any_work() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    for (spec, message) in [("3/3", "numbered 0 to 2"), ("0/0", "at least one shard"), ("1", "write I/N")] {
        let output = run(&reviews(), &out, &["--shard", spec]);
        assert_eq!(output.status.code(), Some(2), "{spec}: {}", stderr(&output));
        assert!(stderr(&output).contains(message), "{spec}: {}", stderr(&output));
    }
    let output = run(&reviews(), &out, &["--shards", "4"]);
    assert!(stderr(&output).contains("JOB_COMPLETION_INDEX"), "{}", stderr(&output));
    let output = run(&reviews(), &dir.path().join("one.parquet"), &["--shard", "0/2"]);
    assert!(stderr(&output).contains("need a dataset output"), "{}", stderr(&output));
    assert!(!out.exists() && !dir.path().join("one.parquet").exists());
}

#[cfg(unix)]
#[test]
fn kill_9_mid_part_then_a_rerun_gives_every_row_once_and_nothing_left_over() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("many.parquet");
    many_reviews(&input, 30, 1_000);
    let single = dir.path().join("single.parquet");
    assert!(run(&input, &single, &[]).status.success());

    let out = dir.path().join("out");
    let args = ["--rows-per-part", "500", "--chunk-rows", "100"];
    let mut child = Command::new(env!("CARGO_BIN_EXE_pipeline"))
        .arg("run")
        .args(args)
        .arg("--input")
        .arg(&input)
        .arg("--model")
        .arg(tiny_model())
        .arg("--output")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    // Kill once two parts are committed and the next one is being written.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let names = if out.is_dir() { files_in(&out) } else { Vec::new() };
        let committed = names.iter().filter(|n| n.starts_with("part-")).count();
        if committed >= 2 && names.iter().any(|n| n.starts_with(".part-") && n.ends_with(".partial")) {
            break;
        }
        assert!(Instant::now() < deadline, "no temporary part appeared: {names:?}");
        assert!(child.try_wait().expect("wait").is_none(), "the run finished before it could be killed");
        std::thread::sleep(Duration::from_millis(1));
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("wait");
    let left = files_in(&out);
    assert!(!left.contains(&"_SUCCESS".to_owned()), "{left:?}");
    assert!(left.iter().any(|n| n.ends_with(".partial")), "the kill left a temporary: {left:?}");

    let output = run(&input, &out, &args);
    assert!(output.status.success(), "{}", stderr(&output));
    let summary = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(!summary.contains(" 0 already committed"), "the rerun skipped nothing: {summary}");
    let names = files_in(&out);
    assert!(names.iter().all(|n| n == "_SUCCESS" || n.starts_with("part-")), "left over: {names:?}");
    assert_eq!(parts_of(&out).len(), 18);
    assert_same_rows(&read(&single), &read_dataset(&out));
}

#[test]
fn a_part_lost_after_success_is_noticed_by_finalize_and_written_again_by_a_rerun() {
    let dir = tempfile::tempdir().expect("tempdir");
    let single = dir.path().join("single.parquet");
    assert!(run(&reviews(), &single, &[]).status.success());
    let out = dir.path().join("out");
    assert!(run(&reviews(), &out, &["--rows-per-part", "100"]).status.success());
    // A report goes beside the dataset, never among its parts (other readers take every file
    // there for a part).
    let report = pipeline(&["report"], &[("--input", &out), ("--output", &out.join("report.html"))]);
    assert_eq!(report.status.code(), Some(1), "{}", stderr(&report));
    let report = pipeline(&["report"], &[("--input", &out), ("--output", &dir.path().join("report.html"))]);
    assert!(report.status.success(), "{}", stderr(&report));
    // A page an older version wrote among the parts is no stranger to the dataset.
    let page = out.join("report.html");
    std::fs::copy(dir.path().join("report.html"), &page).expect("copy");

    std::fs::remove_file(out.join("part-00001.parquet")).expect("rm");
    let finalized = finalize(&out);
    assert_eq!(finalized.status.code(), Some(1), "{}", stderr(&finalized));
    assert!(stderr(&finalized).contains("missing 1 part(s): part-00001.parquet"), "{}", stderr(&finalized));
    assert!(!out.join("_SUCCESS").exists(), "a _SUCCESS that lies is withdrawn");

    let output = run(&reviews(), &out, &["--rows-per-part", "100"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("1 part written, 2 already committed"));
    assert_same_rows(&read(&single), &read_dataset(&out));

    // The same without --finalize first: the rerun itself sees _SUCCESS no longer holds.
    std::fs::remove_file(out.join("part-00002.parquet")).expect("rm");
    let output = run(&reviews(), &out, &["--rows-per-part", "100"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stderr(&output).contains("part-00002.parquet (100 rows) is missing"), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("1 part written, 2 already committed"));
    assert_same_rows(&read(&single), &read_dataset(&out));
    let finalized = finalize(&out);
    assert!(finalized.status.success(), "{}", stderr(&finalized));
    assert!(page.is_file(), "the report is left alone");
}

#[test]
fn a_part_damaged_in_place_or_an_edited_success_is_not_believed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let single = dir.path().join("single.parquet");
    assert!(run(&reviews(), &single, &[]).status.success());
    let out = dir.path().join("out");
    assert!(run(&reviews(), &out, &["--rows-per-part", "100"]).status.success());
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("_SUCCESS")).expect("_SUCCESS")).expect("json");
    let digest = manifest["parts"][1]["digest"].as_str().expect("a digest per part").to_owned();
    assert!(digest.starts_with("sha256:") && digest.len() == 7 + 64, "{digest}");

    // Same size, a run of bytes zeroed in the middle: reported complete before.
    let part = out.join("part-00001.parquet");
    let damage = || {
        let mut bytes = std::fs::read(&part).expect("read");
        let middle = bytes.len() / 2;
        bytes[middle..middle + 64].fill(0);
        std::fs::write(&part, &bytes).expect("damage");
    };
    damage();
    let finalized = finalize(&out);
    assert_eq!(finalized.status.code(), Some(1), "{}", stderr(&finalized));
    let err = stderr(&finalized);
    assert!(err.contains("part-00001.parquet was changed after it was committed"), "{err}");
    assert!(err.contains("missing 1 part(s): part-00001.parquet"), "{err}");
    assert!(!out.join("_SUCCESS").exists(), "a _SUCCESS that lies is withdrawn");
    let output = run(&reviews(), &out, &["--rows-per-part", "100"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("1 part written, 2 already committed"));
    assert_same_rows(&read(&single), &read_dataset(&out));

    // The rerun notices it by itself too.
    damage();
    let output = run(&reviews(), &out, &["--rows-per-part", "100"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stderr(&output).contains("changed after it was committed"), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("1 part written, 2 already committed"));
    assert_same_rows(&read(&single), &read_dataset(&out));

    // A hand-edited total is not believed either: --finalize writes the true one.
    let text = std::fs::read_to_string(out.join("_SUCCESS")).expect("_SUCCESS");
    std::fs::write(out.join("_SUCCESS"), text.replacen("\"rows\": 300", "\"rows\": 3000", 1)).expect("edit");
    let finalized = finalize(&out);
    assert!(finalized.status.success(), "{}", stderr(&finalized));
    assert!(stderr(&finalized).contains("it counts 3000 rows where its parts hold 300"), "{}", stderr(&finalized));
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("_SUCCESS")).expect("_SUCCESS")).expect("json");
    assert_eq!(manifest["rows"], 300);
}

#[test]
fn a_truncated_part_withdraws_the_success_that_vouched_for_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    assert!(run(&reviews(), &out, &["--rows-per-part", "100"]).status.success());
    let part = out.join("part-00001.parquet");
    let bytes = std::fs::read(&part).expect("read");
    std::fs::write(&part, &bytes[..bytes.len() / 2]).expect("truncate");
    let finalized = finalize(&out);
    assert_eq!(finalized.status.code(), Some(1), "{}", stderr(&finalized));
    let err = stderr(&finalized);
    assert!(err.contains("part-00001.parquet is not a readable part; delete it, or rerun with --overwrite"), "{err}");
    assert!(err.contains("part-00001.parquet cannot be read"), "the withdrawal says why: {err}");
    assert!(!out.join("_SUCCESS").exists(), "no reader is told the dataset is complete");
    // The rerun the message offers writes it all again.
    let output = run(&reviews(), &out, &["--rows-per-part", "100", "--overwrite"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(out.join("_SUCCESS").exists());
}

#[test]
fn an_input_inside_the_dataset_output_is_refused_even_with_overwrite() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("ds");
    assert!(run(&reviews(), &out, &["--rows-per-part", "100"]).status.success());
    let before = files_in(&out);
    let input = out.join("part-00002.parquet");
    let output = run(&input, &out, &["--pass-through", "id,text", "--overwrite"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("holds the input file"), "{}", stderr(&output));
    assert_eq!(files_in(&out), before, "nothing deleted");
}

#[test]
fn a_part_copied_over_a_sibling_is_named_not_taken_as_committed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    assert!(run(&reviews(), &out, &["--rows-per-part", "100"]).status.success());
    // Same run, same row count: only the part's own unit index tells them apart.
    std::fs::copy(out.join("part-00000.parquet"), out.join("part-00001.parquet")).expect("copy");
    for output in [run(&reviews(), &out, &["--rows-per-part", "100"]), finalize(&out)] {
        assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
        let err = stderr(&output);
        assert!(err.contains("part-00001.parquet holds the rows of part-00000.parquet"), "{err}");
    }
    std::fs::remove_file(out.join("part-00001.parquet")).expect("rm");
    let output = run(&reviews(), &out, &["--rows-per-part", "100"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("1 part written, 2 already committed"));
}

#[test]
fn a_dataset_output_a_glob_input_would_read_back_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("d");
    std::fs::create_dir(&data).expect("mkdir");
    std::fs::copy(reviews(), data.join("reviews.parquet")).expect("copy");
    let pattern = format!("{}/**/*.parquet", data.display());
    let out = data.join("sub");
    let output = pipeline(&["run", "--input", &pattern], &[("--output", &out)]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("a rerun would read it back as input"), "{}", stderr(&output));
    assert!(!out.exists(), "nothing made");
}

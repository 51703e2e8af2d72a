//! Dataset outputs as a scheduler uses them: parts, shards, `_SUCCESS`, resume after
//! `kill -9`, and refusals that leave other runs' output alone.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use arrow::array::{Array, RecordBatch};
use common::*;

fn parts_of(dir: &Path) -> Vec<PathBuf> {
    files_in(dir).into_iter().filter(|n| n.starts_with("part-")).map(|n| dir.join(n)).collect()
}

/// Every part's rows, in part order.
fn read_dataset(dir: &Path) -> RecordBatch {
    let batches: Vec<RecordBatch> = parts_of(dir).iter().map(|p| read(p)).collect();
    arrow::compute::concat_batches(&batches[0].schema(), &batches).expect("concat")
}

#[test]
fn a_dataset_holds_the_rows_of_a_single_file_run_and_a_manifest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let single = dir.path().join("single.parquet");
    assert!(run(&reviews(), &single, &[]).status.success());
    let out = dir.path().join("out");
    let output = run(&reviews(), &out, &["--rows-per-part", "64"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let summary = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(summary.contains("5 parts written, 0 already committed, of 5 in all; complete"), "{summary}");
    let names = files_in(&out);
    assert_eq!(
        names,
        vec![
            "_SUCCESS",
            "part-00000.parquet",
            "part-00001.parquet",
            "part-00002.parquet",
            "part-00003.parquet",
            "part-00004.parquet"
        ]
    );
    assert_same_rows(&read(&single), &read_dataset(&out));
    // In input order, too.
    assert_eq!(strings(&read(&single), "id"), strings(&read_dataset(&out), "id"));

    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("_SUCCESS")).expect("_SUCCESS")).expect("json");
    assert_eq!(manifest["rows"], 300);
    assert_timestamps(&manifest, "started_at", "finished_at");
    assert_eq!(manifest["parts"].as_array().expect("parts").len(), 5);
    assert_eq!(manifest["inputs"][0]["size"], std::fs::metadata(reviews()).expect("meta").len());
    assert_eq!(manifest["run"]["input_count"], 1);
    assert_eq!(manifest["run"]["model_sha256"].as_str().map(str::len), Some(64));

    // A rerun finds the run complete and writes nothing.
    let before = std::fs::metadata(out.join("part-00000.parquet")).expect("meta").modified().expect("mtime");
    let output = run(&reviews(), &out, &["--rows-per-part", "64"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("0 parts written, 5 already committed"));
    assert_eq!(std::fs::metadata(out.join("part-00000.parquet")).expect("meta").modified().expect("mtime"), before);
}

#[test]
fn shards_write_every_row_once_and_the_last_one_writes_success() {
    let dir = tempfile::tempdir().expect("tempdir");
    let single = dir.path().join("single.parquet");
    assert!(run(&reviews(), &single, &[]).status.success());
    let out = dir.path().join("out");
    for shard in ["1/3", "0/3"] {
        let output = run(&reviews(), &out, &["--rows-per-part", "40", "--shard", shard]);
        assert!(output.status.success(), "{}", stderr(&output));
        assert!(!out.join("_SUCCESS").exists(), "written before every shard is done");
    }
    // The last shard as a Kubernetes Indexed Job pod would run it.
    let output = Command::new(env!("CARGO_BIN_EXE_pipeline"))
        .args(["run", "--rows-per-part", "40", "--shards", "3"])
        .arg("--input")
        .arg(reviews())
        .arg("--model")
        .arg(tiny_model())
        .arg("--output")
        .arg(&out)
        .env("JOB_COMPLETION_INDEX", "2")
        .output()
        .expect("run");
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("shard 2/3: 2 parts written"));
    assert!(out.join("_SUCCESS").exists());
    assert_eq!(parts_of(&out).len(), 8);
    assert_same_rows(&read(&single), &read_dataset(&out));
}

/// The variables by which a scheduler marks a copy of an array job; the tests' own are removed.
const SCHEDULER_INDEXES: [&str; 4] =
    ["JOB_COMPLETION_INDEX", "SLURM_ARRAY_TASK_ID", "AWS_BATCH_JOB_ARRAY_INDEX", "CLOUD_RUN_TASK_INDEX"];

/// Environment variables to set, by name.
type Variables = &'static [(&'static str, &'static str)];

/// `pipeline run --shards COUNT` into `out` as a copy of an array job whose scheduler set
/// `vars` (and no other scheduler's index).
fn array_copy(out: &Path, count: &str, vars: Variables) -> std::process::Output {
    let mut command = run_command(&reviews(), out, &["--rows-per-part", "40", "--shards", count]);
    for name in SCHEDULER_INDEXES {
        command.env_remove(name);
    }
    command.envs(vars.iter().copied()).output().expect("run")
}

/// Each array-job scheduler numbers its copies in its own variables; `--shards` reads them.
#[test]
fn each_schedulers_array_job_finds_its_shard() {
    let dir = tempfile::tempdir().expect("tempdir");
    let single = dir.path().join("single.parquet");
    assert!(run(&reviews(), &single, &[]).status.success());
    let out = dir.path().join("out");
    let copies: [(&str, Variables); 4] = [
        // Kubernetes gives the index only: the count is the Job's completions, given as N.
        ("4", &[("JOB_COMPLETION_INDEX", "0")]),
        // `sbatch --array=1-4`: task 2 is the second place in the range.
        (
            "auto",
            &[
                ("SLURM_ARRAY_TASK_ID", "2"),
                ("SLURM_ARRAY_TASK_MIN", "1"),
                ("SLURM_ARRAY_TASK_MAX", "4"),
                ("SLURM_ARRAY_TASK_COUNT", "4"),
            ],
        ),
        ("auto", &[("AWS_BATCH_JOB_ARRAY_INDEX", "2"), ("AWS_BATCH_JOB_ARRAY_SIZE", "4")]),
        ("auto", &[("CLOUD_RUN_TASK_INDEX", "3"), ("CLOUD_RUN_TASK_COUNT", "4")]),
    ];
    for (index, (count, vars)) in copies.into_iter().enumerate() {
        let output = array_copy(&out, count, vars);
        assert!(output.status.success(), "{vars:?}: {}", stderr(&output));
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(stdout.contains(&format!("shard {index}/4: 2 parts written")), "{vars:?}: {stdout}");
    }
    assert!(out.join("_SUCCESS").exists());
    assert_same_rows(&read(&single), &read_dataset(&out));

    // Kubernetes cannot say how many copies run; a count the scheduler contradicts is refused.
    let refusals: [(&str, Variables, &str); 2] = [
        ("auto", &[("JOB_COMPLETION_INDEX", "1")], "--shards N"),
        ("3", &[("AWS_BATCH_JOB_ARRAY_INDEX", "1"), ("AWS_BATCH_JOB_ARRAY_SIZE", "4")], "runs 4 copies"),
    ];
    for (count, vars, message) in refusals {
        let output = array_copy(&dir.path().join("refused"), count, vars);
        assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
        assert!(stderr(&output).contains(message), "{}", stderr(&output));
    }
    assert!(!dir.path().join("refused").exists());
}

#[test]
fn finalize_writes_success_only_when_every_part_is_there() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    assert!(run(&reviews(), &out, &["--rows-per-part", "100", "--shard", "0/2"]).status.success());
    let finalize = pipeline(&["run"], &[("--finalize", &out)]);
    assert_eq!(finalize.status.code(), Some(1));
    assert!(stderr(&finalize).contains("missing 1 part(s): part-00001.parquet"), "{}", stderr(&finalize));
    assert!(!out.join("_SUCCESS").exists());
    // A shard that lost its race to write _SUCCESS: here, one told it was not last.
    assert!(run(&reviews(), &out, &["--rows-per-part", "100", "--shard", "1/2"]).status.success());
    std::fs::remove_file(out.join("_SUCCESS")).expect("rm");
    let finalize = pipeline(&["run"], &[("--finalize", &out)]);
    assert!(finalize.status.success(), "{}", stderr(&finalize));
    assert!(String::from_utf8_lossy(&finalize.stdout).contains("300 rows in 3 parts"));
    assert!(out.join("_SUCCESS").exists());
}

/// Two input files, `b` and `c`, of the fixture's first 200 rows (4 parts of 50), and `a`,
/// the last 100, kept aside: a file a later run finds new, and which sorts first.
fn grown_inputs(dir: &Path) -> (PathBuf, PathBuf) {
    let input = dir.join("in");
    std::fs::create_dir(&input).expect("mkdir");
    reviews_slice(&input.join("b.parquet"), 0, 100, 50);
    reviews_slice(&input.join("c.parquet"), 100, 100, 50);
    let new = dir.join("a.parquet");
    reviews_slice(&new, 200, 100, 50);
    (input, new)
}

fn modified(path: &Path) -> std::time::SystemTime {
    std::fs::metadata(path).expect("meta").modified().expect("mtime")
}

#[test]
fn a_rerun_over_grown_inputs_classifies_only_the_new_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (input, new) = grown_inputs(dir.path());
    let out = dir.path().join("out");
    let output = run(&input, &out, &["--rows-per-part", "50"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let before: Vec<_> = parts_of(&out).iter().map(|p| modified(p)).collect();
    assert_eq!(before.len(), 4);

    // `a.parquet` sorts before the others, and still takes the parts after theirs.
    std::fs::copy(&new, input.join("a.parquet")).expect("copy");
    let output = run(&input, &out, &["--rows-per-part", "50"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let summary = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(summary.starts_with("100 rows"), "{summary}");
    assert!(summary.contains("2 parts written, 4 already committed, of 6 in all; complete"), "{summary}");
    assert!(stderr(&output).contains("classifying the 1 new one(s)"), "{}", stderr(&output));
    let after: Vec<_> = parts_of(&out).iter().map(|p| modified(p)).collect();
    assert_eq!(after[..4], before[..], "the earlier parts are left as they were");
    let single = dir.path().join("single.parquet");
    assert!(run(&reviews(), &single, &[]).status.success());
    assert_same_rows(&read(&single), &read_dataset(&out));
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("_SUCCESS")).expect("_SUCCESS")).expect("json");
    assert_eq!(manifest["rows"], 300);
    assert_eq!(manifest["parts"].as_array().expect("parts").len(), 6);
    let inputs: Vec<&str> =
        manifest["inputs"].as_array().expect("inputs").iter().filter_map(|i| i["location"].as_str()).collect();
    assert!(inputs[2].ends_with("a.parquet"), "{inputs:?}");

    let output = run(&input, &out, &["--rows-per-part", "50"]);
    assert!(String::from_utf8_lossy(&output.stdout).contains("0 parts written, 6 already committed"));

    // An input the dataset holds that is gone, or changed, is refused: its rows are there.
    let kept = files_in(&out);
    std::fs::rename(input.join("b.parquet"), dir.path().join("b.parquet")).expect("mv");
    let output = run(&input, &out, &["--rows-per-part", "50"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("b.parquet is no longer read"), "{}", stderr(&output));
    std::fs::rename(dir.path().join("b.parquet"), input.join("b.parquet")).expect("mv");
    reviews_slice(&input.join("c.parquet"), 100, 90, 50);
    let output = run(&input, &out, &["--rows-per-part", "50"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("c.parquet changed size"), "{}", stderr(&output));
    assert_eq!(files_in(&out), kept, "nothing touched");
}

#[test]
fn shards_extend_a_dataset_and_finalize_lists_both_runs_parts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (input, new) = grown_inputs(dir.path());
    let out = dir.path().join("out");
    assert!(run(&input, &out, &["--rows-per-part", "50"]).status.success());
    std::fs::copy(&new, input.join("a.parquet")).expect("copy");
    // Parts 4 and 5 are new: one for each shard.
    let output = run(&input, &out, &["--rows-per-part", "50", "--shard", "0/2"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let summary = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        summary.contains("1 part written, 2 already committed, of 6 in all; other parts still to come"),
        "{summary}"
    );
    // The earlier run's _SUCCESS stands, true of what it lists, until the new one is written.
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("_SUCCESS")).expect("_SUCCESS")).expect("json");
    assert_eq!(manifest["rows"], 200);
    let finalize = pipeline(&["run"], &[("--finalize", &out)]);
    assert!(stderr(&finalize).contains("missing 1 part(s): part-00005.parquet"), "{}", stderr(&finalize));
    assert!(run(&input, &out, &["--rows-per-part", "50", "--shard", "1/2"]).status.success());
    std::fs::remove_file(out.join("_SUCCESS")).expect("rm");
    let finalize = pipeline(&["run"], &[("--finalize", &out)]);
    assert!(finalize.status.success(), "{}", stderr(&finalize));
    assert!(String::from_utf8_lossy(&finalize.stdout).contains("300 rows in 6 parts"));
    let single = dir.path().join("single.parquet");
    assert!(run(&reviews(), &single, &[]).status.success());
    assert_same_rows(&read(&single), &read_dataset(&out));
}

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
    let finalize = pipeline(&["run"], &[("--finalize", &out)]);
    assert_eq!(finalize.status.code(), Some(1), "{}", stderr(&finalize));
    assert!(stderr(&finalize).contains("missing 1 part(s): part-00001.parquet"), "{}", stderr(&finalize));
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
    let finalize = pipeline(&["run"], &[("--finalize", &out)]);
    assert!(finalize.status.success(), "{}", stderr(&finalize));
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
    let finalize = pipeline(&["run"], &[("--finalize", &out)]);
    assert_eq!(finalize.status.code(), Some(1), "{}", stderr(&finalize));
    let err = stderr(&finalize);
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
    let finalize = pipeline(&["run"], &[("--finalize", &out)]);
    assert!(finalize.status.success(), "{}", stderr(&finalize));
    assert!(stderr(&finalize).contains("it counts 3000 rows where its parts hold 300"), "{}", stderr(&finalize));
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("_SUCCESS")).expect("_SUCCESS")).expect("json");
    assert_eq!(manifest["rows"], 300);
}

#[test]
fn part_metadata_stays_small_however_many_inputs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let inputs = dir.path().join("in");
    std::fs::create_dir(&inputs).expect("mkdir");
    for i in 0..300 {
        let ids: std::sync::Arc<dyn arrow::array::Array> =
            std::sync::Arc::new(arrow::array::StringArray::from(vec![format!("review-{i}")]));
        let texts: std::sync::Arc<dyn arrow::array::Array> =
            std::sync::Arc::new(arrow::array::StringArray::from(vec!["a fine film"]));
        write_parquet(&inputs.join(format!("in-{i:04}.parquet")), vec![("id", ids), ("text", texts)]);
    }
    let out = dir.path().join("out");
    let output = run(&inputs, &out, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let part = out.join("part-00000.parquet");
    let reader =
        parquet::file::reader::SerializedFileReader::new(std::fs::File::open(&part).expect("part")).expect("parquet");
    let metadata = parquet::file::reader::FileReader::metadata(&reader).file_metadata().clone();
    let run_value = metadata
        .key_value_metadata()
        .and_then(|kv| kv.iter().find(|kv| kv.key == "pipeline.run"))
        .and_then(|kv| kv.value.clone())
        .expect("the run fingerprint");
    // Listing 300 inputs would take about 40 KB, twice (also in the Arrow schema).
    assert!(run_value.len() < 1_000, "{} bytes of fingerprint", run_value.len());
    let size = std::fs::metadata(&part).expect("meta").len();
    assert!(size < 20_000, "a one-row part of {size} bytes");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("_SUCCESS")).expect("_SUCCESS")).expect("json");
    assert_eq!(manifest["inputs"].as_array().map(Vec::len), Some(300), "the full list is in _SUCCESS");
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
    for output in [run(&reviews(), &out, &["--rows-per-part", "100"]), pipeline(&["run"], &[("--finalize", &out)])] {
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
    let finalize = pipeline(&["run"], &[("--finalize", &out)]);
    assert!(stderr(&finalize).contains("missing 1 part(s): part-00001.parquet"), "{}", stderr(&finalize));
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
        (&["--partition-by", "label,"], "--partition-by names an empty column"),
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

//! Parts, shards and `_SUCCESS`: every row once, each scheduler's array job finding its
//! shard, and datasets that grow with their inputs.

use std::process::Command;

use super::*;

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
    let finalized = finalize(&out);
    assert_eq!(finalized.status.code(), Some(1));
    assert!(stderr(&finalized).contains("missing 1 part(s): part-00001.parquet"), "{}", stderr(&finalized));
    assert!(!out.join("_SUCCESS").exists());
    // A shard that lost its race to write _SUCCESS: here, one told it was not last.
    assert!(run(&reviews(), &out, &["--rows-per-part", "100", "--shard", "1/2"]).status.success());
    std::fs::remove_file(out.join("_SUCCESS")).expect("rm");
    let finalized = finalize(&out);
    assert!(finalized.status.success(), "{}", stderr(&finalized));
    assert!(String::from_utf8_lossy(&finalized.stdout).contains("300 rows in 3 parts"));
    assert!(out.join("_SUCCESS").exists());
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
    let finalized = finalize(&out);
    assert!(stderr(&finalized).contains("missing 1 part(s): part-00005.parquet"), "{}", stderr(&finalized));
    assert!(run(&input, &out, &["--rows-per-part", "50", "--shard", "1/2"]).status.success());
    std::fs::remove_file(out.join("_SUCCESS")).expect("rm");
    let finalized = finalize(&out);
    assert!(finalized.status.success(), "{}", stderr(&finalized));
    assert!(String::from_utf8_lossy(&finalized.stdout).contains("300 rows in 6 parts"));
    let single = dir.path().join("single.parquet");
    assert!(run(&reviews(), &single, &[]).status.success());
    assert_same_rows(&read(&single), &read_dataset(&out));
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

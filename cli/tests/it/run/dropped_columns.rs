//! `--drop`: output columns left out, with the scales their bytes need, checked before any
//! work, and recorded so that a dataset resumed with other columns is refused by name.

use crate::common::*;

fn columns(path: &std::path::Path) -> Vec<String> {
    read(path).schema().fields().iter().map(|field| field.name().clone()).collect()
}

#[test]
fn dropped_columns_are_left_out_with_their_scales_and_the_report_still_reads_the_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (all, some) = (dir.path().join("all.parquet"), dir.path().join("some.parquet"));
    assert!(run(&reviews(), &all, &[]).status.success());
    let output = run(&reviews(), &some, &["--drop", "attention_summary,contribution"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let (before, after) = (columns(&all), columns(&some));
    let gone: Vec<&String> = before.iter().filter(|name| !after.contains(name)).collect();
    assert_eq!(gone, ["attention_summary", "contribution", "contribution_scale"], "{after:?}");
    assert_eq!(strings(&read(&some), "prediction"), strings(&read(&all), "prediction"));
    let size = |path: &std::path::Path| std::fs::metadata(path).expect("meta").len();
    assert!(size(&some) < size(&all), "{} bytes against {}", size(&some), size(&all));

    let html = dir.path().join("report.html");
    let report = pipeline(&["report"], &[("--input", &some), ("--output", &html)]);
    assert!(report.status.success(), "{}", stderr(&report));
}

#[test]
fn an_unknown_column_or_a_scale_without_its_bytes_is_refused_before_any_work() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.parquet");
    for (drop, message) in [
        ("attentions", "writes no column `attentions`; it writes prediction"),
        ("id", "input columns are chosen with --pass-through"),
        ("contribution_scale", "drop contribution too"),
        ("prediction", "every reader of an output"),
        (",", "--drop ,: an empty name: give names separated by commas"),
    ] {
        let output = run(&reviews(), &out, &["--drop", drop]);
        assert_eq!(output.status.code(), Some(1), "{drop}: {}", stderr(&output));
        assert!(stderr(&output).contains(message), "{drop}: {}", stderr(&output));
        assert!(!out.exists());
    }
}

#[test]
fn a_dataset_resumed_with_other_columns_is_refused_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("dataset");
    assert!(run(&reviews(), &out, &["--rows-per-part", "100", "--shard", "0/2"]).status.success());
    let before = files_in(&out);
    let output = run(&reviews(), &out, &["--rows-per-part", "100", "--shard", "1/2", "--drop", "attention_summary"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("--drop was not set, now attention_summary"), "{}", stderr(&output));
    assert_eq!(files_in(&out), before);

    // The same columns in another order, or named twice, are the same run.
    let other = dir.path().join("other");
    let drop = |names: &str, shard: &str| {
        run(&reviews(), &other, &["--rows-per-part", "100", "--shard", shard, "--drop", names]).status.success()
    };
    assert!(drop("attention_summary,contribution", "0/2"));
    assert!(drop("contribution,attention_summary,attention_summary", "1/2"));
    assert!(other.join("_SUCCESS").exists());
}

//! The run options' table (`pipeline/src/job/spec.rs`) as users meet it: each row is a flag of
//! `pipeline run`, and what a row says about results holds. A dataset resumed with another
//! value of a result-changing option is refused; with another value of any other option it
//! resumes.

use std::collections::BTreeMap;

use pipeline::job::RUN_OPTIONS;

use super::*;

#[test]
fn every_run_option_is_a_flag_of_pipeline_run_with_its_help() {
    let help = String::from_utf8(pipeline(&["run", "--help"], &[]).stdout).expect("utf-8");
    for option in RUN_OPTIONS {
        let flag = format!("{} ", option.flag());
        assert!(help.contains(&flag) || help.contains(&format!("{}\n", option.flag())), "no {flag}in run --help");
        let first_words: String =
            option.help.trim().trim_end_matches('.').split_whitespace().take(4).collect::<Vec<_>>().join(" ");
        assert!(help.split_whitespace().collect::<Vec<_>>().join(" ").contains(&first_words), "{first_words}");
    }
}

/// A value other than the default for each option, as a flag's arguments, or why it is not
/// tried here. Adding an option means saying here how a rerun with it behaves.
fn another_value(name: &str) -> Result<Vec<&'static str>, &'static str> {
    Ok(match name {
        "text_column" => vec!["--text-column", "label"],
        "pass_through" => vec!["--pass-through", "id"],
        "backend" => vec!["--backend", "tract"],
        "device" => return Err("needs a GPU"),
        "tf32" => return Err("needs a GPU"),
        "ort_library" => return Err("needs ONNX Runtime's library"),
        "batch_size" => vec!["--batch-size", "7"],
        "max_batch_tokens" => vec!["--max-batch-tokens", "900"],
        "chunk_rows" => vec!["--chunk-rows", "33"],
        "max_tokens" => vec!["--max-tokens", "40"],
        "long_documents" => vec!["--long-documents", "head-tail"],
        "long_document_stride" => vec!["--long-document-stride", "50"],
        "long_document_aggregate" => vec!["--long-document-aggregate", "max"],
        "attention" => vec!["--attention", "hops"],
        "drop" => vec!["--drop", "contribution"],
        "embedding" => vec!["--embedding"],
        "min_confidence" => vec!["--min-confidence", "0.9"],
        "shard" => return Err("a shard is its own part of the run (dataset/parts.rs)"),
        "rows_per_part" => vec!["--rows-per-part", "100"],
        "partition_by" => vec!["--partition-by", "prediction"],
        "overwrite" => vec!["--overwrite"],
        "output_format" => return Err("another sink (delta.rs)"),
        "metrics_json" => vec!["--metrics-json", "SCRATCH/summary.json"],
        "job_name" => vec!["--job-name", "nightly"],
        "metrics_push" | "openlineage_url" => return Err("needs a listening service (run/reporting.rs)"),
        "metrics_textfile" => vec!["--metrics-textfile", "SCRATCH/run.prom"],
        "openlineage_namespace" => vec!["--openlineage-namespace", "team"],
        _ => return Err("not known to this test"),
    })
}

#[test]
fn a_rerun_with_another_value_is_refused_exactly_when_the_option_changes_results() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let first = scratch.path().join("first");
    let out = run(&reviews(), &first, &["--rows-per-part", "150"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut untried = BTreeMap::new();
    for option in RUN_OPTIONS {
        let flags = match another_value(option.name) {
            Ok(flags) => flags,
            Err(why) => {
                assert_ne!(
                    why, "not known to this test",
                    "{}: say how a rerun with another value behaves",
                    option.name
                );
                untried.insert(option.name, why);
                continue;
            }
        };
        let scratch_dir = scratch.path().display().to_string();
        let mut extra: Vec<String> = flags.iter().map(|flag| flag.replace("SCRATCH", &scratch_dir)).collect();
        if option.name != "rows_per_part" {
            extra.extend(["--rows-per-part".to_owned(), "150".to_owned()]);
        }
        let dataset = scratch.path().join(option.name);
        copy_dir(&first, &dataset);
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let out = run(&reviews(), &dataset, &extra);
        let said = stderr(&out);
        if option.changes_results {
            assert!(!out.status.success(), "{}: a rerun with {extra:?} resumed another run's parts", option.name);
            assert!(said.contains("another run"), "{}: {said}", option.name);
        } else {
            assert!(out.status.success(), "{}: a rerun with {extra:?} was refused: {said}", option.name);
        }
    }
    assert_eq!(untried.len(), 7, "options not tried: {untried:?}");
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("create");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
    }
}

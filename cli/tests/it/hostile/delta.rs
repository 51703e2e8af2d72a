//! A Delta table stays true to its contract under files rewritten in place and under other
//! writers: a committed file is known by its location, and the table's own properties say
//! which model wrote it and which way its pushes point.

use std::process::Command;
use std::sync::Arc;

use anyhow::Context;
use arrow::array::Array;

use super::outputs::{count_rows, delta_table};
use super::*;

/// The fixture reviews' first `n` rows (cycling past 300), ids made unique by `tag`.
fn reviews_rows(path: &Path, n: usize, tag: &str) {
    let batch = read(&reviews());
    let (ids, texts, labels) = (strings(&batch, "id"), strings(&batch, "text"), strings(&batch, "label"));
    let ids: Vec<String> = (0..n).map(|i| format!("{}-{tag}", ids[i % ids.len()].as_deref().expect("id"))).collect();
    let cycle = |column: &[Option<String>]| -> Vec<Option<String>> {
        (0..n).map(|i| column[i % column.len()].clone()).collect()
    };
    write_parquet(
        path,
        vec![
            ("id", Arc::new(arrow::array::StringArray::from(ids)) as Arc<dyn Array>),
            ("text", Arc::new(arrow::array::StringArray::from(cycle(&texts)))),
            ("label", Arc::new(arrow::array::StringArray::from(cycle(&labels)))),
        ],
    );
}

#[test]
fn a_committed_file_rewritten_with_other_rows_is_refused_not_added_twice() {
    let dir = tempfile::tempdir().expect("tempdir");
    let inputs = dir.path().join("inputs");
    std::fs::create_dir(&inputs).expect("mkdir");
    let file = inputs.join("a.parquet");
    reviews_rows(&file, 300, "a");
    let table = dir.path().join("table");
    let into_table = |extra: &[&str]| {
        let mut flags = vec!["--output-format", "delta"];
        flags.extend_from_slice(extra);
        run(&inputs, &table, &flags)
    };
    assert!(into_table(&[]).status.success());
    let original = std::fs::read(&file).expect("read");
    let batch = read(&file);

    for (rows, said) in [(310, "has 310 now"), (250, "has 250 now")] {
        reviews_rows(&file, rows, "a");
        let rerun = into_table(&[]);
        let err = stderr(&rerun);
        assert_eq!(exit_code(&rerun), Some(1), "{err}");
        for needle in ["a.parquet", "committed to the Delta table", "at version 1", "with 300 rows", said, "new file"] {
            assert!(err.contains(needle), "expected `{needle}` in: {err}");
        }
        assert_eq!(count_rows(&table), "300", "nothing added");
    }
    // The same rows re-exported in other row groups (other units): nothing added.
    let properties =
        parquet::file::properties::WriterProperties::builder().set_max_row_group_row_count(Some(7)).build();
    let mut writer = parquet::arrow::ArrowWriter::try_new(
        std::fs::File::create(&file).expect("create"),
        batch.schema(),
        Some(properties),
    )
    .expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
    let rerun = into_table(&[]);
    assert!(rerun.status.success(), "{}", stderr(&rerun));
    assert_eq!(count_rows(&table), "300", "the same rows in other row groups are not added again");
    // The file as committed, and a new file beside it: the new one alone is added.
    std::fs::write(&file, &original).expect("restore");
    reviews_rows(&inputs.join("b.parquet"), 20, "b");
    let rerun = into_table(&[]);
    assert!(rerun.status.success(), "{}", stderr(&rerun));
    assert_eq!(count_rows(&table), "320");
}

/// The report's model row and its table of what pushed each class.
fn model_and_pushes(html: &str) -> (String, String) {
    let between = |start: &str, end: &str| {
        let from = html.find(start).unwrap_or_else(|| panic!("no {start} in the page"));
        let rest = &html[from..];
        rest[..rest.find(end).expect("end")].to_owned()
    };
    (between("<th>model</th>", "</tr>"), between("<table id=\"class-pushes\">", "</table>"))
}

#[test]
fn a_table_compacted_by_another_writer_keeps_its_model_and_push_direction() {
    let reader = test_support::lakehouse_checks_python().context("no deltalake");
    let Some(python) = test_support::or_skip("compacting a table with deltalake", reader) else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let table = delta_table(dir.path());
    let page = dir.path().join("page.html");
    let report = || {
        let output = pipeline(&["report"], &[("--input", &table), ("--output", &page)]);
        assert!(output.status.success(), "{}", stderr(&output));
        std::fs::read_to_string(&page).expect("page")
    };
    let before = model_and_pushes(&report());
    assert!(!before.0.contains("unknown"), "{}", before.0);

    // Another writer's routine OPTIMIZE rewrites the two parts as one, without our metadata.
    let script = "import os, sys, deltalake\n\
                  t = deltalake.DeltaTable(sys.argv[1])\n\
                  print(t.optimize.compact())\n\
                  os._exit(0)\n";
    let compacted = Command::new(&python).args(["-c", script]).arg(&table).output().expect("python");
    assert!(compacted.status.success(), "{}", stderr(&compacted));
    assert_eq!(model_and_pushes(&report()), before, "the same model and pushes, the same way round");

    // One more append beside the rewritten file: still one table, read the same way.
    let more = dir.path().join("more.parquet");
    reviews_rows(&more, 30, "more");
    let append = run(&more, &table, &["--output-format", "delta", "--rows-per-part", "150"]);
    assert!(append.status.success(), "{}", stderr(&append));
    assert_eq!(count_rows(&table), "330");
    let after = model_and_pushes(&report());
    assert_eq!(after.0, before.0);
}

#[test]
fn a_rerun_over_a_table_missing_a_committed_part_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let table = delta_table(dir.path());
    let staging = files_in(&table).into_iter().find(|name| name.starts_with("run-")).expect("a staging directory");
    let part = files_in(&table.join(&staging)).into_iter().find(|n| n.starts_with("part-")).expect("a part");
    std::fs::remove_file(table.join(&staging).join(&part)).expect("delete a committed part");
    let rerun = run(&reviews(), &table, &["--output-format", "delta", "--rows-per-part", "150"]);
    let err = stderr(&rerun);
    assert_eq!(exit_code(&rerun), Some(1), "{err}");
    assert!(err.contains("gone") && err.contains(&part) && err.contains("repair"), "{err}");
}

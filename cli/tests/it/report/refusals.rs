//! Predictions the report cannot draw honestly are refused by name, with what to do and no
//! page written; what it can repair (entropies, float labels) it repairs.

use arrow::array::{Float32Array, ListArray, ListBuilder, StringArray, StringBuilder};
use arrow::datatypes::Float32Type;

use super::*;

#[test]
fn bad_inputs_are_refused_with_what_to_do_and_no_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    let html_path = dir.path().join("report.html");

    // Not an output of `pipeline run`: the missing columns are named.
    let output = report(&reviews(), &html_path, &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("no column `prediction`, `confidence`"), "{}", stderr(&output));

    // An unknown label column.
    let predictions = default_predictions(dir.path());
    let output = report(&predictions, &html_path, &["--label-column", "stars"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("no label column `stars`"), "{}", stderr(&output));

    // Attention that does not belong to the row's tokens: the row is named.
    let mismatched = dir.path().join("mismatched.parquet");
    write_mismatched_predictions(&mismatched);
    let output = report(&mismatched, &html_path, &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("row 1: attention_summary has 2 weights for 3 tokens"), "{}", stderr(&output));

    // The output is the input.
    let output = report(&predictions, &predictions, &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(read(&predictions).num_rows() == 300, "the input is untouched");

    assert!(!html_path.exists(), "no report is left behind");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).expect("dir").flatten().map(|e| e.file_name()).collect();
    assert_eq!(leftovers.len(), 2, "only the two inputs: {leftovers:?}");
}

/// A file's entropies that `pipeline run` cannot have written (infinite, negative) are
/// computed again from the weights: the report finishes (an infinite one made it loop) and
/// shows finite entropies.
#[test]
fn entropies_that_are_not_entropies_are_recomputed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let compact = read(&hops_predictions(dir.path()));
    let rows = compact.num_rows();
    let mut entropies = ListBuilder::new(arrow::array::Float32Builder::new());
    for row in 0..rows {
        entropies.append_value((0..8).map(|hop| Some(if (row + hop) % 2 == 0 { f32::INFINITY } else { -5.0 })));
    }
    let mut columns: Vec<(&str, arrow::array::ArrayRef)> = Vec::new();
    let schema = compact.schema();
    for (field, column) in schema.fields().iter().zip(compact.columns()) {
        let column = if field.name() == "attention_entropy" { Arc::new(entropies.finish()) } else { column.clone() };
        columns.push((field.name().as_str(), column));
    }
    let edited = dir.path().join("edited.parquet");
    write_parquet(&edited, columns);
    let html_path = dir.path().join("edited.html");
    let output = report(&edited, &html_path, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let html = std::fs::read_to_string(&html_path).expect("report");
    let hop_table = html.split("id=\"hop-tokens\"").nth(1).expect("hop table");
    let hop_table = hop_table.split("</table>").next().unwrap_or_default();
    assert!(!hop_table.contains("inf") && !hop_table.contains("-5.00"), "{hop_table}");
}

/// `batch` written to `path` with the column `name` replaced by `column`.
fn write_with_column(path: &Path, batch: &arrow::array::RecordBatch, name: &str, column: arrow::array::ArrayRef) {
    let schema = batch.schema();
    let columns: Vec<(&str, arrow::array::ArrayRef)> = schema
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(field, old)| (field.name().as_str(), if field.name() == name { column.clone() } else { old.clone() }))
        .collect();
    write_parquet(path, columns);
}

#[test]
fn columns_of_the_wrong_type_or_not_finite_are_refused_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let full = full_predictions(dir.path());
    let batch = read(&full);
    let rows = batch.num_rows();
    let html_path = dir.path().join("report.html");
    let refused = |edited: &Path, needles: &[&str]| {
        let output = report(edited, &html_path, &[]);
        assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
        for needle in needles {
            assert!(stderr(&output).contains(needle), "expected `{needle}` in: {}", stderr(&output));
        }
        assert!(!html_path.exists(), "no report written");
    };

    // A string confidence became all-NULL and empty charts, exit 0.
    let text = dir.path().join("text-confidence.parquet");
    let confidences: Vec<String> = (0..rows).map(|row| format!("{row}%")).collect();
    write_with_column(&text, &batch, "confidence", Arc::new(StringArray::from(confidences)));
    refused(&text, &["text-confidence.parquet", "column `confidence` is Utf8", "floating-point numbers"]);

    // A NaN confidence vanished from the charts.
    let nan = dir.path().join("nan-confidence.parquet");
    let confidences: Vec<f32> = (0..rows).map(|row| if row == 3 { f32::NAN } else { 0.9 }).collect();
    write_with_column(&nan, &batch, "confidence", Arc::new(Float32Array::from(confidences)));
    refused(&nan, &["nan-confidence.parquet", "row 3", "`confidence` is NaN"]);

    // A NaN weight was written into a title.
    let summary = batch.column_by_name("attention_summary").expect("summary").as_any().downcast_ref::<ListArray>();
    let summary = summary.expect("list");
    let mut weights = ListBuilder::new(arrow::array::Float32Builder::new());
    for row in 0..rows {
        let values = summary.value(row);
        let values = values.as_any().downcast_ref::<Float32Array>().expect("floats");
        weights
            .append_value(values.iter().enumerate().map(|(i, w)| if row == 7 && i == 0 { Some(f32::NAN) } else { w }));
    }
    let nan_weight = dir.path().join("nan-weight.parquet");
    write_with_column(&nan_weight, &batch, "attention_summary", Arc::new(weights.finish()));
    refused(&nan_weight, &["nan-weight.parquet", "row 7", "`attention_summary`", "not finite"]);
}

fn write_mismatched_predictions(path: &Path) {
    let mut tokens = ListBuilder::new(StringBuilder::new());
    tokens.append_value([Some("a"), Some("b")]);
    tokens.append_value([Some("x"), Some("y"), Some("z")]);
    let weights = ListArray::from_iter_primitive::<Float32Type, _, _>(vec![
        Some(vec![Some(0.5), Some(0.5)]),
        Some(vec![Some(0.5), Some(0.5)]),
    ]);
    write_parquet(
        path,
        vec![
            ("prediction", Arc::new(StringArray::from(vec!["pos", "neg"]))),
            ("confidence", Arc::new(Float32Array::from(vec![0.9, 0.8]))),
            ("tokens", Arc::new(tokens.finish())),
            ("attention_summary", Arc::new(weights)),
        ],
    );
}

/// The fixture reviews with their `label` column replaced by `labels`.
fn reviews_labelled(path: &Path, labels: Arc<dyn arrow::array::Array>) {
    let batch = read(&reviews());
    let schema = batch.schema();
    let columns: Vec<(&str, Arc<dyn arrow::array::Array>)> = schema
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(field, column)| {
            (field.name().as_str(), if field.name() == "label" { labels.clone() } else { column.clone() })
        })
        .collect();
    write_parquet(path, columns);
}

#[test]
fn float_labels_are_read_as_label_indices_and_label_columns_that_mostly_miss_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let accuracy =
        |page: &str| page.split("id=\"accuracy\">").nth(1).and_then(|s| s.split('<').next()).map(str::to_owned);
    let names = strings(&read(&reviews()), "label");
    let page_for = |labels: Arc<dyn arrow::array::Array>, name: &str| {
        let input = dir.path().join(format!("{name}-reviews.parquet"));
        reviews_labelled(&input, labels);
        let predictions = dir.path().join(format!("{name}-predictions.parquet"));
        assert!(run(&input, &predictions, &[]).status.success());
        let page = dir.path().join(format!("{name}.html"));
        let output = report(&predictions, &page, &[]);
        (output, std::fs::read_to_string(&page).unwrap_or_default())
    };
    let as_strings: Arc<dyn arrow::array::Array> = Arc::new(StringArray::from(names.clone()));
    let (output, by_name) = page_for(as_strings, "strings");
    assert!(output.status.success(), "{}", stderr(&output));
    // pandas writes an integer column with nulls as 0.0/1.0.
    let floats: Vec<Option<f64>> =
        names.iter().map(|l| l.as_deref().map(|l| if l == "pos" { 1.0 } else { 0.0 })).collect();
    let (output, by_float) = page_for(Arc::new(arrow::array::Float64Array::from(floats)), "floats");
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(accuracy(&by_name).is_some());
    assert_eq!(accuracy(&by_float), accuracy(&by_name), "0.0/1.0 are the labels neg/pos");
    assert!(!stderr(&output).contains("no true label matches"), "{}", stderr(&output));

    // Labels in other words than the model's: every row would count as wrong; stop (this
    // was a warning beside an accuracy of 0).
    let other: Vec<Option<String>> = names
        .iter()
        .map(|l| l.as_deref().map(|l| if l == "pos" { "positive" } else { "negative" }.to_owned()))
        .collect();
    let (output, page) = page_for(Arc::new(StringArray::from(other)), "other-words");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("300 of 300 labelled rows have a true label that is none of the model's"));
    assert!(stderr(&output).contains("`negative`, `positive`"), "{}", stderr(&output));
    assert!(page.is_empty(), "no report written");

    // A rating (1..=10): its 1 and 0 read as the indices of pos and neg, the rest as nothing
    // (accuracy 0.0068 with a warning, before).
    let ratings: Vec<i64> = (0..names.len()).map(|row| i64::try_from(row % 10).expect("small") + 1).collect();
    let (output, _) = page_for(Arc::new(arrow::array::Int64Array::from(ratings)), "ratings");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("270 of 300 labelled rows have a true label that is none"), "{}", stderr(&output));

    // An id column: stopped as soon as it shows itself (3,000 rows made a 1.7 GB page).
    let ids: Vec<String> = (0..names.len()).map(|row| format!("doc-{row}")).collect();
    let (output, _) = page_for(Arc::new(StringArray::from(ids)), "ids");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("more than 50 distinct values that are not the model's labels"));
    assert!(stderr(&output).contains("it is not a column of true labels"), "{}", stderr(&output));

    // A float that is no label index is refused.
    let halves: Vec<Option<f64>> = names.iter().map(|_| Some(0.5)).collect();
    let (output, _) = page_for(Arc::new(arrow::array::Float64Array::from(halves)), "halves");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("holds 0.5, which is not a label index"), "{}", stderr(&output));
}

#[test]
fn the_report_never_takes_the_name_of_predictions_or_of_a_run_manifest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let predictions = dir.path().join("predictions.parquet");
    assert!(run(&reviews(), &predictions, &[]).status.success());
    let before = std::fs::read(&predictions).expect("read");
    for name in ["other.parquet", "_SUCCESS"] {
        let target = dir.path().join(name);
        let output = report(&predictions, &target, &[]);
        assert_eq!(output.status.code(), Some(1), "{name}: {}", stderr(&output));
        assert!(stderr(&output).contains("give it a name ending in .html"), "{}", stderr(&output));
        assert!(!target.exists());
    }
    // Inside a dataset, a part's name is refused too.
    let parts = dir.path().join("parts");
    assert!(run(&reviews(), &parts, &["--rows-per-part", "100"]).status.success());
    let part = parts.join("part-00000.parquet");
    let part_before = std::fs::read(&part).expect("read");
    let output = report(&parts, &part, &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert_eq!(std::fs::read(&part).expect("read"), part_before);
    assert_eq!(std::fs::read(&predictions).expect("read"), before);
}

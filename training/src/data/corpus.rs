//! Labelled corpora: a Parquet file with a text column and a label column.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;

use anyhow::{Context, bail};
use batch_io::source::{
    MissingColumn, column, column_list, is_label_list_type, is_string_type, label_sets, label_values, open_parquet,
    string_values,
};
use runtime::package::CorpusFingerprint;
use sha2::{Digest, Sha256};

/// Column names to read.
#[derive(Debug, Clone)]
pub struct Columns {
    pub text: String,
    pub label: String,
}

/// Texts with their label strings, rows with a null text or a null or empty label left out.
#[derive(Debug, Clone)]
pub struct LabelledCorpus {
    pub texts: Vec<String>,
    /// Each text's labels: one, or for a multi-label corpus one or more (distinct, in the
    /// order the row gave them).
    pub labels: Vec<Vec<String>>,
    /// The label column holds lists: a document may have several labels.
    pub multi_label: bool,
    /// Rows skipped because their text or label was null.
    pub skipped_null: usize,
    pub fingerprint: CorpusFingerprint,
}

/// `error`, where it is a column the file lacks, naming the option that chose that column.
fn naming_its_option(error: anyhow::Error, option_of: impl Fn(&str) -> &'static str) -> anyhow::Error {
    match error.downcast_ref::<MissingColumn>() {
        Some(missing) => anyhow::anyhow!(missing.given_as(option_of(&missing.column))),
        None => error,
    }
}

/// The non-null texts of an unlabelled Parquet corpus (e.g. for word vectors).
pub fn read_texts(path: &Path, text_column: &str) -> anyhow::Result<Vec<String>> {
    let source =
        open_parquet(path, &[text_column], 4096).map_err(|error| naming_its_option(error, |_| "text_column"))?;
    check_text_column(path, &source.schema, text_column)?;
    let mut texts = Vec::new();
    for batch in source.batches {
        let batch = batch?;
        let values = string_values(column(&batch, text_column)?).context("text column is not a string column")?;
        texts.extend(values.into_iter().flatten().map(str::to_owned));
    }
    if texts.is_empty() {
        bail!("{} has no non-null texts in column `{text_column}`", path.display());
    }
    Ok(texts)
}

fn check_text_column(path: &Path, schema: &arrow::datatypes::SchemaRef, text_column: &str) -> anyhow::Result<()> {
    let text_type = schema.field_with_name(text_column)?.data_type().clone();
    if !is_string_type(&text_type) {
        bail!(
            "{}: text column `{text_column}` has type {text_type}, expected a string column; its columns are: {} (choose one with --text-column)",
            path.display(),
            column_list(schema)
        );
    }
    Ok(())
}

impl LabelledCorpus {
    pub fn read(path: &Path, columns: &Columns) -> anyhow::Result<Self> {
        let option_of = |column: &str| if column == columns.text { "text_column" } else { "label_column" };
        let source = open_parquet(path, &[&columns.text, &columns.label], 4096)
            .map_err(|error| naming_its_option(error, option_of))?;
        check_text_column(path, &source.schema, &columns.text)?;
        let multi_label = is_label_list_type(source.schema.field_with_name(&columns.label)?.data_type());
        let (mut texts, mut labels, mut skipped_null) = (Vec::new(), Vec::new(), 0);
        let mut empty_lists = EmptyLists::default();
        for batch in source.batches {
            let batch = batch?;
            let text_column = column(&batch, &columns.text)?;
            let batch_texts = string_values(text_column).context("text column is not a string column")?;
            let label_column = column(&batch, &columns.label)?;
            let cannot_read =
                || format!("{}: label column `{}` cannot be read as labels", path.display(), columns.label);
            let batch_labels: Vec<Option<Vec<String>>> = if multi_label {
                label_sets(label_column).with_context(cannot_read)?
            } else {
                label_values(label_column).with_context(cannot_read)?.into_iter().map(|l| l.map(|l| vec![l])).collect()
            };
            for (text, label) in batch_texts.into_iter().zip(batch_labels) {
                let row = texts.len() + skipped_null + empty_lists.count;
                match (text, label) {
                    (Some(_), Some(set)) if multi_label && set.is_empty() => empty_lists.add(row),
                    // An empty label would become a class without a name.
                    (Some(text), Some(set)) if set.iter().all(|label| !label.trim().is_empty()) => {
                        texts.push(text.to_owned());
                        labels.push(distinct(set));
                    }
                    _ => skipped_null += 1,
                }
            }
        }
        if let Some(first) = empty_lists.first {
            bail!(
                "{}: {} row(s) of the label column `{}` hold an empty list (the first is row {first}); a multi-label \
                 corpus needs at least one label a document: drop those rows, or give them a label of their own \
                 (such as `none`)",
                path.display(),
                empty_lists.count,
                columns.label
            );
        }
        if skipped_null > 0 {
            tracing::warn!(
                "{}: skipped {skipped_null} row(s) with a null text, or a null, NaN or empty label",
                path.display()
            );
        }
        if texts.is_empty() {
            bail!(
                "{} has no usable rows (rows with a null text, or a null, NaN or empty label: {skipped_null}); check \
                 --text-column and --label-column (now `{}` and `{}`)",
                path.display(),
                columns.text,
                columns.label
            );
        }
        // Half the rows unlabelled is more often the wrong column than a corpus to learn from.
        if skipped_null > texts.len() {
            bail!(
                "{}: {skipped_null} of {} rows have a null text, or a null, NaN or empty label in column `{}`; check \
                 --label-column and --text-column, or drop the unlabelled rows first",
                path.display(),
                skipped_null + texts.len(),
                columns.label
            );
        }
        let fingerprint = CorpusFingerprint {
            path: path.display().to_string(),
            rows: texts.len() + skipped_null,
            sha256: file_sha256(path)?,
        };
        Ok(Self { texts, labels, multi_label, skipped_null, fingerprint })
    }

    /// The distinct labels in a fixed (sorted) order: the order of the model's outputs.
    pub fn classes(&self) -> Vec<String> {
        self.labels.iter().flatten().cloned().collect::<BTreeSet<_>>().into_iter().collect()
    }

    pub fn len(&self) -> usize {
        self.texts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }
}

/// Rows of a multi-label column holding an empty list (refused: nothing to learn from them).
#[derive(Default)]
struct EmptyLists {
    count: usize,
    /// The first such row, counted from 0 in the file.
    first: Option<usize>,
}

impl EmptyLists {
    fn add(&mut self, row: usize) {
        self.count += 1;
        self.first.get_or_insert(row);
    }
}

/// A row's labels without repeats, in the order given.
fn distinct(labels: Vec<String>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    labels.into_iter().filter(|label| seen.insert(label.clone())).collect()
}

fn file_sha256(path: &Path) -> anyhow::Result<String> {
    let mut file = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let read = file.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
    }
    Ok(format!("{:x}", hasher.finalize()))
}

/// Labels as a message names them: the first ten, each quoted with its control characters
/// escaped and cut at 40 characters, then how many more. A message about a column of ids
/// stays one readable line rather than 65 KB.
pub fn some_labels<'a>(labels: impl IntoIterator<Item = &'a str>) -> String {
    const SHOWN: usize = 10;
    let labels: Vec<&str> = labels.into_iter().collect();
    let quoted = labels.iter().take(SHOWN).map(|label| {
        let cut: String = label.chars().take(40).collect();
        let ellipsis = if cut.len() < label.len() { "…" } else { "" };
        format!("`{}{ellipsis}`", cut.escape_debug())
    });
    let mut text = quoted.collect::<Vec<_>>().join(", ");
    if labels.len() > SHOWN {
        text += &format!(" and {} more", labels.len() - SHOWN);
    }
    text
}

/// Refuses classes that differ only in surrounding white space (`sports` and `sports `): a
/// user means one class, and the model would learn two that split its documents.
pub fn refuse_classes_differing_in_white_space(path: &Path, classes: &[String]) -> anyhow::Result<()> {
    let mut by_trimmed: std::collections::BTreeMap<&str, Vec<&str>> = std::collections::BTreeMap::new();
    for class in classes {
        by_trimmed.entry(class.trim()).or_default().push(class);
    }
    if let Some(same) = by_trimmed.values().find(|spellings| spellings.len() > 1) {
        bail!(
            "{}: labels {} differ only in white space around them, and would train as separate classes; trim the \
             label column first",
            path.display(),
            some_labels(same.iter().copied())
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_named_briefly_and_escaped() {
        let many: Vec<String> = (0..25).map(|i| format!("id{i}")).collect();
        let text = some_labels(many.iter().map(String::as_str));
        assert!(text.starts_with("`id0`, `id1`") && text.ends_with("`id9` and 15 more"), "{text}");
        let long = "x".repeat(100);
        assert_eq!(some_labels(["a\tb", long.as_str()]), format!("`a\\tb`, `{}…`", "x".repeat(40)));
    }

    #[test]
    fn classes_differing_in_white_space_are_refused() {
        let path = Path::new("train.parquet");
        let classes = ["sports".to_owned(), "sports ".to_owned(), "world".to_owned()];
        let error = refuse_classes_differing_in_white_space(path, &classes).expect_err("two spellings");
        assert!(error.to_string().contains("`sports`, `sports `"), "{error}");
        assert!(refuse_classes_differing_in_white_space(path, &classes[1..]).is_ok());
    }
}

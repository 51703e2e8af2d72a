//! `--partition-by`: a dataset's rows split into Hive-style directories (`prediction=pos/`),
//! one per value of the named columns, as DuckDB, Polars, Spark and DataFusion read them: the
//! columns leave the files and are read back from the directory names.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use anyhow::{Context, bail};
use arrow::array::{Array, RecordBatch, UInt32Array};
use arrow::datatypes::{DataType, Schema, SchemaRef};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use batch_io::spelling;

use crate::sinks::layout::{LayoutHints, ParquetLayout};

pub use batch_io::locations::{NULL_PARTITION_VALUE as NULL_VALUE, is_partition_directory};

/// How many directories one unit of work may write: each is a file open at once, and a column
/// with this many values is an identifier, not a partition.
const MOST_DIRECTORIES_PER_UNIT: usize = 1_000;

/// The longest name most file systems and object stores' tools take for one directory.
const MOST_DIRECTORY_NAME_BYTES: usize = 255;

/// `pipeline.partition_by`'s value: each of `names` with its type in `schema` (the output's).
pub fn metadata_value(names: &[String], schema: &Schema) -> anyhow::Result<String> {
    let pairs: Vec<(&String, String)> = names
        .iter()
        .map(|name| {
            let data_type = schema.field_with_name(name).map(|f| f.data_type().to_string()).unwrap_or_default();
            (name, data_type)
        })
        .collect();
    Ok(serde_json::to_string(&pairs)?)
}

/// The columns a run partitions by, and the layout of its files (without them).
#[derive(Debug, Clone)]
pub struct Partitioning {
    /// Each column's name and its position in the full output schema.
    columns: Vec<(String, usize)>,
    /// Positions in the full schema of the columns the files keep.
    kept: Vec<usize>,
    layout: ParquetLayout,
}

impl Partitioning {
    /// `names` among the columns of `full` (the run's output schema); `hints` as for
    /// [`ParquetLayout::new`].
    pub fn new(names: &[String], full: &SchemaRef, hints: &LayoutHints) -> anyhow::Result<Self> {
        let mut columns = Vec::with_capacity(names.len());
        for name in names {
            if name.is_empty() {
                bail!("{} names an empty column: give COLUMN,... without empty names", spelling::name("partition_by"));
            }
            if escape(name) != *name {
                bail!(
                    "{}: its name holds characters a directory name escapes (/ = % : and the \
                     like), which each reader reads back differently; rename the column in the input, or \
                     partition by another",
                    spelling::option_with("partition_by", name)
                );
            }
            let Ok(index) = full.index_of(name) else {
                let written: Vec<&str> = full.fields().iter().map(|f| f.name().as_str()).collect();
                bail!(
                    "{}: the run writes no such column; partition by one it writes ({})",
                    spelling::option_with("partition_by", name),
                    written.join(", ")
                );
            };
            let data_type = full.field(index).data_type();
            if !partitionable(data_type) {
                bail!(
                    "{}: its values are {data_type}, which make no directory names; partition by a column of text, \
                     whole numbers, true/false or dates, such as prediction or a passed-through label",
                    spelling::option_with("partition_by", name)
                );
            }
            if columns.iter().any(|(other, _)| other == name) {
                bail!("{} names {name} twice", spelling::name("partition_by"));
            }
            columns.push((name.clone(), index));
        }
        let kept: Vec<usize> = (0..full.fields().len()).filter(|i| columns.iter().all(|(_, c)| c != i)).collect();
        let fields: Vec<_> = kept.iter().map(|&i| full.field(i).clone()).collect();
        let schema = Arc::new(Schema::new(fields).with_metadata(full.metadata().clone()));
        Ok(Self { columns, kept, layout: ParquetLayout::new(schema, hints)? })
    }

    /// The layout of each file: the output's schema without the partition columns.
    pub fn layout(&self) -> &ParquetLayout {
        &self.layout
    }

    /// The directory of a unit without rows: every column null. Its one empty file says that
    /// the unit is committed, and reads as no rows.
    pub fn empty_unit_directory(&self) -> String {
        self.columns.iter().map(|(name, _)| format!("{}={NULL_VALUE}", escape(name))).collect::<Vec<_>>().join("/")
    }

    /// Refuses a part of more than [`MOST_DIRECTORIES_PER_UNIT`] directories (`directories`).
    pub fn check_directories(&self, directories: usize) -> anyhow::Result<()> {
        if directories > MOST_DIRECTORIES_PER_UNIT {
            let names: Vec<&str> = self.columns.iter().map(|(name, _)| name.as_str()).collect();
            bail!(
                "{}: over {MOST_DIRECTORIES_PER_UNIT} values in one part's rows, more than the \
                 directories a part may write (each is a file open at once); partition by a column with fewer \
                 values (a label, a date, a country), and filter by this one when reading",
                spelling::option_with("partition_by", &names.join(","))
            );
        }
        Ok(())
    }

    /// `batch`'s rows (of the full schema) by directory, in input order within each, without
    /// the partition columns; directories in name order.
    pub fn split(&self, batch: &RecordBatch) -> anyhow::Result<Vec<(String, RecordBatch)>> {
        let options = FormatOptions::default();
        let formatters = self
            .columns
            .iter()
            .map(|(name, index)| {
                let column =
                    batch.columns().get(*index).with_context(|| format!("no column {name} to partition by"))?;
                Ok((name, column, ArrayFormatter::try_new(column.as_ref(), &options)?))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let mut rows_by_directory: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        for row in 0..batch.num_rows() {
            let mut directory = String::new();
            for (name, column, formatter) in &formatters {
                if !directory.is_empty() {
                    directory.push('/');
                }
                let value = if column.is_null(row) { String::new() } else { formatter.value(row).to_string() };
                let value = if value.is_empty() { NULL_VALUE.to_owned() } else { escape(&value) };
                if name.len() + 1 + value.len() > MOST_DIRECTORY_NAME_BYTES {
                    bail!(
                        "{}: a value {} bytes long as a directory name (row {row} of this \
                         chunk), over the {MOST_DIRECTORY_NAME_BYTES} a file system allows; partition by a column of \
                         short values (a label, a date, a country)",
                        spelling::option_with("partition_by", name),
                        name.len() + 1 + value.len()
                    );
                }
                let _ = write!(directory, "{}={value}", escape(name));
            }
            rows_by_directory.entry(directory).or_default().push(u32::try_from(row)?);
        }
        let kept = batch.project(&self.kept)?;
        rows_by_directory
            .into_iter()
            .map(|(directory, rows)| {
                let rows = arrow::compute::take_record_batch(&kept, &UInt32Array::from(rows))?;
                let rows = RecordBatch::try_new(self.layout.schema().clone(), rows.columns().to_vec())?;
                Ok((directory, rows))
            })
            .collect()
    }
}

fn partitionable(data_type: &DataType) -> bool {
    match data_type {
        DataType::Dictionary(_, values) => partitionable(values),
        other => {
            other.is_integer()
                || matches!(
                    other,
                    DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Boolean | DataType::Date32
                )
        }
    }
}

/// A name or value as a directory name's part, escaped as Hive and Spark escape it: `%XX` for
/// the characters a path or a `name=value` pair cannot hold.
pub fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() || "\"#%'*/:=?\\\u{7f}{[]^".contains(c) {
            let mut bytes = [0; 4];
            for byte in c.encode_utf8(&mut bytes).bytes() {
                let _ = write!(escaped, "%{byte:02X}");
            }
        } else {
            escaped.push(c);
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Int64Array, StringArray};
    use arrow::datatypes::Field;

    fn batch() -> RecordBatch {
        let label: ArrayRef =
            Arc::new(StringArray::from(vec![Some("pos"), Some("a/b=c"), None, Some("pos"), Some("")]));
        let year: ArrayRef = Arc::new(Int64Array::from(vec![2024, 2025, 2024, 2024, 2025]));
        let id: ArrayRef = Arc::new(StringArray::from(vec!["0", "1", "2", "3", "4"]));
        RecordBatch::try_from_iter(vec![("id", id), ("label", label), ("year", year)]).expect("batch")
    }

    #[test]
    fn rows_go_to_escaped_hive_directories_in_order_without_their_columns() {
        let batch = batch();
        let names = ["label".to_owned(), "year".to_owned()];
        let partitioning = Partitioning::new(&names, &batch.schema(), &LayoutHints::default()).expect("partitioning");
        let split = partitioning.split(&batch).expect("split");
        let found: Vec<(String, Vec<String>)> = split
            .iter()
            .map(|(dir, rows)| {
                assert_eq!(rows.num_columns(), 1);
                let ids = rows.column(0).as_any().downcast_ref::<StringArray>().expect("ids");
                (dir.clone(), ids.iter().map(|id| id.unwrap_or_default().to_owned()).collect())
            })
            .collect();
        assert_eq!(
            found,
            vec![
                ("label=__HIVE_DEFAULT_PARTITION__/year=2024".to_owned(), vec!["2".to_owned()]),
                ("label=__HIVE_DEFAULT_PARTITION__/year=2025".to_owned(), vec!["4".to_owned()]),
                ("label=a%2Fb%3Dc/year=2025".to_owned(), vec!["1".to_owned()]),
                ("label=pos/year=2024".to_owned(), vec!["0".to_owned(), "3".to_owned()]),
            ]
        );
        assert_eq!(
            partitioning.empty_unit_directory(),
            "label=__HIVE_DEFAULT_PARTITION__/year=__HIVE_DEFAULT_PARTITION__"
        );
    }

    #[test]
    fn columns_that_make_no_directory_names_are_refused_by_name() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, true),
            Field::new("confidence", DataType::Float32, true),
        ]));
        let error = Partitioning::new(&["confidence".to_owned()], &schema, &LayoutHints::default())
            .expect_err("float")
            .to_string();
        assert!(error.contains("--partition-by confidence: its values are Float32"), "{error}");
        let error =
            Partitioning::new(&["label".to_owned()], &schema, &LayoutHints::default()).expect_err("absent").to_string();
        assert!(error.contains("writes no such column; partition by one it writes (id, confidence)"), "{error}");
        let error =
            Partitioning::new(&["a/b".to_owned()], &schema, &LayoutHints::default()).expect_err("escaped").to_string();
        assert!(error.contains("its name holds characters a directory name escapes"), "{error}");
        let long: ArrayRef = Arc::new(StringArray::from(vec!["x".repeat(300)]));
        let batch = RecordBatch::try_from_iter(vec![("id", long)]).expect("batch");
        let partitioning =
            Partitioning::new(&["id".to_owned()], &batch.schema(), &LayoutHints::default()).expect("partitioning");
        let error = partitioning.split(&batch).expect_err("too long").to_string();
        assert!(error.contains("a value 303 bytes long as a directory name"), "{error}");
        let error = Partitioning::new(&["id".to_owned(), "id".to_owned()], &schema, &LayoutHints::default())
            .expect_err("twice");
        assert!(error.to_string().contains("twice"));
    }

    #[test]
    fn partition_directories_are_told_from_other_names_and_read_back() {
        assert!(is_partition_directory("label=pos"));
        for other in ["_SUCCESS", ".label=pos.abc.partial", "=pos", "notes", "part-00000.parquet"] {
            assert!(!is_partition_directory(other), "{other}");
        }
        let batch = batch();
        let names = ["label".to_owned()];
        let partitioning = Partitioning::new(&names, &batch.schema(), &LayoutHints::default()).expect("partitioning");
        let directories: Vec<String> = partitioning.split(&batch).expect("split").into_iter().map(|(d, _)| d).collect();
        let values: Vec<_> = directories
            .iter()
            .map(|d| batch_io::locations::partition_values(&format!("{d}/part-00000.parquet")))
            .collect();
        let value = |v: &str| vec![("label".to_owned(), Some(v.to_owned()))];
        assert_eq!(values, vec![vec![("label".to_owned(), None)], value("a/b=c"), value("pos")]);
    }
}

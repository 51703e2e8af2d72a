//! Reading Parquet corpora as streams of Arrow record batches, with errors that name the
//! file and column.

use std::fs::File;
use std::path::Path;

use anyhow::{Context, bail};
use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchReader};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};

/// A Parquet file opened for streaming a subset of its columns.
pub struct ParquetSource {
    pub schema: SchemaRef,
    pub rows: usize,
    pub reader: ParquetRecordBatchReader,
}

/// Opens `path`, checks that every column in `columns` exists, and streams only those.
pub fn open_parquet(path: &Path, columns: &[&str], batch_size: usize) -> anyhow::Result<ParquetSource> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file)
        .with_context(|| format!("{} is not a readable Parquet file", path.display()))?;
    let schema = builder.schema().clone();
    let mut indices = Vec::with_capacity(columns.len());
    for column in columns {
        match schema.index_of(column) {
            Ok(index) => indices.push(index),
            Err(_) => bail!("{} has no column `{column}`; its columns are: {}", path.display(), column_list(&schema)),
        }
    }
    let rows = usize::try_from(builder.metadata().file_metadata().num_rows()).unwrap_or(0);
    let mask = ProjectionMask::roots(builder.parquet_schema(), indices);
    let reader = builder
        .with_projection(mask)
        .with_batch_size(batch_size)
        .build()
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(ParquetSource { schema, rows, reader })
}

pub fn column_list(schema: &SchemaRef) -> String {
    schema.fields().iter().map(|f| format!("{} ({})", f.name(), f.data_type())).collect::<Vec<_>>().join(", ")
}

pub fn is_string_type(data_type: &DataType) -> bool {
    matches!(data_type, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

/// The values of a string column (`Utf8`, `LargeUtf8` or `Utf8View`); `None` for nulls.
pub fn string_values(array: &ArrayRef) -> Option<Vec<Option<&str>>> {
    Some(match array.data_type() {
        DataType::Utf8 => array.as_string::<i32>().iter().collect(),
        DataType::LargeUtf8 => array.as_string::<i64>().iter().collect(),
        DataType::Utf8View => array.as_string_view().iter().collect(),
        _ => return None,
    })
}

/// A column of `batch` by name (it was checked to exist when the file was opened).
pub fn column<'a>(batch: &'a RecordBatch, name: &str) -> anyhow::Result<&'a ArrayRef> {
    batch.column_by_name(name).with_context(|| format!("record batch lost column `{name}`"))
}

/// Labels may be strings or anything Arrow can cast to one (integers, booleans).
pub fn label_values(array: &ArrayRef) -> anyhow::Result<Vec<Option<String>>> {
    let strings = arrow::compute::cast(array, &DataType::Utf8)?;
    let strings = strings.as_string::<i32>();
    Ok((0..strings.len()).map(|i| strings.is_valid(i).then(|| strings.value(i).to_owned())).collect())
}

/// The extensions `pipeline run` reads from a directory.
pub const DATA_EXTENSIONS: &[&str] = &["parquet", "arrow", "ipc", "feather"];

/// Expands an input location: a file, a directory (its files with one of `extensions`) or a
/// glob pattern. Files come back sorted so runs are reproducible.
pub fn resolve_inputs(input: &str, extensions: &[&str]) -> anyhow::Result<Vec<std::path::PathBuf>> {
    let path = Path::new(input);
    let mut files: Vec<std::path::PathBuf> = if path.is_file() {
        vec![path.to_path_buf()]
    } else if path.is_dir() {
        std::fs::read_dir(path)
            .with_context(|| format!("cannot list {input}"))?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.is_file() && p.extension().and_then(|e| e.to_str()).is_some_and(|e| extensions.contains(&e)))
            .collect()
    } else if input.contains(['*', '?', '[']) {
        glob::glob(input)
            .with_context(|| format!("`{input}` is not a valid glob pattern"))?
            .filter_map(Result::ok)
            .filter(|p| p.is_file())
            .collect()
    } else {
        bail!(
            "input {input} does not exist (give a file, a directory of *.{} files or a glob)",
            extensions.join("/*.")
        );
    };
    files.sort();
    if files.is_empty() {
        bail!("input {input} matches no *.{} file", extensions.join("/*."));
    }
    Ok(files)
}

/// A stream of record batches from one Parquet or Arrow IPC file.
pub struct BatchStream {
    pub schema: SchemaRef,
    /// Row count when the format records it up front.
    pub rows: Option<usize>,
    pub batches: Box<dyn Iterator<Item = anyhow::Result<RecordBatch>> + Send>,
}

/// Opens `path` as Parquet or Arrow IPC (told apart by their magic bytes), reading whole
/// record batches of about `batch_size` rows, never the whole file.
pub fn open_batches(path: &Path, batch_size: usize) -> anyhow::Result<BatchStream> {
    let mut magic = [0u8; 6];
    let mut file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let read = std::io::Read::read(&mut file, &mut magic).with_context(|| format!("cannot read {}", path.display()))?;
    let display = path.display().to_string();
    if read >= 6 && &magic == b"ARROW1" {
        let reader = arrow::ipc::reader::FileReader::try_new(File::open(path)?, None)
            .with_context(|| format!("{display} is not a readable Arrow IPC file"))?;
        let schema = reader.schema();
        let batches = reader.map(move |b| b.with_context(|| format!("cannot read a record batch of {display}")));
        return Ok(BatchStream { schema, rows: None, batches: Box::new(batches) });
    }
    let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(path)?)
        .with_context(|| format!("{display} is neither a readable Parquet file nor an Arrow IPC file"))?;
    let rows = usize::try_from(builder.metadata().file_metadata().num_rows()).ok();
    let reader = builder.with_batch_size(batch_size).build().with_context(|| format!("cannot read {display}"))?;
    let schema = reader.schema();
    let batches = reader.map(move |b| b.with_context(|| format!("cannot read a record batch of {display}")));
    Ok(BatchStream { schema, rows, batches: Box::new(batches) })
}

//! Reading Parquet corpora as streams of Arrow record batches, with errors that name the
//! file and column.

use std::fmt;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{DataType, Schema, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchReader};
use parquet::arrow::ParquetRecordBatchStreamBuilder;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderBuilder, ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection,
    RowSelector,
};
use parquet::errors::ParquetError;
use parquet::file::metadata::ParquetMetaData;

use crate::object_storage::{ObjectReader, RemoteObject, block_on, request_failed};

use crate::panic_guard::guarded;
use crate::text_formats::{TextFormat, describe_unknown, open_text};

/// A Parquet file opened for streaming a subset of its columns.
pub struct ParquetSource {
    pub schema: SchemaRef,
    pub rows: usize,
    /// Record batches, decoded under [`guarded`]; errors name the file.
    pub batches: Batches,
}

/// A stream of record batches whose errors name their file.
pub type Batches = Box<dyn Iterator<Item = anyhow::Result<RecordBatch>> + Send>;

/// A column asked for by name that a file lacks; its `Display` lists the file's columns. A
/// caller that knows which option named the column adds it ([`Self::given_as`]).
#[derive(Debug)]
pub struct MissingColumn {
    pub column: String,
    message: String,
}

impl MissingColumn {
    /// The message with the option that names the column (`text_column`), as the front end
    /// spells it ([`crate::spelling`]).
    pub fn given_as(&self, option: &str) -> String {
        format!("{} (choose another with {})", self.message, crate::spelling::name(option))
    }
}

impl std::fmt::Display for MissingColumn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for MissingColumn {}

/// Opens `path`, checks that every column in `columns` exists (else [`MissingColumn`]), and
/// streams only those.
/// Decoding is guarded: a corrupt file that makes the decoder panic gives an error.
pub fn open_parquet(path: &Path, columns: &[&str], batch_size: usize) -> anyhow::Result<ParquetSource> {
    let display = path.display().to_string();
    let source = guarded(|| display.clone(), || open_parquet_unguarded(path, columns, batch_size))?;
    Ok(ParquetSource { batches: guard_batches(display, source.batches), ..source })
}

fn open_parquet_unguarded(path: &Path, columns: &[&str], batch_size: usize) -> anyhow::Result<ParquetSource> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file)
        .with_context(|| format!("{} is not a readable Parquet file", path.display()))?;
    let schema = builder.schema().clone();
    let mut indices = Vec::with_capacity(columns.len());
    for column in columns {
        match schema.index_of(column) {
            Ok(index) => indices.push(index),
            Err(_) => {
                let message =
                    format!("{} has no column `{column}`; its columns are: {}", path.display(), column_list(&schema));
                return Err(MissingColumn { column: (*column).to_owned(), message }.into());
            }
        }
    }
    let rows = usize::try_from(builder.metadata().file_metadata().num_rows()).unwrap_or(0);
    let mask = ProjectionMask::roots(builder.parquet_schema(), indices);
    let reader = builder
        .with_projection(mask)
        .with_batch_size(batch_size)
        .build()
        .with_context(|| format!("cannot read {}", path.display()))?;
    let display = path.display().to_string();
    let batches = reader.map(move |b| b.with_context(|| format!("cannot read a record batch of {display}")));
    Ok(ParquetSource { schema, rows, batches: Box::new(batches) })
}

/// `batches`, each one decoded under [`guarded`].
fn guard_batches(display: String, mut batches: Batches) -> Batches {
    Box::new(std::iter::from_fn(move || {
        let what = || display.clone();
        guarded(what, || batches.next().transpose()).transpose()
    }))
}

/// ` (did you mean `NAME`?)` for the column of `schema` closest to the mistyped `name`, when
/// one is close (a typo or another case); empty otherwise.
pub fn did_you_mean(name: &str, schema: &Schema) -> String {
    let lower = name.to_lowercase();
    schema
        .fields()
        .iter()
        .map(|field| (strsim::damerau_levenshtein(&lower, &field.name().to_lowercase()), field.name()))
        .filter(|(distance, candidate)| *distance <= (candidate.chars().count() / 3).max(1))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| format!(" (did you mean `{candidate}`?)"))
        .unwrap_or_default()
}

pub fn column_list(schema: &SchemaRef) -> String {
    schema.fields().iter().map(|f| format!("{} ({})", f.name(), f.data_type())).collect::<Vec<_>>().join(", ")
}

pub fn is_string_type(data_type: &DataType) -> bool {
    matches!(data_type, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

/// A column that can be read as text: a string column, or a dictionary of strings
/// (categorical text, as pandas writes it).
pub fn is_text_type(data_type: &DataType) -> bool {
    match data_type {
        DataType::Dictionary(_, values) => is_string_type(values),
        other => is_string_type(other),
    }
}

/// A text column as a plain string array: dictionaries are expanded, strings kept as they are.
pub fn text_array(array: &ArrayRef) -> anyhow::Result<ArrayRef> {
    match array.data_type() {
        DataType::Dictionary(_, values) if is_string_type(values) => {
            Ok(arrow::compute::cast(array, values).context("cannot expand a dictionary text column")?)
        }
        _ => Ok(array.clone()),
    }
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

/// Labels may be strings or single values Arrow can cast to one (integers, booleans, floats).
/// A float NaN (or inf) is a missing label, as pandas writes one, never a class called "NaN"; a
/// column of lists or structs holds no single label per row and is refused.
pub fn label_values(array: &ArrayRef) -> anyhow::Result<Vec<Option<String>>> {
    let data_type = array.data_type();
    if data_type.is_nested() || matches!(data_type, DataType::Binary | DataType::LargeBinary | DataType::BinaryView) {
        anyhow::bail!(
            "it is of type {data_type}, not one label per row: give a column of strings or integers (one class per row)"
        );
    }
    let missing: Vec<bool> = match data_type {
        DataType::Float16 | DataType::Float32 | DataType::Float64 => {
            let floats = arrow::compute::cast(array, &DataType::Float64)?;
            // inf is no class either.
            floats
                .as_primitive::<arrow::datatypes::Float64Type>()
                .iter()
                .map(|v| v.is_none_or(|v| !v.is_finite()))
                .collect()
        }
        _ => (0..array.len()).map(|i| array.is_null(i)).collect(),
    };
    let strings = arrow::compute::cast(array, &DataType::Utf8)?;
    let strings = strings.as_string::<i32>();
    Ok(missing.iter().enumerate().map(|(i, missing)| (!missing).then(|| strings.value(i).to_owned())).collect())
}

/// Whether a label column holds a list of labels per row (a multi-label corpus).
pub fn is_label_list_type(data_type: &DataType) -> bool {
    matches!(data_type, DataType::List(_) | DataType::LargeList(_) | DataType::ListView(_) | DataType::LargeListView(_))
}

/// The labels of each row of a list column (`list<string>`, or of integers): `None` for a
/// null list; null or blank items are left out. Items are read as [`label_values`] reads a
/// single label.
pub fn label_sets(array: &ArrayRef) -> anyhow::Result<Vec<Option<Vec<String>>>> {
    let lists = match array.data_type() {
        DataType::List(_) => arrow::compute::cast(array, &DataType::LargeList(list_item(array)))?,
        DataType::LargeList(_) => array.clone(),
        other => anyhow::bail!("it is of type {other}, not a list of labels per row"),
    };
    let lists = lists.as_list::<i64>();
    let items = label_values(lists.values())?;
    let offsets = lists.value_offsets();
    (0..lists.len())
        .map(|row| {
            if lists.is_null(row) {
                return Ok(None);
            }
            let bound = |i: usize| offsets.get(i).and_then(|&offset| usize::try_from(offset).ok());
            let labels = bound(row)
                .zip(bound(row + 1))
                .and_then(|(start, end)| items.get(start..end))
                .context("a list's offsets lie outside its values")?;
            Ok(Some(labels.iter().flatten().filter(|l| !l.trim().is_empty()).cloned().collect()))
        })
        .collect()
}

fn list_item(array: &ArrayRef) -> arrow::datatypes::FieldRef {
    match array.data_type() {
        DataType::List(field) | DataType::LargeList(field) => field.clone(),
        _ => Arc::new(arrow::datatypes::Field::new_list_field(DataType::Utf8, true)),
    }
}

/// The extensions `pipeline run` reads from a directory: the binary formats, then the text
/// formats ([`crate::text_formats`]).
pub const DATA_EXTENSIONS: &[&str] = &["parquet", "arrow", "ipc", "feather", "csv", "tsv", "jsonl", "ndjson", "txt"];

/// A stream of record batches from one Parquet or Arrow IPC file.
pub struct BatchStream {
    /// The file's whole schema (what the batches carry may be a projection of it).
    pub schema: SchemaRef,
    /// Row count when the format records it up front.
    pub rows: Option<usize>,
    /// Rows in each row group, for Parquet; `None` for Arrow IPC, which is read whole.
    pub row_groups: Option<Vec<usize>>,
    /// A Parquet file's footer, so that later reads of the file need not fetch it again
    /// ([`open_span_with`]).
    pub footer: Option<ArrowReaderMetadata>,
    /// The schema of the batches (the projection asked for).
    pub batch_schema: SchemaRef,
    pub batches: Batches,
}

/// An input file: local, or an object in a store.
#[derive(Debug, Clone)]
pub enum InputFile {
    Local(PathBuf),
    Remote(RemoteObject),
}

impl fmt::Display for InputFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputFile::Local(path) => write!(f, "{}", path.display()),
            InputFile::Remote(object) => f.write_str(&object.url),
        }
    }
}

/// Which rows of a file to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowSpan {
    Whole,
    /// `rows` rows of one Parquet row group, after skipping its first `skip`.
    InRowGroup {
        row_group: usize,
        skip: usize,
        rows: usize,
    },
}

/// Opens `path` as Parquet or Arrow IPC (told apart by their magic bytes) or, by its
/// extension, as CSV, JSON Lines or plain text ([`crate::text_formats`]), reading whole
/// record batches of about `batch_size` rows, never the whole file. Decoding is guarded: a
/// corrupt file that makes a decoder panic gives an error naming the file.
pub fn open_batches(path: &Path, batch_size: usize) -> anyhow::Result<BatchStream> {
    open_span(&InputFile::Local(path.to_path_buf()), batch_size, None, RowSpan::Whole)
}

/// [`open_batches`] for only `span` of the file and, when given, only the named `columns`
/// (which must exist). An object in a store is read by ranges: the footer, then only the
/// column chunks of the row groups asked for.
pub fn open_span(
    file: &InputFile,
    batch_size: usize,
    columns: Option<&[String]>,
    span: RowSpan,
) -> anyhow::Result<BatchStream> {
    open_span_with(file, None, batch_size, columns, span)
}

/// [`open_span`] of a Parquet file whose `footer` an earlier open read ([`BatchStream::footer`]):
/// a unit of a large input costs no second footer request.
pub fn open_span_with(
    file: &InputFile,
    footer: Option<&ArrowReaderMetadata>,
    batch_size: usize,
    columns: Option<&[String]>,
    span: RowSpan,
) -> anyhow::Result<BatchStream> {
    let display = file.to_string();
    let what = || display.clone();
    let stream = guarded(what, || match (file, footer) {
        (InputFile::Local(path), Some(footer)) => read_local_parquet(path, footer.clone(), batch_size, columns, span),
        (InputFile::Local(path), None) => open_batches_unguarded(path, batch_size, columns, span),
        (InputFile::Remote(object), _) if TextFormat::of(&object.url).is_some() => bail!(
            "{} is a text file in object storage, which pipeline reads as Parquet only; copy it to a local disk, or \
             convert it to Parquet",
            object.url
        ),
        (InputFile::Remote(object), footer) => open_remote_unguarded(object, footer, batch_size, columns, span),
    })?;
    Ok(BatchStream { batches: guard_batches(display, stream.batches), ..stream })
}

/// The indices of `columns` in `schema`, or an error naming the file and the columns it has.
pub(crate) fn column_indices(display: &str, schema: &SchemaRef, columns: &[String]) -> anyhow::Result<Vec<usize>> {
    columns
        .iter()
        .map(|column| {
            schema.index_of(column).map_err(|_| {
                anyhow::anyhow!("{display} has no column `{column}`; its columns are: {}", column_list(schema))
            })
        })
        .collect()
}

/// The Arrow IPC reader allocates each block at the length the footer declares before
/// reading it, so a corrupt length asks for terabytes and aborts the process (no panic to
/// catch). Every block must lie inside the file.
fn check_ipc_blocks(path: &Path, file: &mut File) -> anyhow::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    let corrupt = |what: &str| anyhow::anyhow!("{} is not a readable Arrow IPC file: {what}", path.display());
    let size = file.metadata().with_context(|| format!("cannot read {}", path.display()))?.len();
    // The file ends with the footer, its length as a little-endian i32, and "ARROW1".
    let mut trailer = [0u8; 10];
    file.seek(SeekFrom::End(-10)).map_err(|_| corrupt("it is too short"))?;
    file.read_exact(&mut trailer).map_err(|_| corrupt("it is too short"))?;
    let [a, b, c, d, ..] = trailer;
    let footer_length = u64::try_from(i32::from_le_bytes([a, b, c, d])).map_err(|_| corrupt("bad footer length"))?;
    if footer_length + 10 > size {
        return Err(corrupt("its footer is longer than the file"));
    }
    let mut footer = vec![0u8; usize::try_from(footer_length)?];
    file.seek(SeekFrom::End(-10 - i64::try_from(footer_length)?))?;
    file.read_exact(&mut footer).with_context(|| format!("cannot read {}", path.display()))?;
    let footer = arrow::ipc::root_as_footer(&footer).map_err(|e| corrupt(&format!("bad footer ({e})")))?;
    let blocks = footer.recordBatches().into_iter().flatten().chain(footer.dictionaries().into_iter().flatten());
    for block in blocks {
        let end = i128::from(block.offset()) + i128::from(block.metaDataLength()) + i128::from(block.bodyLength());
        if block.offset() < 0 || block.metaDataLength() < 0 || block.bodyLength() < 0 || end > i128::from(size) {
            return Err(corrupt(&format!("a block is declared to end at byte {end}, past its end ({size} bytes)")));
        }
    }
    file.rewind()?;
    Ok(())
}

fn open_batches_unguarded(
    path: &Path,
    batch_size: usize,
    columns: Option<&[String]>,
    span: RowSpan,
) -> anyhow::Result<BatchStream> {
    let mut magic = [0u8; 6];
    let mut file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let read = std::io::Read::read(&mut file, &mut magic).with_context(|| format!("cannot read {}", path.display()))?;
    let display = path.display().to_string();
    if read >= 6 && &magic == b"ARROW1" {
        if span != RowSpan::Whole {
            bail!("{display} is an Arrow IPC file, which is read whole; it has no row groups to split");
        }
        check_ipc_blocks(path, &mut file)?;
        let whole = arrow::ipc::reader::FileReader::try_new(File::open(path)?, None)
            .with_context(|| format!("{display} is not a readable Arrow IPC file"))?
            .schema();
        let projection = columns.map(|c| column_indices(&display, &whole, c)).transpose()?;
        let reader = arrow::ipc::reader::FileReader::try_new(File::open(path)?, projection)
            .with_context(|| format!("{display} is not a readable Arrow IPC file"))?;
        let batch_schema = reader.schema();
        let batches = reader.map(move |b| b.with_context(|| format!("cannot read a record batch of {display}")));
        return Ok(BatchStream {
            schema: whole,
            rows: None,
            row_groups: None,
            footer: None,
            batch_schema,
            batches: Box::new(batches),
        });
    }
    if !magic.starts_with(b"PAR1") {
        let Some(format) = TextFormat::of(&display) else {
            let mut head = Vec::with_capacity(4096);
            std::io::Seek::rewind(&mut file)?;
            std::io::Read::read_to_end(&mut std::io::Read::take(&mut file, 4096), &mut head)?;
            bail!("{}", describe_unknown(&display, &head));
        };
        if span != RowSpan::Whole {
            bail!("{display} is {}, which is read whole; it has no row groups to split", format.name());
        }
        return open_text(path, format, batch_size, columns);
    }
    let footer = ArrowReaderMetadata::load(&file, ArrowReaderOptions::new())
        .with_context(|| format!("{display} is neither a readable Parquet file nor an Arrow IPC file"))?;
    read_local_parquet(path, footer, batch_size, columns, span)
}

/// Reads a local Parquet file whose footer is loaded.
fn read_local_parquet(
    path: &Path,
    footer: ArrowReaderMetadata,
    batch_size: usize,
    columns: Option<&[String]>,
    span: RowSpan,
) -> anyhow::Result<BatchStream> {
    let display = path.display().to_string();
    let handle = File::open(path).with_context(|| format!("cannot open {display}"))?;
    let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(handle, footer.clone());
    let (builder, plan) = plan_read(builder, footer, &display, batch_size, columns, span)?;
    let reader = builder.build().with_context(|| format!("cannot read {display}"))?;
    let batch_schema = reader.schema();
    let batches = reader.map(move |b| b.with_context(|| format!("cannot read a record batch of {display}")));
    Ok(BatchStream { batches: Box::new(batches), batch_schema, ..plan })
}

/// Reads a Parquet object through the store's range requests.
fn open_remote_unguarded(
    object: &RemoteObject,
    footer: Option<&ArrowReaderMetadata>,
    batch_size: usize,
    columns: Option<&[String]>,
    span: RowSpan,
) -> anyhow::Result<BatchStream> {
    let display = object.url.clone();
    let footer = match footer {
        Some(footer) => footer.clone(),
        None => remote_footer(object)?,
    };
    let builder = ParquetRecordBatchStreamBuilder::new_with_metadata(ObjectReader::new(object), footer.clone());
    let (builder, plan) = plan_read(builder, footer, &display, batch_size, columns, span)?;
    let mut stream = builder.build().with_context(|| format!("cannot read {display}"))?;
    let batch_schema = stream.schema().clone();
    let batches = std::iter::from_fn(move || match block_on(futures::StreamExt::next(&mut stream)) {
        Ok(next) => next.map(|b| b.map_err(|e| parquet_request_failed(&display, e))),
        Err(error) => Some(Err(error)),
    });
    Ok(BatchStream { batches: Box::new(batches), batch_schema, ..plan })
}

/// A Parquet file's footer: its row groups, row count and key-value metadata.
pub fn parquet_footer(file: &InputFile) -> anyhow::Result<Arc<ParquetMetaData>> {
    let display = file.to_string();
    let unreadable = || format!("{display} is not a readable Parquet file");
    guarded(unreadable, || match file {
        InputFile::Local(path) => {
            let handle = File::open(path).with_context(|| format!("cannot open {display}"))?;
            Ok(ParquetRecordBatchReaderBuilder::try_new(handle).with_context(unreadable)?.metadata().clone())
        }
        InputFile::Remote(object) => Ok(remote_footer(object)?.metadata().clone()),
    })
}

/// The footer of a Parquet object, read by range requests.
fn remote_footer(object: &RemoteObject) -> anyhow::Result<ArrowReaderMetadata> {
    let mut reader = ObjectReader::new(object);
    block_on(ArrowReaderMetadata::load_async(&mut reader, ArrowReaderOptions::new()))?
        .map_err(|e| parquet_request_failed(&object.url, e))
        .with_context(|| format!("{} is not a readable Parquet file", object.url))
}

/// A Parquet error that carries a failed store request becomes that request's error (a
/// missing object, refused credentials, or a transient failure after retries).
fn parquet_request_failed(display: &str, error: ParquetError) -> anyhow::Error {
    match error {
        ParquetError::External(inner) => match inner.downcast::<object_store::Error>() {
            Ok(request) => request_failed(&format!("cannot read {display}"), *request),
            Err(other) => anyhow::anyhow!("cannot read {display}: {other}"),
        },
        other => anyhow::Error::new(other).context(format!("cannot read a record batch of {display}")),
    }
}

/// The projection, row group and row selection of one read, on either reader (local or
/// object store); the returned stream holds everything but the batches.
fn plan_read<T>(
    builder: ArrowReaderBuilder<T>,
    footer: ArrowReaderMetadata,
    display: &str,
    batch_size: usize,
    columns: Option<&[String]>,
    span: RowSpan,
) -> anyhow::Result<(ArrowReaderBuilder<T>, BatchStream)> {
    let schema = builder.schema().clone();
    let row_groups: Vec<usize> =
        builder.metadata().row_groups().iter().map(|g| usize::try_from(g.num_rows()).unwrap_or(0)).collect();
    let mut rows = usize::try_from(builder.metadata().file_metadata().num_rows()).ok();
    let mut builder = builder.with_batch_size(batch_size);
    if let Some(columns) = columns {
        let indices = column_indices(display, &schema, columns)?;
        let mask = ProjectionMask::roots(builder.parquet_schema(), indices);
        builder = builder.with_projection(mask);
    }
    if let RowSpan::InRowGroup { row_group, skip, rows: take } = span {
        let available = row_groups.get(row_group).copied().unwrap_or(0);
        if skip + take > available {
            bail!(
                "{display} changed: row group {row_group} has {available} rows, not the {} planned; rerun",
                skip + take
            );
        }
        let selection = RowSelection::from(vec![RowSelector::skip(skip), RowSelector::select(take)]);
        builder = builder.with_row_groups(vec![row_group]).with_row_selection(selection);
        rows = Some(take);
    }
    let plan = BatchStream {
        batch_schema: schema.clone(),
        schema,
        rows,
        row_groups: Some(row_groups),
        footer: Some(footer),
        batches: Box::new(std::iter::empty()),
    };
    Ok((builder, plan))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Float64Array, Int64Array, ListArray};
    use arrow::datatypes::Int32Type;

    use super::*;

    #[test]
    fn nan_labels_are_missing_and_lists_are_refused() {
        let floats: ArrayRef =
            Arc::new(Float64Array::from(vec![Some(1.0), Some(f64::NAN), None, Some(0.0), Some(f64::INFINITY)]));
        let expected = vec![Some("1.0".to_owned()), None, None, Some("0.0".to_owned()), None];
        assert_eq!(label_values(&floats).expect("floats"), expected);
        let integers: ArrayRef = Arc::new(Int64Array::from(vec![Some(3), None]));
        assert_eq!(label_values(&integers).expect("integers"), vec![Some("3".to_owned()), None]);
        let lists: ArrayRef =
            Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(vec![Some(vec![Some(1), Some(2)])]));
        let error = label_values(&lists).expect_err("lists are not one label per row");
        assert!(error.to_string().contains("not one label per row"), "{error}");
    }
}

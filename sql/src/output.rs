//! What a query returns: a readable table on the terminal, or CSV / newline-delimited JSON /
//! Parquet to stdout or a file. Files are written under a temporary name and renamed at the
//! end, so a failed query leaves no partial output.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::bail;
use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use batch_io::atomic_file::{TempFile, io_cause, temp_beside, write_failed};
use datafusion::dataframe::DataFrame;

use crate::column_names::{qualifiers, readable_names};
use futures::StreamExt;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultFormat {
    /// An aligned table for people.
    Table,
    /// CSV with a header; list and struct values are written as their text.
    Csv,
    /// Newline-delimited JSON, one object per row.
    Json,
    Parquet,
}

impl batch_io::choice::Choice for ResultFormat {
    const CHOICES: &'static [(Self, &'static str, &'static str)] = &[
        (Self::Table, "table", "an aligned table for people"),
        (Self::Csv, "csv", "CSV with a header; list and struct values are written as their text"),
        (Self::Json, "json", "newline-delimited JSON, one object per row"),
        (Self::Parquet, "parquet", "Parquet"),
    ];
}

impl ResultFormat {
    /// The format an output file's extension implies.
    pub fn from_extension(path: &Path) -> Option<Self> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "csv" => Some(Self::Csv),
            "json" | "jsonl" | "ndjson" => Some(Self::Json),
            "parquet" => Some(Self::Parquet),
            "txt" => Some(Self::Table),
            _ => None,
        }
    }
}

/// How much of a result the table format shows.
#[derive(Debug, Clone, Copy)]
pub struct TableView {
    /// Rows printed; the rest are counted. 0 shows all.
    pub max_rows: usize,
    /// Characters per cell before it is cut with `…`. 0 shows whole values.
    pub max_cell_width: usize,
}

/// Runs `frame` and writes its rows in `format` to `output` (stdout when `None`).
/// `metadata`: key-value metadata for a Parquet output. Returns the number of rows.
pub async fn write_results(
    frame: DataFrame,
    format: ResultFormat,
    output: Option<&Path>,
    view: TableView,
    metadata: HashMap<String, String>,
) -> anyhow::Result<usize> {
    if format == ResultFormat::Parquet && output.is_none() {
        bail!("--format parquet needs --output PATH");
    }
    let schema = readable_schema(&frame, metadata);
    let mut stream = frame.execute_stream().await?;
    let mut sink = Sink::open(output)?;
    let mut rows = 0;
    // A failed write to a file names the file and the system's reason (a full disk) once.
    let write_error = |error: anyhow::Error| match output {
        Some(target) if io_cause(error.as_ref()).is_some() => write_failed(target, error.as_ref()),
        _ => error,
    };
    let written = async {
        let mut writer = RowWriter::new(format, schema.clone(), &mut sink)?;
        while let Some(batch) = stream.next().await {
            let batch = RecordBatch::try_new(schema.clone(), batch?.columns().to_vec())?;
            rows += batch.num_rows();
            writer.write(&batch, view).map_err(write_error)?;
        }
        writer.finish(&schema, rows, view).map_err(write_error)
    }
    .await;
    match written {
        // A reader that stops early (`| head`) is not an error.
        Err(_) if sink.reader_left() => Ok(rows),
        Err(error) => Err(error),
        Ok(()) => {
            sink.finish()?;
            Ok(rows)
        }
    }
}

/// The result's schema with readable column names ([`crate::column_names`]) and `metadata`.
fn readable_schema(frame: &DataFrame, metadata: HashMap<String, String>) -> SchemaRef {
    let arrow = frame.schema().as_arrow();
    let names: Vec<String> = arrow.fields().iter().map(|field| field.name().clone()).collect();
    let qualified: Vec<String> = frame
        .schema()
        .iter()
        .map(|(qualifier, field)| match qualifier {
            Some(table) => format!("{table}.{}", field.name()),
            None => field.name().clone(),
        })
        .collect();
    let readable = readable_names(&names, &qualified, &qualifiers(frame.logical_plan()));
    let fields: Vec<Field> =
        arrow.fields().iter().zip(readable).map(|(field, name)| field.as_ref().clone().with_name(name)).collect();
    Arc::new(Schema::new(fields).with_metadata(metadata))
}

/// Stdout, or a temporary file beside the target that becomes the target on success.
enum Sink {
    /// `reader_left`: a write failed because the reading end of a pipe was closed.
    Stdout {
        out: std::io::Stdout,
        reader_left: bool,
    },
    File {
        temp: TempFile,
        target: PathBuf,
    },
}

impl Sink {
    fn open(output: Option<&Path>) -> anyhow::Result<Self> {
        let Some(target) = output else { return Ok(Sink::Stdout { out: std::io::stdout(), reader_left: false }) };
        let temp = temp_beside(target)?;
        Ok(Sink::File { temp, target: target.to_path_buf() })
    }

    fn reader_left(&self) -> bool {
        matches!(self, Sink::Stdout { reader_left: true, .. })
    }

    fn finish(self) -> anyhow::Result<()> {
        match self {
            Sink::Stdout { mut out, .. } => Ok(out.flush()?),
            Sink::File { temp, target } => temp.publish(&target),
        }
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Sink::Stdout { out, reader_left } => {
                let written = out.write(buf);
                if written.as_ref().is_err_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) {
                    *reader_left = true;
                }
                written
            }
            Sink::File { temp, .. } => temp.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::Stdout { out, reader_left } => {
                let flushed = out.flush();
                if flushed.as_ref().is_err_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) {
                    *reader_left = true;
                }
                flushed
            }
            Sink::File { temp, .. } => temp.flush(),
        }
    }
}

enum RowWriter<'a> {
    /// Rows kept for printing (up to the view's limit).
    Table {
        kept: Vec<RecordBatch>,
        kept_rows: usize,
        out: &'a mut Sink,
    },
    Csv(arrow::csv::Writer<&'a mut Sink>),
    Json(arrow::json::LineDelimitedWriter<&'a mut Sink>),
    Parquet(ArrowWriter<&'a mut Sink>),
}

impl<'a> RowWriter<'a> {
    fn new(format: ResultFormat, schema: SchemaRef, out: &'a mut Sink) -> anyhow::Result<Self> {
        Ok(match format {
            ResultFormat::Table => RowWriter::Table { kept: Vec::new(), kept_rows: 0, out },
            ResultFormat::Csv => RowWriter::Csv(arrow::csv::WriterBuilder::new().with_header(true).build(out)),
            ResultFormat::Json => RowWriter::Json(arrow::json::LineDelimitedWriter::new(out)),
            ResultFormat::Parquet => {
                let properties =
                    WriterProperties::builder().set_compression(Compression::ZSTD(ZstdLevel::default())).build();
                RowWriter::Parquet(ArrowWriter::try_new(out, schema, Some(properties))?)
            }
        })
    }

    fn write(&mut self, batch: &RecordBatch, view: TableView) -> anyhow::Result<()> {
        match self {
            RowWriter::Table { kept, kept_rows, .. } => {
                let room = if view.max_rows == 0 { batch.num_rows() } else { view.max_rows - *kept_rows };
                let take = room.min(batch.num_rows());
                if take > 0 {
                    kept.push(batch.slice(0, take));
                    *kept_rows += take;
                }
            }
            RowWriter::Csv(writer) => writer.write(&nested_as_text(batch)?)?,
            RowWriter::Json(writer) => writer.write(batch)?,
            RowWriter::Parquet(writer) => writer.write(batch)?,
        }
        Ok(())
    }

    fn finish(self, schema: &SchemaRef, rows: usize, view: TableView) -> anyhow::Result<()> {
        match self {
            RowWriter::Table { kept, kept_rows, out } => {
                let (table, cut) = render_table(schema, &kept, view.max_cell_width)?;
                writeln!(out, "{table}")?;
                let plural = if rows == 1 { "" } else { "s" };
                if kept_rows < rows {
                    write!(out, "{rows} row{plural}, {kept_rows} shown (--max-rows 0 shows all)")?;
                } else {
                    write!(out, "{rows} row{plural}")?;
                }
                if cut {
                    write!(
                        out,
                        "; values cut at {} characters (--max-cell-width 0 shows them whole)",
                        view.max_cell_width
                    )?;
                }
                writeln!(out)?;
            }
            RowWriter::Csv(writer) => drop(writer.into_inner()),
            RowWriter::Json(mut writer) => writer.finish()?,
            RowWriter::Parquet(writer) => drop(writer.into_inner()?),
        }
        Ok(())
    }
}

fn format_options() -> FormatOptions<'static> {
    FormatOptions::default().with_null("NULL")
}

/// An aligned table, and whether a cell was cut: cells longer than `max_cell_width`
/// characters are cut, and a list too long shows its first items and how many more.
fn render_table(schema: &SchemaRef, batches: &[RecordBatch], max_cell_width: usize) -> anyhow::Result<(String, bool)> {
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    table.set_header(schema.fields().iter().map(|f| f.name().clone()));
    let options = format_options();
    let mut any_cut = false;
    for batch in batches {
        let formatters: Vec<ArrayFormatter> =
            batch.columns().iter().map(|c| ArrayFormatter::try_new(c.as_ref(), &options)).collect::<Result<_, _>>()?;
        for row in 0..batch.num_rows() {
            let mut cells = Vec::with_capacity(batch.num_columns());
            for (column, formatter) in batch.columns().iter().zip(&formatters) {
                let whole = formatter.value(row).to_string();
                let shown = match list_items(column, row, &options)? {
                    Some(items) if whole.chars().count() > max_cell_width && max_cell_width > 0 => {
                        first_items(&items, max_cell_width)
                    }
                    _ => cut(whole.clone(), max_cell_width),
                };
                any_cut |= shown != whole;
                cells.push(shown);
            }
            table.add_row(cells);
        }
    }
    Ok((table.to_string(), any_cut))
}

/// The items of a list cell as text; `None` for a cell that is not a list (or is null).
fn list_items(column: &ArrayRef, row: usize, options: &FormatOptions) -> anyhow::Result<Option<Vec<String>>> {
    let items = match column.data_type() {
        DataType::List(_) if column.is_valid(row) => column.as_list::<i32>().value(row),
        DataType::LargeList(_) if column.is_valid(row) => column.as_list::<i64>().value(row),
        _ => return Ok(None),
    };
    let formatter = ArrayFormatter::try_new(items.as_ref(), options)?;
    Ok(Some((0..items.len()).map(|i| formatter.value(i).to_string()).collect()))
}

/// `[a, b, … 226 more]`: as many first items as fit in `max_chars` characters (at least one,
/// itself cut if it must be), and the count of the rest.
fn first_items(items: &[String], max_chars: usize) -> String {
    let mut shown = String::from("[");
    for (index, item) in items.iter().enumerate() {
        let rest = format!("… {} more]", items.len() - index);
        let separator = if index == 0 { "" } else { ", " };
        let fits =
            shown.chars().count() + separator.len() + item.chars().count() + 2 + rest.chars().count() <= max_chars;
        if !fits {
            if index == 0 {
                shown.push_str(&cut(item.clone(), max_chars / 2));
                shown.push_str(&format!(", … {} more]", items.len() - 1));
            } else {
                shown.push_str(&format!(", {rest}"));
            }
            return shown;
        }
        shown.push_str(separator);
        shown.push_str(item);
    }
    shown.push(']');
    shown
}

fn cut(mut text: String, max_chars: usize) -> String {
    if max_chars > 0
        && let Some((end, _)) = text.char_indices().nth(max_chars)
    {
        text.truncate(end);
        text.push('…');
    }
    text
}

/// CSV has no lists or structs: such columns become their text, as the table shows them.
fn nested_as_text(batch: &RecordBatch) -> anyhow::Result<RecordBatch> {
    let options = format_options().with_null("");
    let mut fields = Vec::with_capacity(batch.num_columns());
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(batch.num_columns());
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        if field.data_type().is_nested() {
            let formatter = ArrayFormatter::try_new(column.as_ref(), &options)?;
            let text: StringArray =
                (0..column.len()).map(|row| column.is_valid(row).then(|| formatter.value(row).to_string())).collect();
            fields.push(Field::new(field.name(), DataType::Utf8, true));
            columns.push(Arc::new(text));
        } else {
            fields.push(field.as_ref().clone());
            columns.push(column.clone());
        }
    }
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?)
}

#[cfg(test)]
mod tests {
    use super::{cut, first_items};

    #[test]
    fn cut_counts_characters_not_bytes() {
        assert_eq!(cut("héllo wörld".to_owned(), 5), "héllo…");
        assert_eq!(cut("short".to_owned(), 5), "short");
        assert_eq!(cut("anything".to_owned(), 0), "anything");
    }

    #[test]
    fn long_lists_show_their_first_items_and_count_the_rest() {
        let items: Vec<String> = ["this", "is", "a", "powerful", "film", "which", "seems"].map(String::from).to_vec();
        assert_eq!(first_items(&items, 30), "[this, is, a, … 4 more]");
        assert!(first_items(&items, 30).chars().count() <= 30);
        assert_eq!(first_items(&items, 100), "[this, is, a, powerful, film, which, seems]");
        let long = vec!["x".repeat(50), "y".to_owned()];
        assert_eq!(first_items(&long, 20), format!("[{}…, … 1 more]", "x".repeat(10)));
    }
}

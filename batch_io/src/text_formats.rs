//! CSV, JSON Lines and plain-text files as streams of record batches, told apart by their
//! extension. They are streamed with arrow's own readers, a batch at a time. CSV carries no
//! types, and guessing them changes values (`007` would become 7, a zip code lose its zero),
//! so every CSV column is read as the text it holds; JSON Lines says its types, inferred from
//! the first [`INFER_ROWS`] rows; a plain-text file is one document per line in a `text`
//! column.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, bail};
use arrow::array::StringArray;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;

use crate::source::{BatchStream, Batches};

/// Rows read to infer the column types of a JSON Lines file.
pub const INFER_ROWS: usize = 10_000;

/// The column a plain-text file's lines are read into.
pub const LINES_COLUMN: &str = "text";

/// A text format, by file extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextFormat {
    /// Comma- (`.csv`) or tab-separated (`.tsv`), with a header row.
    Csv { delimiter: u8 },
    /// One JSON object per line (`.jsonl`, `.ndjson`).
    JsonLines,
    /// One document per line (`.txt`).
    Lines,
}

impl TextFormat {
    /// The format `name`'s extension says, if it is a text format's (each listed in
    /// [`crate::source::DATA_EXTENSIONS`], so that a directory's are read too).
    pub fn of(name: &str) -> Option<Self> {
        let extension = name.rsplit_once('.')?.1.to_ascii_lowercase();
        match extension.as_str() {
            "csv" => Some(Self::Csv { delimiter: b',' }),
            "tsv" => Some(Self::Csv { delimiter: b'\t' }),
            "jsonl" | "ndjson" => Some(Self::JsonLines),
            "txt" => Some(Self::Lines),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Csv { delimiter: b'\t' } => "TSV",
            Self::Csv { .. } => "CSV",
            Self::JsonLines => "JSON Lines",
            Self::Lines => "plain text",
        }
    }
}

/// Opens `path` in `format`, streaming batches of `batch_size` rows of `columns` (all when
/// `None`; each must exist).
pub fn open_text(
    path: &Path,
    format: TextFormat,
    batch_size: usize,
    columns: Option<&[String]>,
) -> anyhow::Result<BatchStream> {
    let display = path.display().to_string();
    let mut file = File::open(path).with_context(|| format!("cannot open {display}"))?;
    let schema = infer_schema(&display, &mut file, format)?;
    file.rewind().with_context(|| format!("cannot read {display}"))?;
    let projection = columns.map(|columns| crate::source::column_indices(&display, &schema, columns)).transpose()?;
    let batch_schema = match &projection {
        Some(indices) => Arc::new(schema.project(indices)?),
        None => schema.clone(),
    };
    let batches: Batches = match format {
        TextFormat::Csv { delimiter } => {
            let mut builder = arrow::csv::ReaderBuilder::new(schema.clone())
                .with_header(true)
                .with_delimiter(delimiter)
                .with_batch_size(batch_size);
            if let Some(indices) = projection {
                builder = builder.with_projection(indices);
            }
            let (quotes, open_quote) = QuoteWatch::new(file);
            let reader = builder.build(BufReader::new(quotes)).with_context(|| format!("cannot read {display}"))?;
            let batches = numbered(display.clone(), format, reader);
            // The reader takes a quote left open at the end as closing there, swallowing every
            // row after it into one field; that is refused instead.
            let unclosed = std::iter::once(()).filter_map(move |()| {
                let line = open_quote.load(Ordering::Relaxed);
                (line > 0).then(|| Err(anyhow::anyhow!(
                    "{display}: the quote opened on line {line} is never closed, so every row after it would be read \
                     as one field; close it (a quote inside a quoted field is written twice: \"\")"
                )))
            });
            Box::new(batches.chain(unclosed))
        }
        TextFormat::JsonLines => {
            // Only the columns asked for are parsed (the others are skipped as unknown keys), so
            // a column left out cannot fail the read.
            let reader = arrow::json::ReaderBuilder::new(batch_schema.clone())
                .with_batch_size(batch_size)
                .build(BufReader::new(file))
                .with_context(|| format!("cannot read {display}"))?;
            numbered(display, format, reader)
        }
        TextFormat::Lines => Box::new(lines(display, BufReader::new(file), batch_size, batch_schema.clone())),
    };
    Ok(BatchStream { schema, rows: None, row_groups: None, footer: None, batch_schema, batches })
}

/// The schema `pipeline run` reads `path` in `format` with (`pipeline sql` reads CSV with it,
/// so that a value is the same text in both).
pub fn schema_of(path: &Path, format: TextFormat) -> anyhow::Result<SchemaRef> {
    let display = path.display().to_string();
    let mut file = File::open(path).with_context(|| format!("cannot open {display}"))?;
    infer_schema(&display, &mut file, format)
}

/// The file's schema: inferred from its first rows, or one `text` column for plain text.
fn infer_schema(display: &str, file: &mut File, format: TextFormat) -> anyhow::Result<SchemaRef> {
    let inferred = match format {
        TextFormat::Csv { delimiter } => {
            // The header's names, every column as text.
            let csv = arrow::csv::reader::Format::default().with_header(true).with_delimiter(delimiter);
            csv.infer_schema(&mut *file, Some(0)).map(|(schema, _)| as_text(&schema))
        }
        TextFormat::JsonLines => {
            arrow::json::reader::infer_json_schema(BufReader::new(&mut *file), Some(INFER_ROWS)).map(|(s, _)| s)
        }
        TextFormat::Lines => return Ok(Arc::new(Schema::new(vec![Field::new(LINES_COLUMN, DataType::Utf8, true)]))),
    }
    .with_context(|| format!("{display} is not readable as {}", format.name()))?;
    if inferred.fields().is_empty() {
        match format {
            TextFormat::JsonLines => bail!("{display} holds no JSON object: write one object per line"),
            _ => bail!("{display} has no columns: a {} file starts with a header row naming them", format.name()),
        }
    }
    // A column empty in every row read so far may hold text further on.
    let fields: Vec<Field> = inferred
        .fields()
        .iter()
        .map(|field| match field.data_type() {
            DataType::Null => field.as_ref().clone().with_data_type(DataType::Utf8).with_nullable(true),
            _ => field.as_ref().clone(),
        })
        .collect();
    Ok(Arc::new(Schema::new(fields)))
}

/// `schema` with every column as text.
fn as_text(schema: &Schema) -> Schema {
    Schema::new(
        schema
            .fields()
            .iter()
            .map(|field| field.as_ref().clone().with_data_type(DataType::Utf8).with_nullable(true))
            .collect::<Vec<_>>(),
    )
}

/// Batches whose errors name the file and the rows they came from.
fn numbered(
    display: String,
    format: TextFormat,
    reader: impl Iterator<Item = Result<RecordBatch, arrow::error::ArrowError>> + Send + 'static,
) -> Batches {
    let mut rows_before = 0usize;
    Box::new(reader.map(move |batch| match batch {
        Ok(batch) => {
            rows_before += batch.num_rows();
            Ok(batch)
        }
        Err(error) => {
            let message = error.to_string();
            // A value of another type than the first rows had: the advice that helps.
            let retyped = format == TextFormat::JsonLines && message.contains("failed to parse");
            let advice = if retyped {
                format!(
                    ". Column types are inferred from the first {INFER_ROWS} rows; leave a column whose values change \
                     type out with --pass-through, or convert the file to Parquet with explicit types"
                )
            } else {
                String::new()
            };
            Err(anyhow::anyhow!(
                "cannot read {display} as {} in the rows after its first {rows_before}: {message}{advice}",
                format.name()
            ))
        }
    }))
}

/// A CSV file's bytes as they are read, watched for a quote left open: in a well-formed file
/// quotes pair up (one inside a quoted field is doubled), so the count of `"` is even at the
/// end. Once the file is read to its end, `open_at_end` holds the line the last unpaired
/// quote was opened on (lines count from 1), or 0 where every quote closed.
struct QuoteWatch<R> {
    inner: R,
    inside: bool,
    line: usize,
    opened_on: usize,
    open_at_end: Arc<AtomicUsize>,
}

impl<R> QuoteWatch<R> {
    fn new(inner: R) -> (Self, Arc<AtomicUsize>) {
        let open_at_end = Arc::new(AtomicUsize::new(0));
        (Self { inner, inside: false, line: 1, opened_on: 0, open_at_end: open_at_end.clone() }, open_at_end)
    }
}

impl<R: std::io::Read> std::io::Read for QuoteWatch<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let read = self.inner.read(buf)?;
        for &byte in buf.get(..read).unwrap_or_default() {
            match byte {
                b'"' => {
                    self.inside = !self.inside;
                    if self.inside {
                        self.opened_on = self.line;
                    }
                }
                b'\n' => self.line += 1,
                _ => {}
            }
        }
        if read == 0 && !buf.is_empty() && self.inside {
            self.open_at_end.store(self.opened_on, Ordering::Relaxed);
        }
        Ok(read)
    }
}

/// One document per line (without its `\n` or `\r\n`), `batch_size` lines a batch.
fn lines(
    display: String,
    mut reader: impl BufRead + Send + 'static,
    batch_size: usize,
    schema: SchemaRef,
) -> impl Iterator<Item = anyhow::Result<RecordBatch>> + Send {
    let mut line_number = 0usize;
    let mut finished = false;
    std::iter::from_fn(move || {
        if finished {
            return None;
        }
        let mut documents = Vec::with_capacity(batch_size.min(4096));
        let mut line = Vec::new();
        while documents.len() < batch_size {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) => {
                    finished = true;
                    break;
                }
                Ok(_) => line_number += 1,
                Err(error) => return Some(Err(anyhow::anyhow!("cannot read {display}: {error}"))),
            }
            let text = line.strip_suffix(b"\n").unwrap_or(&line);
            let text = text.strip_suffix(b"\r").unwrap_or(text);
            match std::str::from_utf8(text) {
                Ok(text) => documents.push(text.to_owned()),
                Err(_) => {
                    return Some(Err(anyhow::anyhow!(
                        "{display}: line {line_number} is not UTF-8 text; convert the file to UTF-8 (iconv -f LATIN1 \
                         -t UTF-8, for example)"
                    )));
                }
            }
        }
        if documents.is_empty() {
            return None;
        }
        let column = Arc::new(StringArray::from(documents));
        Some(RecordBatch::try_new(schema.clone(), vec![column]).map_err(anyhow::Error::from))
    })
}

/// What the first bytes of a file that is no format we read look like, and what to do.
pub fn describe_unknown(display: &str, head: &[u8]) -> String {
    let supported = "pipeline reads Parquet, Arrow IPC, CSV (.csv, .tsv), JSON Lines (.jsonl, .ndjson) and plain \
                     text (.txt, one document per line)";
    let looks_like = if head.starts_with(&[0x1f, 0x8b]) {
        "is gzip-compressed: decompress it (gunzip), or convert it to Parquet".to_owned()
    } else if head.is_empty() {
        "is empty".to_owned()
    } else if head.contains(&0) {
        "is a binary file of no format it reads".to_owned()
    } else if head.starts_with(b"PK\x03\x04") {
        "is a ZIP archive (an Excel workbook is one): export or unpack it as CSV".to_owned()
    } else if let Ok(text) = std::str::from_utf8(head.get(..head.len().min(4096)).unwrap_or(head))
        .or_else(|e| std::str::from_utf8(head.get(..e.valid_up_to()).unwrap_or_default()))
    {
        let first = text.trim_start();
        if first.starts_with('{') {
            "looks like JSON Lines: name it *.jsonl".to_owned()
        } else if first.starts_with('[') {
            "looks like a JSON array: write one object per line and name it *.jsonl".to_owned()
        } else if first.lines().next().is_some_and(|line| line.contains(',') || line.contains('\t')) {
            "looks like CSV: name it *.csv (or *.tsv when tab-separated)".to_owned()
        } else {
            "looks like text: name it *.txt to read one document per line".to_owned()
        }
    } else {
        "is not a format it recognises".to_owned()
    };
    format!("{display} {looks_like}; {supported}")
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use arrow::array::{Array, AsArray};

    use super::*;

    fn file(name: &str, contents: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::File::create(&path).unwrap().write_all(contents).unwrap();
        (dir, path)
    }

    fn read(path: &Path, columns: Option<&[String]>) -> anyhow::Result<Vec<RecordBatch>> {
        let format = TextFormat::of(&path.to_string_lossy()).unwrap();
        open_text(path, format, 2, columns)?.batches.collect()
    }

    #[test]
    fn csv_columns_are_the_text_they_hold_and_projected() {
        let (_dir, path) = file("r.csv", b"id,text,empty\n007,\"good, very\",\n2,bad,\n3,\"say \"\"hi\"\"\",\n");
        let batches = read(&path, Some(&["text".to_owned(), "id".to_owned()])).unwrap();
        assert_eq!(batches.len(), 2, "two rows a batch");
        let all = arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
        let texts: Vec<_> = all.column(0).as_string::<i32>().iter().flatten().collect();
        assert_eq!(texts, ["good, very", "bad", "say \"hi\""]);
        let ids: Vec<_> = all.column(1).as_string::<i32>().iter().flatten().collect();
        assert_eq!(ids, ["007", "2", "3"], "CSV values stay the text they are");
        let stream = open_text(&path, TextFormat::of("r.csv").unwrap(), 8, None).unwrap();
        assert_eq!(stream.schema.field_with_name("empty").unwrap().data_type(), &DataType::Utf8);
        let error = read(&path, Some(&["txt".to_owned()])).unwrap_err().to_string();
        assert!(error.contains("no column `txt`"), "{error}");
    }

    #[test]
    fn a_quote_left_open_is_refused_not_read_as_one_long_field() {
        let (_dir, path) = file("r.csv", b"id,text\n1,\"unterminated quote\n2,bad\n3,worse\n");
        let error = read(&path, None).unwrap_err().to_string();
        assert!(error.contains("the quote opened on line 2 is never closed"), "{error}");
        let (_ok, fine) = file("f.csv", b"id,text\n1,\"say \"\"hi\"\"\nto all\"\n2,bad\n");
        let rows: usize = read(&fine, None).unwrap().iter().map(RecordBatch::num_rows).sum();
        assert_eq!(rows, 2, "a quoted line break and doubled quotes are fine");
    }

    #[test]
    fn json_lines_and_tsv_read_as_csv_does() {
        let (_a, jsonl) =
            file("r.jsonl", b"{\"text\": \"good\", \"id\": 1}\n{\"text\": \"bad\", \"id\": 2, \"new\": true}\n");
        let batches = read(&jsonl, None).unwrap();
        assert_eq!(batches[0].column_by_name("text").unwrap().as_string::<i32>().value(1), "bad");
        let (_b, tsv) = file("r.tsv", b"text\tid\ngood, really\t1\n");
        let batches = read(&tsv, None).unwrap();
        assert_eq!(batches[0].column(0).as_string::<i32>().value(0), "good, really");
    }

    #[test]
    fn a_value_of_another_type_after_the_sample_names_the_rows() {
        let mut contents = Vec::new();
        for _ in 0..INFER_ROWS {
            contents.extend_from_slice(b"{\"text\": \"a\", \"n\": 1}\n");
        }
        contents.extend_from_slice(b"{\"text\": \"b\", \"n\": \"one\"}\n");
        let (_dir, path) = file("r.jsonl", &contents);
        let format = TextFormat::of("r.jsonl").unwrap();
        let error = open_text(&path, format, 4096, None).unwrap().batches.collect::<anyhow::Result<Vec<_>>>();
        let error = error.unwrap_err().to_string();
        assert!(error.contains("r.jsonl") && error.contains("--pass-through"), "{error}");
        // Left out, the column is never parsed (JSON Lines skips its key).
        let rows: usize = open_text(&path, format, 4096, Some(&["text".to_owned()]))
            .unwrap()
            .batches
            .map(|b| b.unwrap().num_rows())
            .sum();
        assert_eq!(rows, INFER_ROWS + 1);
    }

    #[test]
    fn plain_text_is_a_document_per_line_and_names_a_bad_line() {
        let (_dir, path) = file("r.txt", b"good film\r\n\nbad film");
        let batches = read(&path, None).unwrap();
        let texts: Vec<_> = batches.iter().flat_map(|b| b.column(0).as_string::<i32>().iter().flatten()).collect();
        assert_eq!(texts, ["good film", "", "bad film"]);
        assert_eq!(batches.iter().map(|b| b.column(0).null_count()).sum::<usize>(), 0);
        let (_bad, latin) = file("l.txt", b"ok\ncaf\xe9\n");
        let error = read(&latin, None).unwrap_err().to_string();
        assert!(error.contains("line 2 is not UTF-8"), "{error}");
    }

    #[test]
    fn an_unknown_file_says_what_it_looks_like() {
        assert!(describe_unknown("x.dat", b"{\"text\": 1}").contains("*.jsonl"));
        assert!(describe_unknown("x.dat", b"text,label\na,b").contains("*.csv"));
        assert!(describe_unknown("x.gz", &[0x1f, 0x8b, 8, 0]).contains("gzip"));
        assert!(describe_unknown("x.dat", b"just words").contains("*.txt"));
        assert!(describe_unknown("x.bin", b"\x7fELF\x02\x01\x01\0\0").contains("binary"));
        assert_eq!(TextFormat::of("DATA.CSV"), Some(TextFormat::Csv { delimiter: b',' }));
        assert_eq!(TextFormat::of("data.parquet"), None);
        // A directory is listed by DATA_EXTENSIONS: every text format's extension is there.
        let text = crate::source::DATA_EXTENSIONS.iter().filter(|e| TextFormat::of(&format!("x.{e}")).is_some());
        assert_eq!(text.copied().collect::<Vec<_>>(), ["csv", "tsv", "jsonl", "ndjson", "txt"]);
    }
}

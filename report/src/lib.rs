//! `pipeline report`: one self-contained HTML page about a `pipeline run` output, so that a
//! person can see why documents were classified as they were.
//!
//! `runtime::output::read` finds and casts the output's columns → `tally` aggregates them in one streaming
//! pass → `charts` draws SVG → `page` lays out the HTML. The page is written whole or not at
//! all (`batch_io::atomic_file`).

// This crate reads what users hand us; a panic on it would break the batch-job contract.
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

mod charts;
mod page;
mod tally;

use std::io::Write;
use std::time::Instant;

use anyhow::Context;
use batch_io::atomic_file::check_replaceable;
use batch_io::earlier_output::{OutputKind, check_replaceable_output};
use batch_io::locations::{refuse_output_among_inputs, refuse_output_inside_table, refuse_remote_output_among_inputs};
use batch_io::object_storage::{canonical_url, is_url};
use batch_io::publish::{Destination, Sink};
use batch_io::source::{RowSpan, open_span};

use runtime::output::columns::CONTRIBUTION_SCALE;
use runtime::output::keys;
use runtime::output::origin::{SameRun, refuse_mixed_runs};
use runtime::output::read::{Batch, Layout};
use sql::RowFilter;
use sql::tables::{as_written_in, with_table_metadata};
use std::sync::Arc;

use crate::page::RunInfo;
use crate::tally::Tally;

pub struct ReportOptions {
    /// A `pipeline run` output: a file, a directory or glob of parts, or a URL.
    pub input: String,
    /// The column holding the true label; `None`: `label` when there is one.
    pub label_column: Option<String>,
    /// A local path or an object-storage URL.
    pub output: String,
    /// Documents shown in each example group.
    pub examples: usize,
    /// A SQL condition on the output's columns: only the first `examples` rows that meet it
    /// get cards (the tallies still cover every row).
    pub where_condition: Option<String>,
}

/// What a report run did.
pub struct ReportSummary {
    pub rows: u64,
    pub files: usize,
    pub seconds: f64,
}

/// The most `--examples` a page draws per group.
pub const MOST_EXAMPLES: usize = 200;

/// Rows per record batch read.
const BATCH_ROWS: usize = 1024;

pub fn write_report(options: &ReportOptions) -> anyhow::Result<ReportSummary> {
    let started = Instant::now();
    refuse_output_name(&options.output)?;
    refuse_output_inside_table("output", &options.output)?;
    let destination = Destination::parse(&options.output)?;
    // A Delta table is the files its log lists now, as for `pipeline sql`.
    let sql::tables::ParquetInputs { input: inputs, table_metadata } = sql::tables::parquet_inputs(&options.input)?;
    // A Delta table's properties say which run wrote it, whatever its files (rewritten by
    // another writer's OPTIMIZE, say) still record.
    let schema_of =
        |probe: &batch_io::source::BatchStream| with_table_metadata(probe.schema.as_ref().clone(), &table_metadata);
    match &destination {
        Destination::Local(path) => {
            check_replaceable(path)?;
            check_replaceable_output("output", path, OutputKind::ReportPage)?;
            refuse_output_among_inputs("output", path, inputs.local.as_slice())?;
        }
        Destination::Object { .. } => {
            let files: Vec<String> = inputs.files.iter().map(ToString::to_string).collect();
            refuse_remote_output_among_inputs("output", &options.output, false, None, &options.input, &files)?;
        }
    }

    let first = inputs.files.first().context("the input holds no file")?;
    // A partitioned dataset's directories name columns its files do not hold.
    let partitioned = sql::tables::partitioned_dataset(&options.input, &inputs).map(|(root, _)| root);
    // An empty projection reads only the footer: the schema and metadata decide the layout.
    let probe = open_span(first, BATCH_ROWS, Some(&[]), RowSpan::Whole)?;
    let file_schema = schema_of(&probe);
    let partition_types = runtime::output::keys::recorded_partitions(file_schema.metadata());
    // The columns our run recorded are read from the whole path, so that a glob, a partition
    // directory or one part has them too; another writer's, from below the directory given.
    let partition_values = |file: &batch_io::source::InputFile| -> Vec<PartitionValue> {
        let values = match &partitioned {
            _ if !partition_types.is_empty() => partition_values_of("", file),
            Some(root) => partition_values_of(root, file),
            None => Vec::new(),
        };
        values
            .into_iter()
            .filter_map(|(name, value)| match partition_types.iter().find(|(n, _)| *n == name) {
                Some((_, data_type)) => Some((name, value, data_type.clone())),
                None if partition_types.is_empty() => Some((name, value, arrow::datatypes::DataType::Utf8)),
                None => None,
            })
            .collect()
    };
    let layout_schema = Arc::new(with_partition_fields(file_schema, &partition_values(first)));
    let mut layout = Layout::of(&layout_schema, &first.to_string(), options.label_column.as_deref())?;
    if let Err(why) = runtime::output::token_spans::text_column_of(&layout_schema) {
        tracing::warn!(
            "{first}: its token_spans cannot be read, so the report has no tokens, heat maps or word tables: {why}"
        );
    }
    let run = run_info(options, inputs.files.len(), &layout, layout_schema.metadata());
    drop(probe);
    if !refuse_other_runs(&inputs.files, first, &layout_schema, &schema_of, !table_metadata.is_empty())? {
        // Parts written before `contribution_scale` hold bytes alone: no push table.
        layout.without_contribution_scale();
    }
    let filter = options.where_condition.as_deref().map(|c| RowFilter::new(c, &layout_schema)).transpose()?;

    let mut tally = Tally::new(options.examples, run.max_tokens, &run.labels, options.where_condition.as_deref());
    let mut columns = layout.columns();
    for column in filter.iter().flat_map(RowFilter::columns) {
        if !columns.contains(&column) {
            columns.push(column);
        }
    }
    for file in &inputs.files {
        let name = file.to_string();
        let values = partition_values(file);
        let in_file: Vec<String> = columns.iter().filter(|c| values.iter().all(|(n, ..)| n != *c)).cloned().collect();
        let stream = open_span(file, BATCH_ROWS, Some(&in_file), RowSpan::Whole)?;
        let mut row = 0usize;
        for batch in stream.batches {
            let batch = with_partition_columns(batch?, &values)?;
            let chosen = filter
                .as_ref()
                .map(|f| f.matches(&batch))
                .transpose()
                .with_context(|| format!("{name} rows {row}..{}", row + batch.num_rows()))?;
            let batch = Batch::read(&batch, &layout, &run.labels, &name, row)?;
            tally.add(&batch, &name, row, chosen.as_ref())?;
            row += batch.len();
        }
    }

    refuse_labels_that_mostly_miss(&tally, &run.labels, layout.label.as_deref())?;
    if let Some(chosen) = tally.chosen.as_ref().filter(|c| c.matching == 0) {
        let condition = sql::row_filter::quoted_start(&chosen.condition);
        tracing::warn!("--where {condition} matched no row: the page has no document cards");
    }
    let html = page::render(&run, &tally)?;
    write_whole(&destination, html.as_bytes())?;
    Ok(ReportSummary { rows: tally.rows, files: inputs.files.len(), seconds: started.elapsed().as_secs_f64() })
}

/// The `name=value` directories between `root` and `file` (a partitioned dataset's).
fn partition_values_of(root: &str, file: &batch_io::source::InputFile) -> Vec<(String, Option<String>)> {
    let path = file.to_string();
    let relative = path.strip_prefix(root.trim_end_matches('/')).unwrap_or(&path);
    batch_io::locations::partition_values(relative)
}

/// A partition column of a file: its name, its value (`None`: null) and its type.
type PartitionValue = (String, Option<String>, arrow::datatypes::DataType);

/// `schema` with a field for each partition column it lacks.
fn with_partition_fields(schema: arrow::datatypes::Schema, values: &[PartitionValue]) -> arrow::datatypes::Schema {
    let metadata = schema.metadata().clone();
    let mut fields: Vec<arrow::datatypes::FieldRef> = schema.fields().iter().cloned().collect();
    for (name, _, data_type) in values {
        if schema.index_of(name).is_err() {
            fields.push(Arc::new(arrow::datatypes::Field::new(name, data_type.clone(), true)));
        }
    }
    arrow::datatypes::Schema::new(fields).with_metadata(metadata)
}

/// `batch` with each partition column's value (from the file's directories) on every row, of
/// the type the run recorded.
fn with_partition_columns(
    batch: arrow::array::RecordBatch,
    values: &[PartitionValue],
) -> anyhow::Result<arrow::array::RecordBatch> {
    if values.is_empty() {
        return Ok(batch);
    }
    let schema = with_partition_fields(batch.schema().as_ref().clone(), values);
    let mut columns = batch.columns().to_vec();
    for (name, value, data_type) in values {
        if batch.schema().index_of(name).is_err() {
            let text = arrow::array::StringArray::from(vec![value.as_deref(); batch.num_rows()]);
            let options = arrow::compute::CastOptions { safe: false, ..Default::default() };
            let column = arrow::compute::cast_with_options(&text, data_type, &options).with_context(|| {
                format!("the directory {name}={} is not a {data_type}", value.as_deref().unwrap_or_default())
            })?;
            columns.push(column);
        }
    }
    Ok(arrow::array::RecordBatch::try_new(Arc::new(schema), columns)?)
}

/// Tallies over several models, label sets or encodings would mean nothing: every file after
/// `first` must have its model, labels, encoding and column types (`first_schema`). Footers
/// only, before any row is read. Returns whether every file has `first`'s
/// `contribution_scale` column, if it has one (a dataset resumed across versions may not).
fn refuse_other_runs(
    files: &[batch_io::source::InputFile],
    first: &batch_io::source::InputFile,
    first_schema: &arrow::datatypes::Schema,
    schema_of: &dyn Fn(&batch_io::source::BatchStream) -> arrow::datatypes::Schema,
    delta: bool,
) -> anyhow::Result<bool> {
    let first_name = first.to_string();
    let mut every_scale = true;
    for file in files.iter().skip(1) {
        let probe = open_span(file, BATCH_ROWS, Some(&[]), RowSpan::Whole)?;
        // A Delta table's file rewritten by another writer holds our bytes as `short`.
        let schema = schema_of(&probe);
        let schema = if delta { as_written_in(first_schema, &schema) } else { schema };
        refuse_mixed_runs(
            (&first_name, first_schema),
            (&file.to_string(), &schema),
            SameRun::ModelAndEncoding,
            "report on each run's output separately",
        )?;
        every_scale &= probe.schema.index_of(CONTRIBUTION_SCALE.name).is_ok();
    }
    Ok(every_scale)
}

/// The page is HTML: a `.parquet` name or `_SUCCESS` would take the place of predictions or
/// of a dataset's run manifest.
fn refuse_output_name(output: &str) -> anyhow::Result<()> {
    // A storage key is judged as the store will spell it (`_%53UCCESS` is `_SUCCESS`).
    let resolved = if is_url(output) { canonical_url(output)? } else { output.to_owned() };
    let name = resolved.trim_end_matches('/').rsplit(['/', '\\']).next().unwrap_or(&resolved);
    if name == "_SUCCESS" || name.to_ascii_lowercase().ends_with(".parquet") {
        anyhow::bail!(
            "--output {output}: the report is an HTML page, and that name belongs to predictions or to a \
             dataset's run manifest; give it a name ending in .html, outside the dataset"
        );
    }
    Ok(())
}

/// Labels that are mostly none of the model's (`positive` against `pos`, a rating, indices
/// past the last label) make accuracy meaningless: stop instead of showing it as if it were one.
fn refuse_labels_that_mostly_miss(tally: &Tally, model_labels: &[String], column: Option<&str>) -> anyhow::Result<()> {
    if tally.labelled == 0 || model_labels.is_empty() || tally.unknown_labelled * 2 <= tally.labelled {
        return Ok(());
    }
    let seen: Vec<String> = tally.unknown_labels.iter().take(5).map(|l| format!("`{l}`")).collect();
    let matched = tally.labelled - tally.unknown_labelled;
    anyhow::bail!(
        "{} of {} labelled rows have a true label that is none of the model's: the label column `{}` holds {} but \
         the model predicts {}, so accuracy would mean nothing. Give --label-column a column of the model's labels or of \
         their indices, or leave it out for a report without accuracy",
        tally.unknown_labelled,
        tally.labelled,
        column.unwrap_or("label"),
        if matched == 0 {
            seen.join(", ")
        } else {
            format!("{} (and {matched} rows of the model's labels)", seen.join(", "))
        },
        model_labels.join(", ")
    )
}

fn run_info(
    options: &ReportOptions,
    files: usize,
    layout: &Layout,
    metadata: &std::collections::HashMap<String, String>,
) -> RunInfo {
    RunInfo {
        input: options.input.clone(),
        files,
        variant: metadata.get(keys::MODEL_VARIANT).cloned(),
        model_sha256: metadata.get(keys::MODEL_SHA256).cloned(),
        labels: metadata.get(keys::MODEL_LABELS).and_then(|l| serde_json::from_str(l).ok()).unwrap_or_default(),
        backend: metadata.get(keys::BACKEND).cloned(),
        max_tokens: metadata.get(keys::MAX_TOKENS).and_then(|m| m.parse().ok()),
        long_documents: metadata.get(keys::LONG_DOCUMENTS).cloned(),
        attention: metadata.get(keys::ATTENTION_ENCODING).cloned(),
        label_column: layout.label.clone(),
        model_card: metadata.get(keys::MODEL_CARD).and_then(|card| serde_json::from_str(card).ok()),
    }
}

/// Writes the page under a temporary name (or as an upload) and publishes it whole.
fn write_whole(destination: &Destination, bytes: &[u8]) -> anyhow::Result<()> {
    let mut sink = Sink::create(destination)?;
    sink.write_all(bytes).and_then(|()| sink.flush()).with_context(|| format!("cannot write {destination}"))?;
    sink.publish()
}

//! `pipeline report`: one self-contained HTML page about a `pipeline run` output, so that a
//! person can see why documents were classified as they were.
//!
//! `columns` finds and casts the output's columns → `tally` aggregates them in one streaming
//! pass → `charts` draws SVG → `page` lays out the HTML. The page is written whole or not at
//! all (`batch_io::atomic_file`).

// This crate reads what users hand us; a panic on it would break the batch-job contract.
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

mod charts;
mod columns;
mod page;
mod tally;

use std::io::Write;
use std::time::Instant;

use anyhow::Context;
use batch_io::atomic_file::check_replaceable;
use batch_io::inputs::resolve_input_files;
use batch_io::locations::refuse_output_among_inputs;
use batch_io::publish::{Destination, Sink};
use batch_io::source::{RowSpan, open_span};

use crate::columns::{Batch, Layout};
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
}

/// What a report run did.
pub struct ReportSummary {
    pub rows: u64,
    pub files: usize,
    pub seconds: f64,
}

/// Rows per record batch read.
const BATCH_ROWS: usize = 1024;

pub fn write_report(options: &ReportOptions) -> anyhow::Result<ReportSummary> {
    let started = Instant::now();
    let destination = Destination::parse(&options.output)?;
    let inputs = resolve_input_files(&options.input, &["parquet"])?;
    if let Destination::Local(path) = &destination {
        check_replaceable(path)?;
        refuse_output_among_inputs("--output", path, inputs.local.as_slice())?;
    }

    let first = inputs.files.first().context("the input holds no file")?;
    // An empty projection reads only the footer: the schema and metadata decide the layout.
    let probe = open_span(first, BATCH_ROWS, Some(&[]), RowSpan::Whole)?;
    let layout = Layout::of(&probe.schema, &first.to_string(), options.label_column.as_deref())?;
    let run = run_info(options, inputs.files.len(), &layout, probe.schema.metadata());
    drop(probe);

    let mut tally = Tally::new(options.examples, run.max_tokens);
    let columns = layout.columns();
    for file in &inputs.files {
        let name = file.to_string();
        let stream = open_span(file, BATCH_ROWS, Some(&columns), RowSpan::Whole)?;
        let mut row = 0usize;
        for batch in stream.batches {
            let batch = Batch::read(&batch?, &layout, &run.labels, &name)?;
            tally.add(&batch, &name, row)?;
            row += batch.len();
        }
    }

    let html = page::render(&run, &tally)?;
    write_whole(&destination, html.as_bytes())?;
    Ok(ReportSummary { rows: tally.rows, files: inputs.files.len(), seconds: started.elapsed().as_secs_f64() })
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
        variant: metadata.get("model.variant").cloned(),
        model_sha256: metadata.get("model.sha256").cloned(),
        labels: metadata.get("model.labels").and_then(|l| serde_json::from_str(l).ok()).unwrap_or_default(),
        backend: metadata.get("pipeline.backend").cloned(),
        max_tokens: metadata.get("pipeline.max_tokens").and_then(|m| m.parse().ok()),
        label_column: layout.label.clone(),
    }
}

/// Writes the page under a temporary name (or as an upload) and publishes it whole.
fn write_whole(destination: &Destination, bytes: &[u8]) -> anyhow::Result<()> {
    let mut sink = Sink::create(destination)?;
    sink.write_all(bytes).and_then(|()| sink.flush()).with_context(|| format!("cannot write {destination}"))?;
    sink.publish()
}

//! The read stage: the record batches of each unit of work in turn, one window at a time,
//! only the columns the output needs.

use std::sync::mpsc::SyncSender;
use std::time::Duration;

use anyhow::Context;
use arrow::array::RecordBatch;
use batch_io::source::open_span;

use super::{Line, Window, pass_on, timed};

pub fn run(line: &Line<'_>, out: &SyncSender<Window>) -> anyhow::Result<Duration> {
    let mut busy = Duration::ZERO;
    for (unit, work) in line.units.iter().enumerate() {
        let file = work.file;
        let input = line.files.get(file).context("a unit names a file that is not an input")?;
        let stream = timed(&mut busy, || open_span(input, line.window, Some(line.columns), work.span))?;
        let empty = RecordBatch::new_empty(stream.batch_schema.clone());
        let mut batches = stream.batches.peekable();
        let mut first_row = work.first_row;
        let mut sent = false;
        while let Some(batch) = timed(&mut busy, || batches.next()) {
            let batch =
                batch.with_context(|| format!("cannot read {input} rows {first_row}..{}", first_row + line.window))?;
            // Looking ahead decodes the next batch now rather than on the next turn.
            let ends_unit = timed(&mut busy, || batches.peek().is_none());
            let rows = batch.num_rows();
            sent = true;
            if !pass_on(out, Window { file, first_row, unit, ends_unit, batch }) {
                return Ok(busy);
            }
            first_row += rows;
        }
        // A unit without rows still ends: its (empty) part is how a resume knows it is done.
        if !sent && !pass_on(out, Window { file, first_row, unit, ends_unit: true, batch: empty }) {
            return Ok(busy);
        }
    }
    Ok(busy)
}

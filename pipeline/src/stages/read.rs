//! The read stage: the record batches of each unit of work in turn, one chunk at a time,
//! only the columns the output needs.

use std::sync::mpsc::SyncSender;
use std::time::Duration;

use anyhow::Context;
use arrow::array::RecordBatch;
use batch_io::source::{open_span_with, string_values, text_array};

use super::{Chunk, Line, pass_on, timed};

pub fn run(line: &Line<'_>, out: &SyncSender<Chunk>) -> anyhow::Result<Duration> {
    let mut busy = Duration::ZERO;
    for (unit, work) in line.units.iter().enumerate() {
        let file = work.file;
        let input = line.files.get(file).context("a unit names a file that is not an input")?;
        let footer = line.footers.get(work.file).and_then(Option::as_ref);
        let stream =
            timed(&mut busy, || open_span_with(input, footer, line.chunk_rows, Some(line.columns), work.span))?;
        let empty = RecordBatch::new_empty(stream.batch_schema.clone());
        let mut batches = stream.batches.peekable();
        let mut first_row = work.first_row;
        let mut sent = false;
        while let Some(batch) = timed(&mut busy, || batches.next()) {
            line.check_cancelled()?;
            let batch = batch
                .with_context(|| format!("cannot read {input} rows {first_row}..{}", first_row + line.chunk_rows))?;
            // Looking ahead decodes the next batch now rather than on the next turn.
            let last_batch = timed(&mut busy, || batches.peek().is_none());
            let pieces = timed(&mut busy, || split_by_text_bytes(&batch, line.text_column, CHUNK_TEXT_BYTES))?;
            let count = pieces.len();
            for (i, piece) in pieces.into_iter().enumerate() {
                let rows = piece.num_rows();
                let ends_unit = last_batch && i + 1 == count;
                sent = true;
                if !pass_on(out, Chunk { file, first_row, unit, ends_unit, batch: piece }) {
                    return Ok(busy);
                }
                first_row += rows;
            }
        }
        // A unit without rows still ends: its (empty) part is how a resume knows it is done.
        if !sent && !pass_on(out, Chunk { file, first_row, unit, ends_unit: true, batch: empty }) {
            return Ok(busy);
        }
    }
    Ok(busy)
}

/// The most text one chunk carries, in bytes: above a chunk of ordinary reviews (2,048 of
/// IMDB's are about 2.7 MB), so those are left whole, while documents of 100,000 tokens come a
/// few at a time. `--chunk` counts documents, so memory grew with them: 96 documents of
/// 100,000 tokens peaked at 1,277 MiB in one chunk, and at 390 MiB with this bound.
pub const CHUNK_TEXT_BYTES: usize = 3 << 20;

/// `batch` cut into consecutive slices of at most `budget` bytes of text each (a longer
/// document goes alone); one slice, the batch itself, when it is within the budget.
fn split_by_text_bytes(batch: &RecordBatch, text_column: &str, budget: usize) -> anyhow::Result<Vec<RecordBatch>> {
    let column = batch.column_by_name(text_column).context("a chunk lost the text column")?;
    let text = text_array(column)?;
    let lengths: Vec<usize> = match string_values(&text) {
        Some(values) => values.iter().map(|value| value.map_or(0, str::len)).collect(),
        // Not text: the plan refuses such a column before reading; nothing to measure here.
        None => return Ok(vec![batch.clone()]),
    };
    if lengths.iter().sum::<usize>() <= budget {
        return Ok(vec![batch.clone()]);
    }
    let mut pieces = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (row, length) in lengths.iter().enumerate() {
        if row > start && bytes + length > budget {
            pieces.push(batch.slice(start, row - start));
            (start, bytes) = (row, 0);
        }
        bytes += length;
    }
    pieces.push(batch.slice(start, batch.num_rows() - start));
    Ok(pieces)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Array, StringArray};

    use super::*;

    #[test]
    fn a_chunk_is_cut_where_its_text_passes_the_budget() {
        let texts = ["aaaa", "bb", "cccccccccc", "d", "e"];
        let batch =
            RecordBatch::try_from_iter([("text", Arc::new(StringArray::from(texts.to_vec())) as Arc<dyn Array>)])
                .unwrap();
        let rows = |pieces: Vec<RecordBatch>| pieces.iter().map(RecordBatch::num_rows).collect::<Vec<_>>();
        assert_eq!(rows(split_by_text_bytes(&batch, "text", 100).unwrap()), [5]);
        // 6 bytes fit; the 10-byte text goes alone; then 2 bytes.
        assert_eq!(rows(split_by_text_bytes(&batch, "text", 6).unwrap()), [2, 1, 2]);
        assert_eq!(rows(split_by_text_bytes(&batch, "text", 1).unwrap()), [1, 1, 1, 1, 1]);
    }
}

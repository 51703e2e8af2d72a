//! The read stage: record batches from every input file in turn, one window at a time.

use std::path::PathBuf;
use std::sync::mpsc::SyncSender;
use std::time::Duration;

use anyhow::Context;
use batch_io::source::BatchStream;

use super::{Window, pass_on, timed};

/// `window`: rows per record batch, to name the rows of one that cannot be decoded.
pub fn run(
    files: &[PathBuf],
    streams: Vec<BatchStream>,
    window: usize,
    out: &SyncSender<Window>,
) -> anyhow::Result<Duration> {
    let mut busy = Duration::ZERO;
    for (file, stream) in streams.into_iter().enumerate() {
        let mut first_row = 0;
        let mut batches = stream.batches;
        while let Some(batch) = timed(&mut busy, || batches.next()) {
            let file_name = || files.get(file).map(|f| f.display().to_string()).unwrap_or_default();
            let batch = batch
                .with_context(|| format!("cannot read {} rows {first_row}..{}", file_name(), first_row + window))?;
            let rows = batch.num_rows();
            if !pass_on(out, Window { file, first_row, batch }) {
                return Ok(busy);
            }
            first_row += rows;
        }
    }
    Ok(busy)
}

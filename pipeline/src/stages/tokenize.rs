//! The tokenize stage: each chunk's texts tokenized on all cores and sorted by the shape
//! they pad to.

use std::sync::mpsc::{Receiver, SyncSender};
use std::time::Duration;

use anyhow::Context;
use batch_io::source::{string_values, text_array};

use super::{Chunk, Line, Tokenized, next, pass_on, timed};

pub fn run(line: &Line<'_>, chunks: Receiver<Chunk>, out: &SyncSender<Tokenized>) -> anyhow::Result<Duration> {
    let mut busy = Duration::ZERO;
    while let Some(chunk) = next(&chunks) {
        let encoded = timed(&mut busy, || {
            let rows = || chunk.describe(line.files);
            let text = chunk.batch.column_by_name(line.text_column).context("text column vanished")?;
            let text = text_array(text).with_context(rows)?;
            let texts = string_values(&text).with_context(|| format!("{}: text column is not a string", rows()))?;
            line.classifier.encode(&texts).with_context(|| format!("tokenization failed on {}", rows()))
        })?;
        if !pass_on(out, Tokenized { chunk, encoded }) {
            break;
        }
    }
    Ok(busy)
}

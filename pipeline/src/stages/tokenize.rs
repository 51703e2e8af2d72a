//! The tokenize stage: each window's texts tokenized on all cores and sorted by the shape
//! they pad to.

use std::sync::mpsc::{Receiver, SyncSender};
use std::time::Duration;

use anyhow::Context;
use batch_io::source::{string_values, text_array};

use super::{Line, Tokenized, Window, next, pass_on, timed};

pub fn run(line: &Line<'_>, windows: Receiver<Window>, out: &SyncSender<Tokenized>) -> anyhow::Result<Duration> {
    let mut busy = Duration::ZERO;
    while let Some(window) = next(&windows) {
        let encoded = timed(&mut busy, || {
            let rows = || window.describe(line.files);
            let text = window.batch.column_by_name(line.text_column).context("text column vanished")?;
            let text = text_array(text).with_context(rows)?;
            let texts = string_values(&text).with_context(|| format!("{}: text column is not a string", rows()))?;
            line.classifier.encode(&texts).with_context(|| format!("tokenization failed on {}", rows()))
        })?;
        if !pass_on(out, Tokenized { window, encoded }) {
            break;
        }
    }
    Ok(busy)
}

//! The infer stage: each tokenized chunk in batches on all cores (tract or ONNX Runtime).

use std::sync::mpsc::{Receiver, SyncSender};
use std::time::Duration;

use runtime::classifier::NonFiniteOutput;

use super::{Inferred, Line, Tokenized, next, pass_on, timed};

pub fn run(line: &Line<'_>, chunks: Receiver<Tokenized>, out: &SyncSender<Inferred>) -> anyhow::Result<Duration> {
    let mut busy = Duration::ZERO;
    while let Some(Tokenized { chunk, encoded }) = next(&chunks) {
        line.check_cancelled()?;
        let mut counts = encoded.counts;
        let predictions = timed(&mut busy, || {
            line.classifier.infer(encoded, line.batch_limit).map_err(|error| {
                match error.downcast::<NonFiniteOutput>() {
                    // Rows named in the file, not in the chunk.
                    Ok(bad) => {
                        let file = line.files.get(chunk.file).map(ToString::to_string).unwrap_or_default();
                        anyhow::anyhow!("{file}: {}", bad.message(chunk.first_row))
                    }
                    Err(error) => error.context(format!("inference failed on {}", chunk.describe(line.files))),
                }
            })
        })?;
        counts.abstained = predictions.iter().flatten().filter(|doc| doc.abstains(line.min_confidence)).count();
        if !pass_on(out, Inferred { chunk, predictions, counts }) {
            break;
        }
    }
    Ok(busy)
}

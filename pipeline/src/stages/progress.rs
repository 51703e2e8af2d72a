//! Progress of a run: a bar on a terminal, a log line every ten seconds otherwise.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use batch_io::command_line::logs_are_json;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A bar on a terminal; a log line every ten seconds otherwise.
pub struct Progress {
    bar: Option<ProgressBar>,
    last_log: Instant,
    total: Option<usize>,
}

impl Progress {
    pub fn new(total: Option<usize>) -> Self {
        let bar = (std::io::stderr().is_terminal() && !logs_are_json()).then(|| {
            let bar = ProgressBar::with_draw_target(total.map(|t| t as u64), ProgressDrawTarget::stderr());
            if let Ok(style) =
                ProgressStyle::with_template("[{elapsed_precise}] [{bar:40}] {pos}/{len} docs {per_sec} eta {eta}")
            {
                bar.set_style(style.progress_chars("=> "));
            }
            bar
        });
        Self { bar, last_log: Instant::now(), total }
    }

    /// `rows` more are written, `done` in all.
    pub(super) fn advance(&mut self, rows: usize, done: usize) {
        match &self.bar {
            Some(bar) => bar.inc(rows as u64),
            None if self.last_log.elapsed() >= Duration::from_secs(10) => {
                self.last_log = Instant::now();
                let total = self.total.map(|t| format!("/{t}")).unwrap_or_default();
                tracing::info!(rows_done = done, rows_total = self.total, "{done}{total} rows done");
            }
            None => {}
        }
    }

    pub(super) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

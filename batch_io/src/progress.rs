//! Progress of long work (a run's rows, an epoch's documents): a bar on a terminal; elsewhere
//! (a scheduler's log, JSON logs) a log line every ten seconds, so a log shows the work
//! moving instead of minutes of silence.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::command_line::logs_are_json;

/// How often a log line is written when there is no bar.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// What a [`Progress`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Rows of a run.
    Rows,
    /// Documents of a training epoch.
    Docs,
}

impl Unit {
    fn name(self) -> &'static str {
        match self {
            Unit::Rows => "rows",
            Unit::Docs => "docs",
        }
    }
}

pub struct Progress {
    bar: Option<ProgressBar>,
    /// What is being done (`epoch 3`), before the counts; empty for a run.
    what: String,
    /// What is counted: rows of a run, or documents of an epoch.
    unit: Unit,
    done: usize,
    total: Option<usize>,
    last_log: Instant,
    log_every: Duration,
}

impl Progress {
    /// Progress over `total` (when known) items counted in `unit`.
    pub fn new(what: impl Into<String>, unit: Unit, total: Option<usize>) -> Self {
        let what = what.into();
        let bar = (std::io::stderr().is_terminal() && !logs_are_json()).then(|| {
            let bar = ProgressBar::with_draw_target(total.map(|t| t as u64), ProgressDrawTarget::stderr());
            let template = format!(
                "{{prefix}}[{{elapsed_precise}}] [{{bar:40}}] {{pos}}/{{len}} {} {{per_sec}} eta {{eta}}",
                unit.name()
            );
            if let Ok(style) = ProgressStyle::with_template(&template) {
                bar.set_style(style.progress_chars("=> "));
            }
            if !what.is_empty() {
                bar.set_prefix(format!("{what} "));
            }
            bar
        });
        Self { bar, what, unit, done: 0, total, last_log: Instant::now(), log_every: LOG_EVERY }
    }

    /// `count` more are done. Without a bar, says so in a log line when ten seconds have
    /// passed since the last; returns whether it did.
    pub fn advance(&mut self, count: usize) -> bool {
        self.done += count;
        if let Some(bar) = &self.bar {
            bar.inc(count as u64);
            return false;
        }
        if self.last_log.elapsed() < self.log_every {
            return false;
        }
        self.last_log = Instant::now();
        let (done, total) = (self.done, self.total);
        let of = total.map(|t| format!("/{t}")).unwrap_or_default();
        let what = if self.what.is_empty() { String::new() } else { format!("{}: ", self.what) };
        // The fields a log shipper reads (docs/scale-out.md, "Logs for machines").
        match self.unit {
            Unit::Rows => tracing::info!(rows_done = done, rows_total = total, "{what}{done}{of} rows done"),
            Unit::Docs => tracing::info!(docs_done = done, docs_total = total, "{what}{done}{of} docs done"),
        }
        true
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Off a terminal (as under `cargo test`), a line is logged once the interval has passed,
    /// and not before.
    #[test]
    fn without_a_terminal_a_line_is_logged_once_per_interval() {
        let mut progress = Progress::new("epoch 1", Unit::Docs, Some(100));
        if progress.bar.is_some() {
            eprintln!("SKIPPED: stderr is a terminal here, so progress is a bar");
            return;
        }
        progress.log_every = Duration::from_millis(50);
        assert!(!progress.advance(10), "logged before the interval passed");
        std::thread::sleep(Duration::from_millis(60));
        assert!(progress.advance(10), "no line after the interval");
        assert!(!progress.advance(10), "a second line within the interval");
        assert_eq!(progress.done, 30);
    }
}

//! What a run did, as `pipeline run` prints it, logs it and writes it with `--metrics-json`.

use serde::Serialize;

use runtime::classifier::TextCounts;

use crate::stages::StageSeconds;
use crate::units::Shard;

/// What a dataset run did with its parts.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PartsSummary {
    pub shard: Shard,
    /// Parts written by this process.
    pub written: usize,
    /// Parts of this shard already committed by an earlier attempt, skipped.
    pub skipped: usize,
    /// Parts of the whole run (all shards).
    pub total: usize,
    /// Whether every part is now committed and `_SUCCESS` written (a Delta table: this
    /// shard's parts are in the table).
    pub complete: bool,
    /// A Delta table output: what this shard's commit added.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table: Option<TableCommit>,
}

/// What a shard added to a Delta table.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct TableCommit {
    /// The table version of the commit; `None` where the table held every part already.
    pub version: Option<u64>,
    /// Parts added by the commit.
    pub parts: usize,
    /// The commit's wall time: reading the log, checking the units' `txn`s, writing the entry.
    pub seconds: f64,
}

/// The end-of-run summary (also written as JSON with `--metrics-json`).
#[derive(Debug, Clone, Serialize)]
pub struct JobSummary {
    pub output: String,
    pub files: usize,
    pub rows: usize,
    /// Predicted, null, empty and truncated texts, and tokens (flat in the JSON).
    #[serde(flatten)]
    pub counts: TextCounts,
    /// When the run started and finished (RFC 3339, UTC).
    pub started_at: String,
    pub finished_at: String,
    pub seconds: f64,
    pub docs_per_second: f64,
    pub tokens_per_second: f64,
    pub backend: String,
    pub model_variant: String,
    /// Each stage's busy time; see [`StageSeconds`].
    pub stage_seconds: StageSeconds,
    /// Time inside the model's runs, summed over the runs that overlapped (one per core):
    /// `rows / (session_seconds / cores)` is the session-only speed this run is measured
    /// against.
    pub session_seconds: f64,
    /// Dataset outputs only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parts: Option<PartsSummary>,
    /// The output's columns, for lineage.
    #[serde(skip)]
    pub output_columns: Vec<String>,
    /// The input columns copied to the output, for lineage.
    #[serde(skip)]
    pub passed_through: Vec<String>,
}

impl JobSummary {
    /// Each stage's busy time against the run's wall time, the busiest marked as the
    /// bottleneck, and the model's own share (`--profile`).
    pub fn profile(&self) -> String {
        let stages = &self.stage_seconds;
        let rows = [
            ("read", stages.read),
            ("tokenize", stages.tokenize),
            ("infer", stages.infer),
            ("assemble", stages.assemble),
            ("write", stages.write),
        ];
        let busiest = rows.iter().map(|(_, busy)| *busy).fold(0.0, f64::max);
        let wall = self.seconds.max(f64::EPSILON);
        let mut text = format!(
            "profile: {:.2} s wall, {} rows
  stage      busy s   busy share of wall
",
            self.seconds, self.rows
        );
        for (stage, busy) in rows {
            let mark = if busy == busiest && busy > 0.0 { "  <- the bottleneck" } else { "" };
            text.push_str(&format!(
                "  {stage:<9} {busy:>7.2}   {:>5.1} %{mark}
",
                100.0 * busy / wall
            ));
        }
        text.push_str("  (assemble: the mean over its threads that had work)\n");
        text.push_str(&format!(
            "  inside the model: {:.2} s, summed over the runs that overlapped (one per core)\n",
            self.session_seconds
        ));
        text
    }

    /// The run's figures as one log event (a JSON object with `--log-format json`).
    pub fn log(&self) {
        let stages = &self.stage_seconds;
        tracing::info!(
            rows = self.rows,
            predicted = self.counts.predicted,
            abstained = self.counts.abstained,
            null_texts = self.counts.null_texts,
            empty_texts = self.counts.empty_texts,
            windowed = self.counts.windowed,
            truncated = self.counts.truncated,
            seconds = self.seconds,
            docs_per_second = self.docs_per_second,
            read_busy_seconds = stages.read,
            tokenize_busy_seconds = stages.tokenize,
            infer_busy_seconds = stages.infer,
            assemble_busy_seconds = stages.assemble,
            write_busy_seconds = stages.write,
            parts_written = self.parts.map(|p| p.written),
            parts_skipped = self.parts.map(|p| p.skipped),
            complete = self.parts.map(|p| p.complete),
            output = %self.output,
            "run finished"
        );
    }
}

impl std::fmt::Display for JobSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} rows ({} predicted{}, {} null, {} empty, {} in windows, {} truncated) in {:.1} s: {:.0} docs/s, {:.0} tokens/s [{}] -> {}",
            self.rows,
            self.counts.predicted,
            match self.counts.abstained {
                0 => String::new(),
                abstained => format!(" of which {abstained} abstained"),
            },
            self.counts.null_texts,
            self.counts.empty_texts,
            self.counts.windowed,
            self.counts.truncated,
            self.seconds,
            self.docs_per_second,
            self.tokens_per_second,
            self.backend,
            self.output
        )?;
        if let Some(parts) = &self.parts {
            let shard = if parts.shard == Shard::WHOLE { String::new() } else { format!("shard {}: ", parts.shard) };
            let state = match parts.table {
                Some(TableCommit { version: Some(version), parts, .. }) => {
                    format!("{parts} part(s) committed to the Delta table at version {version}")
                }
                Some(TableCommit { version: None, .. }) => "the Delta table held every part already".to_owned(),
                None if parts.complete => "complete, _SUCCESS written".to_owned(),
                None => "other parts still to come".to_owned(),
            };
            let written = if parts.written == 1 {
                "1 part written".to_owned()
            } else {
                format!("{} parts written", parts.written)
            };
            // A table's skipped parts may be in the table, or staged by an attempt killed
            // before its commit (and committed now).
            let skipped = if parts.table.is_some() { "already staged or in the table" } else { "already committed" };
            write!(f, " ({shard}{written}, {} {skipped}, of {} in all; {state})", parts.skipped, parts.total)?;
        }
        Ok(())
    }
}

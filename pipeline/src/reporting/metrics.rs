//! The run's figures in Prometheus's text format, for a Pushgateway (`--metrics-push`) and
//! for node_exporter's textfile collector (`--metrics-textfile`).
//!
//! Batch-job conventions (the Pushgateway's README and Prometheus's "When to use the
//! Pushgateway"): one group per job and shard, never per pod, so a rescheduled pod replaces
//! its shard's series instead of leaving its own behind; every figure is a gauge about the
//! last run; no sample carries a timestamp. A success PUTs the whole group, with the
//! last-success time; a failure POSTs only the exit code and the failure time, so the last
//! success stays for the alert that asks how long ago it was.

use std::borrow::Cow;
use std::path::Path;
use std::sync::atomic::AtomicU64;

use anyhow::Context;
use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use batch_io::atomic_file::{temp_beside, write_failed};

use crate::job::summary::JobSummary;
use crate::units::Shard;

const PREFIX: &str = "pipeline_run";
/// The gauge a failure keeps from the last success (the textfile has no POST to keep it).
const LAST_SUCCESS: &str = "pipeline_run_last_success_timestamp_seconds";

/// How a run ended, as the metrics say it.
pub enum Outcome<'a> {
    Succeeded(&'a JobSummary),
    /// The exit code the process ends with.
    Failed(u8),
}

/// The figures of one run of one shard.
pub struct RunMetrics {
    job: String,
    shard: Shard,
    body: String,
    succeeded: bool,
}

type FloatGauge = Gauge<f64, AtomicU64>;

impl RunMetrics {
    /// `ended`: when the run ended ([`seconds_now`]), one time for the Pushgateway and the
    /// textfile so that both say the same. `previous_success`: the last success's time,
    /// which a failure keeps (textfile only).
    pub fn new(
        job: &str,
        shard: Shard,
        outcome: &Outcome<'_>,
        ended: f64,
        previous_success: Option<f64>,
    ) -> anyhow::Result<Self> {
        let labels = [("job", job.to_owned()), ("shard", shard.index.to_string())]
            .into_iter()
            .map(|(name, value)| (Cow::Borrowed(name), Cow::Owned(value)));
        let mut registry = Registry::with_prefix_and_labels(PREFIX, labels);
        let mut gauge = |name: &str, help: &str, unit: Option<Unit>, value: f64| {
            let metric = FloatGauge::default();
            metric.set(value);
            match unit {
                Some(unit) => registry.register_with_unit(name, help, unit, metric),
                None => registry.register(name, help, metric),
            }
        };
        let succeeded = match outcome {
            Outcome::Succeeded(summary) => {
                gauge("exit_code", "Exit code of the last run (0: success)", None, 0.0);
                gauge("last_success_timestamp", "When the last successful run ended", Some(Unit::Seconds), ended);
                gauge("shard_count", "Shards of the run", None, shard.count as f64);
                gauge("rows", "Rows the last run read", None, summary.rows as f64);
                gauge("predicted_rows", "Rows the last run predicted", None, summary.counts.predicted as f64);
                gauge(
                    "null_text_rows",
                    "Rows with a null text (no prediction)",
                    None,
                    summary.counts.null_texts as f64,
                );
                gauge("empty_text_rows", "Rows with no token (no prediction)", None, summary.counts.empty_texts as f64);
                gauge("truncated_rows", "Rows of which tokens were left out", None, summary.counts.truncated as f64);
                gauge("windowed_rows", "Rows classified in windows", None, summary.counts.windowed as f64);
                gauge("duration", "Wall time of the last run", Some(Unit::Seconds), summary.seconds);
                gauge("docs_per_second", "Rows per second of the last run", None, summary.docs_per_second);
                if let Some(parts) = &summary.parts {
                    gauge("parts_written", "Parts the last run wrote", None, parts.written as f64);
                    gauge("parts_skipped", "Parts an earlier attempt had committed", None, parts.skipped as f64);
                }
                let stages = Family::<Vec<(String, String)>, FloatGauge>::default();
                let busy = &summary.stage_seconds;
                for (stage, seconds) in [
                    ("read", busy.read),
                    ("tokenize", busy.tokenize),
                    ("infer", busy.infer),
                    ("assemble", busy.assemble),
                    ("write", busy.write),
                ] {
                    stages.get_or_create(&vec![("stage".to_owned(), stage.to_owned())]).set(seconds);
                }
                registry.register_with_unit(
                    "stage_busy",
                    "Busy time of each stage of the last run",
                    Unit::Seconds,
                    stages,
                );
                true
            }
            Outcome::Failed(code) => {
                gauge("exit_code", "Exit code of the last run (0: success)", None, f64::from(*code));
                gauge("last_failure_timestamp", "When the last failed run ended", Some(Unit::Seconds), ended);
                if let Some(time) = previous_success {
                    gauge("last_success_timestamp", "When the last successful run ended", Some(Unit::Seconds), time);
                }
                false
            }
        };
        let mut body = String::new();
        prometheus_text::encode(&mut body, &registry).context("cannot encode the run's metrics")?;
        Ok(Self { job: job.to_owned(), shard, body, succeeded })
    }

    /// The text-format body.
    pub fn text(&self) -> &str {
        &self.body
    }

    /// Sends the figures to the Pushgateway at `base`: PUT (the group replaced) on success,
    /// POST (only these series replaced) on failure.
    pub async fn push(&self, base: &str, deadline: std::time::Duration) -> anyhow::Result<()> {
        let url = format!("{}/metrics/job/{}/shard/{}", base.trim_end_matches('/'), self.job, self.shard.index);
        let client = super::http::http_client(deadline)?;
        let request = if self.succeeded { client.put(&url) } else { client.post(&url) };
        let response = request
            .header(reqwest::header::CONTENT_TYPE, prometheus_text::CONTENT_TYPE)
            .body(self.body.clone())
            .send()
            .await
            .map_err(|e| {
                anyhow::anyhow!("cannot reach the Pushgateway at {}: {}", super::http::redacted(&url), e.without_url())
            })?;
        super::http::expect_success(response, &format!("the Pushgateway at {}", super::http::redacted(&url))).await
    }

    /// Writes the figures to `path` whole (a temporary renamed into place), as the textfile
    /// collector asks.
    pub fn write_textfile(&self, path: &Path) -> anyhow::Result<()> {
        let mut file = temp_beside(path)?;
        std::io::Write::write_all(&mut file, self.body.as_bytes()).map_err(|e| write_failed(path, &e))?;
        file.publish(path)
    }
}

/// Now, in seconds since the Unix epoch to the millisecond, as the timestamps are written.
pub fn seconds_now() -> f64 {
    chrono::Utc::now().timestamp_millis() as f64 / 1000.0
}

/// The last success's time in a textfile written before, if there is one.
pub fn last_success_in(path: &Path) -> Option<f64> {
    // Only a regular file: reading a pipe would wait for a writer.
    if !std::fs::metadata(path).ok()?.is_file() {
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .filter(|line| line.starts_with(LAST_SUCCESS))
        .find_map(|line| line.rsplit(' ').next().and_then(|value| value.parse().ok()))
}

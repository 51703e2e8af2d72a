//! One run of `pipeline run` as its callers ask for it: every option with its default, the
//! checks on them, and how a run records them (the output's schema metadata; a dataset's
//! fingerprint is built from the same fields in `plan`). The command line and the Python
//! module both build a [`RunSpec`]: a new option is a field here plus its spelling in each.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use runtime::inference::{BackendKind, BackendOptions};
use runtime::long_documents::LongDocuments;
use runtime::output::AttentionEncoding;

use crate::units::Shard;

/// The defaults both front ends show and apply.
pub mod defaults {
    pub const OUTPUT: &str = "predictions.parquet";
    pub const TEXT_COLUMN: &str = "text";
    use runtime::inference::Device;

    /// Rows read, length-sorted and written together where the caller gives none: eight of
    /// the device's default batches, and at least 2,048 (the GPU measurement ran 8,192).
    pub fn chunk_rows(device: Device) -> usize {
        (device.default_batch_size() * 8).max(2048)
    }
    pub const ROWS_PER_PART: usize = 2500;
    /// The Pushgateway's `job` and OpenLineage's job name.
    pub const JOB_NAME: &str = "pipeline_run";
    /// OpenLineage's namespace when neither `--openlineage-namespace` nor
    /// `OPENLINEAGE_NAMESPACE` gives one (the OpenLineage client's own default).
    pub const OPENLINEAGE_NAMESPACE: &str = "default";
}

/// What a dataset output is: Parquet parts with `_SUCCESS`, or a Delta Lake table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputFormat {
    #[default]
    Parquet,
    Delta,
}

impl batch_io::choice::Choice for OutputFormat {
    const CHOICES: &'static [(Self, &'static str, &'static str)] = &[
        (OutputFormat::Parquet, "parquet", "one Parquet file, or a directory of parts with _SUCCESS"),
        (
            OutputFormat::Delta,
            "delta",
            "a Delta Lake table (local or object storage): each shard commits its parts once; files already committed are skipped",
        ),
    ];
}

/// The options of where the output goes and how the run reports itself (`output_format` and
/// [`Reporting`]'s fields), as the Python module and, with `-` for `_`, the command line name
/// them: one list for both front ends.
pub const OUTPUT_AND_REPORTING_OPTIONS: [&str; 6] =
    ["output_format", "job_name", "metrics_push", "metrics_textfile", "openlineage_url", "openlineage_namespace"];

/// Where a run reports itself besides its output: none of these ever fails the run.
#[derive(Debug, Clone, Default)]
pub struct Reporting {
    /// The name the run reports under: the Pushgateway's `job` label, OpenLineage's job name.
    pub job_name: String,
    /// A Prometheus Pushgateway's base URL: the figures are PUT there per job and shard.
    pub metrics_push: Option<String>,
    /// A file for node_exporter's textfile collector (`*.prom`).
    pub metrics_textfile: Option<PathBuf>,
    /// An OpenLineage endpoint's base URL (`/api/v1/lineage` is appended).
    pub openlineage_url: Option<String>,
    pub openlineage_namespace: String,
}

impl Reporting {
    /// Sets the OpenLineage endpoint and namespace as `OPENLINEAGE_URL` and
    /// `OPENLINEAGE_NAMESPACE` give them: empty (a template with nothing to fill in) is unset,
    /// leaving no endpoint and the default namespace.
    pub fn set_openlineage(&mut self, url: Option<String>, namespace: Option<String>) {
        let given = |value: Option<String>| value.filter(|v| !v.trim().is_empty());
        self.openlineage_url = given(url);
        self.openlineage_namespace = given(namespace).unwrap_or_else(|| defaults::OPENLINEAGE_NAMESPACE.to_owned());
    }
}

#[derive(Debug, Clone)]
pub struct RunSpec {
    pub input: String,
    /// A local path or a storage URL; see [`super::is_dataset`].
    pub output: String,
    pub text_column: String,
    /// Input columns copied to the output; `None` keeps them all.
    pub pass_through: Option<Vec<String>>,
    pub backend: BackendOptions,
    /// Documents per inference batch; `None`: the device's default ([`Self::batch_size`]).
    pub batch_size: Option<usize>,
    /// Padded tokens per inference batch at most (documents × the longest), besides
    /// `batch_size`: keeps batches of long documents from growing memory and latency.
    pub max_batch_tokens: Option<usize>,
    /// Rows in a chunk: the rows read, tokenized, length-sorted and written together
    /// (`--chunk-rows`), which bounds memory; `None`: the device's default ([`Self::chunk_rows`]).
    pub chunk_rows: Option<usize>,
    pub max_tokens: Option<usize>,
    /// What happens to documents past the token limit.
    pub long_documents: LongDocuments,
    /// Which explanation columns the output keeps, and how.
    pub attention: AttentionEncoding,
    /// Output columns left out (`--drop`), by name.
    pub drop: Vec<String>,
    pub embedding: bool,
    /// Below this confidence a row abstains: a null `prediction` and `abstained` true.
    pub min_confidence: Option<f32>,
    /// Also write the run summary as JSON here.
    pub metrics_json: Option<PathBuf>,
    /// Test hook: panic after the first chunk is written, to exercise the internal-error
    /// path end to end (exit code 70, the unfinished output removed).
    pub panic_after_first_chunk: bool,
    /// Test hook: a Delta output's process kills itself with SIGKILL once its parts are
    /// written, before it commits them (a pod killed at the worst moment).
    pub kill_before_commit: bool,
    /// Bench hook: a stand-in for the model that costs nothing
    /// ([`runtime::inference::NullBackend`]), to measure the pipeline's own ceiling.
    pub null_model: bool,
    /// Set from another thread to stop the run (Ctrl-C in the Python module): no chunk is
    /// read after it, and the run ends with [`super::Interrupted`], publishing nothing.
    pub cancel: Option<Arc<AtomicBool>>,
    /// Dataset outputs only: the units this process takes.
    pub shard: Shard,
    /// Dataset outputs only: the most rows in one part.
    pub rows_per_part: usize,
    /// Dataset outputs only: the columns whose values name the parts' directories
    /// (`--partition-by`, see [`crate::sinks::partitions`]).
    pub partition_by: Vec<String>,
    /// Dataset outputs only: delete another run's parts instead of refusing them.
    pub overwrite: bool,
    pub output_format: OutputFormat,
    /// Metrics and lineage.
    pub reporting: Reporting,
}

impl RunSpec {
    /// Whether the output's files hold the text column (passed through, and not a partition
    /// directory's name), so that tokens can be written as their places in it.
    pub fn files_hold_the_text(&self) -> bool {
        self.pass_through.as_ref().is_none_or(|columns| columns.contains(&self.text_column))
            && !self.partition_by.contains(&self.text_column)
    }

    /// A run of `input` with every other option at its default.
    pub fn new(input: String) -> Self {
        Self {
            input,
            output: defaults::OUTPUT.to_owned(),
            text_column: defaults::TEXT_COLUMN.to_owned(),
            pass_through: None,
            backend: BackendOptions { kind: BackendKind::Auto, ..BackendOptions::default() },
            batch_size: None,
            max_batch_tokens: None,
            chunk_rows: None,
            max_tokens: None,
            long_documents: LongDocuments::default(),
            attention: AttentionEncoding::default(),
            drop: Vec::new(),
            embedding: false,
            min_confidence: None,
            metrics_json: None,
            panic_after_first_chunk: false,
            kill_before_commit: false,
            null_model: false,
            cancel: None,
            shard: Shard::WHOLE,
            rows_per_part: defaults::ROWS_PER_PART,
            partition_by: Vec::new(),
            overwrite: false,
            output_format: OutputFormat::Parquet,
            reporting: Reporting {
                job_name: defaults::JOB_NAME.to_owned(),
                openlineage_namespace: defaults::OPENLINEAGE_NAMESPACE.to_owned(),
                ..Reporting::default()
            },
        }
    }

    /// Documents per inference batch: as given, or the device's default.
    pub fn batch_size(&self) -> usize {
        self.batch_size.unwrap_or_else(|| self.backend.device.default_batch_size())
    }

    /// Rows per chunk: as given, or the device's default.
    pub fn chunk_rows(&self) -> usize {
        self.chunk_rows.unwrap_or_else(|| defaults::chunk_rows(self.backend.device))
    }

    /// Refuses a count of 0, naming the flag (the Python module says it as its argument).
    pub fn check(&self) -> anyhow::Result<()> {
        let counts = [
            ("--batch-size", self.batch_size),
            ("--max-batch-tokens", self.max_batch_tokens),
            ("--chunk-rows", self.chunk_rows),
            ("--max-tokens", self.max_tokens),
            ("--rows-per-part", Some(self.rows_per_part)),
        ];
        for (flag, count) in counts {
            anyhow::ensure!(count != Some(0), "{flag} must be at least 1");
        }
        if let Some(p) = self.min_confidence {
            anyhow::ensure!(
                (0.0..=1.0).contains(&p),
                "--min-confidence {p}: give a probability between 0 and 1 (rows whose top probability is below it get \
                 no prediction)"
            );
        }
        anyhow::ensure!(
            self.output != "-",
            "--output -: pipeline run writes Parquet files (or a dataset, or a table), not a stream; give a path, and \
             read it with `pipeline sql` to print rows"
        );
        if self.output_format == OutputFormat::Delta {
            anyhow::ensure!(
                !self.output.to_ascii_lowercase().ends_with(".parquet"),
                "--output-format delta writes a table, which is a directory: give --output a path without .parquet"
            );
            anyhow::ensure!(
                self.partition_by.is_empty(),
                "--partition-by writes Hive-style directories of a Parquet dataset; a Delta table keeps its own \
                 partitioning, which this version does not write: leave --partition-by out, or write a dataset"
            );
            anyhow::ensure!(
                !self.overwrite,
                "--overwrite does not apply to a Delta table: files already committed are skipped, new ones appended; \
                 to start again, write to a new table"
            );
        }
        anyhow::ensure!(
            !self.reporting.openlineage_namespace.trim().is_empty(),
            "--openlineage-namespace (or OPENLINEAGE_NAMESPACE) must not be empty; leave it out for `{}`",
            defaults::OPENLINEAGE_NAMESPACE
        );
        let job = &self.reporting.job_name;
        anyhow::ensure!(
            !job.trim().is_empty() && !job.contains(['/', '%', '?', '#']) && !job.chars().any(char::is_whitespace),
            "--job-name {job:?}: give a name without spaces, '/', '%', '?' or '#' (it is a Pushgateway URL segment)"
        );
        for (flag, url) in
            [("--metrics-push", &self.reporting.metrics_push), ("--openlineage-url", &self.reporting.openlineage_url)]
        {
            if let Some(url) = url {
                // Messages quote it without its credentials.
                let (parsed, url) = (url::Url::parse(url), batch_io::redact::redact_urls(url));
                let parsed = parsed.map_err(|e| anyhow::anyhow!("{flag} {url} is not a URL ({e})"))?;
                anyhow::ensure!(
                    matches!(parsed.scheme(), "http" | "https"),
                    "{flag} {url} is not an http:// or https:// URL"
                );
                anyhow::ensure!(
                    parsed.query().is_none() && parsed.fragment().is_none(),
                    "{flag} {url}: give the service's base URL, without ?query or #fragment (paths are appended to it)"
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use runtime::inference::Device;

    use super::*;

    #[test]
    fn batch_and_chunk_sizes_default_to_the_devices_and_given_ones_win() {
        let mut spec = RunSpec::new("in.parquet".to_owned());
        assert_eq!((spec.batch_size(), spec.chunk_rows()), (64, 2048));
        spec.backend.device = Device::Cuda;
        assert_eq!((spec.batch_size(), spec.chunk_rows()), (1024, 8192));
        spec.batch_size = Some(256);
        spec.chunk_rows = Some(1000);
        assert_eq!((spec.batch_size(), spec.chunk_rows()), (256, 1000));
        spec.batch_size = Some(0);
        assert!(spec.check().unwrap_err().to_string().contains("--batch-size must be at least 1"));
    }
}

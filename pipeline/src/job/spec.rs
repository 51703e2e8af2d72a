//! One run of `pipeline run` as its callers ask for it: the [`RunSpec`], the table of its
//! options ([`RUN_OPTIONS`], declared once below: see [`super::options`]), and the checks on
//! them together. The command line and the Python module both build a [`RunSpec`] through
//! [`RunSpec::set`]: a new option is a field here and a row of the table.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use batch_io::choice::Choice;
use runtime::inference::{BackendKind, BackendOptions, Device};
use runtime::long_documents::{Aggregate, LongDocuments, Mode};
use runtime::output::AttentionEncoding;

use super::options::{InvalidOption, OptionValue, RunOption, choice_option_types, run_options};
use crate::units::Shard;

/// The defaults that are not an option's (those are in the table), or that code needs as values.
pub mod defaults {
    pub const OUTPUT: &str = "predictions.parquet";
    use runtime::inference::Device;

    /// Rows read, length-sorted and written together where the caller gives none: eight of
    /// the device's default batches, and at least 2,048 (the GPU measurement ran 8,192).
    pub fn chunk_rows(device: Device) -> usize {
        (device.default_batch_size() * 8).max(2048)
    }
    /// OpenLineage's namespace when neither `--openlineage-namespace` nor
    /// `OPENLINEAGE_NAMESPACE` gives one (the OpenLineage client's own default).
    pub const OPENLINEAGE_NAMESPACE: &str = "default";
}

run_options! {
    /// Column holding the document text.
    text_column: String, Classify, changes_results, default "text"
        => |spec, value| spec.text_column = value;
    /// Input columns to copy to the output, comma-separated (default: all).
    pass_through: Vec<String>, Run, changes_results
        => |spec, value| spec.pass_through = Some(value);
    /// Inference backend: `auto` is ONNX Runtime where its library is found (see
    /// --ort-library), else tract.
    backend: BackendKind, Classify, same_results, default "auto"
        => |spec, value| spec.backend.kind = value;
    /// Where the model runs.
    device: Device, Classify, same_results, default "cpu"
        => |spec, value| spec.backend.device = value;
    /// On CUDA, allow TensorFloat-32 matrix products: faster, but probabilities then differ
    /// from the CPU's (by up to about 5e-4 on the default model). Off by default.
    tf32: bool, Classify, same_results
        => |spec, value| spec.backend.tf32 = value;
    /// ONNX Runtime shared library: a file, a directory holding it, or `python` for the
    /// onnxruntime package of the python3 on PATH (default: $ORT_DYLIB_PATH, then onnxruntime/
    /// in the target directory that holds the binary).
    ort_library: PathBuf, Classify, same_results
        => |spec, value| spec.backend.ort_library = Some(value);
    /// Documents per inference batch (default: 64 on a CPU, 1024 with --device cuda).
    batch_size: usize, Classify, same_results
        => |spec, value| spec.batch_size = Some(value);
    /// Also cap each inference batch at this many padded tokens (documents × the longest
    /// document); a document longer than that runs alone. Default: no cap.
    max_batch_tokens: usize, Run, same_results
        => |spec, value| spec.max_batch_tokens = Some(value);
    /// Rows read, length-sorted and written together (a chunk), which bounds memory (default:
    /// 2048 on a CPU, 8192 with --device cuda).
    chunk_rows: usize, Run, same_results
        => |spec, value| spec.chunk_rows = Some(value);
    /// Token limit per document (default: the model's).
    max_tokens: usize, Classify, changes_results
        => |spec, value| spec.max_tokens = Some(value);
    /// What happens to a document longer than the token limit. The `truncated` column says
    /// which documents lost tokens.
    long_documents: Mode, Classify, changes_results, default "windows"
        => |spec, value| spec.long_documents.mode = value;
    /// With long documents read in windows: the most tokens from one window's start to the
    /// next (default: the token limit, windows that do not overlap). The windows are as many
    /// as this stride needs, each only as wide as their count needs (at most the limit), so
    /// neighbours overlap by at least the limit less the stride. Past 1,000 windows the
    /// stride widens, up to the limit.
    long_document_stride: usize, Classify, changes_results, value_name "TOKENS"
        => |spec, value| spec.long_documents.stride = Some(value);
    /// With long documents read in windows: how the windows' probabilities combine.
    long_document_aggregate: Aggregate, Classify, changes_results, default "mean"
        => |spec, value| spec.long_documents.aggregate = value;
    /// How much attention and explanation to write: the hops summed per token as bytes
    /// relative to the heaviest and the contributions as signed bytes (compact); that, every
    /// hop's own weights as bytes and each hop's entropy (hops); every hop, their summary
    /// and the contributions as floats (full); only the summary and the contributions as
    /// floats (summary); each hop's and the summary's N heaviest weights with the rest 0
    /// (top-k:N); or none of them. Every hop's weights are most of an output's size.
    attention: AttentionEncoding, Classify, changes_results, default "compact",
        value_name "compact|hops|full|summary|top-k:N|none"
        => |spec, value| spec.attention = value;
    /// Output columns to leave out, comma-separated (e.g. `contribution`); a column of
    /// bytes takes its scale with it. Input columns are chosen with --pass-through.
    drop: Vec<String>, Classify, changes_results, value_name "COLUMN,..."
        => |spec, value| spec.drop = value;
    /// Also write the sentence embedding fed to the classifier.
    embedding: bool, Classify, changes_results
        => |spec, value| spec.embedding = value;
    /// Abstain below this probability: a row whose most probable class is less likely than P
    /// gets a null `prediction` and `abstained` = true, and keeps its probabilities and
    /// explanations. Pick P from `pipeline eval`'s accuracy at each coverage.
    min_confidence: f32, Classify, changes_results, value_name "P"
        => |spec, value| spec.min_confidence = Some(value);
    /// Dataset outputs: take only shard I of N (units whose number is I modulo N).
    shard: Shard, Run, same_results, value_name "I/N"
        => |spec, value| spec.shard = value;
    /// Dataset outputs: the most rows in one part (parts never cross a row group).
    rows_per_part: usize, Run, changes_results, default "2500"
        => |spec, value| spec.rows_per_part = value;
    /// Dataset outputs: write each part's rows into Hive-style directories by these columns'
    /// values (`prediction=pos/part-00000.parquet`), as DuckDB, Polars, Spark and `pipeline
    /// sql` read them; the columns leave the files. Any output or passed-through column of
    /// text, whole numbers or true/false.
    partition_by: Vec<String>, Run, changes_results, value_name "COLUMN,..."
        => |spec, value| spec.partition_by = value;
    /// Dataset outputs: delete another run's parts (and its _SUCCESS) instead of refusing.
    overwrite: bool, Run, same_results
        => |spec, value| spec.overwrite = value;
    /// `delta`: the output is a Delta Lake table (a directory or a storage prefix, created if
    /// new). Each shard commits its parts to the table once (a Delta `txn` per input unit);
    /// every run is incremental: input files already in the table are skipped, new ones
    /// classified and appended.
    output_format: OutputFormat, OutputAndReporting, same_results, default "parquet"
        => |spec, value| spec.output_format = value;
    /// Also write the run summary as JSON to this file.
    metrics_json: PathBuf, OutputAndReporting, same_results
        => |spec, value| spec.metrics_json = Some(value);
    /// The name the run reports under: the Pushgateway's `job`, OpenLineage's job name.
    job_name: String, OutputAndReporting, same_results, default "pipeline_run"
        => |spec, value| spec.reporting.job_name = value;
    /// PUT the run's figures to this Prometheus Pushgateway (http://host:9091), grouped by
    /// job name and shard; a failed run POSTs its exit code and keeps the last success. A
    /// Pushgateway that is down or refuses is a warning, never a failed run.
    metrics_push: String, OutputAndReporting, same_results, value_name "URL"
        => |spec, value| spec.reporting.metrics_push = Some(value);
    /// Write the same figures to this file for node_exporter's textfile collector (*.prom),
    /// replaced whole.
    metrics_textfile: PathBuf, OutputAndReporting, same_results, value_name "PATH"
        => |spec, value| spec.reporting.metrics_textfile = Some(value);
    /// Send OpenLineage START and COMPLETE/FAIL events to this endpoint (POST
    /// URL/api/v1/lineage; OPENLINEAGE_ENDPOINT, OPENLINEAGE_API_KEY and the parent run in
    /// OPENLINEAGE_PARENT_ID / OPENLINEAGE_ROOT_PARENT_ID are read as OpenLineage's clients
    /// read them). A lineage service that is down is a warning, never a failed run. Empty:
    /// none.
    openlineage_url: String, OutputAndReporting, same_results, env "OPENLINEAGE_URL", value_name "URL"
        => |spec, value| spec.reporting.openlineage_url = Some(value).filter(|url| !url.trim().is_empty());
    /// The OpenLineage namespace of the job (empty: the default).
    openlineage_namespace: String, OutputAndReporting, same_results, default defaults::OPENLINEAGE_NAMESPACE,
        env "OPENLINEAGE_NAMESPACE"
        => |spec, value| spec.reporting.openlineage_namespace = if value.trim().is_empty() {
            defaults::OPENLINEAGE_NAMESPACE.to_owned()
        } else {
            value
        };
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

/// The option `name` (as Python spells it), if there is one.
pub fn find(name: &str) -> Option<&'static RunOption> {
    RUN_OPTIONS.iter().find(|option| option.name == name)
}

choice_option_types!(OutputFormat);

/// `--long-documents` and its settings as given; [`RunSpec::long_documents`] checks them
/// together.
#[derive(Debug, Clone, Copy, Default)]
pub struct LongDocumentOptions {
    pub mode: Mode,
    pub stride: Option<usize>,
    pub aggregate: Aggregate,
}

#[derive(Debug, Clone)]
pub struct RunSpec {
    pub input: String,
    /// A local path or a storage URL; see `job::is_dataset`.
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
    /// What happens to documents past the token limit: see [`Self::long_documents`].
    pub long_documents: LongDocumentOptions,
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
    /// read after it, and the run ends with `Interrupted`, publishing nothing.
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

    /// A run of `input` with every other option at its default (the table's).
    pub fn new(input: String) -> Self {
        let mut spec = Self {
            input,
            output: defaults::OUTPUT.to_owned(),
            text_column: String::new(),
            pass_through: None,
            backend: BackendOptions::default(),
            batch_size: None,
            max_batch_tokens: None,
            chunk_rows: None,
            max_tokens: None,
            long_documents: LongDocumentOptions::default(),
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
            rows_per_part: 1,
            partition_by: Vec::new(),
            overwrite: false,
            output_format: OutputFormat::Parquet,
            reporting: Reporting::default(),
        };
        for option in RUN_OPTIONS {
            if let Some(default) = option.default {
                let applied = option.parse_text(default).map_err(|problem| problem.to_string());
                let applied = applied.and_then(|value| spec.set(option.name, value).map_err(|e| e.to_string()));
                // Every default is read by a test (`every_default_is_a_value_of_its_option`).
                debug_assert!(applied.is_ok(), "the default of {} does not parse: {applied:?}", option.name);
            }
        }
        spec
    }

    /// What happens to documents past the token limit, with the stride and the aggregate
    /// checked against the mode.
    pub fn long_documents(&self) -> Result<LongDocuments, InvalidOption> {
        let LongDocumentOptions { mode, stride, aggregate } = self.long_documents;
        if mode != Mode::Windows {
            let needs_windows = format!(
                "applies only to long documents read in windows, not {}: leave it out, or give {}",
                mode.name(),
                batch_io::spelling::option_with("long_documents", "windows")
            );
            if let Some(stride) = stride {
                return Err(InvalidOption::new(
                    "long_document_stride",
                    Some(OptionValue::Count(stride)),
                    needs_windows,
                ));
            }
            if aggregate != Aggregate::Mean {
                let given = Some(OptionValue::Text(aggregate.name().to_owned()));
                return Err(InvalidOption::new("long_document_aggregate", given, needs_windows));
            }
        }
        Ok(match mode {
            Mode::Truncate => LongDocuments::Truncate,
            Mode::HeadTail => LongDocuments::HeadTail,
            Mode::Windows => LongDocuments::Windows { stride, aggregate },
        })
    }

    /// Documents per inference batch: as given, or the device's default.
    pub fn batch_size(&self) -> usize {
        self.batch_size.unwrap_or_else(|| self.backend.device.default_batch_size())
    }

    /// Rows per chunk: as given, or the device's default.
    pub fn chunk_rows(&self) -> usize {
        self.chunk_rows.unwrap_or_else(|| defaults::chunk_rows(self.backend.device))
    }

    /// Refuses options that rule each other out, and values that the fields took without
    /// [`Self::set`]'s checks, naming the option.
    pub fn check(&self) -> Result<(), InvalidOption> {
        let counts = [
            ("batch_size", self.batch_size),
            ("max_batch_tokens", self.max_batch_tokens),
            ("chunk_rows", self.chunk_rows),
            ("max_tokens", self.max_tokens),
            ("long_document_stride", self.long_documents.stride),
            ("rows_per_part", Some(self.rows_per_part)),
        ];
        for (option, count) in counts {
            if count == Some(0) {
                return Err(InvalidOption::new(option, Some(OptionValue::Count(0)), "must be at least 1"));
            }
        }
        if let Some(p) = self.min_confidence.filter(|p| !(0.0..=1.0).contains(p)) {
            let problem =
                "give a probability between 0 and 1 (rows whose top probability is below it get no prediction)";
            return Err(InvalidOption::new("min_confidence", Some(OptionValue::Probability(p)), problem));
        }
        self.long_documents()?;
        let output = || Some(OptionValue::Text(self.output.clone()));
        if self.output == "-" {
            let problem = "pipeline run writes Parquet files (or a dataset, or a table), not a stream; give a path, and \
                           read it with `pipeline sql` to print rows";
            return Err(InvalidOption::new("output", output(), problem));
        }
        if self.output_format == OutputFormat::Delta {
            if self.output.to_ascii_lowercase().ends_with(".parquet") {
                let problem = "a Delta table is a directory: give a path without .parquet";
                return Err(InvalidOption::new("output", output(), problem));
            }
            if !self.partition_by.is_empty() {
                let problem = "writes Hive-style directories of a Parquet dataset; a Delta table keeps its own \
                               partitioning, which this version does not write: leave it out, or write a dataset";
                return Err(InvalidOption::new(
                    "partition_by",
                    Some(OptionValue::Names(self.partition_by.clone())),
                    problem,
                ));
            }
            if self.overwrite {
                let problem = "does not apply to a Delta table: files already committed are skipped, new ones \
                               appended; to start again, write to a new table";
                return Err(InvalidOption::new("overwrite", Some(OptionValue::Flag(true)), problem));
            }
        }
        let reporting = &self.reporting;
        if reporting.openlineage_namespace.trim().is_empty() {
            let problem = format!("must not be empty; leave it out for `{}`", defaults::OPENLINEAGE_NAMESPACE);
            return Err(InvalidOption::new("openlineage_namespace", Some(OptionValue::Text(String::new())), problem));
        }
        let job = &reporting.job_name;
        if job.trim().is_empty() || job.contains(['/', '%', '?', '#']) || job.chars().any(char::is_whitespace) {
            let problem = "give a name without spaces, '/', '%', '?' or '#' (it is a Pushgateway URL segment)";
            return Err(InvalidOption::new("job_name", Some(OptionValue::Text(job.clone())), problem));
        }
        for (option, url) in
            [("metrics_push", &reporting.metrics_push), ("openlineage_url", &reporting.openlineage_url)]
        {
            if let Some(url) = url {
                // Messages quote it without its credentials.
                let (parsed, url) = (url::Url::parse(url), batch_io::redact::redact_urls(url));
                let invalid =
                    |problem: String| InvalidOption::new(option, Some(OptionValue::Text(url.clone())), problem);
                let parsed = parsed.map_err(|e| invalid(format!("is not a URL ({e})")))?;
                if !matches!(parsed.scheme(), "http" | "https") {
                    return Err(invalid("is not an http:// or https:// URL".to_owned()));
                }
                if parsed.query().is_some() || parsed.fragment().is_some() {
                    let problem = "give the service's base URL, without ?query or #fragment (paths are appended to it)";
                    return Err(invalid(problem.to_owned()));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use runtime::inference::Device;

    use super::*;

    use crate::job::options::OptionValue;

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
        let error = spec.check().unwrap_err();
        assert_eq!(error.to_string(), "--batch-size 0: must be at least 1");
    }

    #[test]
    fn every_default_is_a_value_of_its_option() {
        for option in RUN_OPTIONS {
            if let Some(default) = option.default {
                let value = option.parse_text(default).unwrap();
                RunSpec::new(String::new()).set(option.name, value).unwrap();
            }
        }
        let spec = RunSpec::new("in.parquet".to_owned());
        assert_eq!((spec.text_column.as_str(), spec.rows_per_part), ("text", 2500));
        assert_eq!(spec.backend.kind, BackendKind::Auto);
        assert_eq!(spec.reporting.job_name, "pipeline_run");
        spec.check().unwrap();
    }

    #[test]
    fn the_setter_checks_values_and_names_the_option() {
        let mut spec = RunSpec::new(String::new());
        spec.set("attention", OptionValue::Text("top-k:8".to_owned())).unwrap();
        assert_eq!(spec.attention, AttentionEncoding::TopK(8));
        let error = spec.set("device", OptionValue::Text("tpu".to_owned())).unwrap_err();
        assert_eq!(error.to_string(), "--device tpu: not one of: cpu, cuda");
        let error = spec.set("min_confidence", OptionValue::Probability(1.5)).unwrap_err();
        assert!(error.to_string().starts_with("--min-confidence 1.5: "), "{error}");
        spec.set("long_documents", OptionValue::Text("truncate".to_owned())).unwrap();
        spec.set("long_document_stride", OptionValue::Count(64)).unwrap();
        let error = spec.check().unwrap_err();
        assert_eq!(
            error.to_string(),
            "--long-document-stride 64: applies only to long documents read in windows, not truncate: leave it out, or \
             give --long-documents windows"
        );
        assert!(spec.set("no_such_option", OptionValue::Flag(true)).is_err());
    }
}

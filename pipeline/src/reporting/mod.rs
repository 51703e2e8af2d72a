//! Where a run reports itself besides its output: metrics for Prometheus (`metrics`) and
//! lineage events for OpenLineage (`lineage`). Neither may fail or stall the run: every
//! request has a deadline, and a failure is logged as a warning.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use batch_io::choice::Choice;
use batch_io::command_line::exit_code_for;
use batch_io::object_storage::block_on;
use batch_io::source::InputFile;
use batch_io::spelling;

use crate::job::spec::{Reporting, RunSpec};
use crate::job::summary::JobSummary;
use crate::units::Shard;

mod http;
pub mod lineage;
pub mod metrics;

use http::redacted;
use lineage::{Dataset, EventType, LineageRun, RunRef};
use metrics::{Outcome, RunMetrics};

/// How long a request to a metrics or lineage service may take.
const REQUEST_DEADLINE: Duration = Duration::from_secs(10);

/// How long a request may take while a signal stops the process (Kubernetes gives a pod 30 s
/// between SIGTERM and SIGKILL).
const DEADLINE_WHEN_STOPPED: Duration = Duration::from_secs(3);

/// One run being reported: START sent, the rest at [`RunWatch::finish`], or, if a signal
/// stops the process first, the failure with its exit code.
pub struct RunWatch<'a> {
    spec: &'a RunSpec,
    lineage: Option<LineageRun>,
    /// Set by the run once every output path has passed its checks: before that, not even
    /// the metrics textfile may be written (it could be someone else's file).
    outputs_checked: Arc<AtomicBool>,
    _on_stop: Option<batch_io::command_line::StopHookGuard>,
}

impl<'a> RunWatch<'a> {
    /// Sends the lineage START event, where lineage is asked for. `files` and `model_sha256`:
    /// the run's inputs and model, where they could be read (the run then fails on them).
    pub fn start(spec: &'a RunSpec, files: Option<&[InputFile]>, model_sha256: Option<&str>) -> Self {
        let lineage = spec.reporting.openlineage_url.as_ref().map(|url| {
            let run = lineage_run(spec, files, model_sha256);
            send_lineage(url, &run.event(EventType::Start, None, None), REQUEST_DEADLINE);
            run
        });
        let outputs_checked = Arc::new(AtomicBool::new(false));
        let reporting = &spec.reporting;
        let reports = reporting.metrics_push.is_some() || reporting.metrics_textfile.is_some() || lineage.is_some();
        let on_stop = reports.then(|| {
            let (reporting, shard, lineage) = (spec.reporting.clone(), spec.shard, lineage.clone());
            let checked = outputs_checked.clone();
            batch_io::command_line::on_stop(move |code| {
                report_stopped(&reporting, shard, lineage.as_ref(), code, checked.load(Ordering::SeqCst));
            })
        });
        Self { spec, lineage, outputs_checked, _on_stop: on_stop }
    }

    /// What the run sets once its output paths have passed their checks.
    pub fn outputs_checked(&self) -> &AtomicBool {
        &self.outputs_checked
    }

    /// Sends the metrics and the COMPLETE or FAIL event; a run that failed before its output
    /// paths were checked has no textfile it may write.
    pub fn finish(self, result: &anyhow::Result<JobSummary>) {
        let outputs_checked = self.outputs_checked.load(Ordering::SeqCst);
        let reporting = &self.spec.reporting;
        let outcome = match result {
            Ok(summary) => Outcome::Succeeded(summary),
            Err(error) => Outcome::Failed(exit_code_for(error)),
        };
        let ended = metrics::seconds_now();
        push_metrics(reporting, self.spec.shard, &outcome, ended, REQUEST_DEADLINE);
        if let Some(path) = reporting.metrics_textfile.as_ref().filter(|_| !outputs_checked) {
            tracing::warn!(
                "{}: not written, the run stopped before its outputs (this file among them) passed their checks",
                spelling::option_with("metrics_textfile", &path.display().to_string())
            );
        }
        if outputs_checked {
            write_textfile(reporting, self.spec.shard, &outcome, ended);
        }
        if let (Some(run), Some(url)) = (&self.lineage, &reporting.openlineage_url) {
            let event = match result {
                Ok(summary) => run.event(EventType::Complete, Some(summary), None),
                Err(error) => run.event(EventType::Fail, None, Some(&format!("{error:#}"))),
            };
            send_lineage(url, &event, REQUEST_DEADLINE);
        }
    }
}

/// The figures of `outcome` to the textfile, where one is asked for, keeping the last
/// success's time from the one there.
fn write_textfile(reporting: &Reporting, shard: Shard, outcome: &Outcome<'_>, ended: f64) {
    if let Some(path) = &reporting.metrics_textfile {
        let previous = metrics::last_success_in(path);
        let written = RunMetrics::new(&reporting.job_name, shard, outcome, ended, previous)
            .and_then(|metrics| metrics.write_textfile(path));
        warn_on_failure("metrics_textfile", written);
    }
}

/// A run stopped by a signal: its exit code to the Pushgateway and the textfile (once the run
/// has checked that path) and a FAIL event, each with a short deadline.
fn report_stopped(reporting: &Reporting, shard: Shard, lineage: Option<&LineageRun>, code: u8, outputs_checked: bool) {
    let ended = metrics::seconds_now();
    push_metrics(reporting, shard, &Outcome::Failed(code), ended, DEADLINE_WHEN_STOPPED);
    if outputs_checked {
        write_textfile(reporting, shard, &Outcome::Failed(code), ended);
    }
    if let (Some(run), Some(url)) = (lineage, &reporting.openlineage_url) {
        let message = format!("stopped by a signal (exit code {code})");
        send_lineage(url, &run.event(EventType::Fail, None, Some(&message)), DEADLINE_WHEN_STOPPED);
    }
}

/// The figures of `outcome` to the Pushgateway, where one is asked for.
fn push_metrics(reporting: &Reporting, shard: Shard, outcome: &Outcome<'_>, ended: f64, deadline: Duration) {
    if let Some(url) = &reporting.metrics_push {
        let pushed = RunMetrics::new(&reporting.job_name, shard, outcome, ended, None)
            .and_then(|metrics| block_on(metrics.push(url, deadline)).and_then(|r| r));
        warn_on_failure("metrics_push", pushed);
    }
}

/// The run as OpenLineage names it. Its id is a digest of what makes it this run: the job,
/// the parent run, the inputs as they are now (a new file makes a new run), the output, the
/// shard and the model.
fn lineage_run(spec: &RunSpec, files: Option<&[InputFile]>, model_sha256: Option<&str>) -> LineageRun {
    let reporting = &spec.reporting;
    // Empty is unset: a scheduler's template renders empty where it has no parent to give.
    let run_ref = |variable: &str| {
        std::env::var(variable).ok().filter(|t| !t.trim().is_empty()).and_then(|t| RunRef::parse(variable, &t))
    };
    let (parent, root) = (run_ref(lineage::PARENT_VARIABLE), run_ref(lineage::ROOT_PARENT_VARIABLE));
    if parent.is_none() && root.is_some() {
        tracing::warn!(
            "{} is set without {}; OpenLineage's parent facet needs the parent, so neither is sent",
            lineage::ROOT_PARENT_VARIABLE,
            lineage::PARENT_VARIABLE
        );
    }
    let inputs: Vec<String> = match files {
        Some(files) => files
            .iter()
            .map(|file| match crate::job::plan::input_identity(file) {
                Ok(identity) => format!("{} {} {}", identity.location, identity.size, identity.version),
                Err(_) => file.to_string(),
            })
            .collect(),
        // The run fails on it too, and says why; the id still names the location.
        None => vec![spec.input.clone()],
    };
    let identity = serde_json::json!({
        "namespace": reporting.openlineage_namespace,
        "job": reporting.job_name,
        "parent": parent.as_ref().map(|p| &p.run_id),
        "inputs": inputs,
        "output": spec.output,
        "shard": [spec.shard.index, spec.shard.count],
        "model": model_sha256.unwrap_or_default(),
        // What changes the output: a rerun with other options is another run.
        "options": [
            spec.output_format.name(),
            spec.text_column.as_str(),
            &format!("{:?}", spec.pass_through),
            &format!("{:?}", spec.max_tokens),
            &spec.long_documents().map(|mode| mode.to_string()).unwrap_or_default(),
            &spec.attention.to_string(),
            &spec.embedding.to_string(),
            &format!("{:?}", spec.min_confidence),
            &spec.rows_per_part.to_string(),
        ],
    });
    LineageRun {
        run_id: lineage::run_id(identity.to_string().as_bytes()),
        namespace: reporting.openlineage_namespace.clone(),
        job: reporting.job_name.clone(),
        parent,
        root,
        inputs: vec![Dataset::at(&input_dataset_location(&spec.input))],
        output: Dataset::at(&spec.output),
        text_column: spec.text_column.clone(),
    }
}

/// The input as one dataset: a file or a directory as given; a glob's directory.
fn input_dataset_location(input: &str) -> String {
    match input.find(['*', '?', '[']) {
        Some(at) => {
            let before = input.get(..at).unwrap_or(input);
            before.rsplit_once('/').map_or(".".to_owned(), |(dir, _)| dir.to_owned())
        }
        None => input.to_owned(),
    }
}

/// Sends `event`, with the credentials of every URL in it (an input's `s3://key:secret@…` in a
/// FAIL event's message, a dataset's name) hidden: a lineage service is read by many.
fn send_lineage(url: &str, event: &serde_json::Value, deadline: Duration) {
    let redacted = serde_json::from_str(&redacted(&event.to_string()))
        .map_err(|e| anyhow::anyhow!("cannot hide the credentials in the event ({e}); it is not sent"));
    let sent = redacted.and_then(|event| block_on(LineageRun::send(url, &event, deadline)).and_then(|r| r));
    warn_on_failure("openlineage_url", sent);
}

/// `option` as Python spells it: the front end's spelling is in the warning.
fn warn_on_failure(option: &str, result: anyhow::Result<()>) {
    let flag = spelling::name(option);
    if let Err(error) = result {
        let error = redacted(&format!("{error:#}"));
        tracing::warn!("{flag}: {error}; the run goes on without it");
    }
}

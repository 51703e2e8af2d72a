//! Where a run reports itself besides its output: metrics for Prometheus (`metrics`) and
//! lineage events for OpenLineage (`lineage`). Neither may fail or stall the run: every
//! request has a deadline, and a failure is logged as a warning.

use std::time::Duration;

use batch_io::command_line::exit_code_for;
use batch_io::inputs::resolve_input_files;
use batch_io::object_storage::block_on;
use batch_io::source::DATA_EXTENSIONS;
use runtime::package::ModelPackage;

use crate::job::{JobSummary, RunSpec, model_sha256};

pub mod lineage;
pub mod metrics;

use lineage::{Dataset, EventType, LineageRun, RunRef};
use metrics::{Outcome, RunMetrics};

/// How long a request to a metrics or lineage service may take.
const REQUEST_DEADLINE: Duration = Duration::from_secs(10);

/// One run being reported: START sent, the rest at [`RunWatch::finish`].
pub struct RunWatch<'a> {
    spec: &'a RunSpec,
    lineage: Option<LineageRun>,
}

impl<'a> RunWatch<'a> {
    /// Sends the lineage START event, where lineage is asked for.
    pub fn start(package: &ModelPackage, spec: &'a RunSpec) -> Self {
        let lineage = spec.reporting.openlineage_url.as_ref().map(|url| {
            let run = lineage_run(package, spec);
            send_lineage(url, &run.event(EventType::Start, None, None));
            run
        });
        Self { spec, lineage }
    }

    /// Sends the metrics and the COMPLETE or FAIL event.
    pub fn finish(self, result: &anyhow::Result<JobSummary>) {
        let reporting = &self.spec.reporting;
        let outcome = match result {
            Ok(summary) => Outcome::Succeeded(summary),
            Err(error) => Outcome::Failed(exit_code_for(error)),
        };
        if let Some(url) = &reporting.metrics_push {
            match RunMetrics::new(&reporting.job_name, self.spec.shard, &outcome, None) {
                Ok(metrics) => warn_on_failure("--metrics-push", block_on(metrics.push(url)).and_then(|r| r)),
                Err(error) => warn_on_failure("--metrics-push", Err(error)),
            }
        }
        if let Some(path) = &reporting.metrics_textfile {
            let previous = metrics::last_success_in(path);
            let written = RunMetrics::new(&reporting.job_name, self.spec.shard, &outcome, previous)
                .and_then(|metrics| metrics.write_textfile(path));
            warn_on_failure("--metrics-textfile", written);
        }
        if let (Some(run), Some(url)) = (&self.lineage, &reporting.openlineage_url) {
            let event = match result {
                Ok(summary) => run.event(EventType::Complete, Some(summary), None),
                Err(error) => run.event(EventType::Fail, None, Some(&format!("{error:#}"))),
            };
            send_lineage(url, &event);
        }
    }
}

/// The run as OpenLineage names it. Its id is a digest of what makes it this run: the job,
/// the parent run, the inputs as they are now (a new file makes a new run), the output, the
/// shard and the model.
fn lineage_run(package: &ModelPackage, spec: &RunSpec) -> LineageRun {
    let reporting = &spec.reporting;
    // Empty is unset: a scheduler's template renders empty where it has no parent to give.
    let run_ref = |variable: &str| {
        std::env::var(variable).ok().filter(|t| !t.trim().is_empty()).and_then(|t| RunRef::parse(variable, &t))
    };
    let (parent, root) = (run_ref(lineage::PARENT_VARIABLE), run_ref(lineage::ROOT_PARENT_VARIABLE));
    let inputs: Vec<String> = match resolve_input_files(&spec.input, DATA_EXTENSIONS) {
        Ok(found) => found
            .files
            .iter()
            .map(|file| match crate::job::plan::input_identity(file) {
                Ok(identity) => format!("{} {} {}", identity.location, identity.size, identity.version),
                Err(_) => file.to_string(),
            })
            .collect(),
        // The run fails on it too, and says why; the id still names the location.
        Err(_) => vec![spec.input.clone()],
    };
    let identity = serde_json::json!({
        "namespace": reporting.openlineage_namespace,
        "job": reporting.job_name,
        "parent": parent.as_ref().map(|p| &p.run_id),
        "inputs": inputs,
        "output": spec.output,
        "shard": [spec.shard.index, spec.shard.count],
        "model": model_sha256(package).unwrap_or_default(),
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

fn send_lineage(url: &str, event: &serde_json::Value) {
    warn_on_failure("--openlineage-url", block_on(LineageRun::send(url, event)).and_then(|r| r));
}

fn warn_on_failure(flag: &str, result: anyhow::Result<()>) {
    if let Err(error) = result {
        tracing::warn!("{flag}: {error:#}; the run goes on without it");
    }
}

/// The client for both services: a deadline on every request.
fn http_client() -> anyhow::Result<reqwest::Client> {
    reqwest::Client::builder()
        .timeout(REQUEST_DEADLINE)
        .connect_timeout(REQUEST_DEADLINE)
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start an HTTP client: {e}"))
}

/// An error naming `what` and the answer, unless the status is a success.
async fn expect_success(response: reqwest::Response, what: &str) -> anyhow::Result<()> {
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    let body = response.text().await.unwrap_or_default();
    let body: String = body.trim().chars().take(300).collect();
    anyhow::bail!("{what} answered {status}: {body}")
}

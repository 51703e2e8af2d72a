//! What `pipeline run` tells the systems that watch it: figures for a real Prometheus
//! Pushgateway and node_exporter's textfile collector, and OpenLineage events validated
//! against OpenLineage's own JSON schemas. A service that is down or failing never fails the
//! run.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::http_sink::{HttpSink, http_get};
use crate::common::{reviews, stderr};
use anyhow::Context;

fn run_with(output: &Path, input: &Path, extra: &[&str], env: &[(&str, &str)]) -> Output {
    crate::common::run_command(input, output, extra)
        .env_remove("OPENLINEAGE_URL")
        .env_remove("OPENLINEAGE_NAMESPACE")
        .env_remove("OPENLINEAGE_PARENT_ID")
        .env_remove("OPENLINEAGE_ROOT_PARENT_ID")
        .envs(env.iter().copied())
        .output()
        .expect("run pipeline")
}

/// A real Pushgateway on a free loopback port, stopped when dropped.
struct Pushgateway {
    child: Child,
    url: String,
}

impl Pushgateway {
    fn start(test: &str) -> Option<Self> {
        let binary = test_support::or_skip(test, test_support::pushgateway_binary().context("no Pushgateway"))?;
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("port").port();
        let child = Command::new(binary)
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--persistence.file=")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the Pushgateway");
        let gateway = Self { child, url: format!("http://127.0.0.1:{port}") };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "the Pushgateway did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(gateway)
    }

    /// The value of `metric` in the group of `job` and `shard`, as the Pushgateway parsed it.
    fn value(&self, job: &str, shard: &str, metric: &str) -> Option<f64> {
        let api: serde_json::Value =
            serde_json::from_str(&http_get(&format!("{}/api/v1/metrics", self.url))).expect("json");
        let group = api["data"]
            .as_array()?
            .iter()
            .find(|g| g["labels"]["job"] == job && g["labels"]["shard"] == shard)?
            .clone();
        group[metric]["metrics"][0]["value"].as_str().and_then(|v| v.parse().ok())
    }
}

impl Drop for Pushgateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_run_pushes_its_figures_and_a_failure_keeps_the_last_success() {
    let Some(gateway) = Pushgateway::start("a_run_pushes_its_figures_and_a_failure_keeps_the_last_success") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let textfile = dir.path().join("pipeline.prom");
    let flags = [
        "--metrics-push",
        &gateway.url,
        "--metrics-textfile",
        textfile.to_str().expect("utf-8"),
        "--job-name",
        "nightly",
    ];
    let ok = run_with(&dir.path().join("out.parquet"), &reviews(), &flags, &[]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    assert!(!stderr(&ok).contains("WARN"), "no warning on success: {}", stderr(&ok));
    let value = |metric: &str| gateway.value("nightly", "0", metric);
    assert_eq!(value("pipeline_run_rows"), Some(300.0));
    assert_eq!(value("pipeline_run_exit_code"), Some(0.0));
    let success = value("pipeline_run_last_success_timestamp_seconds").expect("the success time");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs_f64();
    assert!((now - success).abs() < 120.0, "{success} vs {now}");
    assert!(value("pipeline_run_stage_busy_seconds").is_some());
    let text = std::fs::read_to_string(&textfile).expect("textfile");
    assert_eq!(sample(&text, "pipeline_run_rows"), Some(300.0), "{text}");
    let written = sample(&text, "pipeline_run_last_success_timestamp_seconds");
    assert_eq!(written, Some(success), "the textfile and the Pushgateway say one end time: {text}");
    assert!(text.contains("# TYPE pipeline_run_exit_code gauge"), "{text}");

    // A failed run: exit code 1 pushed, the last success and its figures kept.
    let bad = dir.path().join("not-parquet.parquet");
    std::fs::write(&bad, b"this is not parquet").expect("write");
    let failed = run_with(&dir.path().join("out2.parquet"), &bad, &flags, &[]);
    assert_eq!(failed.status.code(), Some(1), "{}", stderr(&failed));
    assert_eq!(value("pipeline_run_exit_code"), Some(1.0));
    assert_eq!(value("pipeline_run_last_success_timestamp_seconds"), Some(success));
    assert_eq!(value("pipeline_run_rows"), Some(300.0), "the last success's figures stay");
    assert!(value("pipeline_run_last_failure_timestamp_seconds").is_some());
    let text = std::fs::read_to_string(&textfile).expect("textfile");
    assert_eq!(sample(&text, "pipeline_run_exit_code"), Some(1.0), "{text}");
    let kept = sample(&text, "pipeline_run_last_success_timestamp_seconds").expect("the last success");
    assert_eq!(kept, success, "the failure keeps the last success's time as it was");
    assert!(!text.contains("pipeline_run_rows"), "{text}");
}

/// The value of `metric`'s one sample (labelled job="nightly", shard="0") in a textfile.
fn sample(text: &str, metric: &str) -> Option<f64> {
    let prefix = format!("{metric}{{job=\"nightly\",shard=\"0\"}} ");
    text.lines().find_map(|line| line.strip_prefix(&prefix)).and_then(|value| value.parse().ok())
}

#[test]
fn a_pushgateway_answering_500_or_a_lineage_service_that_is_down_only_warns() {
    let failing = HttpSink::start(500);
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        format!("http://{}", listener.local_addr().expect("address"))
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let output = dir.path().join("out.parquet");
    // Credentials in a URL never reach the logs.
    let with_password = failing.url.replace("http://", "http://user:s3cret@");
    let result = run_with(&output, &reviews(), &["--metrics-push", &with_password, "--openlineage-url", &closed], &[]);
    assert!(result.status.success(), "{}", stderr(&result));
    assert!(output.is_file(), "the predictions are written");
    let message = stderr(&result);
    assert!(message.contains("--metrics-push") && message.contains("500"), "{message}");
    assert!(message.contains("--openlineage-url") && message.contains("the run goes on without it"), "{message}");
    assert!(!message.contains("s3cret"), "{message}");
    let pushed = failing.requests();
    assert_eq!(pushed.len(), 1, "{pushed:?}");
    assert_eq!((pushed[0].method.as_str(), pushed[0].path.as_str()), ("PUT", "/metrics/job/pipeline_run/shard/0"));
}

/// Validates `events` with scripts/validate-openlineage.py (OpenLineage's JSON schemas).
fn validate(events: &[serde_json::Value], dir: &Path) {
    let validator = test_support::lakehouse_checks_python().context("no validator");
    let Some(python) = test_support::or_skip("validating the lineage events", validator) else { return };
    let file = dir.join("events.jsonl");
    let lines: Vec<String> = events.iter().map(|e| e.to_string()).collect();
    std::fs::write(&file, lines.join("\n")).expect("write");
    let script = crate::common::repo_root().join("scripts/validate-openlineage.py");
    let output = Command::new(python).arg(script).arg(&file).arg("--strict").output().expect("validate");
    assert!(output.status.success(), "{}{}", String::from_utf8_lossy(&output.stdout), stderr(&output));
}

#[test]
fn lineage_events_follow_the_schema_and_name_the_parent_run() {
    let sink = HttpSink::start(200);
    let dir = tempfile::tempdir().expect("tempdir");
    let output = dir.path().join("out.parquet");
    let parent = "airflow-prod/nightly.classify/018fd186-7100-719e-820d-1deddadba642";
    let env = [
        ("OPENLINEAGE_URL", sink.url.as_str()),
        ("OPENLINEAGE_NAMESPACE", "lakehouse"),
        ("OPENLINEAGE_PARENT_ID", parent),
    ];
    let first = run_with(&output, &reviews(), &["--pass-through", "id"], &env);
    assert!(first.status.success(), "{}", stderr(&first));
    let requests = sink.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert!(requests.iter().all(|r| r.method == "POST" && r.path == "/api/v1/lineage"), "{requests:?}");
    let events: Vec<serde_json::Value> =
        requests.iter().map(|r| serde_json::from_str(&r.body).expect("an event")).collect();
    let (start, complete) = (&events[0], &events[1]);
    assert_eq!((start["eventType"].as_str(), complete["eventType"].as_str()), (Some("START"), Some("COMPLETE")));
    assert_eq!(start["run"]["runId"], complete["run"]["runId"]);
    assert_eq!(complete["job"]["namespace"], "lakehouse");
    let facet = &complete["run"]["facets"]["parent"];
    assert_eq!(facet["run"]["runId"], "018fd186-7100-719e-820d-1deddadba642");
    assert_eq!(
        (facet["job"]["namespace"].as_str(), facet["job"]["name"].as_str()),
        (Some("airflow-prod"), Some("nightly.classify"))
    );
    let input = &complete["inputs"][0];
    assert_eq!(input["namespace"], "file");
    assert_eq!(input["name"].as_str(), Some(reviews().to_str().expect("utf-8")));
    let lineage = &complete["outputs"][0]["facets"]["columnLineage"]["fields"];
    assert_eq!(lineage["prediction"]["inputFields"][0]["field"], "text");
    assert_eq!(lineage["contribution"]["inputFields"][0]["field"], "text");
    assert_eq!(lineage["id"]["inputFields"][0]["field"], "id");
    assert_eq!(lineage["id"]["inputFields"][0]["transformations"][0]["subtype"], "IDENTITY");

    // The same run again (a retried pod) reports the same run id.
    let again = run_with(&output, &reviews(), &["--pass-through", "id"], &env);
    assert!(again.status.success(), "{}", stderr(&again));
    let rerun: serde_json::Value = serde_json::from_str(&sink.requests()[2].body).expect("event");
    assert_eq!(rerun["run"]["runId"], start["run"]["runId"]);

    // The same inputs with another option are another run.
    let other =
        run_with(&dir.path().join("out3.parquet"), &reviews(), &["--pass-through", "id", "--attention", "full"], &env);
    assert!(other.status.success(), "{}", stderr(&other));
    let third: serde_json::Value = serde_json::from_str(&sink.requests()[4].body).expect("event");
    assert_ne!(third["run"]["runId"], start["run"]["runId"]);

    // A failed run ends with FAIL and the error.
    let bad = dir.path().join("bad.parquet");
    std::fs::write(&bad, b"not parquet").expect("write");
    let failed = run_with(&dir.path().join("out2.parquet"), &bad, &[], &env);
    assert_eq!(failed.status.code(), Some(1));
    let fail: serde_json::Value = serde_json::from_str(&sink.requests().last().expect("events").body).expect("event");
    assert_eq!(fail["eventType"], "FAIL");
    assert!(
        fail["run"]["facets"]["errorMessage"]["message"].as_str().expect("message").contains("bad.parquet"),
        "{fail}"
    );

    let mut all = events.clone();
    all.push(fail);
    validate(&all, dir.path());
}

#[test]
fn a_refused_metrics_file_is_never_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("reviews.parquet");
    std::fs::copy(reviews(), &input).expect("copy");
    let before = std::fs::read(&input).expect("read");
    let refused =
        run_with(&dir.path().join("out.parquet"), &input, &["--metrics-textfile", input.to_str().expect("utf-8")], &[]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert_eq!(std::fs::read(&input).expect("read"), before, "the input is untouched");
    assert!(
        stderr(&refused).contains("not written, the run stopped before its outputs (this file among them) passed"),
        "{}",
        stderr(&refused)
    );
}

#[test]
fn a_run_stopped_by_sigterm_reports_its_exit_code_and_a_fail_event() {
    let sink = HttpSink::start(200);
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("many.parquet");
    crate::common::many_reviews(&input, 40, 1000);
    // A success first: the textfile must keep its time through the stopped run.
    let textfile = dir.path().join("pipeline.prom");
    let textfile_flag = ["--metrics-textfile", textfile.to_str().expect("utf-8"), "--job-name", "nightly"];
    let ok = run_with(&dir.path().join("first.parquet"), &reviews(), &textfile_flag, &[]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    let success =
        sample(&std::fs::read_to_string(&textfile).expect("textfile"), "pipeline_run_last_success_timestamp_seconds");
    let mut flags = vec!["--metrics-push", &sink.url, "--openlineage-url", &sink.url];
    flags.extend_from_slice(&textfile_flag);
    let mut child = crate::common::run_command(&input, &dir.path().join("out.parquet"), &flags)
        .stderr(Stdio::null())
        .spawn()
        .expect("start");
    let deadline = Instant::now() + Duration::from_secs(30);
    while sink.requests().is_empty() {
        assert!(Instant::now() < deadline, "no START event");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Once the output is being written, its paths (the textfile's too) have been checked.
    let writing = || crate::common::files_in(dir.path()).iter().any(|name| name.starts_with(".out.parquet."));
    while !writing() {
        assert!(Instant::now() < deadline, "no output being written");
        std::thread::sleep(Duration::from_millis(20));
    }
    let killed = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill");
    assert!(killed.success());
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(143), "{status:?}");
    let requests = sink.requests();
    let pushed = requests.iter().find(|r| r.path.starts_with("/metrics/")).expect("a push");
    assert_eq!(pushed.method, "POST", "a failure keeps the last success");
    assert!(pushed.body.contains("pipeline_run_exit_code{job=\"nightly\",shard=\"0\"} 143"), "{}", pushed.body);
    let fail: serde_json::Value = serde_json::from_str(&requests.last().expect("events").body).expect("event");
    assert_eq!(fail["eventType"], "FAIL");
    assert!(fail["run"]["facets"]["errorMessage"]["message"].as_str().expect("message").contains("signal"), "{fail}");
    // The textfile says so too, for alerts that read it rather than the Pushgateway.
    let text = std::fs::read_to_string(&textfile).expect("textfile");
    assert_eq!(sample(&text, "pipeline_run_exit_code"), Some(143.0), "{text}");
    assert!(sample(&text, "pipeline_run_last_failure_timestamp_seconds").is_some(), "{text}");
    assert_eq!(
        sample(&text, "pipeline_run_last_success_timestamp_seconds"),
        success,
        "the last success is kept: {text}"
    );
}

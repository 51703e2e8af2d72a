//! Object stores that refuse or never answer: bad input and transient failures are told
//! apart, and retries last as long as their budget.

use std::process::Command;
use std::time::{Duration, Instant};

use super::*;

#[test]
fn plain_http_is_bad_input_not_a_transient_failure() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.parquet");
    let output = pipeline(&["run", "--input", "http://127.0.0.1:9/reviews.parquet"], &[("--output", &out)]);
    assert_refused(&output, 1, &["plain http:// is not supported", "https://"], &out);
}

/// `pipeline` with S3 pointed at a loopback port nothing listens on (every request refused,
/// a transient failure) and a storage retry budget of `retry_seconds`.
fn pipeline_on_a_dead_store(retry_seconds: &str) -> Command {
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("port").port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_pipeline"));
    command
        .env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}"))
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env("PIPELINE_STORAGE_RETRY_SECONDS", retry_seconds);
    command
}

#[test]
fn storage_retries_last_as_long_as_their_budget() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.parquet");
    let attempt = |budget: &str| {
        let started = Instant::now();
        let output = pipeline_on_a_dead_store(budget)
            .args(["run", "--input", "s3://corpus/in/reviews.parquet", "--output"])
            .arg(&out)
            .output()
            .expect("run pipeline");
        (output, started.elapsed())
    };
    let (output, took) = attempt("6");
    assert_refused(&output, 75, &["s3://corpus/in/reviews.parquet", "rerunning later may succeed"], &out);
    assert!(took >= Duration::from_secs(5) && took < Duration::from_secs(60), "retried for {took:?}");
    let (output, _) = attempt("soon");
    assert_refused(&output, 1, &["PIPELINE_STORAGE_RETRY_SECONDS is `soon`"], &out);
}

#[test]
fn an_unreachable_store_named_in_a_query_is_transient() {
    let output = pipeline_on_a_dead_store("2")
        .args(["sql", "SELECT count(*) FROM 's3://corpus/out/'"])
        .output()
        .expect("run pipeline");
    assert_eq!(exit_code(&output), Some(75), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("cannot list s3://corpus/out") && err.contains("rerunning later may succeed"), "{err}");
    assert_eq!(err.matches("rerunning later").count(), 1, "said once: {err}");
}

#[test]
fn a_model_on_an_unreachable_store_is_transient() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.parquet");
    let output = pipeline_on_a_dead_store("2")
        .args(["run", "--model", "s3://models/san/", "--input"])
        .arg(reviews())
        .arg("--output")
        .arg(&out)
        .env("PIPELINE_MODEL_CACHE", dir.path().join("cache"))
        .output()
        .expect("run pipeline");
    assert_refused(&output, 75, &["--model s3://models/san/", "rerunning later may succeed"], &out);
    assert!(!dir.path().join("cache").exists() || files_in(&dir.path().join("cache")).is_empty(), "nothing cached");
}

#[test]
fn a_delta_table_on_an_unreachable_store_is_transient() {
    let output = pipeline_on_a_dead_store("2")
        .args(["run", "--output-format", "delta", "--output", "s3://lake/predictions/", "--model"])
        .arg(tiny_model())
        .arg("--input")
        .arg(reviews())
        .output()
        .expect("run pipeline");
    assert_eq!(exit_code(&output), Some(75), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("cannot list s3://lake/predictions/") && err.contains("rerunning later may succeed"), "{err}");
}

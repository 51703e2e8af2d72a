//! Messages and logs never show a URL's credentials: a user name and password, or a query
//! string (a token, a signature), whether the URL parses or not.

use std::process::Command;

use super::*;

fn refused_without(output: &Output, secrets: &[&str]) -> String {
    let err = stderr(output);
    assert_ne!(exit_code(output), Some(0), "{err}");
    for secret in secrets {
        assert!(!err.contains(secret), "`{secret}` shown in: {err}");
    }
    assert!(err.contains("***"), "the URL is still named, its secret hidden: {err}");
    err
}

#[test]
fn urls_in_errors_and_json_logs_hide_their_credentials() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.parquet");
    for log_format in ["human", "json"] {
        for (flag, url, secret) in [
            ("--metrics-push", "https://user:hunter2@push.example:99999/", "hunter2"),
            ("--openlineage-url", "http://lineage.example/api?token=abc123", "abc123"),
            ("--openlineage-url", "http://user:pw%zz@lineage.example:99999/", "pw%zz"),
        ] {
            let output = run(&reviews(), &out, &["--log-format", log_format, flag, url]);
            refused_without(&output, &[secret]);
        }
        // The same URL from the environment.
        let output = run_command(&reviews(), &out, &["--log-format", log_format])
            .env("OPENLINEAGE_URL", "https://u:s3cr3t@lineage.example:70000/")
            .output()
            .expect("run");
        refused_without(&output, &["s3cr3t"]);
    }
    assert!(!out.exists());

    // Keys written into a storage URL, against a store that is not there.
    let output = Command::new(env!("CARGO_BIN_EXE_pipeline"))
        .args(["run", "--model"])
        .arg(tiny_model())
        .args(["--input", "s3://AKIAEXAMPLE:wJalrXUtnFEMI@bucket/in.parquet", "--output"])
        .arg(&out)
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .env("AWS_ALLOW_HTTP", "true")
        .env("PIPELINE_STORAGE_RETRY_SECONDS", "0")
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .output()
        .expect("run");
    refused_without(&output, &["wJalrXUtnFEMI", "AKIAEXAMPLE"]);

    // URLs no parser takes, without a scheme or with one slash.
    for url in ["user:hunter2@127.0.0.1:9", "http:/user:hunter2@127.0.0.1:9/", "127.0.0.1:9/?token=hunter2"] {
        let output = run(&reviews(), &out, &["--metrics-push", url]);
        let err = stderr(&output);
        assert!(!err.contains("hunter2") && err.contains("***"), "{url}: {err}");
    }
}

#[test]
fn lineage_events_hide_the_credentials_of_the_urls_they_name() {
    let sink = crate::common::http_sink::HttpSink::start(200);
    let dir = tempfile::tempdir().expect("tempdir");
    let output = Command::new(env!("CARGO_BIN_EXE_pipeline"))
        .args(["run", "--model"])
        .arg(tiny_model())
        .args(["--input", "s3://AKIAEXAMPLE:wJalrXUtnFEMI@bucket/in.parquet", "--openlineage-url", &sink.url])
        .arg("--output")
        .arg(dir.path().join("out.parquet"))
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("PIPELINE_STORAGE_RETRY_SECONDS", "0")
        .output()
        .expect("run");
    assert_ne!(exit_code(&output), Some(0), "{}", stderr(&output));
    let requests = sink.requests();
    assert!(requests.iter().any(|r| r.body.contains("\"FAIL\"")), "a FAIL event was sent");
    for request in requests {
        assert!(!request.body.contains("wJalrXUtnFEMI"), "{}", request.body);
        serde_json::from_str::<Value>(&request.body).expect("still JSON");
    }
}

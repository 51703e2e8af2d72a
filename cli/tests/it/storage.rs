//! `pipeline run` and `pipeline sql` against a real S3-compatible server on loopback (moto's
//! server, installed on first use by `scripts/install-s3-test-server.sh`): inputs, outputs
//! and tables in a bucket, four shards with one killed by SIGKILL, and the errors for a
//! missing bucket or object and for refused or missing credentials.
//!
//! Where the server cannot be installed (no network) the tests skip loudly; under `CI=true`
//! they fail.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::s3_server::*;
use crate::common::*;
use object_store::ObjectStoreExt;
use object_store::path::Path as ObjectPath;

#[test]
fn inputs_and_outputs_in_a_bucket_give_what_local_files_give() {
    let Some(s3) = S3Server::start("inputs_and_outputs_in_a_bucket_give_what_local_files_give") else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let local = dir.path().join("local.parquet");
    assert!(run(&reviews(), &local, &[]).status.success());
    s3.put("in/a/reviews.parquet", &reviews());
    s3.put("in/notes.txt", &reviews());

    // One object in, one object out.
    let output = s3.run(&["run", "--input", "s3://corpus/in/a/reviews.parquet", "--output", "s3://corpus/one.parquet"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(s3.list("").contains(&"one.parquet".to_owned()), "{:?}", s3.list(""));
    let copy = dir.path().join("copy.parquet");
    std::fs::write(&copy, s3.get("one.parquet")).expect("write");
    assert_same_rows(&read(&local), &read(&copy));

    // A glob in, a dataset out.
    let glob_to_dataset =
        ["run", "--input", "s3://corpus/in/*/*.parquet", "--output", "s3://corpus/ds/", "--rows-per-part", "64"];
    let output = s3.run(&glob_to_dataset);
    assert!(output.status.success(), "{}", stderr(&output));
    let keys = s3.list("ds");
    assert_eq!(keys.len(), 6, "{keys:?}");
    assert!(keys.contains(&"ds/_SUCCESS".to_owned()), "{keys:?}");
    assert_same_rows(&read(&local), &s3.read_parts("ds"));

    // A rerun finds it complete.
    let output = s3.run(&glob_to_dataset);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("0 parts written, 5 already committed"));

    // `pipeline sql` answers the same over the bucket as over the local file: a registered
    // prefix (the dataset's parts, not its _SUCCESS), and a glob named in the query.
    let query = "SELECT id, prediction FROM t ORDER BY id";
    let local_table = format!("t={}", local.display());
    let expected = s3.sql(&["--table", &local_table, "--format", "csv", query]);
    assert!(expected.status.success(), "{}", stderr(&expected));
    assert_eq!(String::from_utf8_lossy(&expected.stdout).lines().count(), 1 + read(&local).num_rows());
    let from_prefix = s3.sql(&["--table", "t=s3://corpus/ds/", "--format", "csv", query]);
    assert!(from_prefix.status.success(), "{}", stderr(&from_prefix));
    assert_eq!(from_prefix.stdout, expected.stdout);
    let in_query = query.replace("FROM t", "FROM 's3://corpus/ds/part-*.parquet'");
    let from_glob = s3.sql(&["--format", "csv", &in_query]);
    assert!(from_glob.status.success(), "{}", stderr(&from_glob));
    assert_eq!(from_glob.stdout, expected.stdout);

    // `pipeline report` reads the dataset's parts from the bucket and uploads the page there.
    let report = s3.report(&["--input", "s3://corpus/ds/", "--output", "s3://corpus/report.html"]);
    assert!(report.status.success(), "{}", stderr(&report));
    assert!(String::from_utf8_lossy(&report.stdout).contains("300 rows from 5 file(s)"));
    let page = s3.get("report.html");
    assert!(String::from_utf8_lossy(&page).contains("id=\"confusion-matrix\""));

    // A location that holds no Parquet is named in the error.
    let missing = s3.sql(&["--table", "t=s3://corpus/nothing/", "SELECT 1"]);
    assert_eq!(missing.status.code(), Some(1), "{}", stderr(&missing));
    assert!(stderr(&missing).contains("s3://corpus/nothing/"), "{}", stderr(&missing));
}

/// deploy/run-shard.sh, which the Kubernetes Job and the Airflow DAG both call, run for 4
/// shards at once; one is killed while its part is being uploaded, then rerun.
#[cfg(unix)]
#[test]
fn four_shards_through_the_deploy_script_with_one_killed_and_rerun_write_every_row_once() {
    let Some(s3) =
        S3Server::start("four_shards_through_the_deploy_script_with_one_killed_and_rerun_write_every_row_once")
    else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("many.parquet");
    many_reviews(&input, 20, 500);
    s3.put("in/many.parquet", &input);
    let single = dir.path().join("single.parquet");
    assert!(run(&input, &single, &[]).status.success());

    let tiny = tiny_model();
    let shard = |index: &(&str, &str)| {
        let mut script = Command::new(test_support::repo_root().join("deploy/run-shard.sh"));
        script
            .args(["--model", &tiny.display().to_string(), "--rows-per-part", "500", "--chunk-rows", "50"])
            .envs(s3.env())
            .env("PIPELINE", env!("CARGO_BIN_EXE_pipeline"))
            .env("PIPELINE_INPUT", "s3://corpus/in/many.parquet")
            .env("PIPELINE_OUTPUT", "s3://corpus/out/")
            .env("SHARD_COUNT", "4")
            .env(index.0, index.1)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        script
    };
    // As a Kubernetes Indexed Job runs them: the index in JOB_COMPLETION_INDEX.
    let mut shards: Vec<Child> = ["0", "1", "2", "3"]
        .iter()
        .map(|i| shard(&("JOB_COMPLETION_INDEX", i)).spawn().expect("spawn run-shard.sh"))
        .collect();
    // Shard 1 owns parts 1, 5 and 9: kill it when the upload of its first part appears.
    let deadline = Instant::now() + Duration::from_secs(120);
    while !s3.uploads_in_progress().contains("<Key>out/part-00001.parquet</Key>") {
        assert!(Instant::now() < deadline, "shard 1 started no upload");
        assert!(shards[1].try_wait().expect("wait").is_none(), "shard 1 finished before it could be killed");
    }
    shards[1].kill().expect("SIGKILL");
    for child in &mut shards {
        child.wait().expect("wait");
    }
    let keys = s3.list("out");
    assert!(!keys.contains(&"out/_SUCCESS".to_owned()), "{keys:?}");
    assert!(!keys.contains(&"out/part-00001.parquet".to_owned()), "the killed upload is not visible: {keys:?}");
    assert_eq!(keys.len(), 9, "the other shards' parts: {keys:?}");

    // As Airflow reruns a failed task: the index in SHARD_INDEX.
    let output = shard(&("SHARD_INDEX", "1")).output().expect("rerun run-shard.sh");
    assert!(output.status.success(), "{}", stderr(&output));
    let log = stderr(&output);
    assert!(log.lines().all(|line| line.starts_with('{')), "JSON log lines only: {log}");
    assert!(log.contains("\"parts_written\":3") && log.contains("\"complete\":true"), "{log}");
    let keys = s3.list("out");
    let mut expected: Vec<String> =
        (0..12).map(|i| format!("out/part-{i:05}.parquet")).chain(["out/_SUCCESS".to_owned()]).collect();
    expected.sort();
    assert_eq!(keys, expected, "exactly the parts and _SUCCESS, nothing left over");
    assert_same_rows(&read(&single), &s3.read_parts("out"));
}

#[test]
fn a_missing_bucket_or_object_is_a_clear_error_and_commits_nothing() {
    let Some(s3) = S3Server::start("a_missing_bucket_or_object_is_a_clear_error_and_commits_nothing") else { return };
    s3.put("in/reviews.parquet", &reviews());
    let output = s3.run(&["run", "--input", "s3://corpus/in/nothing.parquet", "--output", "s3://corpus/out/"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("s3://corpus/in/nothing.parquet does not exist"), "{}", stderr(&output));

    let output = s3.run(&["run", "--input", "s3://no-such-bucket/in/*.parquet", "--output", "s3://corpus/out/"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("bucket does not exist"), "{}", stderr(&output));

    let output = s3.run(&["run", "--input", "s3://corpus/in/reviews.parquet", "--output", "s3://no-such-bucket/out/"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("bucket does not exist"), "{}", stderr(&output));
    assert!(s3.list("out").is_empty());

    let output = s3.run(&["run", "--input", "s3://corpus/in/reviews.parquet", "--output", "s3://corpus/in/"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("is covered by the input"), "{}", stderr(&output));
}

#[test]
fn credentials_refused_or_missing_are_clear_errors() {
    let Some(s3) = S3Server::start_with("credentials_refused_or_missing_are_clear_errors", true) else { return };
    let reviews = reviews().display().to_string();

    // Refused: the server knows no such key, for an input and for an output.
    for args in [
        ["run", "--input", "s3://corpus/in/reviews.parquet", "--output", "/nonexistent/never.parquet"],
        ["run", "--input", reviews.as_str(), "--output", "s3://corpus/out/"],
    ] {
        let output = s3.run(&args);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {}", stderr(&output));
        let message = stderr(&output);
        assert!(message.contains("s3://corpus/"), "names the location: {message}");
        assert!(message.contains("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"), "says what to set: {message}");
    }

    // Missing: no credentials in the environment, and a metadata service that has none
    // (on EC2 it would hand out the instance role's).
    let metadata = TcpListener::bind("127.0.0.1:0").expect("bind");
    let metadata_url = format!("http://{}", metadata.local_addr().expect("addr"));
    std::thread::spawn(move || {
        for mut stream in metadata.incoming().flatten() {
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let _ = stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    let output = s3
        .pipeline(&["run", "--input", "s3://corpus/in/reviews.parquet", "--output", "/nonexistent/never.parquet"])
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env("AWS_METADATA_ENDPOINT", &metadata_url)
        .output()
        .expect("run pipeline");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(message.contains("s3://corpus/in/reviews.parquet: no credentials"), "{message}");
    assert!(message.contains("profile files are not read"), "{message}");
}

/// The bytes of the object at `key`.

#[test]
fn aliases_of_an_input_key_are_refused_as_outputs_by_run_report_and_sql() {
    let Some(s3) = S3Server::start("aliases_of_an_input_key_are_refused_as_outputs_by_run_report_and_sql") else {
        return;
    };
    s3.put("in/reviews.parquet", &reviews());
    let before = s3.get("in/reviews.parquet");
    for alias in
        ["s3://corpus/in/./reviews.parquet", "s3://corpus/x/../in/reviews.parquet", "s3://corpus/in/%72eviews.parquet"]
    {
        let output = s3.run(&["run", "--input", "s3://corpus/in/reviews.parquet", "--output", alias]);
        assert_eq!(output.status.code(), Some(1), "{alias}: {}", stderr(&output));
        assert!(stderr(&output).contains("is covered by the input"), "{alias}: {}", stderr(&output));
    }
    assert_eq!(s3.get("in/reviews.parquet"), before, "the input is untouched");

    // A dataset read as input, and written through an alias with --overwrite: its parts stay.
    let into_dataset =
        ["run", "--input", "s3://corpus/in/reviews.parquet", "--output", "s3://corpus/ds/", "--rows-per-part", "100"];
    let output = s3.run(&into_dataset);
    assert!(output.status.success(), "{}", stderr(&output));
    let parts = s3.list("ds");
    let output = s3.run(&[
        "run",
        "--input",
        "s3://corpus/ds/",
        "--output",
        "s3://corpus/x/../ds/",
        "--overwrite",
        "--max-tokens",
        "9",
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert_eq!(s3.list("ds"), parts, "no part deleted");

    // The report: predictions stored without an extension, and the page aimed at them.
    let dir = tempfile::tempdir().expect("tempdir");
    let predictions = dir.path().join("p.parquet");
    assert!(run(&reviews(), &predictions, &[]).status.success());
    s3.put("out/predictions", &predictions);
    let stored = s3.get("out/predictions");
    let report = s3.report(&["--input", "s3://corpus/out/predictions", "--output", "s3://corpus/out/./predictions"]);
    assert_eq!(report.status.code(), Some(1), "{}", stderr(&report));
    assert!(stderr(&report).contains("is covered by the input"), "{}", stderr(&report));
    assert_eq!(s3.get("out/predictions"), stored, "the predictions are untouched");
    // A page among the parts of a dataset would be read as a part by other readers; beside
    // the prefix it is fine.
    let report = s3.report(&["--input", "s3://corpus/ds/", "--output", "s3://corpus/ds/report.html"]);
    assert_eq!(report.status.code(), Some(1), "{}", stderr(&report));
    assert!(stderr(&report).contains("inside the input prefix"), "{}", stderr(&report));
    let report = s3.report(&["--input", "s3://corpus/ds/", "--output", "s3://corpus/ds-report.html"]);
    assert!(report.status.success(), "{}", stderr(&report));
    let rerun = s3.run(&into_dataset);
    assert!(rerun.status.success(), "{}", stderr(&rerun));

    // SQL writes to object storage, and never over a table it reads.
    let output = s3.sql(&["SELECT count(*) AS n FROM 's3://corpus/ds/'", "--output", "s3://corpus/results/count.csv"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(String::from_utf8_lossy(&s3.get("results/count.csv")), "n\n300\n");
    assert!(!Path::new("s3:").exists(), "nothing written to a local path named s3:");
    let output = s3.sql(&[
        "SELECT * FROM p",
        "--table",
        "p=s3://corpus/out/predictions",
        "--output",
        "s3://corpus/out/predictions",
        "--format",
        "parquet",
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("is covered by the input"), "{}", stderr(&output));
    assert_eq!(s3.get("out/predictions"), stored);
}

#[test]
fn a_part_lost_after_success_in_a_bucket_is_noticed_and_written_again() {
    let Some(s3) = S3Server::start("a_part_lost_after_success_in_a_bucket_is_noticed_and_written_again") else {
        return;
    };
    s3.put("in/reviews.parquet", &reviews());
    let args =
        ["run", "--input", "s3://corpus/in/reviews.parquet", "--output", "s3://corpus/out/", "--rows-per-part", "100"];
    assert!(s3.run(&args).status.success());
    block_on(s3.store().delete(&ObjectPath::from("out/part-00001.parquet"))).expect("delete");
    let finalize = Command::new(env!("CARGO_BIN_EXE_pipeline"))
        .args(["finalize", "s3://corpus/out/"])
        .envs(s3.env())
        .output()
        .expect("finalize");
    assert_eq!(finalize.status.code(), Some(1), "{}", stderr(&finalize));
    assert!(stderr(&finalize).contains("part-00001.parquet"), "{}", stderr(&finalize));
    assert!(!s3.list("out").contains(&"out/_SUCCESS".to_owned()), "a _SUCCESS that lies is withdrawn");
    let output = s3.run(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("1 part written, 2 already committed"));
    assert_eq!(s3.read_parts("out").num_rows(), 300);
    assert!(s3.list("out").contains(&"out/_SUCCESS".to_owned()));
}

#[cfg(unix)]
#[test]
fn a_signal_aborts_the_upload_of_a_single_file_output() {
    let Some(s3) = S3Server::start("a_signal_aborts_the_upload_of_a_single_file_output") else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("many.parquet");
    many_reviews(&input, 10, 500);
    for (signal, code) in [("TERM", 143), ("INT", 130)] {
        let child = Command::new(env!("CARGO_BIN_EXE_pipeline"))
            .args(["run", "--model"])
            .arg(tiny_model())
            .arg("--input")
            .arg(&input)
            .args(["--output", "s3://corpus/out/single.parquet", "--chunk-rows", "1", "--batch-size", "1"])
            .envs(s3.env())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let deadline = Instant::now() + Duration::from_secs(60);
        while !s3.uploads_in_progress().contains("<Key>out/single.parquet</Key>") {
            assert!(Instant::now() < deadline, "no upload started");
            std::thread::sleep(Duration::from_millis(20));
        }
        let sent = Command::new("kill").args([&format!("-{signal}"), &child.id().to_string()]).status();
        assert!(sent.expect("kill").success());
        let output = child.wait_with_output().expect("wait");
        assert_eq!(output.status.code(), Some(code), "{}", stderr(&output));
        assert!(
            stderr(&output).contains("aborted the unfinished upload of s3://corpus/out/single.parquet"),
            "{}",
            stderr(&output)
        );
        assert!(!s3.uploads_in_progress().contains("out/single.parquet"), "{}", s3.uploads_in_progress());
        assert!(s3.list("out").is_empty());
    }
}

/// `--model s3://…/`: the package is downloaded once into the cache, reused while its objects
/// are unchanged, fetched again when one is replaced, and a missing package is named.
#[test]
fn a_model_in_object_storage_is_downloaded_once_and_cached() {
    let Some(s3) = S3Server::start("a_model_in_object_storage_is_downloaded_once_and_cached") else { return };
    for name in ["manifest.json", "tokenizer.json", "model.onnx"] {
        s3.put(&format!("models/tiny/{name}"), &tiny_model().join(name));
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("cache");
    let local = dir.path().join("local.parquet");
    assert!(run(&reviews(), &local, &[]).status.success());
    let remote_run = |out: &Path, model: &str| {
        Command::new(env!("CARGO_BIN_EXE_pipeline"))
            .args(["run", "--model", model, "--input"])
            .arg(reviews())
            .arg("--output")
            .arg(out)
            .envs(s3.env())
            .env("PIPELINE_MODEL_CACHE", &cache)
            .output()
            .expect("run pipeline")
    };
    let first = dir.path().join("first.parquet");
    let output = remote_run(&first, "s3://corpus/models/tiny/");
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stderr(&output).contains("model package downloaded"), "{}", stderr(&output));
    assert_same_rows(&read(&local), &read(&first));
    assert_eq!(files_in(&cache).len(), 1, "one cache entry");

    // Unchanged: read from the cache.
    let output = remote_run(&dir.path().join("second.parquet"), "s3://corpus/models/tiny/");
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stderr(&output).contains("using the cached copy"), "{}", stderr(&output));

    // Damaged in place (same size, bytes zeroed), then a file lost: downloaded again into the
    // same entry, never read as the package nor stuck on "Directory not empty".
    let entry = cache.join(&files_in(&cache)[0]);
    let size = std::fs::metadata(entry.join("model.onnx")).expect("cached graph").len();
    std::fs::write(entry.join("model.onnx"), vec![0u8; usize::try_from(size).expect("size")]).expect("damage");
    let output = remote_run(&dir.path().join("damaged.parquet"), "s3://corpus/models/tiny/");
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stderr(&output).contains("model package downloaded"), "{}", stderr(&output));
    assert_same_rows(&read(&local), &read(&dir.path().join("damaged.parquet")));
    std::fs::remove_file(entry.join("tokenizer.json")).expect("lose a file");
    let output = remote_run(&dir.path().join("lost.parquet"), "s3://corpus/models/tiny/");
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stderr(&output).contains("model package downloaded"), "{}", stderr(&output));
    assert_eq!(files_in(&cache).len(), 1, "the same entry, repaired");

    // A file replaced in the bucket: fetched again, into a new entry.
    s3.put("models/tiny/tokenizer.json", &tiny_model().join("tokenizer.json"));
    let manifest = std::fs::read_to_string(tiny_model().join("manifest.json")).expect("manifest");
    let edited = dir.path().join("manifest.json");
    std::fs::write(&edited, format!("{manifest}\n")).expect("write");
    s3.put("models/tiny/manifest.json", &edited);
    let output = remote_run(&dir.path().join("third.parquet"), "s3://corpus/models/tiny/");
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stderr(&output).contains("model package downloaded"), "{}", stderr(&output));
    assert_eq!(files_in(&cache).len(), 2, "a new entry for the new version");

    // SQL's classify() takes the same URL (it said "is not a directory"), from the cache.
    let query = "SELECT classify('A wonderful, moving film.', 's3://corpus/models/tiny/').prediction AS p";
    let output = Command::new(env!("CARGO_BIN_EXE_pipeline"))
        .args(["sql", query, "--format", "csv"])
        .envs(s3.env())
        .env("PIPELINE_MODEL_CACHE", &cache)
        .output()
        .expect("run sql");
    assert!(output.status.success(), "{}", stderr(&output));
    let printed = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(printed == "p\npos\n" || printed == "p\nneg\n", "{printed}");
    // Beside the downloaded entries, `pipeline sql` unpacks its default model into the cache.
    let downloaded = || files_in(&cache).into_iter().filter(|name| !name.starts_with("embedded-")).count();
    assert_eq!(downloaded(), 2, "the cached entry was used");

    // No package there: the missing file is named, exit 1, nothing cached.
    let missing = dir.path().join("missing.parquet");
    let output = remote_run(&missing, "s3://corpus/models/none/");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("s3://corpus/models/none/manifest.json"), "{}", stderr(&output));
    assert!(!missing.exists());
    assert_eq!(downloaded(), 2);
}

#[test]
fn a_partitioned_dataset_in_a_bucket_grows_by_its_new_objects_and_reads_back() {
    let Some(s3) = S3Server::start("a_partitioned_dataset_in_a_bucket_grows_by_its_new_objects_and_reads_back") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, from) in [("b", 0), ("c", 100), ("a", 200)] {
        let slice = dir.path().join(format!("{name}.parquet"));
        reviews_slice(&slice, from, 100, 50);
        if name != "a" {
            s3.put(&format!("in/{name}.parquet"), &slice);
        }
    }
    let args = [
        "run",
        "--input",
        "s3://corpus/in/",
        "--output",
        "s3://corpus/out/",
        "--rows-per-part",
        "50",
        "--partition-by",
        "prediction",
    ];
    let output = s3.run(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    let first = s3.list("out");
    assert!(first.iter().all(|k| k == "out/_SUCCESS" || k.starts_with("out/prediction=")), "{first:?}");
    // `a` sorts first, and is the only one classified.
    s3.put("in/a.parquet", &dir.path().join("a.parquet"));
    let output = s3.run(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("2 parts written, 4 already committed, of 6 in all"));
    let keys = s3.list("out");
    assert!(first.iter().all(|k| keys.contains(k)), "{keys:?}");

    let query = "SELECT prediction, count(*) AS n FROM t GROUP BY prediction ORDER BY prediction";
    let from_bucket = s3.sql(&["--table", "t=s3://corpus/out/", "--format", "csv", query]);
    assert!(from_bucket.status.success(), "{}", stderr(&from_bucket));
    let local = dir.path().join("local.parquet");
    assert!(run(&reviews(), &local, &[]).status.success());
    let local_table = format!("t={}", local.display());
    let expected = s3.sql(&["--table", &local_table, "--format", "csv", query]);
    assert_eq!(String::from_utf8_lossy(&from_bucket.stdout), String::from_utf8_lossy(&expected.stdout));
    let report = s3.report(&["--input", "s3://corpus/out/", "--output", "s3://corpus/report.html"]);
    assert!(report.status.success(), "{}", stderr(&report));
    assert!(
        String::from_utf8_lossy(&report.stdout).starts_with("300 rows"),
        "{}",
        String::from_utf8_lossy(&report.stdout)
    );
}

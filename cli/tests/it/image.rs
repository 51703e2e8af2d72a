//! The image, built from the repository's Dockerfile with this test build's binary
//! (`scripts/build-image.sh`: buildah and podman, no Docker daemon) and run as the Kubernetes
//! Job in deploy/ runs it: its user, a read-only root filesystem with the model cache as the
//! only writable mount, its exact command and environment, against an S3 server on loopback.
//!
//! Where the container tools cannot be installed the tests skip loudly; under `CI=true` they
//! fail.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use crate::common::s3_server::*;
use crate::common::*;

const TAG: &str = "localhost/attention-classifier/pipeline:test";

fn podman() -> Command {
    let mut command = Command::new("podman");
    command.env("CONTAINERS_CONF", repo_root().join("scripts/container/containers.conf"));
    command
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// The image, built once per test process from the binary these tests run; `false` (with a
/// loud note) where it cannot be built, outside CI.
fn image_built(test: &str) -> bool {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let output = Command::new("bash")
            .arg(repo_root().join("scripts/build-image.sh"))
            .arg(TAG)
            .env("PIPELINE_BINARY", env!("CARGO_BIN_EXE_pipeline"))
            .output()
            .map_err(|error| format!("cannot run scripts/build-image.sh: {error}"))?;
        if output.status.success() {
            Ok(())
        } else {
            let log = text(&output);
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            Err(format!("scripts/build-image.sh failed:\n{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n")))
        }
    });
    test_support::or_skip(test, built.as_ref()).is_some()
}

/// What the indexed Job in deploy/ tells Kubernetes to run, read from the file itself, so a
/// change there is a change here.
struct Job {
    command: Vec<String>,
    env_names: Vec<String>,
    user: String,
    read_only_root: bool,
    cache_mount: String,
    fail_codes: String,
    retry_codes: String,
}

impl Job {
    fn load() -> Job {
        let yaml = std::fs::read_to_string(repo_root().join("deploy/kubernetes-indexed-job.yaml")).expect("the Job");
        // What follows `key`: up to one of `ends`.
        let after = |key: &str, ends: &[char]| -> String {
            let at = yaml.find(key).unwrap_or_else(|| panic!("the Job has no {key}"));
            let rest = &yaml[at + key.len()..];
            rest[..rest.find(ends).expect("a value")].trim().to_owned()
        };
        let value = |key: &str| after(key, &[',', '}', '\n']);
        let command = serde_json::from_str(&after("command: ", &['\n'])).expect("the command, a JSON-style list");
        let env = yaml.split("          env:\n").nth(1).expect("an env list");
        let env_names = env
            .lines()
            .map_while(|line| line.trim().strip_prefix("- { name: "))
            .map(|entry| entry[..entry.find(',').expect("name, value")].to_owned())
            .collect();
        let rules = yaml.split("podFailurePolicy:").nth(1).expect("a podFailurePolicy");
        let codes_after = |action: &str| -> String {
            let rule = &rules[rules.find(action).unwrap_or_else(|| panic!("no {action} rule"))..];
            let values = &rule[rule.find("values: ").expect("exit codes") + "values: ".len()..];
            values[..values.find('\n').expect("a line")].to_owned()
        };
        Job {
            command,
            env_names,
            user: format!("{}:{}", value("runAsUser: "), value("runAsGroup: ")),
            read_only_root: value("readOnlyRootFilesystem: ") == "true",
            cache_mount: value("{ name: model-cache, mountPath: "),
            fail_codes: codes_after("action: FailIndex"),
            retry_codes: codes_after("action: Count"),
        }
    }

    /// One pod of the Job: `index` of `shards`, with the Job's variables set to `values`, the
    /// Secret's (the S3 endpoint and credentials) and a scratch directory as the model cache.
    fn run_pod(
        &self,
        index: usize,
        values: &BTreeMap<&str, String>,
        secret: &[(&str, String)],
        cache: &Path,
    ) -> Output {
        let names: Vec<&str> = values.keys().copied().collect();
        let mut job_names: Vec<&str> = self.env_names.iter().map(String::as_str).collect();
        job_names.sort_unstable();
        assert_eq!(names, job_names, "every variable of the Job");
        let mut command = podman();
        command.args(["run", "--rm", "--user", &self.user]);
        if self.read_only_root {
            // Kubernetes gives a read-only root nothing writable: no /tmp, unlike podman's default.
            command.args(["--read-only", "--read-only-tmpfs=false"]);
        }
        command.arg("--volume").arg(format!("{}:{}", cache.display(), self.cache_mount));
        command.arg("--entrypoint").arg(serde_json::to_string(&self.command).expect("json"));
        command.args(["--env", &format!("JOB_COMPLETION_INDEX={index}")]);
        for (name, value) in values.iter().map(|(k, v)| (*k, v)).chain(secret.iter().map(|(k, v)| (*k, v))) {
            command.args(["--env", &format!("{name}={value}")]);
        }
        command.arg(TAG).output().expect("run podman")
    }
}

/// The values of the Job's variables for a run over the bucket's `input` into its `out/`.
fn job_variables(input: &str, shards: usize) -> BTreeMap<&'static str, String> {
    BTreeMap::from([
        ("PIPELINE_INPUT", format!("s3://{BUCKET}/{input}")),
        ("PIPELINE_OUTPUT", format!("s3://{BUCKET}/out/")),
        ("SHARD_COUNT", shards.to_string()),
        ("PIPELINE_OUTPUT_FORMAT", "parquet".to_owned()),
        ("PIPELINE_JOB_NAME", "classify-reviews".to_owned()),
        ("PIPELINE_METRICS_PUSH", String::new()),
        ("OPENLINEAGE_URL", String::new()),
        ("OPENLINEAGE_NAMESPACE", "classify".to_owned()),
    ])
}

/// An emptyDir as Kubernetes makes it: empty, and writable by any user.
fn scratch_volume(parent: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = parent.join("model-cache");
    std::fs::create_dir(&dir).expect("mkdir");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    dir
}

fn files_under(dir: &Path) -> Vec<String> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                pending.push(path);
            } else {
                files.push(path.strip_prefix(dir).expect("under").display().to_string());
            }
        }
    }
    files.sort();
    files
}

#[test]
fn the_image_runs_the_sharded_job_as_kubernetes_runs_it() {
    let test = "the_image_runs_the_sharded_job_as_kubernetes_runs_it";
    let Some(s3) = S3Server::start(test) else { return };
    if !image_built(test) {
        return;
    }
    let job = Job::load();
    assert!(job.read_only_root, "the Job runs with a read-only root filesystem");

    // The image's own user is the one the Job names, group included.
    let id = podman().args(["run", "--rm", "--entrypoint", "id", TAG]).output().expect("podman");
    assert!(id.status.success(), "{}", text(&id));
    let (uid, gid) = job.user.split_once(':').expect("uid:gid");
    assert!(text(&id).starts_with(&format!("uid={uid}(pipeline) gid={gid}(pipeline)")), "{}", text(&id));

    s3.put("in/reviews-a.parquet", &reviews());
    s3.put("in/reviews-b.parquet", &reviews());
    let before = s3.list("");
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = scratch_volume(dir.path());
    let values = job_variables("in/*.parquet", 2);
    for index in 0..2 {
        let pod = job.run_pod(index, &values, &s3.env(), &cache);
        assert!(pod.status.success(), "pod {index}: {}", text(&pod));
    }

    let written: Vec<String> = s3.list("").into_iter().filter(|key| !before.contains(key)).collect();
    assert!(written.iter().all(|key| key.starts_with("out/")), "written outside the output: {written:?}");
    assert!(written.contains(&"out/_SUCCESS".to_owned()), "{written:?}");
    assert!(written.iter().filter(|key| key.contains("/part-")).count() >= 2, "{written:?}");
    assert_eq!(s3.read_parts("out/").num_rows(), 600, "every review of both inputs, once");
    for key in ["in/reviews-a.parquet", "in/reviews-b.parquet"] {
        assert_eq!(s3.get(key), std::fs::read(reviews()).expect("read"), "{key} is untouched");
    }
    // The scratch volume holds the default model's cache entry and nothing else.
    let cached = files_under(&cache);
    assert!(!cached.is_empty() && cached.iter().all(|f| f.starts_with("attention-classifier/models/")), "{cached:?}");
}

#[test]
fn bad_input_and_a_store_that_is_down_exit_as_the_pod_failure_policy_expects() {
    let test = "bad_input_and_a_store_that_is_down_exit_as_the_pod_failure_policy_expects";
    let Some(s3) = S3Server::start(test) else { return };
    if !image_built(test) {
        return;
    }
    let job = Job::load();
    // 1 fails the index at once; 75 is retried.
    assert_eq!(job.fail_codes, "[1, 2]");
    assert_eq!(job.retry_codes, "[75]");
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = scratch_volume(dir.path());

    // Not Parquet under a .parquet name: a retry would fail the same way.
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "these are notes, not a table\n").expect("write");
    s3.put("in/broken.parquet", &notes);
    let values = job_variables("in/broken.parquet", 1);
    let pod = job.run_pod(0, &values, &s3.env(), &cache);
    assert_eq!(pod.status.code(), Some(1), "{}", text(&pod));
    assert!(text(&pod).contains("in/broken.parquet"), "the error names the object: {}", text(&pod));
    assert!(s3.list("out/").is_empty(), "a failed shard commits nothing: {:?}", s3.list("out/"));

    // The store refuses connections (nothing listens on the port) for the whole retry budget.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let mut down: Vec<(&str, String)> = s3.env().into_iter().filter(|(name, _)| *name != "AWS_ENDPOINT_URL").collect();
    down.push(("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{closed}")));
    down.push(("PIPELINE_STORAGE_RETRY_SECONDS", "2".to_owned()));
    s3.put("in/reviews.parquet", &reviews());
    let values = job_variables("in/reviews.parquet", 1);
    let pod = job.run_pod(0, &values, &down, &cache);
    assert_eq!(pod.status.code(), Some(75), "{}", text(&pod));
}

#[test]
fn without_a_writable_cache_the_error_says_what_to_mount() {
    if !image_built("without_a_writable_cache_the_error_says_what_to_mount") {
        return;
    }
    let job = Job::load();
    let pod = podman()
        .args(["run", "--rm", "--user", &job.user, "--read-only", "--read-only-tmpfs=false", TAG, "inspect"])
        .output()
        .expect("podman");
    assert_eq!(pod.status.code(), Some(1), "{}", text(&pod));
    assert!(text(&pod).contains(&format!("mount a volume at {}", job.cache_mount)), "{}", text(&pod));
}

#[test]
fn the_image_carries_training() {
    if !image_built("the_image_carries_training") {
        return;
    }
    let help = podman().args(["run", "--rm", TAG, "train", "--help"]).output().expect("podman");
    assert!(help.status.success(), "{}", text(&help));
    assert!(text(&help).contains("--variant"), "{}", text(&help));
}

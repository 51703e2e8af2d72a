//! What a run takes from the machine: the default model's cache on disk, and memory bounded
//! by the text in flight.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Array, Int64Array};

use super::*;

/// `pipeline run` of the embedded default model from `dir/cwd`, with `TMPDIR=dir/tmp`,
/// `HOME=dir/home` and `PIPELINE_MODEL_CACHE=cache`.
fn default_model_run(dir: &Path, cache: &std::ffi::OsStr, input: &Path, out: &Path) -> Command {
    for sub in ["cwd", "tmp", "home"] {
        std::fs::create_dir_all(dir.join(sub)).expect("mkdir");
    }
    let mut command = Command::new(env!("CARGO_BIN_EXE_pipeline"));
    command
        .current_dir(dir.join("cwd"))
        .env("TMPDIR", dir.join("tmp"))
        .env("HOME", dir.join("home"))
        .env_remove("XDG_CACHE_HOME")
        .env("PIPELINE_MODEL_CACHE", cache)
        .args(["run", "--input"])
        .arg(input)
        .arg("--output")
        .arg(out);
    command
}

#[test]
fn the_default_model_is_unpacked_once_into_the_cache_and_never_left_in_tmpdir() {
    let dir = tempfile::tempdir().expect("tempdir");
    let outputs = tempfile::tempdir().expect("tempdir");
    let out = outputs.path().join("out.parquet");
    // An empty PIPELINE_MODEL_CACHE is unset: the cache under HOME, nothing in the current directory.
    let output = default_model_run(dir.path(), "".as_ref(), &reviews(), &out).output().expect("run");
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(files_in(&dir.path().join("cwd")), Vec::<String>::new());
    let entries = files_in(&dir.path().join("home/.cache/attention-classifier/models"));
    assert!(entries.len() == 1 && entries[0].starts_with("embedded-"), "{entries:?}");
    assert_eq!(files_in(&dir.path().join("tmp")), Vec::<String>::new());

    // kill -9 mid-run leaves no copy of the model behind (each was 14 MB, for ever).
    let input = outputs.path().join("many.parquet");
    many_reviews(&input, 30, 1000);
    let mut child = default_model_run(dir.path(), "".as_ref(), &input, &outputs.path().join("killed.parquet"))
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    std::thread::sleep(Duration::from_millis(1500));
    child.kill().expect("kill -9");
    child.wait().expect("wait");
    let left: Vec<String> = files_in(&dir.path().join("tmp"))
        .into_iter()
        .filter(|name| name.starts_with("pipeline-default-model"))
        .collect();
    assert_eq!(left, Vec::<String>::new(), "copies of the default model left in TMPDIR");

    // A damaged entry (a file lost) is written again, not "Directory not empty".
    let entry = dir.path().join("home/.cache/attention-classifier/models").join(&entries[0]);
    std::fs::remove_file(entry.join("tokenizer.json")).expect("lose a file");
    std::fs::remove_file(&out).expect("clean");
    let output = default_model_run(dir.path(), "".as_ref(), &reviews(), &out).output().expect("run");
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(entry.join("tokenizer.json").is_file());
}

#[test]
fn a_model_cache_that_is_not_a_directory_is_named_by_its_variable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"not a directory").expect("write");
    let dangling = dir.path().join("dangling");
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).expect("symlink");
    for (cache, what) in [(&file, "is not a directory"), (&dangling, "is a link to nothing")] {
        let out = dir.path().join("out.parquet");
        // The default model still runs, from a temporary copy, and says why.
        let output = default_model_run(dir.path(), cache.as_os_str(), &reviews(), &out).output().expect("run");
        let err = stderr(&output);
        assert!(output.status.success(), "{err}");
        assert!(err.contains("PIPELINE_MODEL_CACHE") && err.contains(what), "{err}");
        assert!(!err.contains("File exists"), "{err}");
        std::fs::remove_file(&out).expect("clean");
    }
    assert_eq!(std::fs::read(&file).expect("read"), b"not a directory", "untouched");
}

/// The peak resident memory (VmHWM) of `command` in MiB, read from /proc while it runs, and its exit status.
fn peak_rss_mib(command: &mut Command) -> (std::process::ExitStatus, u64) {
    let mut child = command.stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("spawn");
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak_kib = 0u64;
    loop {
        if let Ok(status) = std::fs::read_to_string(&status_file)
            && let Some(line) = status.lines().find(|line| line.starts_with("VmHWM:"))
        {
            let kib = line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or(0);
            peak_kib = peak_kib.max(kib);
        }
        if let Some(status) = child.try_wait().expect("wait") {
            return (status, peak_kib / 1024);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn memory_is_bounded_by_the_text_in_flight_not_by_documents() {
    // 96 documents of 100,000 tokens each, read as one window of documents, peaked at
    // 1,277 MiB before the window was bounded by its text too (390 MiB after; 48 documents
    // took 717 MiB before, 372 MiB after: memory grew with the documents, now it does not).
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("long.parquet");
    let text = "a good film , truly great . ".repeat(100_000 / 7);
    let texts: Vec<String> = (0..96).map(|i| format!("{i} {text}")).collect();
    let ids: Arc<dyn Array> = Arc::new(Int64Array::from_iter_values(0..96));
    write_parquet(&input, vec![("id", ids), ("text", Arc::new(arrow::array::StringArray::from(texts)))]);
    let out = dir.path().join("out.parquet");
    let mut command = Command::new(env!("CARGO_BIN_EXE_pipeline"));
    command.args(["run", "--backend", "tract", "--threads", "2", "--input"]).arg(&input);
    command.arg("--model").arg(tiny_model()).arg("--output").arg(&out);
    let (status, peak) = peak_rss_mib(&mut command);
    assert!(status.success());
    assert_eq!(read(&out).num_rows(), 96);
    eprintln!("peak RSS {peak} MiB");
    assert!(peak < 600, "peak RSS {peak} MiB");
}

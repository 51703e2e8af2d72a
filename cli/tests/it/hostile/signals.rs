//! Runs stopped from outside (signals, a panic, a closed stderr) or by a file that fails half
//! way: nothing unfinished is left, and the logs say what happened.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;

/// Starts a slow `pipeline run` (one document per window over 3,000 rows) into `out`.
fn slow_run(dir: &Path, out: &Path) -> std::process::Child {
    slow_run_with(dir, out, &[])
}

/// Waits for the run's temporary output to appear beside `out`; returns its path.
fn wait_for_temporary(out: &Path) -> PathBuf {
    let dir = out.parent().expect("parent");
    let started = Instant::now();
    loop {
        let found = files_in(dir).into_iter().find(|name| name.ends_with(".partial"));
        if let Some(name) = found {
            return dir.join(name);
        }
        assert!(started.elapsed() < Duration::from_secs(60), "no temporary output appeared");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn partials(dir: &Path) -> Vec<String> {
    files_in(dir).into_iter().filter(|name| name.ends_with(".partial")).collect()
}

#[cfg(unix)]
#[test]
fn signals_remove_the_unfinished_output_and_a_rerun_clears_what_kill_9_left() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).expect("mkdir");
    let out = out_dir.join("predictions.parquet");
    for (signal, code) in [("TERM", 143), ("INT", 130)] {
        let child = slow_run(dir.path(), &out);
        let temporary = wait_for_temporary(&out);
        let sent = Command::new("kill").args([&format!("-{signal}"), &child.id().to_string()]).status();
        assert!(sent.expect("kill").success());
        let output = child.wait_with_output().expect("wait");
        assert_eq!(output.status.code(), Some(code), "SIG{signal}: {}", stderr(&output));
        assert!(!temporary.exists(), "SIG{signal} left {}", temporary.display());
        assert!(partials(&out_dir).is_empty() && !out.exists(), "SIG{signal}: {:?}", files_in(&out_dir));
    }

    // kill -9 cannot be handled: the temporary stays, unlocked, until the next run removes it.
    let mut child = slow_run(dir.path(), &out);
    let temporary = wait_for_temporary(&out);
    child.kill().expect("SIGKILL");
    child.wait().expect("wait");
    assert!(temporary.exists(), "SIGKILL leaves the temporary");
    let output = run(&reviews(), &out, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(partials(&out_dir).is_empty(), "the rerun removed what the killed run left: {:?}", files_in(&out_dir));
    assert!(out.is_file());
}

#[test]
fn a_panic_is_reported_as_an_internal_error_and_removes_the_output() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.parquet");
    let output = run(&reviews(), &out, &["--chunk-rows", "10", "--panic-after-first-chunk"]);
    let err = stderr(&output);
    assert_eq!(exit_code(&output), Some(70), "{err}");
    // The report names where it panicked (file and line; the backtrace names the functions).
    assert!(err.contains("internal error, please report") && err.contains("at pipeline/src/stages/write.rs:"), "{err}");
    assert!(err.contains("pipeline::stages::write::injected_panic"), "{err}");
    assert!(err.contains("removed the unfinished"), "{err}");
    assert!(files_in(dir.path()).is_empty(), "{:?}", files_in(dir.path()));
}

/// A file that decodes for its first windows and fails in a later one: the failing stage
/// stops the whole line, the run names the file and rows, and nothing is left behind.
#[test]
fn a_file_that_fails_mid_run_stops_every_stage_and_leaves_no_output() {
    use parquet::file::properties::WriterProperties;
    use parquet::file::reader::{FileReader, SerializedFileReader};

    let dir = tempfile::tempdir().expect("tempdir");
    let inputs = dir.path().join("inputs");
    std::fs::create_dir(&inputs).expect("inputs dir");
    let texts: Vec<String> =
        (0..3000).map(|i| format!("review {i}: a fine film, well acted and {} long", i % 97)).collect();
    let good = inputs.join("a.parquet");
    write_parquet(&good, vec![("text", Arc::new(arrow::array::StringArray::from(texts.clone())))]);
    // Three row groups; the last one's text page is then overwritten with noise.
    let bad = inputs.join("b.parquet");
    let batch = read(&good);
    let properties = WriterProperties::builder().set_max_row_group_row_count(Some(1000)).build();
    let file = std::fs::File::create(&bad).expect("create");
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), Some(properties)).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
    let reader = SerializedFileReader::new(std::fs::File::open(&bad).expect("open")).expect("parquet");
    let last = reader.metadata().row_group(2).column(0);
    let (start, length) = (last.data_page_offset() as usize, last.compressed_size() as usize);
    let mut bytes = std::fs::read(&bad).expect("read");
    for byte in &mut bytes[start + 8..start + length.min(400)] {
        *byte = byte.wrapping_mul(31).wrapping_add(7);
    }
    std::fs::write(&bad, bytes).expect("corrupt");

    let out = dir.path().join("out.parquet");
    let output = pipeline(
        &["run", "--chunk-rows", "500", "--text-column", "text"],
        &[("--input", &inputs), ("--model", &tiny_model()), ("--output", &out)],
    );
    assert_refused(&output, 1, &["b.parquet rows 2000..2500"], &out);
    assert!(partials(dir.path()).is_empty(), "temporaries left: {:?}", partials(dir.path()));
}

/// [`slow_run`] with more arguments.
fn slow_run_with(dir: &Path, out: &Path, extra: &[&str]) -> std::process::Child {
    let data = dir.join("many");
    if !data.exists() {
        std::fs::create_dir(&data).expect("mkdir");
        for i in 0..10 {
            std::fs::copy(reviews(), data.join(format!("part-{i}.parquet"))).expect("copy");
        }
    }
    Command::new(env!("CARGO_BIN_EXE_pipeline"))
        .args(["run", "--chunk-rows", "1", "--batch-size", "1"])
        .args(extra)
        .arg("--input")
        .arg(&data)
        .arg("--model")
        .arg(tiny_model())
        .arg("--output")
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn")
}

#[cfg(unix)]
#[test]
fn a_closed_stderr_neither_kills_the_run_nor_leaves_a_partial() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).expect("mkdir");
    let out = out_dir.join("predictions.parquet");
    // As `pipeline run … 2>&1 | head -1`: the reader of stderr goes away at once. The run
    // logs as it goes, and --profile writes to stderr at the end.
    let mut child = slow_run_with(dir.path(), &out, &["--profile"]);
    drop(child.stderr.take());
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(0));
    assert_eq!(read(&out).num_rows(), 3000);
    assert!(partials(&out_dir).is_empty(), "{:?}", files_in(&out_dir));
}

fn assert_json_lines(text: &str) {
    assert!(!text.trim().is_empty(), "no log at all");
    for line in text.lines() {
        assert!(serde_json::from_str::<Value>(line).is_ok(), "not a JSON line: {line}\nin: {text}");
    }
}

#[cfg(unix)]
#[test]
fn json_logs_carry_usage_errors_and_signals_and_human_logs_to_a_pipe_have_no_colour() {
    let output = pipeline(&["--log-format", "json", "run", "--bogus"], &[]);
    assert_eq!(exit_code(&output), Some(2));
    assert_json_lines(&stderr(&output));
    assert!(stderr(&output).contains("--bogus"), "{}", stderr(&output));
    let output = pipeline(&["run", "--log-format=json", "--batch-size", "0"], &[]);
    assert_eq!(exit_code(&output), Some(2));
    assert_json_lines(&stderr(&output));
    // Help is still help.
    let output = pipeline(&["--log-format", "json", "run", "--help"], &[]);
    assert_eq!(exit_code(&output), Some(0));
    assert!(String::from_utf8_lossy(&output.stdout).contains("--input"));

    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("predictions.parquet");
    let child = slow_run_with(dir.path(), &out, &["--log-format", "json"]);
    wait_for_temporary(&out);
    let sent = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    assert!(sent.expect("kill").success());
    let output = child.wait_with_output().expect("wait");
    assert_eq!(exit_code(&output), Some(143));
    let err = stderr(&output);
    assert_json_lines(&err);
    assert!(err.contains("stopped by signal 15") && err.contains("removed the unfinished"), "{err}");

    // Human logs into a pipe (as every test's): plain text, no escape codes.
    let output = run(&reviews(), &out, &["--profile"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(!stderr(&output).contains('\u{1b}'), "{:?}", stderr(&output));
    assert!(!stderr(&output).is_empty());
}

//! tract and ONNX Runtime: the same answers, which one a run takes, and clear refusals of
//! CUDA where there is none.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;

#[test]
fn tract_and_onnx_runtime_agree() {
    let dir = tempfile::tempdir().expect("tempdir");
    let library = test_support::onnxruntime_library().expect("install ONNX Runtime for tests");
    let (tract, ort) = (dir.path().join("tract.parquet"), dir.path().join("ort.parquet"));
    assert!(run(&reviews(), &tract, &[]).status.success());
    let home = tempfile::tempdir().expect("HOME");
    let output = Command::new(env!("CARGO_BIN_EXE_pipeline"))
        .args(["run", "--backend", "ort", "--input"])
        .arg(reviews())
        .arg("--model")
        .arg(tiny_model())
        .arg("--output")
        .arg(&ort)
        .arg("--ort-library")
        .arg(&library)
        .env("HOME", home.path())
        .env_remove("XDG_CACHE_HOME")
        .env_remove(runtime::inference::TELEMETRY_OFF_VARIABLE)
        .output()
        .expect("run pipeline");
    assert!(output.status.success(), "{}", stderr(&output));
    let diff = max_diff(&probabilities(&read(&tract)), &probabilities(&read(&ort)));
    assert!(diff <= 1e-5, "tract and ORT differ by {diff}");
    // ONNX Runtime's telemetry (a device id and an event store under ~/.cache/Microsoft) is off:
    // the run wrote its output and nothing in the user's home.
    let written: Vec<_> = std::fs::read_dir(home.path()).expect("home").collect();
    assert!(written.is_empty(), "the run wrote into HOME: {written:?}");
}

#[test]
fn cuda_requests_fail_clearly_without_a_cuda_runtime() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.parquet");
    let output = run(&reviews(), &out, &["--backend", "tract", "--device", "cuda"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("tract backend runs on the CPU only"), "{}", stderr(&output));
    // The default backend never meets a GPU request with tract: it needs ONNX Runtime.
    let output = run(&reviews(), &out, &["--device", "cuda"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(!stderr(&output).contains("[tract]") && !out.exists(), "{}", stderr(&output));

    // The CPU wheel installed for the tests has no CUDA provider: a clear error, never a
    // silent fall-back to the CPU. (With onnxruntime-gpu on a GPU machine this would run.)
    let library = test_support::onnxruntime_library().expect("install ONNX Runtime for tests");
    let output = pipeline(
        &["run", "--backend", "ort", "--device", "cuda"],
        &[("--input", &reviews()), ("--model", &tiny_model()), ("--output", &out), ("--ort-library", &library)],
    );
    assert!(!output.status.success());
    assert!(stderr(&output).contains("CUDA execution provider is not available"), "{}", stderr(&output));
    // Before it, the run says which of the GPU's defaults it took.
    assert!(stderr(&output).contains("batches of 1024 documents, chunks of 8192 rows"), "{}", stderr(&output));
    assert!(!out.exists());
}

/// A fake `python3` that records that it ran and says onnxruntime lives in `capi`.
fn fake_python(dir: &Path, capi: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("bin dir");
    let script = bin.join("python3");
    let marker = dir.join("python-ran");
    std::fs::write(&script, format!("#!/bin/sh\ntouch '{}'\necho '{}'\n", marker.display(), capi.display()))
        .expect("script");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    bin
}

#[test]
fn python_is_asked_for_onnx_runtime_only_when_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let library = test_support::onnxruntime_library().expect("install ONNX Runtime for tests");
    let capi = dir.path().join("capi");
    std::fs::create_dir(&capi).expect("capi");
    std::os::unix::fs::symlink(&library, capi.join("libonnxruntime.so.1.32.0")).expect("symlink");
    let bin = fake_python(dir.path(), &capi);
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let run_ort = |library: &str, out: &Path| {
        Command::new(env!("CARGO_BIN_EXE_pipeline"))
            .args(["run", "--backend", "ort", "--ort-library", library, "--input"])
            .arg(reviews())
            .arg("--model")
            .arg(tiny_model())
            .arg("--output")
            .arg(out)
            .env("PATH", &path)
            .env_remove("ORT_DYLIB_PATH")
            .output()
            .expect("run pipeline")
    };

    // A path is used as it is: Python is not run.
    let explicit = run_ort(&library.display().to_string(), &dir.path().join("explicit.parquet"));
    assert!(explicit.status.success(), "{}", stderr(&explicit));
    assert!(!dir.path().join("python-ran").exists(), "python3 ran although a library path was given");

    // `python` asks the python3 on PATH, and uses the library it names.
    let asked = run_ort("python", &dir.path().join("python.parquet"));
    assert!(asked.status.success(), "{}", stderr(&asked));
    assert!(dir.path().join("python-ran").exists(), "python3 was not asked");

    // A python3 whose answer holds no library is a clear error.
    std::fs::remove_file(capi.join("libonnxruntime.so.1.32.0")).expect("remove");
    let missing = run_ort("python", &dir.path().join("missing.parquet"));
    assert_eq!(missing.status.code(), Some(1));
    assert!(stderr(&missing).contains("pip install onnxruntime"), "{}", stderr(&missing));
    assert!(!dir.path().join("missing.parquet").exists());
}

/// With no `--backend`, ONNX Runtime runs where its library is found, and tract, saying so,
/// where it is not.
#[test]
fn the_default_backend_is_onnx_runtime_where_its_library_is_found_else_tract() {
    let dir = tempfile::tempdir().expect("tempdir");
    let library = test_support::onnxruntime_library().expect("install ONNX Runtime for tests");
    let run_default = |library: Option<&Path>, out: &Path| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_pipeline"));
        command.current_dir(dir.path()).args(["run", "--input"]).arg(reviews()).arg("--model").arg(tiny_model());
        command.arg("--output").arg(out).env_remove("ORT_DYLIB_PATH").env("PATH", "/usr/bin:/bin");
        if let Some(library) = library {
            command.env("ORT_DYLIB_PATH", library);
        }
        command.output().expect("run pipeline")
    };
    let found = run_default(Some(&library), &dir.path().join("ort.parquet"));
    assert!(found.status.success(), "{}", stderr(&found));
    assert!(String::from_utf8_lossy(&found.stdout).contains("[ort-cpu]"), "{}", String::from_utf8_lossy(&found.stdout));
    let missing = run_default(None, &dir.path().join("tract.parquet"));
    assert!(missing.status.success(), "{}", stderr(&missing));
    // With the default target directory the tests' own copy sits next to the binary
    // (target/onnxruntime), where the default backend rightly finds it.
    let beside_binary = Path::new(env!("CARGO_BIN_EXE_pipeline"))
        .ancestors()
        .skip(1)
        .take(3)
        .any(|dir| dir.join("onnxruntime").join(runtime::inference::LIBRARY_FILE).is_file());
    let expected = if beside_binary { "[ort-cpu]" } else { "[tract]" };
    assert!(String::from_utf8_lossy(&missing.stdout).contains(expected), "expected {expected}");
    if !beside_binary {
        assert!(stderr(&missing).contains("using tract"), "{}", stderr(&missing));
    }
    // A library named in ORT_DYLIB_PATH must work: auto does not hide a wrong one behind tract.
    let wrong = run_default(Some(&dir.path().join("no-such-library.so")), &dir.path().join("wrong.parquet"));
    assert_eq!(wrong.status.code(), Some(1), "{}", stderr(&wrong));
    assert!(stderr(&wrong).contains("ORT_DYLIB_PATH"), "{}", stderr(&wrong));
    let diff = max_diff(
        &probabilities(&read(&dir.path().join("ort.parquet"))),
        &probabilities(&read(&dir.path().join("tract.parquet"))),
    );
    assert!(diff <= 1e-5, "the two defaults differ by {diff}");
}

#[test]
fn tf32_without_cuda_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.parquet");
    let output = run(&reviews(), &out, &["--tf32"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("--tf32 applies to CUDA only"), "{}", stderr(&output));
    assert!(!out.exists());
}

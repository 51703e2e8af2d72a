//! The wheel as a data engineer installs it: `scripts/build-wheel.sh` builds it (CI runs it
//! before the tests), and these tests install it into a virtual environment with pyarrow, ONNX
//! Runtime, Ray Data and PySpark (`scripts/install-python-engines.sh`), then run its Python
//! tests (python/tests) there. Without a wheel they skip loudly; under `CI=true` they fail.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::SystemTime;

use test_support::repo_root;

/// The newest wheel under target/wheels, if it is newer than the `pipeline` binary these
/// tests were built with (else it was built from older sources).
fn fresh_wheel() -> Result<PathBuf, String> {
    let dir = repo_root().join("target").join("wheels");
    let wheel = std::fs::read_dir(&dir)
        .map_err(|_| format!("no {}: build the wheel with `bash scripts/build-wheel.sh`", dir.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "whl"))
        .max_by_key(|path| modified(path))
        .ok_or_else(|| format!("no wheel in {}: build it with `bash scripts/build-wheel.sh`", dir.display()))?;
    let binary = Path::new(env!("CARGO_BIN_EXE_pipeline"));
    if modified(&wheel) < modified(binary) {
        return Err(format!(
            "{} is older than {}: rebuild it with `bash scripts/build-wheel.sh`",
            wheel.display(),
            binary.display()
        ));
    }
    Ok(wheel)
}

fn modified(path: &Path) -> SystemTime {
    std::fs::metadata(path).and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH)
}

/// The engines' Python with the wheel installed (once per test binary), or the reason there is none.
fn python_with_wheel() -> Result<PathBuf, String> {
    static INSTALLED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            let wheel = fresh_wheel()?;
            let python = test_support::python_engines_python().map_err(|e| format!("{e:#}"))?;
            let status = Command::new(&python)
                .args(["-m", "pip", "install", "--quiet", "--no-deps", "--force-reinstall"])
                .arg(&wheel)
                .status()
                .map_err(|e| format!("cannot run pip: {e}"))?;
            if !status.success() {
                return Err(format!("pip could not install {} ({status})", wheel.display()));
            }
            Ok(python)
        })
        .clone()
}

/// Runs the Python tests of `file` (filtered by `-k filter`) with the installed wheel.
fn pytest(test: &str, file: &str, filter: &str) {
    let Some(python) = test_support::or_skip(test, python_with_wheel()) else { return };
    let tests = repo_root().join("python").join("tests");
    let output = Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", filter])
        .arg(tests.join(file))
        .current_dir(&tests)
        // Only the environment's ONNX Runtime: the one the wheel must find by itself.
        .env_remove("ORT_DYLIB_PATH")
        .output()
        .expect("run pytest");
    let printed = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{file} -k {filter}:\n{printed}");
    // pytest exits 5 when nothing was collected; a filter that selects nothing must not pass.
    assert!(printed.contains(" passed"), "{printed}");
    assert!(!printed.contains("skipped"), "{printed}");
}

#[test]
fn the_python_api_classifies_tables_as_pipeline_run_does() {
    pytest("the_python_api_classifies_tables_as_pipeline_run_does", "test_classifier.py", "test_");
}

#[test]
fn the_ray_data_example_gives_pipeline_run_predictions() {
    pytest("the_ray_data_example_gives_pipeline_run_predictions", "test_engines.py", "ray");
}

#[test]
fn the_pyspark_example_gives_pipeline_run_predictions() {
    pytest("the_pyspark_example_gives_pipeline_run_predictions", "test_engines.py", "pyspark");
}

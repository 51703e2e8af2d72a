//! What the workspace's tests share: where the repository is, and the ONNX Runtime library
//! they run against. A dev-dependency only, so installing software never happens in a binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, PoisonError};

use anyhow::{Context, ensure};
use runtime::inference::{INSTALL_DIR, LIBRARY_FILE};

/// The repository root: one level above the package under test, as cargo names it when it
/// runs the test. Not the path compiled in: checkouts that share a target directory share
/// test binaries, and a binary built in another checkout would read that checkout's files.
pub fn repo_root() -> PathBuf {
    let package =
        std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    package.join("..")
}

/// `target/onnxruntime/libonnxruntime.so.1.32.0` under the repository root (whatever
/// `CARGO_TARGET_DIR` says: the tests' own copy), running
/// `scripts/install-onnxruntime.sh` first when it is missing. Parallel callers install once.
pub fn onnxruntime_library() -> anyhow::Result<PathBuf> {
    static INSTALL: Mutex<()> = Mutex::new(());
    let _guard = INSTALL.lock().unwrap_or_else(PoisonError::into_inner);

    let root = repo_root();
    let dir = root.join(INSTALL_DIR);
    let library = dir.join(LIBRARY_FILE);
    if !library.is_file() {
        let (script, output) = run_install_script("install-onnxruntime.sh", &dir)?;
        ensure!(
            library.is_file(),
            "`bash {}` succeeded but {} does not exist (it printed: {})",
            script.display(),
            library.display(),
            String::from_utf8_lossy(&output.stdout).trim()
        );
    }
    std::path::absolute(&library).with_context(|| format!("cannot make {} absolute", library.display()))
}

/// What a test needs from outside the build (a server, a browser, a reader), or why it is not
/// there: `Some` when found; otherwise the test says SKIPPED on stderr and passes, except under
/// `CI=true`, where a missing tool fails it.
pub fn or_skip<T, E: std::fmt::Display>(test: &str, found: Result<T, E>) -> Option<T> {
    match found {
        Ok(value) => Some(value),
        Err(reason) => {
            assert!(std::env::var("CI").as_deref() != Ok("true"), "{test} cannot run under CI: {reason:#}");
            eprintln!("SKIPPED {test}: {reason:#}");
            None
        }
    }
}

/// The Python of `target/moto` under the repository root, with moto's S3-compatible server
/// (`python -m moto.server`), running `scripts/install-s3-test-server.sh` first when it is
/// missing.
pub fn s3_test_server_python() -> anyhow::Result<PathBuf> {
    installed_python("install-s3-test-server.sh", "moto")
}

/// The Python of `target/deploy-checks`, with kubernetes-validate and Airflow, running
/// `scripts/install-deploy-checks.sh` first when it is missing.
pub fn deploy_checks_python() -> anyhow::Result<PathBuf> {
    installed_python("install-deploy-checks.sh", "deploy-checks")
}

/// The Python of `target/python-engines`, with pyarrow, ONNX Runtime, pytest, Ray Data and
/// PySpark (and Java for Spark), running `scripts/install-python-engines.sh` first when it is
/// missing.
pub fn python_engines_python() -> anyhow::Result<PathBuf> {
    installed_python("install-python-engines.sh", "python-engines")
}

/// The Python of `target/lakehouse-checks`, with delta-rs's Python reader (`deltalake`) and
/// jsonschema for `scripts/validate-openlineage.py`, running
/// `scripts/install-lakehouse-checks.sh` first when it is missing.
pub fn lakehouse_checks_python() -> anyhow::Result<PathBuf> {
    installed_python("install-lakehouse-checks.sh", "lakehouse-checks")
}

/// Debian's Prometheus Pushgateway, installed by `scripts/install-pushgateway.sh` when it is
/// missing.
pub fn pushgateway_binary() -> anyhow::Result<PathBuf> {
    static INSTALL: Mutex<()> = Mutex::new(());
    let _guard = INSTALL.lock().unwrap_or_else(PoisonError::into_inner);
    let (script, output) = run_install_script("install-pushgateway.sh", Path::new("-"))?;
    let printed = String::from_utf8_lossy(&output.stdout);
    let binary = PathBuf::from(printed.lines().last().unwrap_or_default().trim());
    ensure!(binary.is_file(), "`bash {}` printed no pushgateway binary", script.display());
    Ok(binary)
}

/// The Python of the virtual environment `target/DIR` that `scripts/SCRIPT` installs (a
/// no-op when it is there). Parallel callers install one at a time.
fn installed_python(script: &str, dir: &str) -> anyhow::Result<PathBuf> {
    static INSTALL: Mutex<()> = Mutex::new(());
    let _guard = INSTALL.lock().unwrap_or_else(PoisonError::into_inner);
    let dir = repo_root().join("target").join(dir);
    let (script, _) = run_install_script(script, &dir)?;
    let python = dir.join("bin").join("python");
    ensure!(python.is_file(), "`bash {}` succeeded but {} does not exist", script.display(), python.display());
    Ok(python)
}

/// Runs `scripts/NAME DEST` (its messages go to the test's stderr) and returns the script's
/// path and what it printed; an error if it fails.
fn run_install_script(name: &str, dest: &Path) -> anyhow::Result<(PathBuf, std::process::Output)> {
    let script = repo_root().join("scripts").join(name);
    let output = Command::new("bash")
        .arg(&script)
        .arg(dest)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("could not run `bash {}`", script.display()))?;
    ensure!(output.status.success(), "`bash {}` failed ({}); see its messages above", script.display(), output.status);
    Ok((script, output))
}

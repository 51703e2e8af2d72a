//! The ONNX Runtime backend, through `ort` with the shared library loaded at run time.
//!
//! No ONNX Runtime is linked into the binary: [`OrtLibrary::locate`] finds `libonnxruntime.so`
//! (explicit path, `ORT_DYLIB_PATH`, or the copy that `scripts/install-onnxruntime.sh` puts in
//! `onnxruntime/` of the target directory; a Python `onnxruntime` install only when asked for with
//! [`FROM_PYTHON`]), and the first [`OrtBackend::open`] loads it for the whole process.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use ort::environment::Environment;
use ort::ep::{self, ExecutionProvider};
use ort::session::{Session, SessionInputValue};
use ort::value::{DynValue, TensorElementType, TensorRef, ValueType};

use super::{BackendOptions, Device, InferenceBackend, ModelInputs, ModelOutputs, OutputTensor};
use crate::package::tensor;
use batch_io::locations::same_location;

/// The ONNX Runtime release this project is tested with on the CPU (and that the install
/// script fetches).
pub const ORT_VERSION: &str = "1.32.0";
/// The newest `onnxruntime-gpu` release (built for CUDA 13); there is no 1.32 for CUDA.
pub const ORT_GPU_VERSION: &str = "1.31.1";
/// Where the tests install the library, relative to the repository root: where
/// `scripts/install-onnxruntime.sh` installs it unless `CARGO_TARGET_DIR` names another target
/// directory.
pub const INSTALL_DIR: &str = "target/onnxruntime";
/// The file name of that release's shared library on Linux.
pub const LIBRARY_FILE: &str = "libonnxruntime.so.1.32.0";
/// The library "path" that means: ask the `python3` on `PATH` where its `onnxruntime` package is.
/// Running Python is explicit, never a side effect of opening a backend.
pub const FROM_PYTHON: &str = "python";

/// Finding the ONNX Runtime shared library.
#[derive(Debug, Clone, Copy)]
pub struct OrtLibrary;

impl OrtLibrary {
    /// The library `ORT_DYLIB_PATH` names, if it is set and not empty.
    pub fn from_environment() -> Option<PathBuf> {
        std::env::var_os("ORT_DYLIB_PATH").filter(|value| !value.is_empty()).map(PathBuf::from)
    }

    /// Finds the ONNX Runtime shared library, in this order:
    ///
    /// 1. `explicit` (a file, a directory holding `libonnxruntime.so*`, or [`FROM_PYTHON`]: the
    ///    `onnxruntime` package of the `python3` on `PATH`, `onnxruntime/capi/libonnxruntime.so*`;
    ///    `onnxruntime-gpu` installs the same package, with CUDA);
    /// 2. the `ORT_DYLIB_PATH` environment variable (same forms);
    /// 3. `search_dirs`, in order (the Python module passes its environment's
    ///    `onnxruntime/capi`);
    /// 4. the `onnxruntime` package of the Python environment the running executable was
    ///    installed into (`<prefix>/bin/pipeline` → `<prefix>/lib/python3*/site-packages`), as
    ///    `pip install attention-classifier[ort]` lays it out;
    /// 5. `onnxruntime/libonnxruntime.so.1.32.0` in the target directory holding the running
    ///    executable (`target/onnxruntime/`, where `scripts/install-onnxruntime.sh` installs it).
    ///
    /// Never the current directory: a library planted where a user happens to run `pipeline`
    /// would be executed.
    ///
    /// An explicit or `ORT_DYLIB_PATH` path that does not exist is an error rather than a reason to
    /// look further. Returns an absolute path.
    pub fn locate(explicit: Option<&Path>, search_dirs: &[PathBuf]) -> anyhow::Result<PathBuf> {
        if let Some(path) = explicit {
            return library_at(path).with_context(|| {
                format!("the ONNX Runtime library given explicitly ({}) cannot be used", path.display())
            });
        }
        if let Some(path) = OrtLibrary::from_environment() {
            return library_at(&path).with_context(|| {
                format!("ORT_DYLIB_PATH={} cannot be used as the ONNX Runtime library", path.display())
            });
        }
        let exe = std::env::current_exe().ok();
        let python_packages = exe.as_deref().map(python_packages_beside).unwrap_or_default();
        if let Some(found) = search_dirs.iter().chain(&python_packages).find_map(|dir| library_in_dir(dir)) {
            return Ok(found);
        }
        let mut candidates = Vec::new();
        if let Some(exe) = exe {
            // target/release/<bin> and target/release/deps/<test binary>
            candidates.extend(exe.ancestors().skip(1).take(3).map(|dir| dir.join("onnxruntime").join(LIBRARY_FILE)));
        }
        for candidate in candidates {
            if candidate.is_file() {
                return absolute(&candidate);
            }
        }
        bail!(
            "the ONNX Runtime shared library ({LIBRARY_FILE}) was not found. Fix it with one of:\n\
             \x20 - set ORT_DYLIB_PATH=/path/to/{LIBRARY_FILE} (or pass the library path explicitly);\n\
             \x20 - `pip install onnxruntime=={ORT_VERSION}` (or `onnxruntime-gpu=={ORT_GPU_VERSION}` for CUDA) \
             for the python3 on PATH, and pass `{}` (or set ORT_DYLIB_PATH={FROM_PYTHON});\n\
             \x20 - run `scripts/install-onnxruntime.sh` (CPU only; installs onnxruntime/{LIBRARY_FILE} in the \
             target directory, $CARGO_TARGET_DIR or else target/, where the binaries built there find it).",
            batch_io::spelling::option_with("ort_library", FROM_PYTHON)
        )
    }
}

/// `onnxruntime/capi` in each `site-packages` of the Python environment `exe` lives in, if it
/// is `<prefix>/bin/<exe>` (a virtual environment, or a Python installation's prefix).
fn python_packages_beside(exe: &Path) -> Vec<PathBuf> {
    // In a Python interpreter (the `attention_classifier` module), `current_exe` is the base
    // interpreter even inside a virtual environment (the venv's `python` is a link to it):
    // its site-packages is not this environment's, and may hold any ONNX Runtime. The module
    // passes its own environment's directory as a search directory instead.
    if exe.file_name().and_then(OsStr::to_str).is_some_and(|name| name.starts_with("python")) {
        return Vec::new();
    }
    let Some(prefix) = exe.parent().filter(|bin| bin.ends_with("bin")).and_then(Path::parent) else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(prefix.join("lib")) else { return Vec::new() };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_str().is_some_and(|name| name.starts_with("python3")))
        .map(|entry| entry.path().join("site-packages").join("onnxruntime").join("capi"))
        .filter(|dir| dir.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// A path given explicitly or through `ORT_DYLIB_PATH`: the library itself, a directory with it,
/// or [`FROM_PYTHON`].
fn library_at(path: &Path) -> anyhow::Result<PathBuf> {
    // The keyword wins over a file or directory of that name (write `./python` for one).
    if path == Path::new(FROM_PYTHON) {
        return python_library()
            .with_context(|| format!("the python3 on PATH has no usable onnxruntime package (install one with `pip install onnxruntime=={ORT_VERSION}`)"));
    }
    if path.is_file() {
        return absolute(path);
    }
    if path.is_dir() {
        return library_in_dir(path)
            .with_context(|| format!("the directory {} holds no libonnxruntime.so* library", path.display()));
    }
    bail!("{} does not exist", path.display())
}

/// `libonnxruntime.so*` in `dir` (the most specific name when there are several, e.g. symlinks).
fn library_in_dir(dir: &Path) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.file_name().and_then(OsStr::to_str).is_some_and(is_library_name) && path.is_file())
        .collect();
    found.sort_by_key(|path| std::cmp::Reverse(path.as_os_str().len()));
    found.into_iter().next().and_then(|path| absolute(&path).ok())
}

/// `libonnxruntime.so` or `libonnxruntime.so.1.32.0`, not a backup such as `…so.1.32.0.bak`.
fn is_library_name(name: &str) -> bool {
    name.strip_prefix("libonnxruntime.so").is_some_and(|version| {
        version.is_empty()
            || version
                .strip_prefix('.')
                .is_some_and(|v| v.split('.').all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit())))
    })
}

/// The `onnxruntime/capi` library of the `python3` on `PATH`. Uses `find_spec`, so the package
/// (and numpy) is not imported.
fn python_library() -> anyhow::Result<PathBuf> {
    const SCRIPT: &str = "import importlib.util, os\n\
        spec = importlib.util.find_spec('onnxruntime')\n\
        locations = list(spec.submodule_search_locations or []) if spec else []\n\
        print(os.path.join(locations[0], 'capi') if locations else '')\n";
    let output = Command::new("python3")
        .args(["-c", SCRIPT])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .context("cannot run python3")?;
    ensure!(output.status.success(), "python3 failed ({}) when asked where onnxruntime is", output.status);
    let capi = String::from_utf8_lossy(&output.stdout);
    let capi = capi.trim();
    ensure!(!capi.is_empty(), "the python3 on PATH has no onnxruntime package");
    library_in_dir(Path::new(capi)).with_context(|| format!("{capi} holds no libonnxruntime.so*"))
}

fn absolute(path: &Path) -> anyhow::Result<PathBuf> {
    std::path::absolute(path).with_context(|| format!("cannot make {} absolute", path.display()))
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The process-wide ONNX Runtime: one library, one environment.
struct Runtime {
    library: PathBuf,
    environment: Environment,
}

/// The variable that keeps ONNX Runtime's telemetry off. Since 1.2x its Linux builds write a
/// device id and an event store under `~/.cache/Microsoft/DeveloperTools/` on every run (and
/// try to send them); `with_telemetry(false)` does not stop that, this variable does.
pub const TELEMETRY_OFF_VARIABLE: &str = "ORT_DISABLE_TELEMETRY";

/// Sets `ORT_DISABLE_TELEMETRY=1` unless the user set it, so that a run writes nothing but its
/// output. Call it first thing in `main`, while the process has one thread.
pub fn keep_telemetry_off() {
    if std::env::var_os(TELEMETRY_OFF_VARIABLE).is_none() {
        // SAFETY: called at the start of `main`, before any other thread exists, so nothing
        // reads the environment while it changes.
        unsafe { std::env::set_var(TELEMETRY_OFF_VARIABLE, "1") }
    }
}

/// Loads `library` and creates the environment on first use; later calls must name the same library.
fn runtime(library: &Path) -> anyhow::Result<&'static Runtime> {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    static INIT: Mutex<()> = Mutex::new(());

    let _guard = lock(&INIT);
    if let Some(runtime) = RUNTIME.get() {
        ensure!(
            same_location(&runtime.library, library),
            "ONNX Runtime is already loaded from {} in this process and cannot also be loaded from {}; \
             use one library per process",
            runtime.library.display(),
            library.display()
        );
        return Ok(runtime);
    }
    let environment = ort::init_from(library)
        .with_context(|| format!("could not load the ONNX Runtime library {}", library.display()))?
        .with_name("pipeline")
        .with_telemetry(false)
        .build()
        .with_context(|| format!("could not create an ONNX Runtime environment from {}", library.display()))?;
    Ok(RUNTIME.get_or_init(|| Runtime { library: library.to_path_buf(), environment }))
}

/// Which [`ModelInputs`] buffer feeds a graph input.
#[derive(Debug, Clone, Copy)]
enum Feed {
    InputIds,
    AttentionMask,
}

/// Everything needed to create one more session on the graph.
struct SessionRecipe {
    graph: PathBuf,
    runtime: &'static Runtime,
    device: Device,
    intra_op_threads: usize,
    tf32: bool,
}

impl SessionRecipe {
    fn build(&self) -> anyhow::Result<Session> {
        let library = &self.runtime.library;
        let mut builder = Session::builder(&self.runtime.environment)?
            .with_intra_threads(self.intra_op_threads)
            .map_err(ort::Error::<()>::from)?
            .with_inter_threads(1)
            .map_err(ort::Error::<()>::from)?;
        if self.device == Device::Cuda {
            let available = ep::CUDA::is_available()
                .with_context(|| format!("could not list the execution providers of {}", library.display()))?;
            ensure!(
                available,
                "the CUDA execution provider is not available in {}: install onnxruntime-gpu \
                 (`pip install onnxruntime-gpu=={ORT_GPU_VERSION}`, plus the CUDA 13 and cuDNN 9 libraries it \
                 needs) and point ORT_DYLIB_PATH at its onnxruntime/capi/libonnxruntime.so.{ORT_GPU_VERSION}",
                library.display()
            );
            builder = builder
                // ONNX Runtime's CUDA provider enables TF32 unless told not to.
                .with_execution_providers([ep::CUDA::default().with_tf32(self.tf32).build().error_on_failure()])
                .map_err(ort::Error::<()>::from)
                .with_context(|| {
                    format!(
                        "could not enable the CUDA execution provider of {} (are the CUDA and cuDNN libraries \
                         it needs on LD_LIBRARY_PATH, and is a GPU visible?)",
                        library.display()
                    )
                })?;
        }
        let session = builder.commit_from_file(&self.graph).with_context(|| {
            let device = match self.device {
                Device::Cpu => "CPU",
                Device::Cuda => "CUDA",
            };
            format!(
                "ONNX Runtime ({}) could not load the graph {} on {device}",
                library.display(),
                self.graph.display()
            )
        })?;
        Ok(session)
    }
}

/// Idle sessions; `ort` runs need `&mut Session`, so concurrent runs each take their own.
struct SessionPool {
    state: Mutex<PoolState>,
    returned: Condvar,
    capacity: usize,
}

struct PoolState {
    idle: Vec<Session>,
    /// Sessions in existence (idle or checked out).
    total: usize,
}

/// A session checked out of the pool; returned on drop.
struct PooledSession<'p> {
    pool: &'p SessionPool,
    session: Option<Session>,
}

impl PooledSession<'_> {
    fn session(&mut self) -> anyhow::Result<&mut Session> {
        self.session.as_mut().context("internal error: pooled ONNX Runtime session already returned")
    }
}

impl Drop for PooledSession<'_> {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            lock(&self.pool.state).idle.push(session);
            self.pool.returned.notify_one();
        }
    }
}

/// Runs graphs with ONNX Runtime, on the CPU or through the CUDA execution provider.
///
/// One session is created at open; concurrent [`InferenceBackend::run`] calls create more, lazily,
/// up to one per `available cores / intra_op_threads` on the CPU (`PIPELINE_CUDA_SESSIONS` on
/// CUDA, default 4), and wait for a free one beyond that.
pub struct OrtBackend {
    recipe: SessionRecipe,
    feeds: Vec<(String, Feed)>,
    output_names: Vec<String>,
    pool: SessionPool,
}

impl OrtBackend {
    /// Loads ONNX Runtime (see [`OrtLibrary::locate`]) and opens `graph` with it. The graph's inputs
    /// must be `input_ids` and optionally `attention_mask`, both int64. With [`Device::Cuda`] this
    /// fails unless the library has a working CUDA execution provider; it never falls back to the CPU.
    pub fn open(graph: &Path, options: &BackendOptions) -> anyhow::Result<Self> {
        let library = OrtLibrary::locate(options.ort_library.as_deref(), &options.ort_search_dirs)
            .with_context(|| format!("cannot open {} with ONNX Runtime", graph.display()))?;
        let runtime =
            runtime(&library).with_context(|| format!("cannot open {} with ONNX Runtime", graph.display()))?;
        let recipe = SessionRecipe {
            graph: graph.to_path_buf(),
            runtime,
            device: options.device,
            intra_op_threads: options.intra_op_threads,
            tf32: options.tf32,
        };
        let session = recipe.build()?;

        let mut feeds = Vec::with_capacity(session.inputs().len());
        for input in session.inputs() {
            let feed = match input.name() {
                tensor::INPUT_IDS => Feed::InputIds,
                tensor::ATTENTION_MASK => Feed::AttentionMask,
                other => bail!(
                    "the graph {} has an input `{other}`; only `input_ids` and `attention_mask` can be fed",
                    graph.display()
                ),
            };
            if let ValueType::Tensor { ty, .. } = input.dtype()
                && *ty != TensorElementType::Int64
            {
                bail!("the input `{}` of the graph {} is {ty}, expected int64", input.name(), graph.display());
            }
            feeds.push((input.name().to_owned(), feed));
        }
        ensure!(
            feeds.iter().any(|(_, feed)| matches!(feed, Feed::InputIds)),
            "the graph {} has no `input_ids` input",
            graph.display()
        );
        let output_names: Vec<String> = session.outputs().iter().map(|output| output.name().to_owned()).collect();

        let capacity = match options.device {
            Device::Cuda => cuda_sessions()?,
            Device::Cpu => {
                // The worker threads this run was given: --threads, else every core.
                let cores = rayon::current_num_threads();
                match options.intra_op_threads {
                    0 => 1,
                    threads => (cores / threads).max(1),
                }
            }
        };
        let pool = SessionPool {
            state: Mutex::new(PoolState { idle: vec![session], total: 1 }),
            returned: Condvar::new(),
            capacity,
        };
        Ok(Self { recipe, feeds, output_names, pool })
    }

    fn checkout(&self) -> anyhow::Result<PooledSession<'_>> {
        let mut state = lock(&self.pool.state);
        loop {
            if let Some(session) = state.idle.pop() {
                return Ok(PooledSession { pool: &self.pool, session: Some(session) });
            }
            if state.total < self.pool.capacity {
                state.total += 1;
                drop(state);
                return match self.recipe.build() {
                    Ok(session) => Ok(PooledSession { pool: &self.pool, session: Some(session) }),
                    Err(error) => {
                        lock(&self.pool.state).total -= 1;
                        self.pool.returned.notify_one();
                        Err(error)
                    }
                };
            }
            state = self.pool.returned.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

impl InferenceBackend for OrtBackend {
    fn run(&self, inputs: &ModelInputs) -> anyhow::Result<ModelOutputs> {
        self.run_timed(inputs).map(|(outputs, _)| outputs)
    }

    /// Times the run from the moment a session is free: on CUDA, runs queue for the one
    /// session (or few), and the queueing is not the session's time.
    fn run_timed(&self, inputs: &ModelInputs) -> anyhow::Result<(ModelOutputs, Duration)> {
        let graph = self.recipe.graph.display();
        let elements: usize = inputs.shape.iter().product();
        ensure!(
            inputs.input_ids.len() == elements && inputs.attention_mask.len() == elements,
            "batch shape {:?} needs {elements} ids and mask values, got {} and {}",
            inputs.shape,
            inputs.input_ids.len(),
            inputs.attention_mask.len()
        );

        let mut values: Vec<(&str, SessionInputValue<'_>)> = Vec::with_capacity(self.feeds.len());
        for (name, feed) in &self.feeds {
            let data = match feed {
                Feed::InputIds => &inputs.input_ids,
                Feed::AttentionMask => &inputs.attention_mask,
            };
            let tensor = TensorRef::from_array_view((inputs.shape.as_slice(), data.as_slice()))
                .with_context(|| format!("could not make the `{name}` tensor of shape {:?}", inputs.shape))?;
            values.push((name.as_str(), tensor.into()));
        }

        let mut pooled = self.checkout()?;
        let started = Instant::now();
        let outputs = pooled
            .session()?
            .run(values)
            .with_context(|| format!("ONNX Runtime failed to run {graph} on a batch of shape {:?}", inputs.shape))?;
        let mut named = ModelOutputs::new();
        for name in &self.output_names {
            let value =
                outputs.get(name).with_context(|| format!("ONNX Runtime returned no `{name}` output for {graph}"))?;
            let tensor = output_tensor(value).with_context(|| format!("cannot read the output `{name}` of {graph}"))?;
            named.insert(name.clone(), tensor);
        }
        Ok((named, started.elapsed()))
    }

    fn output_names(&self) -> &[String] {
        &self.output_names
    }

    fn computes_on_cpu(&self) -> bool {
        self.recipe.device == Device::Cpu
    }

    fn describe(&self) -> String {
        match self.recipe.device {
            Device::Cpu => "ort-cpu",
            Device::Cuda => "ort-cuda",
        }
        .to_owned()
    }
}

/// The variable that sets how many sessions run batches on the GPU at once.
pub const CUDA_SESSIONS_VARIABLE: &str = "PIPELINE_CUDA_SESSIONS";

/// Sessions on CUDA when the variable is unset. On one H100 (1,000,000 IMDB reviews, batches
/// of 1,024; RESULTS.md, #34), 1, 2, 4 and 8 sessions ran 22,099, 29,078, 32,003 and 30,983
/// docs/s end to end.
const DEFAULT_CUDA_SESSIONS: usize = 4;

/// Sessions run on CUDA at once, each on its own stream: while one session's host side
/// prepares, launches and copies, another's kernels keep the GPU busy.
fn cuda_sessions() -> anyhow::Result<usize> {
    parse_cuda_sessions(std::env::var_os(CUDA_SESSIONS_VARIABLE).as_deref())
}

/// [`cuda_sessions`] from the variable's value, if set.
fn parse_cuda_sessions(value: Option<&OsStr>) -> anyhow::Result<usize> {
    let Some(value) = value else { return Ok(DEFAULT_CUDA_SESSIONS) };
    let sessions = value.to_str().and_then(|v| v.trim().parse::<usize>().ok()).filter(|n| (1..=64).contains(n));
    sessions.with_context(|| {
        format!("{CUDA_SESSIONS_VARIABLE}={}: give a whole number of sessions from 1 to 64", value.to_string_lossy())
    })
}

/// Copies a CPU-side output tensor out as f32 (other numeric types are converted, like tract does).
fn output_tensor(value: &DynValue) -> anyhow::Result<OutputTensor> {
    let ValueType::Tensor { ty, .. } = value.dtype() else {
        bail!("it is not a tensor but {}", value.dtype());
    };
    let (shape, data) = match ty {
        TensorElementType::Float32 => {
            let (shape, data) = value.try_extract_tensor::<f32>()?;
            (shape, data.to_vec())
        }
        TensorElementType::Float64 => {
            let (shape, data) = value.try_extract_tensor::<f64>()?;
            (shape, data.iter().map(|&x| x as f32).collect())
        }
        TensorElementType::Int64 => {
            let (shape, data) = value.try_extract_tensor::<i64>()?;
            (shape, data.iter().map(|&x| x as f32).collect())
        }
        TensorElementType::Int32 => {
            let (shape, data) = value.try_extract_tensor::<i32>()?;
            (shape, data.iter().map(|&x| x as f32).collect())
        }
        other => bail!("its element type {other} cannot be converted to float32"),
    };
    let shape = shape
        .iter()
        .map(|&dim| usize::try_from(dim).with_context(|| format!("negative dimension {dim} in its shape")))
        .collect::<anyhow::Result<Vec<usize>>>()?;
    Ok(OutputTensor { shape, data })
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    use super::{DEFAULT_CUDA_SESSIONS, is_library_name, parse_cuda_sessions, python_packages_beside};

    #[test]
    fn the_cuda_session_count_is_read_from_the_variable_and_a_bad_value_is_named() {
        assert_eq!(parse_cuda_sessions(None).unwrap(), DEFAULT_CUDA_SESSIONS);
        assert_eq!(parse_cuda_sessions(Some(OsStr::new(" 2 "))).unwrap(), 2);
        for bad in ["0", "65", "-1", "two", ""] {
            let error = parse_cuda_sessions(Some(OsStr::new(bad))).unwrap_err().to_string();
            assert!(error.contains(&format!("PIPELINE_CUDA_SESSIONS={bad}:")) && error.contains("1 to 64"), "{error}");
        }
    }

    #[test]
    fn a_program_installed_into_an_environment_finds_its_onnxruntime_but_an_interpreter_does_not() {
        let prefix = tempfile::tempdir().unwrap();
        let capi = prefix.path().join("lib/python3.11/site-packages/onnxruntime/capi");
        std::fs::create_dir_all(&capi).unwrap();
        std::fs::create_dir_all(prefix.path().join("bin")).unwrap();
        assert_eq!(python_packages_beside(&prefix.path().join("bin/pipeline")), vec![capi]);
        // The module runs in a venv's python, which `current_exe` resolves to the base
        // interpreter: its site-packages may hold any release, and is not the venv's.
        assert!(python_packages_beside(&prefix.path().join("bin/python3.11")).is_empty());
    }

    #[test]
    fn only_library_names_count_as_the_library() {
        assert!(is_library_name("libonnxruntime.so"));
        assert!(is_library_name("libonnxruntime.so.1.32.0"));
        assert!(!is_library_name("libonnxruntime.so.1.32.0.bak"));
        assert!(!is_library_name("libonnxruntime.so.1..0"));
        assert!(!is_library_name("libonnxruntime_providers_cuda.so"));
    }
}

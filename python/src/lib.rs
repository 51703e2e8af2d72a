//! `attention_classifier._native`: the model runtime and the batch job, for Python.
//!
//! [`Classifier`] classifies pyarrow tables in memory: the text column is read through the
//! Arrow C data interface without a copy, and the output columns go back the same way. [`run`]
//! is `pipeline run` without a subprocess. The Python package around this module
//! (`python/attention_classifier/__init__.py`) finds ONNX Runtime and adapts the arguments.

// Tables come from users' code; a panic would take their Python worker down with it.
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use anyhow::Context;
use arrow::array::RecordBatch;
use arrow::datatypes::{Schema, SchemaRef};
use arrow_pyarrow::{PyArrowType, Table};
use batch_io::command_line::MAX_THREADS;
use batch_io::object_storage::TransientIo;
use batch_io::source::{is_text_type, string_values, text_array};
use pipeline::job::options::Kind;
use pipeline::job::spec::find;
use pipeline::job::{OptionValue, RUN_OPTIONS, RunOption, RunSpec, Scope, model_sha256, run_job, table_metadata};
use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use runtime::model_source::Unpacked;
use runtime::output::{OutputTable, is_reserved, keys, reserved_names};
use runtime::package::ModelPackage;

// Under `attention_classifier`, where the package exports them: pickle finds a class by its
// module and name, so an error raised in a worker process reaches the driver whole.
pyo3::create_exception!(
    attention_classifier,
    PipelineError,
    PyRuntimeError,
    "The input, the model or the options were refused; the message says which and what to do."
);
pyo3::create_exception!(
    attention_classifier,
    TransientError,
    PipelineError,
    "Object storage could not be reached; the same call may succeed later (exit code 75 of `pipeline`)."
);

/// An error for Python: transient object-storage failures as [`TransientError`], so that a
/// scheduler's retry can tell them apart; everything else as [`PipelineError`]. The message
/// is the whole chain of causes, as `pipeline` prints it.
fn python_error(error: anyhow::Error) -> PyErr {
    // Options in the message are already spelt as keyword arguments (`batch_io::spelling`).
    let message = batch_io::redact::redact_urls(&format!("{error:#}"));
    if error.chain().any(|cause| cause.is::<TransientIo>()) {
        TransientError::new_err(message)
    } else {
        PipelineError::new_err(message)
    }
}

/// The keyword arguments of both `Classifier` and `run` that are no run option: the
/// process's worker threads, and where the Python package found ONNX Runtime.
const FRONT_END_OWN: [&str; 2] = ["threads", "ort_search_dirs"];

/// The options `Classifier` takes: those of how documents are classified.
const CLASSIFIER_SCOPES: [Scope; 1] = [Scope::Classify];

/// The options `run` takes: every run option.
const RUN_SCOPES: [Scope; 3] = [Scope::Classify, Scope::Run, Scope::OutputAndReporting];

/// The run options a call of `scopes` takes.
fn options_of(scopes: &[Scope]) -> impl Iterator<Item = &'static RunOption> {
    RUN_OPTIONS.iter().filter(move |option| scopes.contains(&option.scope))
}

/// The keyword arguments a call of `scopes` takes: its options and the front end's own.
fn keywords(scopes: &[Scope]) -> Vec<&'static str> {
    options_of(scopes).map(|option| option.name).chain(FRONT_END_OWN).collect()
}

/// The run options whose values are of the kinds `wanted` takes.
fn keywords_of_kind(wanted: fn(Kind) -> bool) -> impl Iterator<Item = &'static str> {
    RUN_OPTIONS.iter().filter(move |option| wanted(option.kind)).map(|option| option.name)
}

/// A keyword argument's value as the option's kind reads it.
fn option_value(option: &RunOption, value: &Bound<'_, PyAny>) -> PyResult<OptionValue> {
    // Python's bool is an int: `min_confidence=True` would silently be 1.0.
    if matches!(option.kind, Kind::Count | Kind::Probability) && value.is_instance_of::<pyo3::types::PyBool>() {
        return Err(PyTypeError::new_err(format!("takes a number, not {}", value.repr()?)));
    }
    Ok(match option.kind {
        Kind::Text | Kind::Choice(_) | Kind::Parsed => OptionValue::Text(value.extract()?),
        Kind::Path => OptionValue::Path(value.extract()?),
        Kind::Count => OptionValue::Count(value.extract()?),
        Kind::Flag => OptionValue::Flag(value.extract()?),
        Kind::Probability => OptionValue::Probability(value.extract()?),
        Kind::Names => OptionValue::Names(value.extract()?),
    })
}

/// What a call's keyword arguments give besides the run options they set.
#[derive(Default)]
struct FrontEndOptions {
    threads: Option<usize>,
    ort_search_dirs: Vec<PathBuf>,
    /// The options set from their environment variable, for a refusal to say so.
    from_environment: Vec<&'static RunOption>,
}

/// Sets `spec`'s options from a call's keyword arguments (those of `scopes`), as
/// `pipeline run` sets them from its flags: first from the options' environment variables,
/// then from the arguments. Returns the arguments that are no run option.
fn set_options(
    function: &str,
    spec: &mut RunSpec,
    options: Option<&Bound<'_, PyDict>>,
    scopes: &[Scope],
) -> PyResult<FrontEndOptions> {
    let mut from_environment = Vec::new();
    for option in options_of(scopes) {
        // `None` is left out, as everywhere: the environment's value then stands.
        let given = options.map(|dict| dict.get_item(option.name)).transpose()?.flatten().is_some_and(|v| !v.is_none());
        let from_env = option.env.and_then(|name| std::env::var(name).ok()).filter(|value| !value.trim().is_empty());
        if let (false, Some(text)) = (given, from_env) {
            let value = option.parse_text(&text).map_err(|problem| {
                python_error(anyhow::anyhow!("{}={text:?}: {problem}", option.env.unwrap_or_default()))
            })?;
            spec.set(option.name, value).map_err(|e| python_error(e.into()))?;
            from_environment.push(option);
        }
    }
    let mut own = FrontEndOptions { from_environment, ..FrontEndOptions::default() };
    let known = keywords(scopes);
    keyword_arguments(function, options, &known, |name, value| {
        if value.is_none() {
            return Ok(known.contains(&name));
        }
        match (name, find(name).filter(|option| scopes.contains(&option.scope))) {
            ("threads", _) => own.threads = Some(value.extract()?),
            ("ort_search_dirs", _) => own.ort_search_dirs = value.extract()?,
            (_, Some(option)) => {
                let value = option_value(option, value)?;
                spec.set(option.name, value).map_err(|e| python_error(e.into()))?;
            }
            (_, None) => return Ok(false),
        }
        Ok(true)
    })?;
    spec.backend.ort_search_dirs = std::mem::take(&mut own.ort_search_dirs);
    Ok(own)
}

/// Each keyword argument handed to `take`, which says whether it knew it; an unknown one is
/// a `TypeError` naming the known ones, as Python's own for a misspelt argument.
fn keyword_arguments(
    function: &str,
    options: Option<&Bound<'_, PyDict>>,
    known: &[&str],
    mut take: impl FnMut(&str, &Bound<'_, PyAny>) -> PyResult<bool>,
) -> PyResult<()> {
    for (name, value) in options.into_iter().flat_map(|dict| dict.iter()) {
        let name: String = name.extract()?;
        // A wrong type names the argument, not only the types (`'str' object cannot be …`).
        let named = |error: PyErr| {
            let py = value.py();
            let given = value.repr().map(|r| r.to_string()).unwrap_or_default();
            if error.is_instance_of::<PyTypeError>(py) {
                PyTypeError::new_err(format!("{function}() argument {name}={given}: {}", error.value(py)))
            } else if error.is_instance_of::<pyo3::exceptions::PyOverflowError>(py) {
                pyo3::exceptions::PyOverflowError::new_err(format!(
                    "{function}() argument {name}={given}: {}",
                    error.value(py)
                ))
            } else {
                error
            }
        };
        if !take(&name, &value).map_err(named)? {
            let mut names: Vec<&str> = known.to_vec();
            names.sort_unstable();
            return Err(PyTypeError::new_err(format!(
                "{function}() got an unexpected keyword argument '{name}'; it takes: {}",
                names.join(", ")
            )));
        }
    }
    Ok(())
}

/// Sizes rayon's global pool, which `run` (the batch job's stages) works on; `None` leaves
/// the default, all cores (or `RAYON_NUM_THREADS`). Refuses a process forked after its parent
/// ran a job: the pool's threads do not exist in the child, and waiting on them hangs.
fn set_global_threads(threads: Option<usize>) -> anyhow::Result<()> {
    static FIRST_RUN_PID: OnceLock<u32> = OnceLock::new();
    let pid = *FIRST_RUN_PID.get_or_init(std::process::id);
    anyhow::ensure!(
        pid == std::process::id(),
        "run() was called in this process's parent before it forked, and the parent's worker threads do not \
         exist in a forked child; start worker processes with multiprocessing's 'spawn' or 'forkserver' method"
    );
    let Some(threads) = threads else { return Ok(()) };
    check_threads(threads)?;
    if rayon::ThreadPoolBuilder::new().num_threads(threads).build_global().is_err() {
        let current = rayon::current_num_threads();
        anyhow::ensure!(
            current == threads,
            "this process already runs jobs on {current} threads, and cannot change to {threads}: \
             pass the same threads= to every run() in one process, or set RAYON_NUM_THREADS before the first"
        );
    }
    Ok(())
}

/// `threads=` within `pipeline run --threads`'s bounds (more never returned: each thread
/// costs a stack).
fn check_threads(threads: usize) -> anyhow::Result<()> {
    anyhow::ensure!(
        (1..=MAX_THREADS).contains(&threads),
        "threads={threads}: must be between 1 and {MAX_THREADS} (default: all cores)"
    );
    Ok(())
}

/// The classifiers' worker threads: a pool of this module's own rather than rayon's global
/// one, remade in a child process after a fork (which has none of its parent's threads:
/// waiting on them hung for ever).
struct WorkerPool {
    pid: u32,
    pool: Arc<rayon::ThreadPool>,
}

fn worker_pool(threads: Option<usize>) -> anyhow::Result<Arc<rayon::ThreadPool>> {
    threads.map(check_threads).transpose()?;
    static POOL: Mutex<Option<WorkerPool>> = Mutex::new(None);
    let mut slot = POOL.lock().unwrap_or_else(PoisonError::into_inner);
    let pid = std::process::id();
    if let Some(current) = slot.as_ref().filter(|current| current.pid == pid) {
        let size = current.pool.current_num_threads();
        anyhow::ensure!(
            threads.is_none_or(|wanted| wanted == size),
            "this process already classifies on {size} threads, and cannot change to {}: pass the same \
             threads= to every Classifier in one process",
            threads.unwrap_or(size)
        );
        return Ok(current.pool.clone());
    }
    // Forked: the parent's pool has no threads here, and dropping it would wait on them.
    if let Some(parent) = slot.take() {
        std::mem::forget(parent);
    }
    let pool = Arc::new(rayon::ThreadPoolBuilder::new().num_threads(threads.unwrap_or(0)).build()?);
    *slot = Some(WorkerPool { pid, pool: pool.clone() });
    Ok(pool)
}

/// Rows classified between two looks for Ctrl-C (a few seconds of work on 2 cores).
const ROWS_BETWEEN_SIGNAL_CHECKS: usize = 4096;

/// A model package opened for classifying tables in memory.
#[pyclass(frozen, module = "attention_classifier._native")]
struct Classifier {
    classifier: runtime::classifier::Classifier,
    table: OutputTable,
    text_column: String,
    batch_size: usize,
    threads: Option<usize>,
    model: PathBuf,
    /// The schema metadata `pipeline run` writes (model, labels, options).
    metadata: std::collections::HashMap<String, String>,
    /// The default model's temporary copy, where the model cache could not be written.
    _unpacked: Option<Unpacked>,
}

#[pymethods]
impl Classifier {
    /// `Classifier(model=None, **options)`: `options` are `pipeline run`'s flags that
    /// concern classifying (see the Python package's `Classifier`), and `threads`.
    #[new]
    #[pyo3(signature = (model = None, **options))]
    fn new(py: Python<'_>, model: Option<PathBuf>, options: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        // The options of a run, checked as `pipeline run` checks them; there is no input.
        let mut spec = RunSpec::new(String::new());
        let threads = set_options("Classifier", &mut spec, options, &CLASSIFIER_SCOPES)?.threads;
        let open = || -> anyhow::Result<Self> {
            spec.check()?;
            worker_pool(threads)?;
            let (unpacked, package) = open_package(model.as_deref())?;
            let model = package.dir.clone();
            let classifier = runtime::classifier::Classifier::open(package, &spec.backend, spec.max_tokens)?
                .with_long_documents(spec.long_documents()?)?;
            let table = OutputTable::for_model(classifier.optional_columns(spec.embedding), spec.attention)
                .abstaining_below(spec.min_confidence)
                // The input's columns, the text among them, come first in every table.
                .with_token_spans(classifier.gives_token_spans())
                .without(&spec.drop)?;
            let package = classifier.package();
            let metadata = table_metadata(package, &model_sha256(package)?, &classifier, &spec, &table)?;
            let (text_column, batch_size) = (spec.text_column.clone(), spec.batch_size());
            Ok(Self { classifier, table, text_column, batch_size, threads, model, metadata, _unpacked: unpacked })
        };
        py.detach(open).map_err(python_error)
    }

    /// The labels, in the order of the `probabilities` column.
    #[getter]
    fn labels(&self) -> Vec<String> {
        self.classifier.labels().to_vec()
    }

    /// The backend in use: `tract`, `ort-cpu` or `ort-cuda`.
    #[getter]
    fn backend(&self) -> String {
        self.classifier.backend().describe()
    }

    /// The model package's directory.
    #[getter]
    fn model(&self) -> PathBuf {
        self.model.clone()
    }

    /// The input's columns followed by the prediction columns of `pipeline run`, row for row.
    /// Rows are classified and their columns built a few thousand at a time (batches sorted by
    /// length within them), with a look for Ctrl-C in between: memory holds the output table
    /// and one such chunk of predictions, not a prediction per row of the table.
    fn classify(&self, py: Python<'_>, table: PyArrowType<Table>) -> PyResult<PyArrowType<Table>> {
        let (batches, schema) = table.0.into_inner();
        let output_schema = self.output_schema(&schema).map_err(python_error)?;
        let pool = worker_pool(self.threads).map_err(python_error)?;
        let mut classified = Vec::with_capacity(batches.len());
        for batch in &batches {
            let mut start = 0;
            while start < batch.num_rows() {
                let rows = batch.slice(start, ROWS_BETWEEN_SIGNAL_CHECKS.min(batch.num_rows() - start));
                start += rows.num_rows();
                let chunk = py.detach(|| pool.install(|| self.classify_chunk(&rows, output_schema.clone())));
                classified.push(chunk.map_err(python_error)?);
                py.check_signals()?;
            }
        }
        let table = Table::try_new(classified, output_schema).map_err(|e| python_error(e.into()))?;
        Ok(PyArrowType(table))
    }
}

impl Classifier {
    /// One chunk of rows with the prediction columns beside them.
    fn classify_chunk(&self, rows: &RecordBatch, output_schema: SchemaRef) -> anyhow::Result<RecordBatch> {
        let text = rows.column_by_name(&self.text_column).context("a record batch lost the text column")?;
        let text = text_array(text)?;
        let values = string_values(&text).context("the text column is not a string column")?;
        let (predictions, _) = self.classifier.predict(&values, self.batch_size)?;
        let mut columns = rows.columns().to_vec();
        columns.extend(self.table.build(&predictions, self.classifier.labels(), self.classifier.vocabulary())?);
        Ok(RecordBatch::try_new(output_schema, columns)?)
    }

    /// The input schema with the output columns after it; refuses a missing or non-text
    /// text column, and an input column named like an output column.
    fn output_schema(&self, schema: &Schema) -> anyhow::Result<SchemaRef> {
        let columns = || schema.fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>().join(", ");
        let named = schema.fields().iter().filter(|f| f.name() == &self.text_column).count();
        anyhow::ensure!(
            named <= 1,
            "the table has {named} columns named `{}`; rename all but one before classifying",
            self.text_column
        );
        let field = schema.field_with_name(&self.text_column).map_err(|_| {
            anyhow::anyhow!(
                "the table has no text column `{}`; its columns are: {} (choose one with text_column=)",
                self.text_column,
                columns()
            )
        })?;
        anyhow::ensure!(
            is_text_type(field.data_type()),
            "text column `{}` has type {}, expected a string column (choose one with text_column=)",
            self.text_column,
            field.data_type()
        );
        // Every output name, whatever this classifier writes, as `pipeline run` refuses them: a
        // reader would take an input `attention` for the model's.
        if let Some(field) = schema.fields().iter().find(|f| is_reserved(f.name())) {
            anyhow::bail!(
                "input column `{}` collides with an output column of `pipeline run` ({}); drop or rename it before \
                 classifying",
                field.name(),
                reserved_names().collect::<Vec<_>>().join(", ")
            );
        }
        let mut fields = schema.fields().to_vec();
        fields.extend(self.table.fields());
        // The input's metadata (pandas', say) kept, but never another run's model and options.
        let mut metadata: std::collections::HashMap<String, String> = schema
            .metadata()
            .iter()
            .filter(|(key, _)| !keys::is_ours(key))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        metadata.extend(self.metadata.clone());
        Ok(std::sync::Arc::new(Schema::new_with_metadata(fields, metadata)))
    }
}

/// A package directory or object-storage URL, or the embedded default model; the guard, when
/// there is one, keeps a temporary copy of the default model alive.
fn open_package(model: Option<&Path>) -> anyhow::Result<(Option<Unpacked>, ModelPackage)> {
    match model {
        Some(location) => runtime::model_source::open(Some(location)),
        None => runtime::model_source::embedded::cached(),
    }
}

/// `pipeline run` in this process; returns the run summary as JSON (what `--metrics-json`
/// writes). `options` are `pipeline run`'s other flags, spelt as Python arguments.
#[pyfunction]
#[pyo3(signature = (input, output = None, *, model = None, **options))]
fn run(
    py: Python<'_>,
    input: String,
    output: Option<String>,
    model: Option<PathBuf>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<String> {
    let cancel = Arc::new(AtomicBool::new(false));
    let mut spec = RunSpec::new(input);
    let own = set_options("run", &mut spec, options, &RUN_SCOPES)?;
    let threads = own.threads;
    if let Some(output) = output {
        spec.output = output;
    }
    // Checked here too, so that a refused value read from the environment says so.
    if let Err(invalid) = spec.check() {
        let variable = own.from_environment.iter().find(|option| option.name == invalid.option).and_then(|o| o.env);
        return Err(python_error(match variable {
            Some(variable) => anyhow::anyhow!("{invalid} (from {variable}: change or unset it)"),
            None => invalid.into(),
        }));
    }
    spec.cancel = Some(cancel.clone());
    let job = move || -> anyhow::Result<String> {
        set_global_threads(threads)?;
        let (_unpacked, package) = open_package(model.as_deref())?;
        let summary = run_job(&package, &spec)?;
        Ok(serde_json::to_string(&summary)?)
    };
    // The job runs on a thread of its own while this one looks for Ctrl-C: on it the job is
    // told to stop, its temporaries are removed as it unwinds, and KeyboardInterrupt is raised.
    let (done, finished) = std::sync::mpsc::channel();
    let worker = std::thread::Builder::new()
        .name("pipeline-run".to_owned())
        .spawn(move || {
            let _ = done.send(job());
        })
        .map_err(|e| python_error(anyhow::anyhow!("cannot start the run's thread: {e}")))?;
    // A receiver is not shared between threads, so each wait takes it and hands it back.
    let mut finished = finished;
    let result = loop {
        let (received, receiver) = py.detach(move || (finished.recv_timeout(SIGNAL_CHECK_INTERVAL), finished));
        finished = receiver;
        match received {
            Ok(result) => break result.map_err(python_error),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if let Err(interrupt) = py.check_signals() {
                    cancel.store(true, Ordering::Relaxed);
                    let _ = py.detach(move || finished.recv());
                    break Err(interrupt);
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                break Err(python_error(anyhow::anyhow!("internal error: the run's thread ended without a result")));
            }
        }
    };
    let _ = py.detach(|| worker.join());
    result
}

/// How often `run` looks for Ctrl-C while the job works.
const SIGNAL_CHECK_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    // Every message of the libraries names options as this module's callers pass them.
    batch_io::spelling::use_keyword_arguments();
    module.add_class::<Classifier>()?;
    module.add_function(wrap_pyfunction!(run, module)?)?;
    module.add("PipelineError", module.py().get_type::<PipelineError>())?;
    module.add("TransientError", module.py().get_type::<TransientError>())?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // The keyword arguments each takes, for the test that holds them to `pipeline run --help`.
    module.add("CLASSIFIER_KEYWORDS", keywords(&CLASSIFIER_SCOPES))?;
    module.add("RUN_KEYWORDS", keywords(&RUN_SCOPES))?;
    // Those the Python package checks as counts, and those it also takes as "a,b" strings.
    module.add(
        "COUNT_KEYWORDS",
        keywords_of_kind(|kind| matches!(kind, Kind::Count)).chain(["threads"]).collect::<Vec<_>>(),
    )?;
    module.add("LIST_KEYWORDS", keywords_of_kind(|kind| matches!(kind, Kind::Names)).collect::<Vec<_>>())?;
    // The ONNX Runtime releases this build runs: the CPU one, and the CUDA one.
    module.add("SUPPORTED_ONNXRUNTIME", vec![runtime::inference::ORT_VERSION, runtime::inference::ORT_GPU_VERSION])?;
    Ok(())
}

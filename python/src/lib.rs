//! `attention_classifier._native`: the model runtime and the batch job, for Python.
//!
//! [`Classifier`] classifies pyarrow tables in memory: the text column is read through the
//! Arrow C data interface without a copy, and the output columns go back the same way. [`run`]
//! is `pipeline run` without a subprocess. The Python package around this module
//! (`python/attention_classifier/__init__.py`) finds ONNX Runtime and adapts the arguments.

// Tables come from users' code; a panic would take their Python worker down with it.
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use anyhow::Context;
use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::{Schema, SchemaRef};
use arrow_pyarrow::{PyArrowType, Table};
use batch_io::object_storage::TransientIo;
use batch_io::source::{is_text_type, string_values, text_array};
use clap::ValueEnum;
use pipeline::job::{JobOptions, run_job};
use pipeline::model_source::Unpacked;
use pipeline::units::Shard;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use runtime::inference::{BackendKind, BackendOptions, Device};
use runtime::long_documents::{Aggregate, LongDocuments, Mode};
use runtime::output_table::{AttentionOutput, OutputTable};
use runtime::package::ModelPackage;

pyo3::create_exception!(
    _native,
    PipelineError,
    PyRuntimeError,
    "The input, the model or the options were refused; the message says which and what to do."
);
pyo3::create_exception!(
    _native,
    TransientError,
    PipelineError,
    "Object storage could not be reached; the same call may succeed later (exit code 75 of `pipeline`)."
);

/// An error for Python: transient object-storage failures as [`TransientError`], so that a
/// scheduler's retry can tell them apart; everything else as [`PipelineError`]. The message
/// is the whole chain of causes, as `pipeline` prints it.
fn python_error(error: anyhow::Error) -> PyErr {
    let message = format!("{error:#}");
    if error.chain().any(|cause| cause.is::<TransientIo>()) {
        TransientError::new_err(message)
    } else {
        PipelineError::new_err(message)
    }
}

/// Parses one of a flag's choices the way `pipeline` does (`head-tail`, `ort`, ...).
fn choice<T: ValueEnum>(argument: &str, value: &str) -> anyhow::Result<T> {
    T::from_str(value, true).map_err(|_| {
        let names: Vec<String> =
            T::value_variants().iter().filter_map(|v| v.to_possible_value()).map(|v| v.get_name().to_owned()).collect();
        anyhow::anyhow!("{argument}={value:?} is not one of: {}", names.join(", "))
    })
}

/// The backend arguments shared by [`Classifier`] and [`run`].
fn backend_options(
    backend: &str,
    device: &str,
    ort_library: Option<PathBuf>,
    ort_search_dirs: Vec<PathBuf>,
) -> anyhow::Result<BackendOptions> {
    Ok(BackendOptions {
        kind: choice::<BackendKind>("backend", backend)?,
        device: choice::<Device>("device", device)?,
        intra_op_threads: 1,
        ort_library,
        ort_search_dirs,
        tf32: false,
    })
}

fn long_documents(mode: &str, stride: Option<usize>, aggregate: &str) -> anyhow::Result<LongDocuments> {
    LongDocuments::choose(
        choice::<Mode>("long_documents", mode)?,
        stride,
        choice::<Aggregate>("long_document_aggregate", aggregate)?,
    )
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
    anyhow::ensure!(threads >= 1, "threads must be at least 1");
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

/// The classifiers' worker threads: a pool of this module's own rather than rayon's global
/// one, remade in a child process after a fork (which has none of its parent's threads:
/// waiting on them hung for ever).
struct WorkerPool {
    pid: u32,
    pool: Arc<rayon::ThreadPool>,
}

fn worker_pool(threads: Option<usize>) -> anyhow::Result<Arc<rayon::ThreadPool>> {
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
    anyhow::ensure!(threads != Some(0), "threads must be at least 1");
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
    /// The default model's temporary copy, where the model cache could not be written.
    _unpacked: Option<Unpacked>,
}

#[pymethods]
impl Classifier {
    #[new]
    #[pyo3(signature = (
        model = None, *, backend = "auto", device = "cpu", ort_library = None, ort_search_dirs = Vec::new(),
        text_column = "text".to_owned(), batch_size = 64, max_tokens = None, long_documents = "windows",
        long_document_stride = None, long_document_aggregate = "mean", attention = "compact", embedding = false,
        threads = None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        model: Option<PathBuf>,
        backend: &str,
        device: &str,
        ort_library: Option<PathBuf>,
        ort_search_dirs: Vec<PathBuf>,
        text_column: String,
        batch_size: usize,
        max_tokens: Option<usize>,
        long_documents: &str,
        long_document_stride: Option<usize>,
        long_document_aggregate: &str,
        attention: &str,
        embedding: bool,
        threads: Option<usize>,
    ) -> PyResult<Self> {
        let open = || -> anyhow::Result<Self> {
            anyhow::ensure!(batch_size >= 1, "batch_size must be at least 1");
            anyhow::ensure!(max_tokens != Some(0), "max_tokens must be at least 1");
            worker_pool(threads)?;
            let backend = backend_options(backend, device, ort_library, ort_search_dirs)?;
            let mode = self::long_documents(long_documents, long_document_stride, long_document_aggregate)?;
            let attention: AttentionOutput =
                attention.parse().map_err(|e: String| anyhow::anyhow!("attention={attention:?}: {e}"))?;
            let (unpacked, package) = open_package(model.as_deref())?;
            let model = package.dir.clone();
            let classifier =
                runtime::classifier::Classifier::open(package, &backend, max_tokens)?.with_long_documents(mode)?;
            let table = OutputTable::for_model(classifier.optional_columns(embedding)).with_attention_output(attention);
            Ok(Self { classifier, table, text_column, batch_size, threads, model, _unpacked: unpacked })
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
    /// Rows are classified a few thousand at a time (batches sorted by length within them),
    /// with a look for Ctrl-C in between.
    fn classify(&self, py: Python<'_>, table: PyArrowType<Table>) -> PyResult<PyArrowType<Table>> {
        let (batches, schema) = table.0.into_inner();
        let output_schema = self.output_schema(&schema).map_err(python_error)?;
        let texts = self.text_arrays(&batches).map_err(python_error)?;
        let mut values: Vec<Option<&str>> = Vec::with_capacity(batches.iter().map(RecordBatch::num_rows).sum());
        for text in &texts {
            values.extend(
                string_values(text).ok_or_else(|| PipelineError::new_err("the text column is not a string column"))?,
            );
        }
        let pool = worker_pool(self.threads).map_err(python_error)?;
        let mut predictions = Vec::with_capacity(values.len());
        for rows in values.chunks(ROWS_BETWEEN_SIGNAL_CHECKS) {
            let classified = py.detach(|| pool.install(|| self.classifier.predict(rows, self.batch_size)));
            predictions.extend(classified.map_err(python_error)?.0);
            py.check_signals()?;
        }
        let classified = py.detach(|| self.assemble(&batches, &predictions, output_schema)).map_err(python_error)?;
        Ok(PyArrowType(classified))
    }
}

impl Classifier {
    /// Each batch's text column, dictionaries expanded.
    fn text_arrays(&self, batches: &[RecordBatch]) -> anyhow::Result<Vec<ArrayRef>> {
        batches
            .iter()
            .map(|batch| {
                text_array(batch.column_by_name(&self.text_column).context("a record batch lost the text column")?)
            })
            .collect()
    }

    /// The input's record batches with the prediction columns beside them.
    fn assemble(
        &self,
        batches: &[RecordBatch],
        predictions: &[Option<runtime::output_table::DocumentPrediction>],
        output_schema: SchemaRef,
    ) -> anyhow::Result<Table> {
        let (labels, vocabulary) = (self.classifier.labels(), self.classifier.vocabulary());
        let mut rest = predictions;
        let mut classified = Vec::with_capacity(batches.len());
        for batch in batches {
            let (these, after) = rest.split_at_checked(batch.num_rows()).context("fewer predictions than rows")?;
            rest = after;
            let mut columns = batch.columns().to_vec();
            columns.extend(self.table.build(these, labels, vocabulary)?);
            classified.push(RecordBatch::try_new(output_schema.clone(), columns)?);
        }
        Ok(Table::try_new(classified, output_schema)?)
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
        let mut fields = schema.fields().to_vec();
        for field in self.table.fields() {
            anyhow::ensure!(
                schema.field_with_name(field.name()).is_err(),
                "input column `{}` collides with an output column; drop or rename it before classifying",
                field.name()
            );
            fields.push(field);
        }
        Ok(std::sync::Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone())))
    }
}

/// A package directory or object-storage URL, or the embedded default model; the guard, when
/// there is one, keeps a temporary copy of the default model alive.
fn open_package(model: Option<&Path>) -> anyhow::Result<(Option<Unpacked>, ModelPackage)> {
    match model {
        Some(location) => pipeline::model_source::open(Some(location)),
        None => pipeline::model_source::embedded::cached(),
    }
}

/// `pipeline run` in this process; returns the run summary as JSON (what `--metrics-json`
/// writes).
#[pyfunction]
#[pyo3(signature = (
    input, output = "predictions.parquet".to_owned(), *, model = None, text_column = "text".to_owned(),
    pass_through = None, backend = "auto", device = "cpu", ort_library = None, ort_search_dirs = Vec::new(),
    batch_size = 64, max_batch_tokens = None, window = 2048, max_tokens = None, long_documents = "windows",
    long_document_stride = None, long_document_aggregate = "mean", attention = "compact", embedding = false,
    shard = None, rows_per_part = 2500, overwrite = false, threads = None,
))]
#[allow(clippy::too_many_arguments)]
fn run(
    py: Python<'_>,
    input: String,
    output: String,
    model: Option<PathBuf>,
    text_column: String,
    pass_through: Option<Vec<String>>,
    backend: &str,
    device: &str,
    ort_library: Option<PathBuf>,
    ort_search_dirs: Vec<PathBuf>,
    batch_size: usize,
    max_batch_tokens: Option<usize>,
    window: usize,
    max_tokens: Option<usize>,
    long_documents: &str,
    long_document_stride: Option<usize>,
    long_document_aggregate: &str,
    attention: &str,
    embedding: bool,
    shard: Option<String>,
    rows_per_part: usize,
    overwrite: bool,
    threads: Option<usize>,
) -> PyResult<String> {
    let job = || -> anyhow::Result<String> {
        for (name, value) in [("batch_size", batch_size), ("window", window), ("rows_per_part", rows_per_part)] {
            anyhow::ensure!(value >= 1, "{name} must be at least 1");
        }
        set_global_threads(threads)?;
        let shard = match shard {
            Some(shard) => shard.parse::<Shard>().with_context(|| format!("shard={shard:?}"))?,
            None => Shard::WHOLE,
        };
        let options = JobOptions {
            input,
            output,
            text_column,
            pass_through,
            backend: backend_options(backend, device, ort_library, ort_search_dirs)?,
            batch_size,
            max_batch_tokens,
            window,
            max_tokens,
            long_documents: self::long_documents(long_documents, long_document_stride, long_document_aggregate)?,
            attention: attention.parse().map_err(|e: String| anyhow::anyhow!("attention={attention:?}: {e}"))?,
            with_embedding: embedding,
            metrics_json: None,
            panic_after_first_window: false,
            null_model: false,
            shard,
            rows_per_part,
            overwrite,
        };
        let (_unpacked, package) = open_package(model.as_deref())?;
        let summary = run_job(&package, &options)?;
        Ok(serde_json::to_string(&summary)?)
    };
    py.detach(job).map_err(python_error)
}

#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<Classifier>()?;
    module.add_function(wrap_pyfunction!(run, module)?)?;
    module.add("PipelineError", module.py().get_type::<PipelineError>())?;
    module.add("TransientError", module.py().get_type::<TransientError>())?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

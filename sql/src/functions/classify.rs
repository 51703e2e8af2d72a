//! `classify(text[, model])`: runs a model package on raw text inside a query and returns
//! `{prediction, confidence, probabilities}` (and `abstained` under `--min-confidence`); `classify_explain(text[, model])` adds the
//! `tokens`, whether the text was `truncated`, `attention_summary` and `contribution` (null
//! for a model without one), ready for `attention_html`, `contribution_html` or `top_tokens`. Each incoming Arrow array is classified as one
//! batch through the same [`Classifier`] as `pipeline run` (length-sorted, all cores).
//! Packages are loaded once per session, when the query is planned, so a wrong path fails
//! before any row is read.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use batch_io::source::string_values;
use datafusion::arrow::array::{ArrayRef, StructArray};
use datafusion::arrow::buffer::NullBuffer;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Fields};
use datafusion::common::{DataFusionError, Result, ScalarValue, plan_err};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};
use runtime::classifier::Classifier;
use runtime::inference::BackendOptions;
use runtime::long_documents::LongDocuments;
use runtime::output::OutputTable;
use runtime::package::ModelPackage;

use super::args::{Parameters, Role};
use crate::tables::ReadLocations;

/// Which of the two functions: the prediction alone, or with what explains it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Explained {
    No,
    Yes,
}

impl Explained {
    fn name(self) -> &'static str {
        match self {
            Explained::No => "classify",
            Explained::Yes => "classify_explain",
        }
    }

    fn parameters(self) -> Parameters {
        let help = match self {
            Explained::No => "classify raw text: {prediction, confidence, probabilities}",
            Explained::Yes => {
                "classify(), plus the tokens, whether the text was truncated, attention_summary and contribution"
            }
        };
        Parameters {
            function: self.name(),
            names: &["text", "model"],
            roles: &[Role::Text, Role::Text],
            optional: 1,
            help,
        }
    }

    /// The columns of the output table the function returns, as a struct (with `abstained`
    /// under `--min-confidence`: [`Classify::result_table`]).
    fn columns(self) -> OutputTable {
        use runtime::output::columns::*;
        match self {
            Explained::No => OutputTable::of(&[&PREDICTION, &PREDICTED_LABELS, &CONFIDENCE, &PROBABILITIES]),
            Explained::Yes => OutputTable::of(&[
                &PREDICTION,
                &PREDICTED_LABELS,
                &CONFIDENCE,
                &PROBABILITIES,
                &TOKENS,
                &TRUNCATED,
                &ATTENTION_SUMMARY,
                &CONTRIBUTION,
            ]),
        }
    }
}

/// The packages a session has loaded, by directory, shared by both functions.
pub type LoadedModels = Arc<Mutex<HashMap<PathBuf, Arc<Classifier>>>>;

/// How `classify` finds and runs models.
#[derive(Debug, Clone)]
pub struct ClassifyOptions {
    /// The package `classify(text)` uses; `None` makes the one-argument form an error.
    pub default_model: Option<PathBuf>,
    pub backend: BackendOptions,
    /// Documents per inference batch.
    pub batch_size: usize,
    /// What happens to documents past a model's token limit.
    pub long_documents: LongDocuments,
    /// Below this confidence a row abstains: a null `prediction` and `abstained` true.
    pub min_confidence: Option<f32>,
}

impl ClassifyOptions {
    /// No default model (`classify(text)` asks for one), tract, one document per batch: for
    /// sessions that only read outputs.
    pub fn without_model() -> Self {
        Self {
            default_model: None,
            backend: BackendOptions::default(),
            batch_size: 1,
            long_documents: LongDocuments::default(),
            min_confidence: None,
        }
    }
}

pub struct Classify {
    explained: Explained,
    signature: Signature,
    options: ClassifyOptions,
    loaded: LoadedModels,
    /// The session's input locations; each package loaded is added.
    read: ReadLocations,
    documentation: Documentation,
}

impl Classify {
    pub fn new(explained: Explained, options: ClassifyOptions, loaded: LoadedModels, read: ReadLocations) -> Self {
        let signature = Signature::user_defined(Volatility::Immutable);
        let documentation = explained.parameters().documentation();
        Self { explained, signature, options, loaded, read, documentation }
    }

    fn result_table(&self) -> OutputTable {
        self.explained.columns().abstaining_below(self.options.min_confidence)
    }

    fn result_fields(&self) -> Fields {
        Fields::from(self.result_table().fields())
    }

    /// The package named by the call (or the default), loaded on first use.
    fn classifier(&self, model: Option<&str>) -> Result<Arc<Classifier>> {
        let dir = match model {
            Some(dir) => PathBuf::from(dir),
            None => match &self.options.default_model {
                Some(dir) => dir.clone(),
                None => {
                    let name = self.explained.name();
                    return plan_err!(
                        "{name}(text) has no default model here; name a package: {name}(text, 'MODEL_DIR')"
                    );
                }
            },
        };
        let mut loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(classifier) = loaded.get(&dir) {
            return Ok(classifier.clone());
        }
        let name = self.explained.name();
        let classifier = open_package(&dir)
            .inspect(|package| self.read.lock().unwrap_or_else(PoisonError::into_inner).push(package.as_input()))
            .and_then(|package| Classifier::open(package, &self.options.backend, None))
            .map_err(|e| DataFusionError::Plan(format!("{name}: cannot load model package {}: {e:#}", dir.display())))?
            // The package loaded; a stride that does not fit its token limit is the flag's fault.
            .with_long_documents(self.options.long_documents)
            .map_err(|e| DataFusionError::Plan(format!("{name}: {e:#} (the model package {})", dir.display())))?;
        let classifier = Arc::new(classifier);
        loaded.insert(dir, classifier.clone());
        Ok(classifier)
    }
}

/// A package directory, or a prefix in object storage (downloaded once into the model cache),
/// as `pipeline run --model` takes it. The download waits on the object-storage runtime,
/// which a query thread cannot do, so it runs on a plain thread of its own.
fn open_package(location: &Path) -> anyhow::Result<ModelPackage> {
    let open = || runtime::model_source::open(Some(location)).map(|(_, package)| package);
    if !location.to_str().is_some_and(batch_io::object_storage::is_url) {
        return open();
    }
    std::thread::scope(|scope| {
        scope.spawn(open).join().unwrap_or_else(|_| Err(anyhow::anyhow!("downloading the model panicked")))
    })
}

/// The model argument, which must be a constant: one model per call site.
fn model_argument(value: Option<&ScalarValue>, explained: Explained) -> Result<Option<String>> {
    match value {
        Some(ScalarValue::Utf8(Some(dir)) | ScalarValue::Utf8View(Some(dir)) | ScalarValue::LargeUtf8(Some(dir))) => {
            Ok(Some(dir.clone()))
        }
        _ => {
            let name = explained.name();
            plan_err!(
                "{name}(text, model): model must be a constant string naming a package directory, e.g. {name}(text, 'models/san')"
            )
        }
    }
}

impl std::fmt::Debug for Classify {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Classify")
            .field("explained", &self.explained)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

// One instance per session: identity is all DataFusion needs to compare.
impl PartialEq for Classify {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for Classify {}

impl Hash for Classify {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.explained.hash(state);
    }
}

impl ScalarUDFImpl for Classify {
    fn name(&self) -> &str {
        self.explained.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn documentation(&self) -> Option<&Documentation> {
        Some(&self.documentation)
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.explained.parameters().coerce(arg_types)
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Struct(self.result_fields()))
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let model = match args.scalar_arguments.get(1) {
            Some(value) => model_argument(*value, self.explained)?,
            None => None,
        };
        // Loading here makes a missing or broken package a planning error.
        self.classifier(model.as_deref())?;
        Ok(Arc::new(Field::new(self.name(), DataType::Struct(self.result_fields()), true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let model = match args.args.get(1) {
            Some(ColumnarValue::Scalar(value)) => model_argument(Some(value), self.explained)?,
            Some(ColumnarValue::Array(_)) => model_argument(None, self.explained)?,
            None => None,
        };
        let classifier = self.classifier(model.as_deref())?;
        let name = self.explained.name();
        let texts = args.args.first().ok_or_else(|| DataFusionError::Internal(format!("{name}: no text argument")))?;
        let texts: ArrayRef = texts.to_array(args.number_rows)?;
        let texts =
            string_values(&texts).ok_or_else(|| DataFusionError::Internal(format!("{name}: text not a string")))?;
        let (predictions, _) = classifier
            .predict(&texts, self.options.batch_size)
            .map_err(|e| DataFusionError::Execution(format!("{name}: {e:#}")))?;

        let columns = self
            .result_table()
            .with_label_thresholds(classifier.package().manifest.label_thresholds.as_deref().map(Into::into))
            .build(&predictions, classifier.labels(), classifier.vocabulary())
            .map_err(|e| DataFusionError::Execution(format!("{name}: {e:#}")))?;
        let fields = self.result_fields();
        let valid = NullBuffer::from(predictions.iter().map(Option::is_some).collect::<Vec<bool>>());
        Ok(ColumnarValue::Array(Arc::new(StructArray::try_new(fields, columns, Some(valid))?)))
    }
}

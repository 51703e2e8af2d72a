//! OpenLineage RunEvents (spec 2-0-2): START when a run begins, COMPLETE or FAIL when it ends,
//! POSTed to `<url>/api/v1/lineage` (or `OPENLINEAGE_ENDPOINT`).
//!
//! - The runId is derived from the run (job, parent run, inputs as the run sees them, output,
//!   shard, model), so a retried pod reports the same run, and the next day's inputs a new one.
//! - The parent run comes from `OPENLINEAGE_PARENT_ID` and `OPENLINEAGE_ROOT_PARENT_ID`
//!   (`namespace/job/runId`), which Airflow's OpenLineage macros give and OpenLineage's own
//!   integrations read.
//! - Datasets are named as the OpenLineage naming spec says: `file` + an absolute path, or
//!   `s3://bucket` + a key (likewise `gs://`, `az://`, `https://host`).
//! - The output carries its schema and a `columnLineage` facet: the text column feeds every
//!   column the model writes, and a passed-through column is its input's.

use serde_json::{Value, json};

use crate::job::summary::JobSummary;

const PRODUCER: &str = concat!("https://github.com/attention-classifier/pipeline/tree/v", env!("CARGO_PKG_VERSION"));
const RUN_EVENT: &str = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent";
const PARENT: &str = "https://openlineage.io/spec/facets/1-2-0/ParentRunFacet.json#/$defs/ParentRunFacet";
const COLUMN_LINEAGE: &str =
    "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet";
const SCHEMA: &str = "https://openlineage.io/spec/facets/1-2-0/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet";
const ERROR_MESSAGE: &str =
    "https://openlineage.io/spec/facets/1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet";
const JOB_TYPE: &str = "https://openlineage.io/spec/facets/2-0-4/JobTypeJobFacet.json#/$defs/JobTypeJobFacet";

/// The variables a parent process sets, as Airflow's OpenLineage macros write them.
pub const PARENT_VARIABLE: &str = "OPENLINEAGE_PARENT_ID";
pub const ROOT_PARENT_VARIABLE: &str = "OPENLINEAGE_ROOT_PARENT_ID";
/// The endpoint path under the URL, as OpenLineage's clients read it.
pub const ENDPOINT_VARIABLE: &str = "OPENLINEAGE_ENDPOINT";
const DEFAULT_ENDPOINT: &str = "api/v1/lineage";
/// A bearer token, as OpenLineage's clients read it.
pub const API_KEY_VARIABLE: &str = "OPENLINEAGE_API_KEY";

/// A run as OpenLineage names it.
#[derive(Debug, Clone)]
pub struct LineageRun {
    pub run_id: String,
    pub namespace: String,
    pub job: String,
    pub parent: Option<RunRef>,
    pub root: Option<RunRef>,
    pub inputs: Vec<Dataset>,
    pub output: Dataset,
    pub text_column: String,
}

/// Another job's run: `namespace/job/runId`.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRef {
    pub namespace: String,
    pub job: String,
    pub run_id: String,
}

impl RunRef {
    /// `namespace/job/runId`, as `OPENLINEAGE_PARENT_ID` holds it; `None` (with a warning) for
    /// anything else.
    pub fn parse(variable: &str, text: &str) -> Option<Self> {
        let parts: Vec<&str> = text.trim().split('/').collect();
        match parts.as_slice() {
            [namespace, job, run_id] if !namespace.is_empty() && !job.is_empty() && is_uuid(run_id) => {
                Some(Self { namespace: (*namespace).to_owned(), job: (*job).to_owned(), run_id: (*run_id).to_owned() })
            }
            _ => {
                tracing::warn!("{variable}={text:?} is not namespace/job/runId (with a UUID); lineage goes without it");
                None
            }
        }
    }

    fn to_json(&self) -> Value {
        json!({ "run": { "runId": self.run_id }, "job": { "namespace": self.namespace, "name": self.job } })
    }
}

fn is_uuid(text: &str) -> bool {
    uuid::Uuid::parse_str(text).is_ok()
}

/// A dataset as the naming spec says: namespace and name.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    pub namespace: String,
    pub name: String,
}

impl Dataset {
    /// `location`: a local path (made absolute) or a storage URL.
    pub fn at(location: &str) -> Self {
        if let Ok(url) = url::Url::parse(location)
            && url.scheme().len() > 1
        {
            let scheme = match url.scheme() {
                "s3a" | "s3n" => "s3",
                "gcs" => "gs",
                "abfs" | "abfss" | "azure" => "az",
                other => other,
            };
            let host = url.host_str().unwrap_or_default();
            let namespace = if matches!(scheme, "http" | "https") {
                url.origin().ascii_serialization()
            } else {
                format!("{scheme}://{host}")
            };
            let name = url.path().trim_matches('/').to_owned();
            return Self { namespace, name: if name.is_empty() { "/".to_owned() } else { name } };
        }
        let path = std::path::Path::new(location);
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let name = absolute.display().to_string();
        let name = if name.len() > 1 { name.trim_end_matches('/').to_owned() } else { name };
        Self { namespace: "file".to_owned(), name }
    }

    fn to_json(&self) -> Value {
        json!({ "namespace": self.namespace, "name": self.name })
    }
}

/// Which event.
#[derive(Debug, Clone, Copy)]
pub enum EventType {
    Start,
    Complete,
    Fail,
}

impl LineageRun {
    /// The event of `kind`; `summary` for COMPLETE (the output's columns), `error` for FAIL.
    pub fn event(&self, kind: EventType, summary: Option<&JobSummary>, error: Option<&str>) -> Value {
        let event_type = match kind {
            EventType::Start => "START",
            EventType::Complete => "COMPLETE",
            EventType::Fail => "FAIL",
        };
        let mut run_facets = serde_json::Map::new();
        if let Some(parent) = &self.parent {
            let mut facet = parent.to_json();
            if let Some(root) = self.root.as_ref().or(Some(parent))
                && let Some(object) = facet.as_object_mut()
            {
                object.insert("root".to_owned(), root.to_json());
            }
            run_facets.insert("parent".to_owned(), with_facet_header(facet, PARENT));
        }
        if let Some(message) = error {
            let facet = json!({ "message": message, "programmingLanguage": "rust" });
            run_facets.insert("errorMessage".to_owned(), with_facet_header(facet, ERROR_MESSAGE));
        }
        let job_type = with_facet_header(
            json!({ "processingType": "BATCH", "integration": "ATTENTION_CLASSIFIER", "jobType": "JOB" }),
            JOB_TYPE,
        );
        let mut output = self.output.to_json();
        if let (Some(summary), Some(object)) = (summary, output.as_object_mut()) {
            object.insert(
                "facets".to_owned(),
                json!({
                    "schema": with_facet_header(self.schema_facet(summary), SCHEMA),
                    "columnLineage": with_facet_header(self.column_lineage(summary), COLUMN_LINEAGE),
                }),
            );
        }
        json!({
            "eventType": event_type,
            "eventTime": crate::timestamps::rfc3339(chrono::Utc::now()),
            "producer": PRODUCER,
            "schemaURL": RUN_EVENT,
            "run": { "runId": self.run_id, "facets": run_facets },
            "job": { "namespace": self.namespace, "name": self.job, "facets": { "jobType": job_type } },
            "inputs": self.inputs.iter().map(Dataset::to_json).collect::<Vec<_>>(),
            "outputs": [output],
        })
    }

    fn schema_facet(&self, summary: &JobSummary) -> Value {
        let fields: Vec<Value> = summary.output_columns.iter().map(|name| json!({ "name": name })).collect();
        json!({ "fields": fields })
    }

    /// Each output column from its input columns: the model's columns from the text (of every
    /// input), a passed-through column from its namesake.
    fn column_lineage(&self, summary: &JobSummary) -> Value {
        let mut fields = serde_json::Map::new();
        for column in &summary.output_columns {
            let passed = summary.passed_through.contains(column);
            let (source, transformation) = if passed {
                (
                    column.as_str(),
                    json!({ "type": "DIRECT", "subtype": "IDENTITY", "description": "copied from the input" }),
                )
            } else {
                (
                    self.text_column.as_str(),
                    json!({ "type": "DIRECT", "subtype": "TRANSFORMATION", "description": "computed by the model from the text" }),
                )
            };
            let input_fields: Vec<Value> = self
                .inputs
                .iter()
                .map(|input| {
                    json!({ "namespace": input.namespace, "name": input.name, "field": source, "transformations": [transformation] })
                })
                .collect();
            fields.insert(column.clone(), json!({ "inputFields": input_fields }));
        }
        json!({ "fields": fields })
    }

    /// POSTs `event` to `<url>/<endpoint>`.
    pub async fn send(url: &str, event: &Value, deadline: std::time::Duration) -> anyhow::Result<()> {
        let endpoint = std::env::var(ENDPOINT_VARIABLE).unwrap_or_else(|_| DEFAULT_ENDPOINT.to_owned());
        let target = format!("{}/{}", url.trim_end_matches('/'), endpoint.trim_start_matches('/'));
        let mut request = super::http::http_client(deadline)?
            .post(&target)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(event.to_string());
        if let Ok(key) = std::env::var(API_KEY_VARIABLE) {
            request = request.bearer_auth(key);
        }
        let shown = super::http::redacted(&target);
        let response =
            request.send().await.map_err(|e| anyhow::anyhow!("cannot reach {shown}: {}", e.without_url()))?;
        super::http::expect_success(response, &shown).await
    }
}

fn with_facet_header(mut facet: Value, schema_url: &str) -> Value {
    if let Some(object) = facet.as_object_mut() {
        object.insert("_producer".to_owned(), Value::from(PRODUCER));
        object.insert("_schemaURL".to_owned(), Value::from(schema_url));
    }
    facet
}

/// A UUID made from `identity`'s digest (version 8: custom), so that the same run gets the
/// same id.
pub fn run_id(identity: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(identity);
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(digest.get(..16).unwrap_or(&[0; 16]));
    uuid::Builder::from_custom_bytes(bytes).into_uuid().to_string()
}

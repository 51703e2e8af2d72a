//! Parquet files as SQL tables: `--table NAME=LOCATION` registrations and locations quoted
//! in a query (`FROM 'reviews.parquet'`, `FROM 's3://bucket/out/'`). A location is a file, a
//! directory of `*.parquet` files or a glob, locally or in object storage. Every file is
//! checked up front (a Delta table: the files its log lists now), so a file that is not Parquet fails with its name instead of an
//! anonymous footer error in the middle of a query.

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Context;
use arrow::datatypes::{Schema, SchemaRef};
use async_trait::async_trait;
use batch_io::inputs::{InputFiles, resolve_input_files};
use batch_io::locations::{InputLocation, LocationKind};
use batch_io::object_storage::{TransientIo, is_url, list_inputs};
use batch_io::source::{InputFile, parquet_footer};
use datafusion::catalog::{TableProvider, UrlTableFactory};
use datafusion::datasource::listing::{ListingTable, ListingTableConfig, ListingTableUrl};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::SessionState;
use datafusion::execution::options::ReadOptions;
use datafusion::prelude::ParquetReadOptions;
use parquet::arrow::parquet_to_arrow_schema;
use parquet::file::reader::{FileReader, SerializedFileReader};
use runtime::output::PushesTowards;

use crate::text_tables::text_table;
use runtime::output::columns::{CONTRIBUTION, TOKEN_SPANS, TOKENS};
use runtime::output::keys;
use runtime::output::origin::{SameRun, refuse_mixed_runs};

/// The URLs DataFusion reads `files` by.
pub(crate) fn table_urls(files: &[InputFile]) -> Result<Vec<ListingTableUrl>> {
    files
        .iter()
        .map(|file| match file {
            InputFile::Local(path) => ListingTableUrl::parse(std::path::absolute(path)?.to_string_lossy()),
            InputFile::Remote(object) => ListingTableUrl::parse(&object.url),
        })
        .collect()
}

/// The Parquet files behind `location` (a file, a directory's or prefix's `*.parquet` files
/// or a glob, locally or in object storage), sorted, each checked to have a readable footer,
/// and to be of the same `--attention` encoding and column types as the first (a table takes
/// the first file's schema and would cast the others' weights silently).
/// Also returns what a table that keeps the files' `contribution` column must say to be read
/// the right way round ([`PushMetadata`]), when they have that column.
/// This blocks: from async code call [`find_parquet_files`].
pub fn resolve_parquet_files(location: &str) -> anyhow::Result<ResolvedFiles> {
    let ParquetInputs { input, table_metadata } = parquet_inputs(location)?;
    let mut schemas = Vec::with_capacity(input.files.len());
    for file in &input.files {
        let footer = match file {
            InputFile::Local(path) => {
                let opened = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
                let reader =
                    SerializedFileReader::new(opened).map_err(|e| anyhow::anyhow!("{e}")).with_context(|| {
                        format!(
                            "{} is not a Parquet file; `pipeline sql` reads Parquet, Delta tables, and CSV, TSV or \
                             JSON Lines files named by their extension",
                            path.display()
                        )
                    })?;
                Arc::new(reader.metadata().clone())
            }
            InputFile::Remote(_) => parquet_footer(file)?,
        };
        let name = file.to_string();
        let meta = footer.file_metadata();
        let schema = parquet_to_arrow_schema(meta.schema_descr(), meta.key_value_metadata())
            .with_context(|| format!("{name}: its Parquet schema has no Arrow equivalent"))?;
        schemas.push((name, schema));
    }
    // A Delta table is read with the types of a file we wrote (byte lists as bytes), where one is
    // left: files another writer rewrote hold them as the table declares them.
    let delta = !table_metadata.is_empty();
    let reference =
        if delta { schemas.iter().position(|(_, s)| s.metadata().contains_key(keys::MODEL_SHA256)) } else { None };
    if let Some(index) = reference.filter(|index| *index > 0) {
        schemas.swap(0, index);
    }
    let mut first: Option<(String, Schema)> = None;
    let mut pushes_towards = None;
    let mut token_spans_text = None;
    for (name, schema) in schemas {
        let schema = with_table_metadata(schema, &table_metadata);
        let schema = match (&first, delta) {
            (Some((_, reference)), true) => delta_table::as_written_in(reference, &schema),
            _ => schema,
        };
        match &first {
            None => {
                // The other files agree (refused below where they do not).
                if schema.index_of(CONTRIBUTION.name).is_ok()
                    && let Ok(towards) = PushesTowards::recorded(schema.metadata())
                {
                    let labels = schema.metadata().get(keys::MODEL_LABELS).cloned().unwrap_or_default();
                    pushes_towards = Some((towards.metadata_value(), labels));
                }
                token_spans_text = match runtime::output::token_spans::text_column_of(&schema) {
                    Ok(text) => text,
                    Err(why) => {
                        tracing::warn!("{name}: its token_spans give the table no `tokens` column: {why}");
                        None
                    }
                };
                first = Some((name, schema));
            }
            Some((first_name, first_schema)) => refuse_mixed_runs(
                (first_name, first_schema),
                (&name, &schema),
                SameRun::Encoding,
                &format!("query them as separate tables (one location each) instead of one {location}"),
            )?,
        }
    }
    let recorded = first.as_ref().map(|(_, schema)| keys::recorded_partitions(schema.metadata())).unwrap_or_default();
    let schema = first.filter(|_| delta).map(|(_, schema)| Arc::new(schema));
    let partitioned = if delta { None } else { partitioned_dataset(location, &input) };
    warn_of_partition_columns_left_out(location, &input, &recorded, partitioned.as_ref());
    // Typed as the run recorded them; text where it did not (another writer's dataset).
    let partitioned = partitioned.map(|(root, names)| {
        let typed = names
            .into_iter()
            .map(|name| {
                let recorded = recorded.iter().find(|(n, _)| *n == name).map(|(_, t)| t.clone());
                (name, recorded.unwrap_or(arrow::datatypes::DataType::Utf8))
            })
            .collect();
        (root, typed)
    });
    Ok(ResolvedFiles { input, pushes: pushes_towards, schema, partitioned, token_spans_text })
}

pub use delta_table::as_written_in;

/// The files behind a table's location, as [`resolve_parquet_files`] checked them.
pub struct ResolvedFiles {
    pub input: InputFiles,
    /// Where the table's pushes point, when its files have a `contribution` column.
    pub pushes: Option<PushMetadata>,
    /// The schema to read every file with, where inferring it from the files would not do: a
    /// Delta table, whose rewritten files hold our byte lists as `short`.
    pub schema: Option<SchemaRef>,
    /// A Hive-style partitioned dataset (`pipeline run --partition-by`): its root, and the
    /// columns its directories name, in order, with their types.
    pub partitioned: Option<(String, Vec<(String, arrow::datatypes::DataType)>)>,
    /// The text column that the files' `token_spans` count in, where they hold spans instead
    /// of tokens: the table then gives `tokens` too, read from them.
    pub token_spans_text: Option<String>,
}

/// Files of a partitioned run read from a glob, a partition directory or one part lack the
/// columns their directories name (DataFusion takes them only below the table's directory):
/// say so, and which directory has them.
fn warn_of_partition_columns_left_out(
    location: &str,
    input: &InputFiles,
    recorded: &[(String, arrow::datatypes::DataType)],
    partitioned: Option<&(String, Vec<String>)>,
) {
    let read: Vec<&String> = partitioned.map(|(_, names)| names.iter().collect()).unwrap_or_default();
    let missing: Vec<&str> =
        recorded.iter().map(|(n, _)| n.as_str()).filter(|n| !read.iter().any(|r| r == n)).collect();
    let Some(first) = input.files.first().map(ToString::to_string) else { return };
    if missing.is_empty() {
        return;
    }
    let root =
        first.split('/').take_while(|s| !batch_io::locations::is_partition_directory(s)).collect::<Vec<_>>().join("/");
    tracing::warn!(
        "{location}: its files lie in partition directories, and read from here they lack the column(s) {} those \
         name; give the dataset's directory ({root}/) to have them",
        missing.join(", ")
    );
}

/// The root and partition columns of `location` where it is a directory or prefix whose files
/// lie in `name=value` directories, as the first file's path names them.
pub fn partitioned_dataset(location: &str, input: &InputFiles) -> Option<(String, Vec<String>)> {
    let relative = match (input.local.as_ref(), input.files.first()?) {
        (Some(local), InputFile::Local(path)) if matches!(local.kind, LocationKind::Directory { .. }) => {
            path.strip_prefix(&local.location).ok()?.to_string_lossy().replace('\\', "/")
        }
        (None, InputFile::Remote(object)) if !location.contains(['*', '?', '[']) => {
            object.url.strip_prefix(location.trim_end_matches('/'))?.to_owned()
        }
        _ => return None,
    };
    let columns: Vec<String> =
        batch_io::locations::partition_values(&relative).into_iter().map(|(name, _)| name).collect();
    (!columns.is_empty()).then(|| (location.to_owned(), columns))
}

/// The Parquet files behind a location, and what a Delta table's properties say of every one
/// of them.
pub struct ParquetInputs {
    pub input: InputFiles,
    /// A Delta table's record of the run that wrote it (model, labels, encoding, where the
    /// pushes point), which outranks each file's own metadata: a file rewritten by another
    /// writer (OPTIMIZE, Z-ORDER) has lost it. Empty where the location is not a table.
    pub table_metadata: HashMap<String, String>,
}

/// `schema` with `table_metadata` over its own metadata.
pub fn with_table_metadata(schema: Schema, table_metadata: &HashMap<String, String>) -> Schema {
    if table_metadata.is_empty() {
        return schema;
    }
    let mut metadata = schema.metadata().clone();
    metadata.extend(table_metadata.iter().map(|(key, value)| (key.clone(), value.clone())));
    schema.with_metadata(metadata)
}

/// The Parquet files at `location`: a Delta table's as its log lists them now, or else the
/// file, directory of `*.parquet` files or glob, locally or in object storage.
pub fn parquet_inputs(location: &str) -> anyhow::Result<ParquetInputs> {
    match delta_table_files(location)? {
        Some(inputs) => Ok(inputs),
        None => {
            let input = resolve_input_files(location, &["parquet"])?;
            Ok(ParquetInputs { input, table_metadata: HashMap::new() })
        }
    }
}

/// The data files of the Delta table at `location` as its log lists them now (a table's
/// directory also holds files the log does not list); `None` where it is not a table.
fn delta_table_files(location: &str) -> anyhow::Result<Option<ParquetInputs>> {
    let Some(table) = delta_table::data_files(location)? else { return Ok(None) };
    let (uris, table_metadata) = (table.uris, table.properties);
    if uris.is_empty() {
        anyhow::bail!(
            "the Delta table {location} holds no data files yet; run `pipeline run --output-format delta` into it first"
        );
    }
    if is_url(location) {
        let mut files = Vec::new();
        for uri in &uris {
            files.extend(list_inputs(uri, &["parquet"])?.into_iter().map(InputFile::Remote));
        }
        return Ok(Some(ParquetInputs { input: InputFiles { local: None, files }, table_metadata }));
    }
    let mut paths = Vec::new();
    for uri in &uris {
        let path = delta_table::local_file(uri);
        paths.push(path.with_context(|| format!("the Delta table {location} lists {uri}, which is not a local file"))?);
    }
    let local = InputLocation {
        location: location.to_owned(),
        kind: LocationKind::Directory { extensions: vec!["parquet".to_owned()] },
        files: paths.clone(),
    };
    let input = InputFiles { local: Some(local), files: paths.into_iter().map(InputFile::Local).collect() };
    Ok(Some(ParquetInputs { input, table_metadata }))
}

/// [`resolve_parquet_files`] off the query runtime's threads: listing and footer reads block,
/// and object-storage requests wait on their own runtime, which a runtime thread cannot do.
pub async fn find_parquet_files(location: &str) -> anyhow::Result<ResolvedFiles> {
    let location = location.to_owned();
    tokio::task::spawn_blocking(move || resolve_parquet_files(&location))
        .await
        .context("resolving a table's files failed")?
}

/// A table over `resolved`'s files, with its schema, or else the schema merged from their
/// footers. `name`: what the query calls it, which a view's plan scans under, so that result
/// headers lose it as they lose a plain table's name ([`crate::column_names`]).
pub async fn parquet_table(
    state: &SessionState,
    resolved: &ResolvedFiles,
    name: &str,
) -> Result<Arc<dyn TableProvider>> {
    let table = match &resolved.partitioned {
        Some((root, columns)) => partitioned_table(state, root, columns, name).await?,
        None => listing_table(state, resolved).await?,
    };
    match &resolved.token_spans_text {
        Some(text) => with_tokens(state, table, text, name),
        None => Ok(table),
    }
}

/// `table` with a `tokens` column before its `token_spans`, read from them in `text`: the
/// queries written for outputs that held the strings still run (a query that leaves it out
/// does not compute it).
fn with_tokens(
    state: &SessionState,
    table: Arc<dyn TableProvider>,
    text: &str,
    name: &str,
) -> Result<Arc<dyn TableProvider>> {
    use datafusion::logical_expr::LogicalPlanBuilder;
    use datafusion::prelude::ident;
    let mut projection = Vec::new();
    for field in table.schema().fields() {
        if field.name() == TOKEN_SPANS.name {
            let tokens = crate::functions::tokens_udf().call(vec![ident(text), ident(TOKEN_SPANS.name)]);
            projection.push(tokens.alias(TOKENS.name));
        }
        projection.push(ident(field.name()));
    }
    let source = datafusion::datasource::provider_as_source(table);
    let plan = LogicalPlanBuilder::scan(name, source, None)?.project(projection)?.build()?;
    Ok(datafusion::dataframe::DataFrame::new(state.clone(), plan).into_view())
}

/// A table over `resolved`'s files, not partitioned.
async fn listing_table(state: &SessionState, resolved: &ResolvedFiles) -> Result<Arc<dyn TableProvider>> {
    // The files were chosen above, whatever their extension.
    let options = ParquetReadOptions::default()
        .to_listing_options(state.config(), state.default_table_options())
        .with_file_extension("");
    let config =
        ListingTableConfig::new_with_multi_paths(table_urls(&resolved.input.files)?).with_listing_options(options);
    let config = match &resolved.schema {
        Some(schema) => config.with_schema(schema.clone()),
        None => config.infer_schema(state).await?,
    };
    Ok(Arc::new(ListingTable::try_new(config)?))
}

/// A table over the `*.parquet` files under `root`'s partition directories, with their
/// `columns` read from the directory names as DataFusion reads Hive-style datasets, then given
/// their types back, with the null value's name as null.
async fn partitioned_table(
    state: &SessionState,
    root: &str,
    columns: &[(String, arrow::datatypes::DataType)],
    name: &str,
) -> Result<Arc<dyn TableProvider>> {
    use arrow::datatypes::DataType;
    use datafusion::logical_expr::{LogicalPlanBuilder, cast, lit, when};
    use datafusion::prelude::ident;
    let url = if is_url(root) {
        format!("{}/", root.trim_end_matches('/'))
    } else {
        format!("{}/", std::path::absolute(root)?.to_string_lossy().trim_end_matches('/'))
    };
    let options = ParquetReadOptions::default()
        .to_listing_options(state.config(), state.default_table_options())
        .with_file_extension(".parquet")
        .with_table_partition_cols(columns.iter().map(|(name, _)| (name.clone(), DataType::Utf8)).collect());
    let config = ListingTableConfig::new(ListingTableUrl::parse(&url)?).with_listing_options(options);
    let table: Arc<dyn TableProvider> = Arc::new(ListingTable::try_new(config.infer_schema(state).await?)?);
    let mut projection = Vec::new();
    for field in table.schema().fields() {
        let column = ident(field.name());
        projection.push(match columns.iter().find(|(name, _)| name == field.name()) {
            Some((name, data_type)) => {
                let value_type = match data_type {
                    DataType::Dictionary(_, values) => values.as_ref().clone(),
                    other => other.clone(),
                };
                let null = datafusion::scalar::ScalarValue::try_from(&value_type)?;
                when(column.clone().eq(lit(batch_io::locations::NULL_PARTITION_VALUE)), lit(null))
                    .otherwise(cast(column, value_type))?
                    .alias(name)
            }
            None => column,
        });
    }
    let source = datafusion::datasource::provider_as_source(table);
    let plan = LogicalPlanBuilder::scan(name, source, None)?.project(projection)?.build()?;
    Ok(datafusion::dataframe::DataFrame::new(state.clone(), plan).into_view())
}

/// Resolves table names that are not registered but look like paths (`FROM 'dir/*.parquet'`).
#[derive(Debug)]
pub struct ParquetPathTables {
    /// A snapshot of the session, for its Parquet options and object store.
    state: SessionState,
    /// Every location a query has read, so that an output can be checked against them.
    read: ReadLocations,
    remote_read: RemoteReads,
    anchors: PushAnchors,
}

/// The input locations of a session, shared between its registrations and its path tables.
pub type ReadLocations = Arc<Mutex<Vec<InputLocation>>>;

/// The object-storage locations a session has read, each with the object URLs it expanded to.
pub type RemoteReads = Arc<Mutex<Vec<(String, Vec<String>)>>>;

/// Where a table's `contribution` pushes point and the model's labels: its
/// `pipeline.contribution_towards` value and its `model.labels` (empty where not recorded).
pub type PushMetadata = (String, String);

/// What the tables a session read say of their columns, which an output that keeps those
/// columns must say too, so that the report reads them: where the pushes point
/// ([`PushMetadata`]), and the text column `token_spans` count in.
#[derive(Debug, Default)]
pub struct ReadMarks {
    pub pushes: BTreeSet<PushMetadata>,
    pub token_spans_texts: BTreeSet<String>,
}

/// The [`ReadMarks`] of a session, shared between its registrations and its path tables.
pub type PushAnchors = Arc<Mutex<ReadMarks>>;

/// Records what `resolved`'s files say of their pushes and token spans.
pub fn record_anchor(resolved: &ResolvedFiles, anchors: &PushAnchors) {
    let mut marks = anchors.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(towards) = &resolved.pushes {
        marks.pushes.insert(towards.clone());
    }
    if let Some(text) = &resolved.token_spans_text {
        marks.token_spans_texts.insert(text.clone());
    }
}

/// Records where `files` (resolved from `location`) came from, for the output check.
pub fn record_read(files: &InputFiles, location: &str, local: &ReadLocations, remote: &RemoteReads) {
    match &files.local {
        Some(input) => local.lock().unwrap_or_else(PoisonError::into_inner).push(input.clone()),
        None => {
            let objects = files.files.iter().map(ToString::to_string).collect();
            remote.lock().unwrap_or_else(PoisonError::into_inner).push((location.to_owned(), objects));
        }
    }
}

impl ParquetPathTables {
    pub fn new(state: SessionState, read: ReadLocations, remote_read: RemoteReads, anchors: PushAnchors) -> Self {
        Self { state, read, remote_read, anchors }
    }
}

fn looks_like_path(name: &str) -> bool {
    is_url(name) || name.contains(['/', '.', '*', '?', '[']) || Path::new(name).exists()
}

#[async_trait]
impl UrlTableFactory for ParquetPathTables {
    async fn try_new(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        // A bare unknown name is left to DataFusion's "table not found".
        if !looks_like_path(name) {
            return Ok(None);
        }
        if let Some((table, input)) =
            text_table(&self.state, name).await.map_err(|error| DataFusionError::Plan(format!("{error:#}")))?
        {
            record_read(&input, name, &self.read, &self.remote_read);
            return Ok(Some(table));
        }
        let resolved = find_parquet_files(name).await.map_err(|error| {
            // An unreachable store stays transient (exit 75) through DataFusion's error; its
            // message names the location.
            match error.chain().find_map(|cause| cause.downcast_ref::<TransientIo>()) {
                Some(transient) => DataFusionError::External(Box::new(TransientIo(transient.0.clone()))),
                None => DataFusionError::Plan(format!("{error:#}")),
            }
        })?;
        let table = parquet_table(&self.state, &resolved, name).await?;
        record_read(&resolved.input, name, &self.read, &self.remote_read);
        record_anchor(&resolved, &self.anchors);
        Ok(Some(table))
    }
}

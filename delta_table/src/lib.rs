//! A Delta Lake table's location, opened as its readers and its writer both need it: the
//! store behind it (local, or object storage configured from the environment), its log loaded
//! through that store, and its data files and recorded properties. `pipeline run` writes
//! tables on top of this (`pipeline::delta`); `pipeline sql` and the report read them.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, bail};
use arrow::datatypes::{DataType, Field, FieldRef, Schema};
use batch_io::locations::DELTA_LOG;
use batch_io::object_storage::{RemotePrefix, block_on, is_url, remote_prefix, request_failed};
use deltalake_core::logstore::{
    LogStore, LogStoreFactory, ObjectStoreRef, StorageConfig, default_logstore, logstore_factories,
};
use deltalake_core::{DeltaResult, DeltaTable, DeltaTableBuilder, DeltaTableError};
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;
use runtime::output::keys;
use url::Url;

/// The schema-metadata keys that become table properties and must agree for two runs to
/// share a table: the model and what its rows mean.
pub const TABLE_PROPERTY_KEYS: [&str; 8] = [
    keys::MODEL_VARIANT,
    keys::MODEL_SHA256,
    keys::MODEL_LABELS,
    keys::MAX_TOKENS,
    keys::LONG_DOCUMENTS,
    keys::ATTENTION_ENCODING,
    keys::CONTRIBUTION_TOWARDS,
    keys::TOKEN_SPANS_TEXT,
];

/// A Delta table's location: where it is, and the store its log and files live in. It need
/// not be a table yet.
pub struct DeltaLocation {
    /// As the user gave it, for messages.
    pub location: String,
    /// The table's root, ending in `/`.
    pub url: Url,
    /// The store, rooted at the file system's root or the bucket.
    pub store: Arc<dyn ObjectStore>,
    /// In object storage: the table's prefix.
    pub remote: Option<RemotePrefix>,
}

/// The log store for tables in object storage: delta-rs's default one (commits by a
/// create-if-absent write, which S3, GCS and Azure support), over the store this crate already
/// configured from the environment. delta-rs registers it for `file://` and `memory://` only;
/// its cloud crates would bring their own stores and SDKs.
#[derive(Debug)]
struct PlainLogStores;

impl LogStoreFactory for PlainLogStores {
    fn with_options(
        &self,
        prefixed_store: ObjectStoreRef,
        root_store: ObjectStoreRef,
        location: &Url,
        options: &StorageConfig,
    ) -> DeltaResult<Arc<dyn LogStore>> {
        Ok(default_logstore(prefixed_store, root_store, location, options))
    }
}

fn register_log_stores() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for scheme in ["s3://", "s3a://", "gs://", "az://", "abfs://", "abfss://", "azure://", "adl://"] {
            if let Ok(url) = Url::parse(scheme) {
                logstore_factories().insert(url, Arc::new(PlainLogStores));
            }
        }
    });
}

impl DeltaLocation {
    /// The table at `location` (a local directory, created if its parent exists, or a storage
    /// URL); it need not be a table yet.
    pub fn at(location: &str) -> anyhow::Result<Self> {
        if is_url(location) {
            register_log_stores();
            let prefix = remote_prefix(location)?;
            let url =
                Url::parse(&format!("{}/", prefix.url)).with_context(|| format!("`{location}` is not a valid URL"))?;
            return Ok(Self { location: location.to_owned(), url, store: prefix.store.clone(), remote: Some(prefix) });
        }
        let path = Path::new(location);
        if path.exists() && !path.is_dir() {
            bail!(
                "{} is a file; a Delta table is a directory (give a new or empty one, or a table)",
                batch_io::spelling::option_with("output", location)
            );
        }
        if !path.exists() {
            let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
            if !parent.is_dir() {
                bail!("cannot write {location}: the directory {} does not exist", parent.display());
            }
            match std::fs::create_dir(path) {
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists && path.is_dir() => {}
                result => result.with_context(|| format!("cannot create the table directory {location}"))?,
            }
        }
        let absolute = path.canonicalize().with_context(|| format!("cannot resolve {location}"))?;
        let url = Url::from_directory_path(&absolute)
            .map_err(|()| anyhow::anyhow!("{} cannot be written as a file:// URL", absolute.display()))?;
        let store = Arc::new(object_store::local::LocalFileSystem::new());
        Ok(Self { location: location.to_owned(), url, store, remote: None })
    }

    /// The table's log directory in [`Self::store`].
    pub fn log_dir(&self) -> anyhow::Result<ObjectPath> {
        match &self.remote {
            Some(prefix) => Ok(prefix.child(DELTA_LOG)),
            None => ObjectPath::from_url_path(self.url.path())
                .map(|root| root.clone().join(DELTA_LOG))
                .with_context(|| format!("cannot name the log of {}", self.location)),
        }
    }

    /// Whether the location has a Delta log: asked through our own store first, so that a
    /// store that cannot be reached fails as every other request of ours does (transient,
    /// exit 75, after the retries), and a location that is no table costs one listing.
    pub fn has_log(&self) -> anyhow::Result<bool> {
        let Some(prefix) = &self.remote else {
            return Ok(Path::new(&self.location).join(DELTA_LOG).is_dir());
        };
        let log = prefix.child(DELTA_LOG);
        let listing = block_on(prefix.store.list_with_delimiter(Some(&log)))?
            .map_err(|e| request_failed(&format!("cannot list {}", self.location), e))?;
        Ok(!listing.objects.is_empty())
    }

    /// The table over this location's store, its log not read yet: to load it, or to create
    /// one through its log store.
    pub fn unloaded(&self) -> anyhow::Result<DeltaTable> {
        DeltaTableBuilder::from_url(self.url.clone())
            .and_then(|builder| builder.with_storage_backend(self.store.clone(), self.url.clone()).build())
            .with_context(|| format!("cannot open {} as a Delta table", self.location))
    }

    /// The table as its log says now; `None` where there is no table yet.
    pub fn load(&self) -> anyhow::Result<Option<DeltaTable>> {
        if !self.has_log()? {
            return Ok(None);
        }
        let mut table = self.unloaded()?;
        match block_on(table.load())? {
            Ok(()) => Ok(Some(table)),
            Err(DeltaTableError::NotATable(_)) => Ok(None),
            Err(error) => Err(self.failed("cannot read the Delta log of", error)),
        }
    }

    pub fn failed(&self, what: &str, error: DeltaTableError) -> anyhow::Error {
        anyhow::anyhow!("{what} {}: {error}", self.location)
    }
}

/// A local table's data file as delta-rs lists it (a path, percent-encoded as a URL's, or a
/// `file://` URL) on the file system; `None` for a URL of another scheme.
pub fn local_file(uri: &str) -> Option<std::path::PathBuf> {
    match Url::parse(uri) {
        Ok(url) if url.scheme() == "file" => url.to_file_path().ok(),
        Ok(_) => None,
        Err(_) => Url::parse(&format!("file://{uri}")).ok().and_then(|url| url.to_file_path().ok()),
    }
}

/// `other` with each column's type read as `reference` has it where the two differ only as a
/// Delta table stores it: another writer rewriting our files (OPTIMIZE) writes our byte lists
/// as the table declares them, `short`, and they read back as our bytes.
pub fn as_written_in(reference: &Schema, other: &Schema) -> Schema {
    let fields: Vec<Field> = other
        .fields()
        .iter()
        .map(|field| match reference.field_with_name(field.name()) {
            Ok(ours)
                if signed(ours.data_type()).equals_datatype(field.data_type())
                    || signed(field.data_type()).equals_datatype(ours.data_type()) =>
            {
                field.as_ref().clone().with_data_type(ours.data_type().clone())
            }
            _ => field.as_ref().clone(),
        })
        .collect();
    Schema::new_with_metadata(fields, other.metadata().clone())
}

/// `data_type` with every unsigned integer widened to the signed type that holds its values.
pub fn signed(data_type: &DataType) -> DataType {
    let item = |field: &FieldRef| Arc::new(field.as_ref().clone().with_data_type(signed(field.data_type())));
    match data_type {
        DataType::UInt8 => DataType::Int16,
        DataType::UInt16 => DataType::Int32,
        DataType::UInt32 | DataType::UInt64 => DataType::Int64,
        DataType::List(field) => DataType::List(item(field)),
        DataType::LargeList(field) => DataType::LargeList(item(field)),
        DataType::FixedSizeList(field, size) => DataType::FixedSizeList(item(field), *size),
        other => other.clone(),
    }
}

/// A Delta table as its readers see it now.
pub struct TableFiles {
    /// The data files its log lists, as URLs or paths.
    pub uris: Vec<String>,
    /// What its properties record of the run that wrote it ([`TABLE_PROPERTY_KEYS`]): the
    /// model, its labels, the encoding and where the pushes point. These outrank each file's
    /// own schema metadata, which a file rewritten by another writer (OPTIMIZE) has lost.
    pub properties: HashMap<String, String>,
}

/// The Delta table at `location` as `pipeline sql` and the report read it; `None` where
/// `location` is not a Delta table (no `_delta_log/`).
pub fn data_files(location: &str) -> anyhow::Result<Option<TableFiles>> {
    let is_file_name = location.to_ascii_lowercase().ends_with(".parquet");
    // Only an existing directory or a prefix can be a table (and `at` must create nothing).
    if location.contains(['*', '?', '[']) || is_file_name || (!is_url(location) && !Path::new(location).is_dir()) {
        return Ok(None);
    }
    let output = DeltaLocation::at(location)?;
    let Some(table) = output.load()? else { return Ok(None) };
    let uris = table.get_file_uris().map_err(|e| output.failed("cannot list the files of", e))?.collect();
    let snapshot = table.snapshot().map_err(|e| output.failed("cannot read", e))?;
    let configuration = snapshot.metadata().configuration();
    let properties = TABLE_PROPERTY_KEYS
        .iter()
        .filter_map(|key| configuration.get(*key).map(|value| ((*key).to_owned(), value.clone())))
        .collect();
    Ok(Some(TableFiles { uris, properties }))
}

//! Object storage (S3, GCS, Azure, plain HTTPS) through the `object_store` crate, for code
//! that is otherwise synchronous: one small tokio runtime runs the requests, and callers on
//! ordinary threads wait on them.
//!
//! Each bucket gets its own store, built from that cloud's standard environment variables
//! (`from_env().with_url()`): `AWS_ACCESS_KEY_ID`, `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`,
//! `GOOGLE_SERVICE_ACCOUNT`, `AZURE_STORAGE_ACCOUNT_NAME`, … Profile files (`~/.aws`) are not
//! read. Requests that fail transiently are retried with exponential backoff for up to two
//! minutes (`PIPELINE_STORAGE_RETRY_SECONDS`); an error that persists after the retries is
//! marked [`TransientIo`] (exit code 75).
//!
//! Locations are compared by [`canonical_url`], the object the store will really address, so
//! that `s3://b/in/./r.parquet` and `s3://b/x/../in/r.parquet` are known to be `s3://b/in/r.parquet`.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use anyhow::{Context, bail};
use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use glob::{MatchOptions, Pattern};
use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::http::HttpBuilder;
use object_store::path::Path as ObjectPath;
use object_store::{
    BackoffConfig, GetOptions, ObjectMeta, ObjectStore, ObjectStoreExt, ObjectStoreScheme, RetryConfig,
};
use parquet::arrow::arrow_reader::ArrowReaderOptions;
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::errors::ParquetError;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use url::Url;

/// Schemes that name object storage rather than a local path.
const SCHEMES: &[&str] = &["s3", "s3a", "gs", "az", "adl", "azure", "abfs", "abfss", "http", "https"];

/// Whether `location` is a URL of object storage (`s3://…`, `gs://…`, `az://…`, `https://…`).
pub fn is_url(location: &str) -> bool {
    location.split_once("://").is_some_and(|(scheme, _)| SCHEMES.contains(&scheme.to_ascii_lowercase().as_str()))
}

/// An error from object storage that persisted after the retries (a timeout, a refused
/// connection, a server error): rerunning later may succeed. Exit code 75.
#[derive(Debug)]
pub struct TransientIo(pub String);

impl fmt::Display for TransientIo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (a transient failure that persisted after retries; rerunning later may succeed)", self.0)
    }
}

impl std::error::Error for TransientIo {}

/// `error` from a request about `what`, with the cause a user can act on: a missing object
/// or bucket and refused credentials are bad input; anything else is [`TransientIo`].
pub fn request_failed(what: &str, error: object_store::Error) -> anyhow::Error {
    use object_store::Error as E;
    match error {
        E::NotFound { .. } => anyhow::anyhow!("{what}: it does not exist (check the bucket and the path)"),
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => anyhow::anyhow!(
            "{what}: access refused ({error}); check the credentials in the cloud's environment variables \
             (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, GOOGLE_SERVICE_ACCOUNT, AZURE_STORAGE_ACCOUNT_KEY)"
        ),
        E::Generic { .. } if is_missing_bucket(&error) => {
            anyhow::anyhow!("{what}: the bucket does not exist ({error}); check its name and AWS_ENDPOINT_URL")
        }
        E::Generic { .. } if is_from_metadata_service(&error) => {
            let what = format!(
                "{what}: no credentials: the environment has none (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, \
                 or AWS_WEB_IDENTITY_TOKEN_FILE; ~/.aws profile files are not read), and the instance metadata \
                 service, which gives them on EC2, gave none ({error})"
            );
            // A metadata service that answers but refuses is final; one that cannot be
            // reached may be a passing failure on a machine that has one.
            if error_text(&error).contains("status code: 4") {
                anyhow::anyhow!(what)
            } else {
                anyhow::Error::new(TransientIo(what))
            }
        }
        E::Generic { .. } if is_refused_credentials(&error) => anyhow::anyhow!(
            "{what}: credentials missing or refused ({error}); set the cloud's credential variables \
             (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, GOOGLE_SERVICE_ACCOUNT, AZURE_STORAGE_ACCOUNT_KEY)"
        ),
        E::Precondition { .. } => anyhow::anyhow!(
            "{what}: it was replaced while this run read it (its ETag is no longer the one listed when the run \
             started), so rows of two versions would mix; rerun once its producer has finished writing it"
        ),
        E::InvalidPath { .. } | E::NotSupported { .. } | E::NotImplemented { .. } => {
            anyhow::anyhow!("{what}: {error}")
        }
        other => anyhow::Error::new(TransientIo(format!("{what}: {other}"))),
    }
}

fn error_text(error: &object_store::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

fn is_missing_bucket(error: &object_store::Error) -> bool {
    error_text(error).contains("NoSuchBucket")
}

/// A failure to get credentials from the EC2 (or ECS) metadata service, which object_store
/// asks when the environment holds no credentials.
fn is_from_metadata_service(error: &object_store::Error) -> bool {
    let text = error_text(error);
    ["/latest/api/token", "/latest/meta-data/", "169.254.170.2"].iter().any(|s| text.contains(s))
}

fn is_refused_credentials(error: &object_store::Error) -> bool {
    let text = error_text(error);
    ["InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "credential"].iter().any(|s| text.contains(s))
}

/// The runtime that carries every object-storage request of the process, started on first
/// use; the error (no threads or timers to be had) is the caller's to report.
fn runtime() -> anyhow::Result<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    let runtime = RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("object-store")
            .enable_all()
            .build()
            .map_err(|error| error.to_string())
    });
    runtime.as_ref().map_err(|error| anyhow::anyhow!("cannot start the object-storage runtime: {error}"))
}

/// Runs `work` to completion from ordinary (non-async) code; fails only when the runtime
/// cannot start.
pub fn block_on<F: Future>(work: F) -> anyhow::Result<F::Output> {
    Ok(runtime()?.block_on(work))
}

/// How long transient failures are retried by default, in seconds.
const DEFAULT_RETRY_SECONDS: u64 = 120;
/// The environment variable that changes it (a scheduler with its own retries may want less).
pub const RETRY_SECONDS_VARIABLE: &str = "PIPELINE_STORAGE_RETRY_SECONDS";

/// The retry budget: [`DEFAULT_RETRY_SECONDS`], or `PIPELINE_STORAGE_RETRY_SECONDS`.
fn retry_budget() -> anyhow::Result<Duration> {
    match std::env::var(RETRY_SECONDS_VARIABLE) {
        Err(_) => Ok(Duration::from_secs(DEFAULT_RETRY_SECONDS)),
        Ok(text) => text.trim().parse::<u64>().map(Duration::from_secs).map_err(|_| {
            anyhow::anyhow!("{RETRY_SECONDS_VARIABLE} is `{text}`; give a whole number of seconds, such as 120")
        }),
    }
}

/// Retries for transient failures, until the budget is spent. object_store draws each wait at
/// random between `init_backoff` and `base` × the previous one (so it grows by about
/// `base` / 2 a try): from 1 s, by about ×1.5, capped at 20 s, the tries spread over the whole
/// budget instead of ending in seconds. The try count is only a backstop.
fn retry_config() -> anyhow::Result<RetryConfig> {
    let budget = retry_budget()?;
    Ok(RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_secs(1).min(budget),
            max_backoff: Duration::from_secs(20),
            base: 3.0,
        },
        max_retries: 1000,
        retry_timeout: budget,
    })
}

/// One store per scheme and bucket (host), shared by everything that reads or writes there.
fn store_for(url: &Url) -> anyhow::Result<(Arc<dyn ObjectStore>, ObjectPath)> {
    static STORES: Mutex<Option<HashMap<String, Arc<dyn ObjectStore>>>> = Mutex::new(None);
    let (scheme, path) =
        ObjectStoreScheme::parse(url).map_err(|e| anyhow::anyhow!("{url} is not a storage URL: {e}"))?;
    let base = &url[..url::Position::BeforePath];
    let mut stores = STORES.lock().unwrap_or_else(PoisonError::into_inner);
    let stores = stores.get_or_insert_with(HashMap::new);
    if let Some(store) = stores.get(base) {
        return Ok((store.clone(), path));
    }
    let built = |e: object_store::Error| anyhow::anyhow!("cannot use {base}: {e}");
    let retry = retry_config()?;
    let store: Arc<dyn ObjectStore> = match scheme {
        ObjectStoreScheme::AmazonS3 => {
            Arc::new(AmazonS3Builder::from_env().with_url(base).with_retry(retry).build().map_err(built)?)
        }
        ObjectStoreScheme::GoogleCloudStorage => {
            Arc::new(GoogleCloudStorageBuilder::from_env().with_url(base).with_retry(retry).build().map_err(built)?)
        }
        ObjectStoreScheme::MicrosoftAzure => {
            Arc::new(MicrosoftAzureBuilder::from_env().with_url(base).with_retry(retry).build().map_err(built)?)
        }
        // Refused before any request: the client would refuse it on every try, and that
        // refusal would read as a transient failure (exit 75, retried for ever by a scheduler).
        ObjectStoreScheme::Http if url.scheme() == "http" => bail!(
            "{url}: plain http:// is not supported; serve the file over https://, or for an \
             S3-compatible server give s3://BUCKET/KEY with AWS_ENDPOINT_URL and AWS_ALLOW_HTTP=true"
        ),
        ObjectStoreScheme::Http => {
            Arc::new(HttpBuilder::new().with_url(base).with_retry(retry).build().map_err(built)?)
        }
        _ => bail!("{url}: give s3://, gs://, az:// or https:// for object storage, or a local path"),
    };
    stores.insert(base.to_owned(), store.clone());
    Ok((store, path))
}

/// The object (or prefix) a storage URL really addresses, spelt one way: `.` and `..`
/// segments resolved and percent-escapes decoded as the store resolves them, `s3a://` as
/// `s3://`, no trailing `/`. Two locations address the same object exactly when their
/// canonical URLs are equal, and one is inside the other when it starts with the other's
/// canonical URL and a `/`.
pub fn canonical_url(location: &str) -> anyhow::Result<String> {
    let url = Url::parse(location).with_context(|| format!("`{location}` is not a valid URL"))?;
    let (scheme, path) =
        ObjectStoreScheme::parse(&url).map_err(|e| anyhow::anyhow!("{location} is not a storage URL: {e}"))?;
    let host = url.host_str().unwrap_or_default();
    let base = match scheme {
        ObjectStoreScheme::AmazonS3 if url.scheme() != "https" => format!("s3://{host}"),
        ObjectStoreScheme::GoogleCloudStorage if url.scheme() != "https" => format!("gs://{host}"),
        _ => url[..url::Position::BeforePath].to_owned(),
    };
    Ok(if path.as_ref().is_empty() { base } else { format!("{base}/{path}") })
}

/// A glob location split at the last `/` before its first wildcard: the prefix to list, and
/// the pattern the keys under it must match. `None` when the location has no wildcard.
pub fn split_glob(location: &str) -> Option<(&str, &str)> {
    let cut = location.find(['*', '?', '['])?;
    let slash = location.get(..cut)?.rfind('/')?;
    Some((location.get(..slash)?, location.get(slash + 1..)?))
}

/// The store that serves `url`'s scheme and bucket, built from the environment on first use
/// (for DataFusion, which asks for a store by URL).
pub fn store_at(url: &Url) -> anyhow::Result<Arc<dyn ObjectStore>> {
    store_for(url).map(|(store, _)| store)
}

/// An object in a store: where it is and what the listing said about it.
#[derive(Clone)]
pub struct RemoteObject {
    pub store: Arc<dyn ObjectStore>,
    pub meta: ObjectMeta,
    /// The object's URL, for messages and the run manifest.
    pub url: String,
}

impl fmt::Debug for RemoteObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.url)
    }
}

impl RemoteObject {
    /// The ETag when the store gives one, else the modification time.
    pub fn version(&self) -> String {
        self.meta.e_tag.clone().unwrap_or_else(|| self.meta.last_modified.to_rfc3339())
    }
}

/// A Parquet object read by range requests: the footer first, then only the column chunks
/// a read asks for, never the whole object. Every request carries `If-Match` with the ETag
/// listed when the run started, so that an object replaced during the run is an error, never
/// a part holding rows of both versions.
#[derive(Clone, Debug)]
pub struct ObjectReader {
    object: RemoteObject,
}

impl ObjectReader {
    pub fn new(object: &RemoteObject) -> Self {
        Self { object: object.clone() }
    }
}

fn parquet_error(error: object_store::Error) -> ParquetError {
    ParquetError::External(Box::new(error))
}

/// The footer and the metadata before it usually fit here: one request instead of two.
const FOOTER_PREFETCH: usize = 64 << 10;

impl ObjectReader {
    /// `range` of the object as it was listed.
    async fn listed_range(&self, range: Range<u64>) -> object_store::Result<Bytes> {
        let RemoteObject { store, meta, .. } = &self.object;
        let options = GetOptions {
            range: Some(object_store::GetRange::Bounded(range)),
            if_match: meta.e_tag.clone(),
            ..GetOptions::default()
        };
        store.get_opts(&meta.location, options).await?.bytes().await
    }
}

impl AsyncFileReader for ObjectReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        async move { self.listed_range(range).await.map_err(parquet_error) }.boxed()
    }

    fn get_byte_ranges(&mut self, ranges: Vec<Range<u64>>) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        async move {
            // Nearby ranges in one request, as `ObjectStore::get_ranges` does.
            let this = &*self;
            object_store::coalesce_ranges(
                &ranges,
                |range| this.listed_range(range),
                object_store::OBJECT_STORE_COALESCE_DEFAULT,
            )
            .await
            .map_err(parquet_error)
        }
        .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        _options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        async move {
            let size = self.object.meta.size;
            let reader = ParquetMetaDataReader::new().with_prefetch_hint(Some(FOOTER_PREFETCH));
            Ok(Arc::new(reader.load_and_finish(&mut *self, size).await?))
        }
        .boxed()
    }
}

/// A place in a store: a prefix ("directory") or an object.
#[derive(Clone)]
pub struct RemotePrefix {
    pub store: Arc<dyn ObjectStore>,
    pub path: ObjectPath,
    /// As the user gave it, without a trailing `/`.
    pub url: String,
}

impl fmt::Debug for RemotePrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.url)
    }
}

/// Parses a storage URL and finds its store.
pub fn remote_prefix(location: &str) -> anyhow::Result<RemotePrefix> {
    let url = Url::parse(location).with_context(|| format!("`{location}` is not a valid URL"))?;
    let (store, path) = store_for(&url)?;
    Ok(RemotePrefix { store, path, url: location.trim_end_matches('/').to_owned() })
}

impl RemotePrefix {
    /// The object `name` directly under this prefix.
    pub fn child(&self, name: &str) -> ObjectPath {
        self.path.clone().join(name)
    }

    pub fn child_url(&self, name: &str) -> String {
        format!("{}/{name}", self.url)
    }

    /// The object at `relative` (`a=1/part-00000.parquet`) under this prefix, its segments
    /// taken as they are: keys listed under it come back to the same object.
    pub fn descendant(&self, relative: &str) -> anyhow::Result<ObjectPath> {
        let mut path = self.path.clone();
        for segment in relative.split('/') {
            let part = object_store::path::PathPart::parse(segment)
                .map_err(|e| anyhow::anyhow!("{relative} is not a valid object name under {}: {e}", self.url))?;
            path = path.join(part);
        }
        Ok(path)
    }

    /// The keys of every object under this prefix, at any depth, relative to it, sorted.
    pub fn list_relative(&self) -> anyhow::Result<Vec<String>> {
        let root = self.path.as_ref().len();
        let mut names: Vec<String> = list_all(self)?
            .into_iter()
            .map(|o| o.meta.location.as_ref().get(root..).unwrap_or_default().trim_start_matches('/').to_owned())
            .collect();
        names.sort();
        Ok(names)
    }

    /// Names of the objects directly under this prefix (not in sub-prefixes).
    pub fn list_names(&self) -> anyhow::Result<Vec<String>> {
        let listing = block_on(self.store.list_with_delimiter(Some(&self.path)))?
            .map_err(|e| request_failed(&format!("cannot list {}", self.url), e))?;
        let mut names: Vec<String> =
            listing.objects.iter().filter_map(|o| o.location.filename().map(str::to_owned)).collect();
        names.sort();
        Ok(names)
    }
}

const GLOB_OPTIONS: MatchOptions =
    MatchOptions { case_sensitive: true, require_literal_separator: true, require_literal_leading_dot: true };

/// Expands an input URL into objects: one object, every object with one of `extensions`
/// directly under a prefix (`s3://bucket/data/`), or a glob over keys
/// (`s3://bucket/data/*.parquet`). `https://` cannot be listed, so it takes neither.
pub fn list_inputs(location: &str, extensions: &[&str]) -> anyhow::Result<Vec<RemoteObject>> {
    let is_http = location.starts_with("http://") || location.starts_with("https://");
    let has_glob = location.contains(['*', '?', '[']);
    if is_http && has_glob {
        bail!("{location}: an https:// location cannot be listed, so it takes no glob; name each file");
    }
    let listing = || extensions.join("/*.");
    if has_glob {
        let (base, pattern_text) = split_glob(location).unwrap_or((location, ""));
        let prefix = remote_prefix(base)?;
        let pattern =
            Pattern::new(pattern_text).with_context(|| format!("`{location}` is not a valid glob pattern"))?;
        let mut objects = list_all(&prefix)?;
        let under = prefix.path.as_ref().len();
        objects.retain(|o| {
            let key = o.meta.location.as_ref();
            let relative = key.get(under..).unwrap_or_default().trim_start_matches('/');
            pattern.matches_with(relative, GLOB_OPTIONS)
        });
        if objects.is_empty() {
            bail!("input {location} matches no object");
        }
        return Ok(objects);
    }
    let prefix = remote_prefix(location)?;
    if !location.ends_with('/') {
        match block_on(prefix.store.head(&prefix.path))? {
            Ok(meta) => return Ok(vec![RemoteObject { store: prefix.store.clone(), meta, url: prefix.url.clone() }]),
            Err(object_store::Error::NotFound { .. }) if !is_http => {}
            Err(error) => return Err(request_failed(&format!("cannot read input {location}"), error)),
        }
    }
    let mut objects = list_all(&prefix)?;
    let depth = prefix.path.parts().count() + 1;
    // Directly under the prefix, or in its partition directories (`prediction=pos/`).
    let in_partitions = |location: &ObjectPath| {
        let relative: Vec<_> = location.parts().skip(depth - 1).collect();
        let relative: Vec<&str> = relative.iter().map(|part| part.as_ref()).collect();
        !relative.is_empty() && crate::locations::in_partition_directories(&relative.join("/"))
    };
    objects.retain(|o| {
        in_partitions(&o.meta.location)
            && o.meta.location.extension().is_some_and(|e| extensions.contains(&e))
            && !o.meta.location.filename().is_some_and(|n| n.starts_with('.') || n.starts_with('_'))
    });
    if objects.is_empty() {
        bail!(
            "input {location} does not exist or holds no *.{} object (give an object, a prefix or a glob)",
            listing()
        );
    }
    Ok(objects)
}

/// Every object under `prefix`, at any depth, sorted by key.
fn list_all(prefix: &RemotePrefix) -> anyhow::Result<Vec<RemoteObject>> {
    use futures::TryStreamExt;
    let metas: Vec<ObjectMeta> = block_on(prefix.store.list(Some(&prefix.path)).try_collect())?
        .map_err(|e| request_failed(&format!("cannot list {}", prefix.url), e))?;
    let root = prefix.path.as_ref().len();
    let mut objects: Vec<RemoteObject> = metas
        .into_iter()
        .map(|meta| {
            let relative = meta.location.as_ref().get(root..).unwrap_or_default().trim_start_matches('/').to_owned();
            RemoteObject { store: prefix.store.clone(), url: format!("{}/{relative}", prefix.url), meta }
        })
        .collect();
    objects.sort_by(|a, b| a.meta.location.cmp(&b.meta.location));
    Ok(objects)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_replaced_during_a_run_is_never_read_as_the_listed_version() {
        let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let key = ObjectPath::from("corpus/a.parquet");
        block_on(store.put(&key, b"version one: 0123456789".to_vec().into())).expect("runtime").unwrap();
        let meta = block_on(store.head(&key)).expect("runtime").unwrap();
        let mut reader =
            ObjectReader::new(&RemoteObject { store: store.clone(), meta, url: "s3://corpus/a.parquet".into() });
        assert_eq!(&block_on(reader.get_bytes(0..7)).expect("runtime").unwrap()[..], b"version");
        let ranges = block_on(reader.get_byte_ranges(vec![0..3, 13..16])).expect("runtime").unwrap();
        assert_eq!((&ranges[0][..], &ranges[1][..]), (&b"ver"[..], &b"012"[..]));

        // Re-exported by its producer mid-run, the same size.
        block_on(store.put(&key, b"version two: 9876543210".to_vec().into())).expect("runtime").unwrap();
        for result in [
            block_on(reader.get_bytes(0..7)).expect("runtime").map(|_| ()),
            block_on(reader.get_byte_ranges(vec![0..3, 13..16])).expect("runtime").map(|_| ()),
        ] {
            let ParquetError::External(error) = result.unwrap_err() else { panic!("a store error") };
            let error = *error.downcast::<object_store::Error>().unwrap();
            let message = format!("{:#}", request_failed("cannot read s3://corpus/a.parquet", error));
            assert!(message.contains("it was replaced while this run read it"), "{message}");
        }
    }

    #[test]
    fn storage_urls_are_told_from_local_paths() {
        for url in ["s3://b/k.parquet", "gs://b/", "az://c/p", "https://h/x.parquet", "S3://b/k"] {
            assert!(is_url(url), "{url}");
        }
        for path in ["data/x.parquet", "/tmp/s3://x", "file.parquet", "C:\\data", "ftp://h/x"] {
            assert!(!is_url(path), "{path}");
        }
    }

    #[test]
    fn https_takes_no_glob() {
        let error = list_inputs("https://example.invalid/data/*.parquet", &["parquet"]).expect_err("no glob");
        assert!(error.to_string().contains("cannot be listed"), "{error}");
    }
}

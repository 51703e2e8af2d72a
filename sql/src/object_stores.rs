//! Object stores for DataFusion, built on demand: DataFusion keys a store by scheme, host and
//! port, so every bucket a query names needs its own. Local files keep DataFusion's default
//! store; any other URL gets the store `pipeline run` would use (same environment variables,
//! retries and cache).

use std::sync::Arc;

use datafusion::error::{DataFusionError, Result};
use datafusion::execution::object_store::{DefaultObjectStoreRegistry, ObjectStoreRegistry};
use object_store::ObjectStore;
use url::Url;

#[derive(Debug, Default)]
pub struct StoresFromEnvironment {
    registered: DefaultObjectStoreRegistry,
}

impl ObjectStoreRegistry for StoresFromEnvironment {
    fn register_store(&self, url: &Url, store: Arc<dyn ObjectStore>) -> Option<Arc<dyn ObjectStore>> {
        self.registered.register_store(url, store)
    }

    /// A registered store (local files), else the bucket's store, which `store_at` builds
    /// once and caches.
    fn get_store(&self, url: &Url) -> Result<Arc<dyn ObjectStore>> {
        self.registered
            .get_store(url)
            .or_else(|_| batch_io::object_storage::store_at(url).map_err(|e| DataFusionError::External(e.into())))
    }
}

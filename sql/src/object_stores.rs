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

    fn get_store(&self, url: &Url) -> Result<Arc<dyn ObjectStore>> {
        if let Ok(store) = self.registered.get_store(url) {
            return Ok(store);
        }
        let store = batch_io::object_storage::store_at(url).map_err(|e| DataFusionError::External(e.into()))?;
        self.registered.register_store(url, store.clone());
        Ok(store)
    }
}

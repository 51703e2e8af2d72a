//! Flag groups more than one command takes, so that each reads them the same way.

pub mod columns;
pub mod run_options;

pub use columns::ColumnFlags;
pub use run_options::{BackendFlags, LongDocumentFlags, RunOptionFlags};

//! Flag groups more than one command takes, so that each reads them the same way.

pub mod backend;
pub mod columns;
pub mod long_documents;

pub use backend::BackendFlags;
pub use columns::ColumnFlags;
pub use long_documents::LongDocumentFlags;

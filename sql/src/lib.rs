//! SQL over predictions: a DataFusion session with attention-aware functions and
//! `classify()` on raw text, for `pipeline sql`.
//!
//! `tables` turns Parquet paths and URLs into tables (`object_stores` finds their stores), `functions` adds the SQL functions,
//! `field_access` lets `classify(text).prediction` plan, `memory` bounds what a query holds,
//! `session` puts them together, and
//! `output` prints or writes what a query returns.

// This crate reads what users hand us (files, manifests, SQL); a panic on it would break the
// batch-job contract, so it neither unwraps nor indexes unchecked (tests may: clippy.toml).
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

mod column_names;
mod field_access;
pub mod functions;
pub mod memory;
mod object_stores;
pub mod output;
pub mod row_filter;
pub mod session;
pub mod tables;
mod text_tables;

pub use functions::{ClassifyOptions, function_help};
pub use output::{ResultFormat, TableView, write_results};
pub use row_filter::RowFilter;
pub use session::SqlSession;

//! `pipeline run`, the batch job: input files → record batches → tokenization and batched
//! inference → output table → one Parquet file published whole (see `job`).
//!
//! The model side lives in the `runtime` crate, the file edges in `batch_io`.

// This crate reads what users hand us; a panic on it would break the batch-job contract, so it
// neither unwraps nor indexes unchecked (tests may: clippy.toml).
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

pub mod job;

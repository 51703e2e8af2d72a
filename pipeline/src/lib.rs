//! `pipeline run`, the batch job: `job` checks the inputs, the outputs and the schema, then
//! runs `stages` (read → tokenize → infer → assemble → write, overlapped on their own
//! threads) into one of the `sinks`: one Parquet file published whole, a dataset of parts
//! (`sinks::dataset`, partitioned by `sinks::partitions`), or a Delta table (`sinks::delta`).
//!
//! The model side lives in the `runtime` crate, the file edges in `batch_io`.

// This crate reads what users hand us; a panic on it would break the batch-job contract, so it
// neither unwraps nor indexes unchecked (tests may: clippy.toml).
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

pub mod job;
pub mod reporting;
pub mod scheduler;
pub mod sinks;
pub mod stages;
pub mod timestamps;
pub mod units;

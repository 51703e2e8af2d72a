//! The batch pipeline and the model-package contract.
//!
//! Data flows `locations` (input files, and where output may go) → `source` (Parquet/Arrow
//! record batches) → `text` (tokenization) → `inference` (tract or ONNX Runtime) →
//! `predictions` (output columns) → `atomic_file` (published whole or not at all).
//! `classifier` joins tokenization and inference for one model, after `contract` has checked
//! that the package's parts belong together; `job` runs the whole flow for `pipeline run`.
//! `package` is the contract `export` writes and everything else reads; `command_line` is
//! what both programs do around their work (exit codes, signals, panics).

// This crate reads what users hand us (files, manifests, SQL); a panic on it would break the
// batch-job contract, so it neither unwraps nor indexes unchecked (tests may: clippy.toml).
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

pub mod atomic_file;
pub mod classifier;
pub mod command_line;
pub mod contract;
pub mod inference;
pub mod job;
pub mod locations;
pub mod package;
pub mod panic_guard;
pub mod predictions;
pub mod source;
pub mod text;

//! The batch pipeline and the model-package contract.
//!
//! Data flows `source` (Parquet/Arrow record batches) → `text` (tokenization) → `inference`
//! (tract or ONNX Runtime) → `predictions` (output columns). `classifier` joins tokenization
//! and inference for one model; `job` runs the whole flow for `pipeline run`. `package` is
//! the contract `export` writes and everything else reads.

pub mod atomic_file;
pub mod classifier;
pub mod command_line;
pub mod inference;
pub mod job;
pub mod package;
pub mod predictions;
pub mod source;
pub mod text;

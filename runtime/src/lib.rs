//! The model-package runtime: what training, the batch job, SQL and the report share to read a
//! model package and run it.
//!
//! `package` is the contract `pipeline train` writes and everything else reads (ARCHITECTURE.md, "The
//! model package"), and `model_source` where one comes from (a directory, a URL downloaded
//! once into a cache, or the default model compiled in); `contract` checks, when a package opens, that its parts belong together.
//! `text` tokenizes, `inference` runs the graph (tract or ONNX Runtime), and `classifier` joins
//! the two for one model, and `long_documents` what it does with documents past the token
//! limit. `output` is the output table: the one definition of the columns a prediction
//! becomes, their encodings under `--attention`, the metadata a run records, and the table
//! read back; `explain` ranks tokens by attention and
//! shades heat maps, for SQL and the report alike.

// This crate reads what users hand us (manifests, tokenizers, graphs); a panic on it would
// break the batch-job contract, so it neither unwraps nor indexes unchecked (tests may:
// clippy.toml).
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

pub mod classifier;
pub mod contract;
pub mod explain;
pub mod inference;
pub mod long_documents;
pub mod model_source;
pub mod output;
pub mod package;
pub mod text;

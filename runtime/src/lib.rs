//! The model-package runtime: what training, the batch job, SQL and the report share to read a
//! model package and run it.
//!
//! `package` is the contract `export` writes and everything else reads (ARCHITECTURE.md, "The
//! model package"); `contract` checks, when a package opens, that its parts belong together.
//! `text` tokenizes, `inference` runs the graph (tract or ONNX Runtime), and `classifier` joins
//! the two for one model, and `long_documents` what it does with documents past the token
//! limit. `output_table` is the one definition of the columns a prediction
//! becomes, `compact_weights` their byte encoding under `--attention compact`, and
//! `output_origin` which run wrote an output file.

// This crate reads what users hand us (manifests, tokenizers, graphs); a panic on it would
// break the batch-job contract, so it neither unwraps nor indexes unchecked (tests may:
// clippy.toml).
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

pub mod classifier;
pub mod compact_weights;
pub mod contract;
pub mod inference;
pub mod long_documents;
pub mod output_origin;
pub mod output_table;
pub mod package;
pub mod text;

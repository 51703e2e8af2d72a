//! `export`: trains the attention classifiers in burn and writes model packages
//! (ONNX graph + tokenizer + manifest) that the pipeline runs.
//!
//! Data flow: corpus → vocabulary → split/encode → train (burn) → onnx emit → package (verified).

// No unwrap/expect/panic on what users hand us (corpora, word vectors, packages); tests may
// (clippy.toml). Unchecked indexing stays allowed here, unlike in `pipeline` and `sql`: it
// is in the numeric kernels (skip-gram updates, recurrent cells), on buffers this crate sized
// itself, where a checked access per element would cost speed and hide the arithmetic.
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod corpus;
pub mod eval;
pub mod layers;
pub mod models;
pub mod onnx;
pub mod package;
pub mod split;
pub mod train;
pub mod training_run;
pub mod vocabulary;
pub mod word_vectors;

//! `export`: trains the attention classifiers in burn and writes model packages
//! (ONNX graph + tokenizer + manifest) that the pipeline runs.
//!
//! Data flow: corpus → vocabulary → split/encode → train (burn) → onnx emit → package (verified).

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

//! Training, the crate behind `pipeline train|eval|vectors` (whose commands are the `cli` crate's): trains the attention classifiers in burn
//! and writes model packages (ONNX graph + tokenizer + manifest) that the runtime runs.
//!
//! Data flow: `data` (corpus → vocabulary → split, word vectors) → `schedule` (the
//! corpus-fitted defaults) → `fit` (burn's training loop over a `models` variant built from
//! `layers`, judged by `metrics`, optionally on perturbed embeddings: `adversarial`) → `onnx` (graph emission) →
//! `package_writer` (verified with tract, published whole). `job` runs that flow for
//! `pipeline train` (in a process whose freed memory `memory` keeps for reuse); `eval` scores a
//! written package through the runtime; `ensemble` joins
//! trained packages into one (`pipeline combine`).

// No unwrap/expect/panic on what users hand us (corpora, word vectors, packages); tests may
// (clippy.toml). Unchecked indexing stays allowed here, unlike in the runtime and `sql`: it
// is in the numeric kernels (skip-gram updates, recurrent cells), on buffers this crate sized
// itself, where a checked access per element would cost speed and hide the arithmetic.
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod adversarial;
pub mod calibration;
pub mod data;
pub mod distil;
pub mod ensemble;
pub mod eval;
pub mod fit;
pub mod job;
pub mod label_sets;
pub mod layers;
pub mod metrics;
pub mod models;
pub mod onnx;
pub mod package_writer;
pub mod schedule;

//! The edges of every program in the workspace: where its data comes from and how its results
//! leave, under the batch-job contract (docs/contract.md, "The batch-job contract").
//!
//! `locations` resolves input files (and refuses an output that an input would read) →
//! `source` decodes them into Arrow record batches (Parquet and Arrow IPC there, CSV, JSON Lines
//! and plain text in `text_formats`), under `panic_guard` so a corrupt file is an
//! error rather than a crash → … the program's work … → `atomic_file` publishes each output
//! whole or not at all, replacing nothing but an earlier output of its kind (`earlier_output`). `command_line` is what both programs do around their work: exit codes,
//! and removing unfinished output on a signal or a panic; `choice`, settings with named values; `values`, counts and probabilities as flags spell them; `spelling`, options in messages as the front end spells them;
//! `progress`, a bar on a terminal and a log line every ten seconds elsewhere.

// This crate reads what users hand us; a panic on it would break the batch-job contract, so it
// neither unwraps nor indexes unchecked (tests may: clippy.toml).
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

pub mod atomic_file;
pub mod choice;
pub mod command_line;
pub mod earlier_output;
pub mod inputs;
pub mod locations;
pub mod object_storage;
pub mod panic_guard;
pub mod progress;
pub mod publish;
pub mod redact;
pub mod source;
pub mod spelling;
pub mod text_formats;
pub mod values;

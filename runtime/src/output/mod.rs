//! The output table: what a run writes for each document, and how it is read back.
//!
//! - `prediction`: what the model said about one document;
//! - `columns`: one descriptor per column (name, type under each encoding, how it is filled),
//!   from which the schema, the arrays and the reserved names derive;
//! - `encoding`: the `--attention` choice as one type, with the byte encoding of `compact`
//!   and the hop entropy;
//! - `keys`: the schema-metadata keys a run writes and readers check;
//! - `anchor`: which class the `contribution` pushes are towards;
//! - `origin`: which run wrote a file, so that tables and reports do not blend runs;
//! - `token_spans`: each token's place in the text, written instead of its string;
//! - `read`: an output read back, whatever wrote it, with bytes decoded to weights and spans
//!   to tokens.

pub mod anchor;
pub mod columns;
pub mod encoding;
pub mod keys;
pub mod origin;
pub mod prediction;
pub mod read;
pub mod token_spans;

pub use anchor::PushesTowards;
pub use columns::{OptionalColumns, OutputTable, is_reserved, reserved_names};
pub use encoding::AttentionEncoding;
pub use prediction::{DocumentPrediction, SentenceAttention};

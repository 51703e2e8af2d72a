//! The batch pipeline: model packages, tokenization and inference backends.

pub mod inference;
pub mod job;
pub mod package;
pub mod predictions;
pub mod source;
pub mod text;

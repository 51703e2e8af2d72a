//! The flags that say what happens to documents longer than the token limit, shared by
//! `pipeline run` and `pipeline sql` (for `classify()`).

use clap::{Args, ValueEnum};
use runtime::long_documents::{Aggregate, LongDocuments};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// Classify overlapping windows of the token limit and combine them.
    Windows,
    /// Keep the first quarter and the last three quarters of the token limit.
    HeadTail,
    /// Keep the first tokens up to the limit.
    Truncate,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum AggregateFlag {
    Mean,
    Max,
}

#[derive(Debug, Args)]
pub struct LongDocumentFlags {
    /// What happens to a document longer than the token limit (see --max-tokens). The
    /// `truncated` column says which documents lost tokens.
    #[arg(long, value_enum, default_value_t = Mode::Windows)]
    long_documents: Mode,
    /// --long-documents windows: tokens from one window's start to the next (default: half
    /// the token limit). A document gets at most 1,000 windows: past that the stride widens.
    #[arg(long, value_name = "TOKENS", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    long_document_stride: Option<usize>,
    /// --long-documents windows: how the windows' probabilities combine.
    #[arg(long, value_enum, default_value_t = AggregateFlag::Mean)]
    long_document_aggregate: AggregateFlag,
}

impl LongDocumentFlags {
    pub fn mode(&self) -> anyhow::Result<LongDocuments> {
        let windows_only = self.long_document_stride.is_some() || self.long_document_aggregate != AggregateFlag::Mean;
        if windows_only && self.long_documents != Mode::Windows {
            anyhow::bail!("--long-document-stride and --long-document-aggregate need --long-documents windows");
        }
        Ok(match self.long_documents {
            Mode::Truncate => LongDocuments::Truncate,
            Mode::HeadTail => LongDocuments::HeadTail,
            Mode::Windows => LongDocuments::Windows {
                stride: self.long_document_stride,
                aggregate: match self.long_document_aggregate {
                    AggregateFlag::Mean => Aggregate::Mean,
                    AggregateFlag::Max => Aggregate::Max,
                },
            },
        })
    }
}

//! The flags that say what happens to documents longer than the token limit, shared by
//! `pipeline run` and `pipeline sql` (for `classify()`).

use batch_io::choice::Choice;
use clap::Args;
use flags::choice;
use runtime::long_documents::{Aggregate, LongDocuments, Mode};

#[derive(Debug, Args)]
pub struct LongDocumentFlags {
    /// What happens to a document longer than the token limit (the model's, or --max-tokens
    /// where the command has it). The `truncated` column says which documents lost tokens.
    #[arg(long, value_parser = choice::<Mode>(), default_value = Mode::Windows.name())]
    long_documents: Mode,
    /// --long-documents windows: the most tokens from one window's start to the next
    /// (default: the token limit, windows that do not overlap). The windows are as many as
    /// this stride needs, each only as wide as their count needs (at most the limit), so
    /// neighbours overlap by at least the limit less the stride. Past 1,000 windows the stride
    /// widens, up to the limit.
    #[arg(long, value_name = "TOKENS", value_parser = flags::at_least_one)]
    long_document_stride: Option<usize>,
    /// --long-documents windows: how the windows' probabilities combine.
    #[arg(long, value_parser = choice::<Aggregate>(), default_value = Aggregate::Mean.name())]
    long_document_aggregate: Aggregate,
}

impl LongDocumentFlags {
    pub fn mode(&self) -> anyhow::Result<LongDocuments> {
        LongDocuments::choose(self.long_documents, self.long_document_stride, self.long_document_aggregate)
    }
}

//! The corpus columns the training commands read, shared by `pipeline train` and `pipeline eval`.

use clap::Args;
use training::data::corpus::Columns;

#[derive(Args)]
pub struct ColumnFlags {
    /// Column holding the document text.
    #[arg(long, default_value = "text")]
    text_column: String,
    /// Column holding the class label (any type castable to a string), or a list of labels
    /// per document (`list<string>`: a multi-label corpus).
    #[arg(long, default_value = "label")]
    label_column: String,
}

impl ColumnFlags {
    pub fn columns(&self) -> Columns {
        Columns { text: self.text_column.clone(), label: self.label_column.clone() }
    }
}

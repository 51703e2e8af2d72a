//! `pipeline report`: the command line of the HTML attention report.

use clap::Args;
use report::{ReportOptions, write_report};

#[derive(Args)]
pub struct ReportArgs {
    /// An output of `pipeline run`: a Parquet file, a dataset directory or a glob of parts,
    /// locally or in object storage.
    #[arg(long)]
    input: String,
    /// The column with the true labels (default: `label` when there is one). Gives accuracy,
    /// macro-F1, the confusion matrix, calibration and the misclassified examples.
    #[arg(long)]
    label_column: Option<String>,
    /// The HTML file to write, a local path or an object-storage URL (self-contained: it
    /// opens from disk, with no network).
    #[arg(long, default_value = "report.html")]
    output: String,
    /// Documents drawn in each example group (most confident, least confident, misclassified).
    #[arg(long, default_value_t = 5, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=report::MOST_EXAMPLES as u64))]
    examples: usize,
    /// Draw only the documents that meet this SQL condition on the output's columns (the
    /// first --examples of them, in input order), with `pipeline sql`'s functions: for
    /// example "label <> prediction AND truncated" or "id = 'test_neg_1'". The tallies still
    /// cover every row.
    #[arg(long = "where", value_name = "CONDITION")]
    where_condition: Option<String>,
}

pub fn run(args: ReportArgs) -> anyhow::Result<()> {
    let options = ReportOptions {
        input: args.input,
        label_column: args.label_column,
        output: args.output,
        examples: args.examples,
        where_condition: args.where_condition,
    };
    let summary = write_report(&options)?;
    println!("{} rows from {} file(s) in {:.1} s -> {}", summary.rows, summary.files, summary.seconds, options.output);
    Ok(())
}

//! `pipeline combine`: trained packages joined into one that sums their weighted logits, the
//! weights fitted on the validation split the members held out.

use std::path::PathBuf;

use batch_io::atomic_file::write_failed;
use batch_io::earlier_output::OutputKind;
use clap::Args;
use training::ensemble::{self, CombineRequest};

use super::checked_output;
use crate::args::ColumnFlags;

#[derive(Args)]
pub struct CombineArgs {
    /// The packages to combine, comma-separated, trained on the same corpus with the same
    /// seed, vocabulary settings and validation split.
    #[arg(long, value_delimiter = ',', num_args = 1.., required = true)]
    members: Vec<PathBuf>,
    /// The corpus the members were trained on (Parquet): its validation split, rebuilt as
    /// they made it, chooses the weights.
    #[arg(long)]
    train: PathBuf,
    /// The validation corpus the members were trained with, if they were given one.
    #[arg(long)]
    valid: Option<PathBuf>,
    /// The share of --train the members held out for validation.
    #[arg(long, default_value_t = 0.1)]
    valid_fraction: f64,
    /// Output package directory.
    #[arg(long)]
    out: PathBuf,
    /// Replace --out if it holds a package.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    columns: ColumnFlags,
    /// Also write each member's, the equal weights' and the ensemble's validation figures as
    /// JSON to this file.
    #[arg(long, value_name = "FILE")]
    metrics_json: Option<PathBuf>,
}

pub fn run(args: CombineArgs) -> anyhow::Result<()> {
    let request = CombineRequest {
        members: args.members,
        train: args.train,
        valid: args.valid,
        columns: args.columns.columns(),
        valid_fraction: args.valid_fraction,
        out: args.out,
        force: args.force,
    };
    let mut inputs: Vec<&std::path::Path> = vec![request.train.as_path()];
    inputs.extend(request.valid.as_deref());
    let metrics = args
        .metrics_json
        .as_deref()
        .map(|path| checked_output("metrics_json", path, &inputs, OutputKind::SummaryJson))
        .transpose()?;
    let report = ensemble::combine(&request)?;
    let width = report.standings.iter().map(|s| s.name.len()).max().unwrap_or(0);
    let mut table = format!("{:width$}  accuracy  macro-F1  log-loss  weights\n", "validation");
    for standing in &report.standings {
        let weights: Vec<String> = standing.weights.iter().map(|w| format!("{w:.3}")).collect();
        table.push_str(&format!(
            "{:width$}  {:>8.4}  {:>8.4}  {:>8.4}  {}\n",
            standing.name,
            standing.accuracy,
            standing.macro_f1,
            standing.log_loss,
            weights.join(" ")
        ));
    }
    let m = &report.manifest;
    batch_io::command_line::print_report(&format!(
        "wrote {} ({} members, {} parameters)\n{table}expected calibration error {:.4}\n{}",
        report.package.display(),
        m.training.members,
        m.parameter_count,
        report.ece,
        report.validation.table()
    ))?;
    if let (Some(mut file), Some(path)) = (metrics, &args.metrics_json) {
        let summary = serde_json::json!({
            "package": report.package,
            "standings": report.standings,
            "validation": report.validation.json(),
            "ece": report.ece,
        });
        std::io::Write::write_all(&mut file, serde_json::to_string_pretty(&summary)?.as_bytes())
            .map_err(|e| write_failed(path, &e))?;
        file.publish(path)?;
    }
    Ok(())
}

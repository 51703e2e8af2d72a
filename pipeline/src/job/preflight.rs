//! Everything checked before any work: the output locations (never an input, never the
//! model, replaceable) and every input file's schema (the text column, the pass-through
//! columns, names that would clash with the output's).

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, bail};
use arrow::datatypes::{FieldRef, Schema};

use batch_io::atomic_file::check_replaceable;
use batch_io::earlier_output::{OutputKind, check_replaceable_output};
use batch_io::inputs::InputFiles;
use batch_io::locations::{
    InputLocation, refuse_dataset_holding_inputs, refuse_output_among_inputs, refuse_output_inside_table,
    refuse_remote_output_among_inputs, same_location, within,
};
use batch_io::object_storage::is_url;
use batch_io::source::{BatchStream, InputFile, column_list, did_you_mean, is_text_type};
use batch_io::spelling::{name, option, option_with};
use runtime::output::OutputTable;
use runtime::package::ModelPackage;

use super::spec::{OutputFormat, RunSpec};
use crate::units::{Shard, part_name};

/// Checks every output location before any work: each may be replaced (see
/// [`check_replaceable`]), none is read by the input (now or on a rerun) or is a file of the
/// model package, and the metrics file is neither the predictions file nor in a dataset
/// output's directory.
pub fn check_outputs(
    options: &RunSpec,
    input: &InputFiles,
    package: &ModelPackage,
    dataset: bool,
) -> anyhow::Result<()> {
    if !dataset && options.shard != Shard::WHOLE {
        // Python has no `shards=`: only the command line reads the shard from a scheduler.
        let shard = if batch_io::spelling::keywords() {
            option("shard")
        } else {
            format!("{} and {}", option("shard"), option("shards"))
        };
        bail!("{shard} need a dataset output: give {} a directory (a path without .parquet)", option("output"));
    }
    if !dataset && !options.partition_by.is_empty() {
        bail!(
            "{} needs a dataset output: give {} a directory (a path without .parquet)",
            option("partition_by"),
            option("output")
        );
    }
    if !dataset && options.overwrite {
        tracing::warn!(
            "{} applies to dataset outputs; a file output replaces an earlier one of its kind anyway",
            batch_io::spelling::flag_set("overwrite")
        );
    }
    let output = options.output.as_str();
    // What no output may overwrite: the local inputs (now or on a rerun) and the model.
    let inputs: Vec<InputLocation> = input.local.iter().cloned().chain([package.as_input()]).collect();
    // Never into a Delta table's log or among its files (a Delta output is the table itself).
    refuse_output_inside_table("output", output)?;
    if dataset && options.output_format != OutputFormat::Delta {
        if !is_url(output) && Path::new(output).join(batch_io::locations::DELTA_LOG).is_dir() {
            bail!(
                "{} is a Delta table: add {} to append to it, or write the Parquet output somewhere else",
                option_with("output", output),
                option_with("output_format", "delta")
            );
        }
        refuse_output_inside_table("output", &format!("{}/{}", output.trim_end_matches('/'), part_name(0)))?;
    }
    if is_url(output) {
        let files: Vec<String> = input.files.iter().map(ToString::to_string).collect();
        let first_part = dataset.then(|| format!("{}/{}", output.trim_end_matches('/'), part_name(0)));
        refuse_remote_output_among_inputs("output", output, dataset, first_part.as_deref(), &options.input, &files)?;
    } else {
        let path = Path::new(output);
        if dataset {
            // The directory, and any part in it, must be out of the inputs' reach.
            refuse_output_among_inputs("output", path, &inputs)?;
            refuse_output_among_inputs("output", &path.join(part_name(0)), &inputs)?;
            refuse_dataset_holding_inputs("output", path, &inputs)?;
        } else {
            check_replaceable(path)?;
            refuse_output_among_inputs("output", path, &inputs)?;
            check_replaceable_output("output", path, OutputKind::Parquet)?;
        }
    }
    let side_files = [
        ("metrics_json", &options.metrics_json, OutputKind::SummaryJson),
        ("metrics_textfile", &options.reporting.metrics_textfile, OutputKind::MetricsText),
    ];
    if let [(first, Some(a), _), (second, Some(b), _)] = &side_files
        && same_location(a, b)
    {
        bail!("{} and {} both name {}; give each its own file", name(first), name(second), a.display());
    }
    for (side, metrics, kind) in
        side_files.iter().filter_map(|(side, path, kind)| path.as_ref().map(|p| (*side, p, *kind)))
    {
        let given = option_with(side, &metrics.display().to_string());
        check_replaceable(metrics).context(given.clone())?;
        refuse_output_inside_table(side, &metrics.to_string_lossy())?;
        refuse_output_among_inputs(side, metrics, &inputs)?;
        if same_location(metrics, Path::new(output)) {
            bail!("{given} is also {}; give the figures their own file", name("output"));
        }
        // Among the parts (or in a table's log or staging) it could replace a committed part,
        // `_SUCCESS` or a log entry.
        if dataset && !is_url(output) && within(metrics, Path::new(output)) {
            bail!("{given} is inside the dataset output {output}; give the figures a file outside it");
        }
        // Last: the checks above say more precisely why a file is not ours to replace.
        check_replaceable_output(side, metrics, kind)?;
    }
    Ok(())
}

/// Checks the text column and the pass-through columns in every file, and returns the kept
/// column names with the output schema.
pub fn plan_schema(
    files: &[InputFile],
    streams: &[BatchStream],
    options: &RunSpec,
    table: &OutputTable,
) -> anyhow::Result<(Vec<String>, Schema)> {
    let first = &streams.first().context("no input file")?.schema;
    let kept: Vec<String> = match &options.pass_through {
        Some(columns) => columns.clone(),
        None => first.fields().iter().map(|f| f.name().clone()).collect(),
    };
    if options.pass_through.is_some() {
        let mut seen = std::collections::HashSet::new();
        if let Some(twice) = kept.iter().find(|name| !seen.insert(name.as_str())) {
            bail!("{} names the column `{twice}` twice; name each column once", option("pass_through"));
        }
    }
    for (file, stream) in files.iter().zip(streams) {
        let schema = &stream.schema;
        refuse_ambiguous_columns(file, schema, &kept, &options.text_column)?;
        match schema.field_with_name(&options.text_column) {
            Err(_) => bail!(
                "{} has no text column `{}`{}; its columns are: {} (choose one with {})",
                file,
                options.text_column,
                did_you_mean(&options.text_column, schema),
                column_list(schema),
                option("text_column")
            ),
            Ok(field) if !is_text_type(field.data_type()) => bail!(
                "{}: text column `{}` has type {}, expected a string column (choose one with {})",
                file,
                options.text_column,
                field.data_type(),
                option("text_column")
            ),
            Ok(_) => {}
        }
        for name in &kept {
            let here = schema.field_with_name(name).ok();
            let there = first.field_with_name(name).ok();
            match (here, there) {
                (Some(a), Some(b)) if a.data_type() == b.data_type() => {}
                (None, _) => bail!(
                    "{} has no column `{name}` to pass through{}; its columns are: {}",
                    file,
                    did_you_mean(name, schema),
                    column_list(schema)
                ),
                (Some(a), Some(b)) => bail!(
                    "{}: column `{name}` is {} there but {} in the first input file; convert one of them, \
                     or leave the column out with {}",
                    file,
                    a.data_type(),
                    b.data_type(),
                    option("pass_through")
                ),
                (Some(_), None) => bail!("{}: column `{name}` is missing from the first input file", file),
            }
        }
    }
    // Every kept column was found in every file above, the first included.
    let mut fields: Vec<FieldRef> =
        kept.iter().map(|name| first.field_with_name(name).map(|f| Arc::new(f.clone()))).collect::<Result<_, _>>()?;
    // Every output name is refused, not only this run's: a reader would take a passed-through
    // `attention_entropy` or `contribution` for the model's.
    if let Some(name) = kept.iter().find(|name| runtime::output::is_reserved(name)) {
        bail!("input column `{name}` collides with an output column; leave it out with {}", option("pass_through"));
    }
    fields.extend(table.fields());
    Ok((kept, Schema::new(fields)))
}

/// A column read by name (kept or the text) must be the only one of that name in `file`.
fn refuse_ambiguous_columns(file: &InputFile, schema: &Schema, kept: &[String], text: &str) -> anyhow::Result<()> {
    let mut seen = std::collections::HashSet::new();
    for name in schema.fields().iter().map(|f| f.name()) {
        if !seen.insert(name) && (kept.contains(name) || name == text) {
            let count = schema.fields().iter().filter(|f| f.name() == name).count();
            bail!(
                "{file} has {count} columns named `{name}`, so the name does not say which one to read; rename all \
                 but one, or (if it is not the text column) name the columns to keep with --pass-through"
            );
        }
    }
    Ok(())
}

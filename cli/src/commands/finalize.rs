//! `pipeline finalize`: a sharded dataset output completed once every shard has run, by
//! writing its `_SUCCESS` (a Delta table needs none: each shard commits its own parts).

use std::ffi::OsString;

use batch_io::command_line::print_report;
use clap::Args;

#[derive(Args)]
pub struct FinalizeArgs {
    /// The dataset output (a directory or a storage URL) whose shards have all run. The
    /// run's options are read from its parts.
    #[arg(value_name = "DIR|URL")]
    dir: String,
    /// Read for the old spelling, `pipeline run --finalize DIR --threads N`; finalizing reads
    /// only the parts' footers.
    #[arg(long, hide = true, value_parser = flags::thread_count)]
    threads: Option<usize>,
}

pub fn run(args: FinalizeArgs) -> anyhow::Result<()> {
    finalize(&args.dir)
}

/// The command line with the old spelling, `pipeline run --finalize DIR` (or
/// `--finalize=DIR`), rewritten as `pipeline finalize DIR`; `true` where it was, so the caller
/// warns once logging is set up. The old spelling goes in the next release.
pub fn rewrite_old_spelling(mut args: Vec<OsString>) -> (Vec<OsString>, bool) {
    let Some(run) = subcommand_at(&args).filter(|&at| args.get(at).is_some_and(|arg| arg == "run")) else {
        return (args, false);
    };
    // Flags end at `--`: after it every word is a value, `--finalize` too.
    let end = args.iter().skip(run + 1).position(|arg| arg == "--").map_or(args.len(), |at| at + run + 1);
    let flag = args
        .get(run + 1..end)
        .unwrap_or_default()
        .iter()
        .position(|arg| arg == "--finalize" || arg.to_string_lossy().starts_with("--finalize="));
    let Some(flag) = flag.map(|at| at + run + 1) else { return (args, false) };
    if let Some(subcommand) = args.get_mut(run) {
        *subcommand = OsString::from("finalize");
    }
    let given = args.remove(flag);
    if let Some(dir) = given.to_string_lossy().strip_prefix("--finalize=") {
        if dir.starts_with('-') {
            // A directory named like a flag goes after `--`, where it is read as the directory.
            if end == args.len() + 1 {
                args.push(OsString::from("--"));
            }
            args.push(OsString::from(dir));
        } else {
            args.insert(flag, OsString::from(dir));
        }
    }
    (args, true)
}

/// Where the subcommand is: the first argument after the program's name that is neither a
/// flag nor `--log-format`'s value (the one flag `pipeline` takes before it).
fn subcommand_at(args: &[OsString]) -> Option<usize> {
    let mut at = 1;
    while let Some(arg) = args.get(at) {
        if arg == "--log-format" {
            at += 2;
        } else if arg.to_string_lossy().starts_with('-') {
            at += 1;
        } else {
            return Some(at);
        }
    }
    None
}

/// Writes `_SUCCESS` into `dir` once its parts are all there, or says which are missing.
pub fn finalize(dir: &str) -> anyhow::Result<()> {
    if let Some(table) = delta_table::data_files(dir)? {
        let report = format!(
            "{dir} is a Delta table of {} data files: each shard committed its own parts; nothing to finalize\n",
            table.uris.len()
        );
        return print_report(&report);
    }
    let manifest = pipeline::job::finalize(dir)?;
    print_report(&format!("{dir} complete: {} rows in {} parts; _SUCCESS written\n", manifest.rows, manifest.run.parts))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(line: &str) -> (String, bool) {
        let (args, old) = rewrite_old_spelling(line.split(' ').map(OsString::from).collect());
        (args.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" "), old)
    }

    #[test]
    fn the_old_spelling_becomes_the_finalize_command_and_nothing_else_changes() {
        assert_eq!(rewritten("pipeline run --finalize out/"), ("pipeline finalize out/".to_owned(), true));
        assert_eq!(rewritten("pipeline run --finalize=out/"), ("pipeline finalize out/".to_owned(), true));
        assert_eq!(
            rewritten("pipeline --log-format json run --threads 2 --finalize s3://b/o/ --log-format json"),
            ("pipeline --log-format json finalize --threads 2 s3://b/o/ --log-format json".to_owned(), true)
        );
        // Another flag stays, and `finalize` refuses it as a usage error.
        assert_eq!(
            rewritten("pipeline run --finalize out/ --shard 1/2"),
            ("pipeline finalize out/ --shard 1/2".to_owned(), true)
        );
        assert_eq!(rewritten("pipeline run --finalize=--odd"), ("pipeline finalize -- --odd".to_owned(), true));
        assert_eq!(rewritten("pipeline run --finalize -- --odd"), ("pipeline finalize -- --odd".to_owned(), true));
        for line in [
            "pipeline run --input a.parquet",
            "pipeline sql run --finalize",
            "pipeline --log-format run x",
            // After `--` it is a value, not the old flag.
            "pipeline run -- --finalize out/",
        ] {
            assert_eq!(rewritten(line), (line.to_owned(), false), "{line}");
        }
    }
}

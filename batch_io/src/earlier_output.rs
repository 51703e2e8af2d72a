//! Which existing files an output may replace: nothing but an earlier output of the same kind
//! of ours, recognised by its first bytes, so that a mistyped `--metrics-textfile README.md`
//! or `--output essay.txt` leaves the file alone. An empty file may always be replaced.

use crate::spelling::{name, option_with};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use anyhow::bail;

/// The kinds of file the programs write, each as an earlier one of ours starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputKind {
    /// `PAR1` at the start and at the end.
    Parquet,
    /// CSV with a header: a `.csv` or `.tsv` name, and text.
    Csv,
    /// Newline-delimited JSON: a first line that is one object.
    JsonLines,
    /// A run's or an evaluation's summary (`--metrics-json`): a JSON object with the
    /// summary's `docs_per_second`.
    SummaryJson,
    /// Prometheus's text format as `--metrics-textfile` writes it (`# HELP pipeline_run_…`).
    MetricsText,
    /// The report's page.
    ReportPage,
    /// `pipeline sql`'s aligned table (`--format table`): a first line of `┌───`.
    TextTable,
    /// Word vectors in word2vec's text format (`pipeline vectors`): a first line of two counts.
    WordVectors,
}

impl OutputKind {
    fn describe(self) -> &'static str {
        match self {
            OutputKind::Parquet => "a Parquet file",
            OutputKind::Csv => "a CSV file (named *.csv)",
            OutputKind::JsonLines => "a newline-delimited JSON file",
            OutputKind::SummaryJson => "a run summary (JSON)",
            OutputKind::MetricsText => "a metrics textfile",
            OutputKind::ReportPage => "a page written by `pipeline report`",
            OutputKind::TextTable => "a table written by `pipeline sql --format table`",
            OutputKind::WordVectors => "word vectors written by `pipeline vectors`",
        }
    }

    /// Whether a file named `path` that starts with `head` (and ends with `tail`) is an earlier
    /// output of this kind.
    fn recognises(self, path: &Path, head: &[u8], tail: &[u8]) -> bool {
        let text = String::from_utf8_lossy(head);
        let first_line = text.lines().next().unwrap_or_default().trim();
        match self {
            OutputKind::Parquet => head.starts_with(b"PAR1") && tail.ends_with(b"PAR1"),
            OutputKind::Csv => {
                let named = path
                    .extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| e.eq_ignore_ascii_case("csv") || e.eq_ignore_ascii_case("tsv"));
                named && !head.contains(&0)
            }
            OutputKind::JsonLines => first_line.starts_with('{') && first_line.ends_with('}'),
            OutputKind::SummaryJson => text.trim_start().starts_with('{') && text.contains("\"docs_per_second\""),
            OutputKind::MetricsText => text.starts_with("# HELP pipeline_run_"),
            OutputKind::ReportPage => text.contains("<title>Attention report: "),
            OutputKind::TextTable => first_line.starts_with('┌'),
            OutputKind::WordVectors => {
                let counts: Vec<&str> = first_line.split_whitespace().collect();
                counts.len() == 2 && counts.iter().all(|c| c.parse::<u64>().is_ok())
            }
        }
    }
}

/// Bytes read from each end of a file to recognise it.
const PEEK: usize = 4096;

/// Refuses to replace an existing `target` (given as the option `option`; see
/// [`crate::spelling`]) unless it is empty or an earlier
/// output of `kind`, and refuses `-`, which would be a file of that name rather than stdout.
/// Anything that is not a regular file is left to the caller's checks.
pub fn check_replaceable_output(option: &str, target: &Path, kind: OutputKind) -> anyhow::Result<()> {
    if target.as_os_str() == "-" {
        let given = option_with(option, "-");
        bail!("{given}: give a file path ({} is written to a file, not to stdout)", kind.describe());
    }
    let Ok(meta) = std::fs::metadata(target) else { return Ok(()) };
    if !meta.is_file() || meta.len() == 0 {
        return Ok(());
    }
    let ends = || -> std::io::Result<(Vec<u8>, Vec<u8>)> {
        let mut file = File::open(target)?;
        let mut head = Vec::with_capacity(PEEK);
        file.by_ref().take(PEEK as u64).read_to_end(&mut head)?;
        let back = meta.len().min(PEEK as u64);
        file.seek(SeekFrom::End(-i64::try_from(back).unwrap_or(0)))?;
        let mut tail = Vec::with_capacity(PEEK);
        file.read_to_end(&mut tail)?;
        Ok((head, tail))
    };
    let recognised = ends().is_ok_and(|(head, tail)| kind.recognises(target, &head, &tail));
    if !recognised {
        bail!(
            "{} exists and is not {}; an output replaces only an earlier output of its own kind, so that a \
             mistyped name leaves a file alone. Move or delete it, or choose another {}",
            option_with(option, &target.display().to_string()),
            kind.describe(),
            name(option)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: &str, contents: &[u8], kind: OutputKind) -> anyhow::Result<()> {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(name);
        std::fs::write(&path, contents).expect("write");
        check_replaceable_output("output", &path, kind)
    }

    const ESSAY: &[u8] = b"It was a dark and stormy night; the rain fell in torrents.\n";

    #[test]
    fn only_an_earlier_output_of_the_same_kind_is_replaced() {
        let cases: [(&str, &[u8], OutputKind); 8] = [
            ("vectors.txt", b"2 3\nfilm 0.1 0.2 0.3\n", OutputKind::WordVectors),
            ("out.parquet", b"PAR1....PAR1", OutputKind::Parquet),
            ("out.csv", b"id,prediction\n1,pos\n", OutputKind::Csv),
            ("out.json", b"{\"id\":\"1\"}\n{\"id\":\"2\"}\n", OutputKind::JsonLines),
            ("summary.json", b"{\n  \"rows\": 3,\n  \"docs_per_second\": 1.0\n}", OutputKind::SummaryJson),
            ("run.prom", b"# HELP pipeline_run_exit_code Exit code\n", OutputKind::MetricsText),
            ("report.html", b"<!DOCTYPE html><html><head><title>Attention report: x</title>", OutputKind::ReportPage),
            ("out.txt", "┌────┐\n│ id │\n".as_bytes(), OutputKind::TextTable),
        ];
        for (name, ours, kind) in cases {
            check(name, ours, kind).unwrap_or_else(|e| panic!("{name}: {e:#}"));
            check(name, b"", kind).expect("an empty file");
            // A CSV file is known by its name alone: text named *.csv may be replaced.
            let essay_name = if kind == OutputKind::Csv { "essay.txt" } else { name };
            let error = check(essay_name, ESSAY, kind).expect_err("an essay").to_string();
            assert!(error.contains("is not") && error.contains("Move or delete it"), "{error}");
        }
        // The same bytes under another kind's name or kind are refused.
        check("README.md", b"id,prediction\n", OutputKind::Csv).expect_err("not named *.csv");
        check("out.json", b"PAR1....PAR1", OutputKind::JsonLines).expect_err("Parquet is not JSON lines");
        check("notes.json", b"{\n  \"title\": \"mine\"\n}\n", OutputKind::JsonLines).expect_err("a pretty object");
    }
}

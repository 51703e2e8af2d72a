//! Where a command reads and writes: an input location (a file, a directory or a glob)
//! expanded into files, and the check that an output is not something an input reads, now
//! or on a rerun (an output inside an input directory would be read back as input).

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use glob::{MatchOptions, Pattern};

use crate::atomic_file::describe_file_type;

/// How an input location was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocationKind {
    File,
    /// A directory; its files with one of these extensions are read.
    Directory {
        extensions: Vec<String>,
    },
    Glob,
}

/// An input location and the files it expands to (sorted, so runs are reproducible).
#[derive(Debug, Clone)]
pub struct InputLocation {
    /// As the user gave it.
    pub location: String,
    pub kind: LocationKind,
    pub files: Vec<PathBuf>,
}

/// Hidden files (such as an interrupted run's `.x.parquet.XXXXXX.partial`) match a glob only
/// when the pattern spells the dot, as in a shell.
const GLOB_OPTIONS: MatchOptions =
    MatchOptions { case_sensitive: true, require_literal_separator: true, require_literal_leading_dot: true };

/// Expands `location`: a file, a directory (its files with one of `extensions`) or a glob.
pub fn resolve_inputs(location: &str, extensions: &[&str]) -> anyhow::Result<InputLocation> {
    let path = Path::new(location);
    let has_glob = location.contains(['*', '?', '[']);
    let listing = || extensions.join("/*.");
    let (kind, mut files): (LocationKind, Vec<PathBuf>) = match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => (LocationKind::File, vec![path.to_path_buf()]),
        Ok(meta) if meta.is_dir() => {
            let files = std::fs::read_dir(path)
                .with_context(|| format!("cannot list {location}"))?
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .filter(|p| p.is_file() && has_extension(p, extensions))
                .collect();
            (LocationKind::Directory { extensions: extensions.iter().map(|e| (*e).to_owned()).collect() }, files)
        }
        Ok(meta) => bail!(
            "input {location} is {}, not a regular file; give a file, a directory of *.{} files or a glob",
            describe_file_type(meta.file_type()),
            listing()
        ),
        Err(_) if has_glob => {
            let paths = glob::glob_with(location, GLOB_OPTIONS)
                .with_context(|| format!("`{location}` is not a valid glob pattern"))?;
            (LocationKind::Glob, paths.filter_map(Result::ok).filter(|p| p.is_file()).collect())
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            bail!("input {location} does not exist (give a file, a directory of *.{} files or a glob)", listing())
        }
        Err(error) => bail!("cannot read input {location}: {error}"),
    };
    files.sort();
    if files.is_empty() {
        bail!("input {location} matches no *.{} file", listing());
    }
    Ok(InputLocation { location: location.to_owned(), kind, files })
}

fn has_extension(path: &Path, extensions: &[impl AsRef<str>]) -> bool {
    path.extension().and_then(|e| e.to_str()).is_some_and(|e| extensions.iter().any(|x| x.as_ref() == e))
}

/// `path` made absolute with symlinks resolved; for a path that does not exist yet, its
/// directory is resolved and the name kept.
fn resolved(path: &Path) -> Option<PathBuf> {
    if let Ok(real) = path.canonicalize() {
        return Some(real);
    }
    let name = path.file_name()?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Some(parent.canonicalize().ok()?.join(name))
}

/// Whether two paths name the same file, existing or not (symlinks and `..` resolved).
pub fn same_location(a: &Path, b: &Path) -> bool {
    a == b || matches!((resolved(a), resolved(b)), (Some(a), Some(b)) if a == b)
}

impl InputLocation {
    /// Why writing `path` would clobber this input: it is one of the files read now, or a
    /// rerun would read it once it exists. `None` when the input never reads it.
    pub fn overlap(&self, path: &Path) -> Option<&'static str> {
        let target = resolved(path)?;
        if self.files.iter().any(|file| resolved(file).as_ref() == Some(&target)) {
            return Some("it is one of the input files");
        }
        let on_rerun = match &self.kind {
            LocationKind::File => false,
            LocationKind::Directory { extensions } => {
                has_extension(&target, extensions)
                    && target.parent().is_some_and(|dir| resolved(Path::new(&self.location)).as_deref() == Some(dir))
            }
            LocationKind::Glob => {
                let matches = |pattern: &str, candidate: &Path| {
                    Pattern::new(pattern).is_ok_and(|p| p.matches_path_with(candidate, GLOB_OPTIONS))
                };
                // The pattern as given, and made absolute, against the output as given,
                // made absolute, and resolved.
                let absolute_pattern = std::path::absolute(&self.location).ok();
                let absolute_pattern = absolute_pattern.as_deref().and_then(Path::to_str);
                matches(&self.location, path)
                    || absolute_pattern.is_some_and(|pattern| {
                        std::path::absolute(path).is_ok_and(|a| matches(pattern, &a)) || matches(pattern, &target)
                    })
            }
        };
        on_rerun.then_some("a rerun would read it back as input")
    }
}

/// Refuses an output (named by `flag`, e.g. `--output`) that one of `inputs` reads, or would
/// read on a rerun.
pub fn refuse_output_among_inputs(flag: &str, output: &Path, inputs: &[InputLocation]) -> anyhow::Result<()> {
    for input in inputs {
        if let Some(why) = input.overlap(output) {
            bail!(
                "{flag} {} is covered by the input {} ({why}); write it somewhere the input does not cover",
                output.display(),
                input.location
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(location: &Path, extensions: &[&str]) -> InputLocation {
        resolve_inputs(location.to_str().expect("utf-8"), extensions).expect("resolves")
    }

    #[test]
    fn outputs_an_input_reads_now_or_on_a_rerun_are_found() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        std::fs::create_dir(&data).expect("mkdir");
        std::fs::write(data.join("a.parquet"), b"x").expect("write");
        std::fs::write(data.join(".hidden.parquet"), b"x").expect("write");

        let file = input(&data.join("a.parquet"), &["parquet"]);
        assert!(file.overlap(&data.join("a.parquet")).is_some());
        assert!(file.overlap(&data.join("./../data/a.parquet")).is_some(), "resolved, not textual");
        assert!(file.overlap(&data.join("b.parquet")).is_none());

        let directory = input(&data, &["parquet"]);
        assert_eq!(directory.overlap(&data.join("b.parquet")), Some("a rerun would read it back as input"));
        assert!(directory.overlap(&data.join("b.csv")).is_none(), "not an extension the input reads");
        assert!(directory.overlap(&dir.path().join("b.parquet")).is_none());

        let glob = input(&data.join("*.parquet"), &["parquet"]);
        assert_eq!(glob.files.len(), 1, "hidden files are not matched by *");
        assert!(glob.overlap(&data.join("out.parquet")).is_some());
        assert!(glob.overlap(&dir.path().join("out.parquet")).is_none());
    }

    #[cfg(unix)]
    #[test]
    fn a_device_as_input_is_named_as_such() {
        let error = resolve_inputs("/dev/null", &["parquet"]).expect_err("not a file");
        assert!(format!("{error:#}").contains("is a character device"), "{error:#}");
    }
}

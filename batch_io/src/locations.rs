//! Where a command reads and writes: an input location (a file, a directory or a glob)
//! expanded into files, and the check that an output is not something an input reads, now
//! or on a rerun (an output inside an input directory would be read back as input).

use crate::spelling::option_with;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use glob::{MatchOptions, Pattern};

use crate::atomic_file::describe_file_type;
use crate::object_storage::{canonical_url, is_url, split_glob};

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
            let files = files_in_directory(path, extensions).with_context(|| format!("cannot list {location}"))?;
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

/// A directory's files with one of `extensions`, and those in its partition directories
/// (`prediction=pos/`, see [`is_partition_directory`]) at any depth.
fn files_in_directory(dir: &Path, extensions: &[&str]) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut directories = vec![dir.to_path_buf()];
    while let Some(here) = directories.pop() {
        for entry in std::fs::read_dir(&here)? {
            let path = entry?.path();
            let partition = path.file_name().and_then(|n| n.to_str()).is_some_and(is_partition_directory);
            if path.is_dir() && partition {
                directories.push(path);
            } else if path.is_file() && has_extension(&path, extensions) {
                files.push(path);
            }
        }
    }
    Ok(files)
}

/// What Hive, Spark, DuckDB and Polars read as a null value in a partition directory's name.
pub const NULL_PARTITION_VALUE: &str = "__HIVE_DEFAULT_PARTITION__";

/// Whether a directory named `segment` is one level of a Hive-style partitioned dataset
/// (`name=value`): its files are the dataset's, with the value as a column.
pub fn is_partition_directory(segment: &str) -> bool {
    !segment.starts_with(['.', '_']) && segment.split_once('=').is_some_and(|(name, _)| !name.is_empty())
}

/// Whether the file at `relative` (its path under a dataset's root, `/` between segments) lies
/// directly under the root or in its partition directories only.
pub fn in_partition_directories(relative: &str) -> bool {
    let mut directories: Vec<&str> = relative.split('/').collect();
    directories.pop();
    directories.into_iter().all(is_partition_directory)
}

/// The partition columns of a file at `relative` (its path under a dataset's root, `/`
/// between segments): each `name=value` directory's name and value, unescaped, with
/// [`NULL_PARTITION_VALUE`] as `None`.
pub fn partition_values(relative: &str) -> Vec<(String, Option<String>)> {
    let mut segments: Vec<&str> = relative.split('/').filter(|s| !s.is_empty()).collect();
    segments.pop();
    let unescaped = |text: &str| percent_encoding::percent_decode_str(text).decode_utf8_lossy().into_owned();
    segments
        .into_iter()
        .filter(|segment| is_partition_directory(segment))
        .filter_map(|segment| segment.split_once('='))
        .map(|(name, value)| (unescaped(name), (value != NULL_PARTITION_VALUE).then(|| unescaped(value))))
        .collect()
}

fn has_extension(path: &Path, extensions: &[impl AsRef<str>]) -> bool {
    path.extension().and_then(|e| e.to_str()).is_some_and(|e| extensions.iter().any(|x| x.as_ref() == e))
}

/// `path` made absolute with symlinks resolved. For a path that does not exist yet, its
/// nearest existing ancestor is resolved and the rest appended (`.` and `..` in the rest
/// taken lexically), so a dataset's part in a directory still to be made is found too.
fn resolved(path: &Path) -> Option<PathBuf> {
    if let Ok(real) = path.canonicalize() {
        return Some(real);
    }
    let absolute = std::path::absolute(path).ok()?;
    let mut missing = Vec::new();
    let mut ancestor = absolute.as_path();
    let mut base = loop {
        match ancestor.canonicalize() {
            Ok(real) => break real,
            Err(_) => {
                missing.push(ancestor.file_name()?.to_owned());
                ancestor = ancestor.parent()?;
            }
        }
    };
    // `std::path::absolute` keeps `..`, which `file_name` reads as no name: those paths
    // gave `None` above, and are compared as given.
    for name in missing.iter().rev() {
        base.push(name);
    }
    Some(base)
}

/// Whether two paths name the same file, existing or not (symlinks and `..` resolved).
pub fn same_location(a: &Path, b: &Path) -> bool {
    a == b || matches!((resolved(a), resolved(b)), (Some(a), Some(b)) if a == b)
}

/// Whether `path` is `dir` or anything under it, as the file system resolves both.
pub fn within(path: &Path, dir: &Path) -> bool {
    path.starts_with(dir) || matches!((resolved(path), resolved(dir)), (Some(p), Some(d)) if p.starts_with(&d))
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
                let dir = resolved(Path::new(&self.location))?;
                let read_back = has_extension(&target, extensions) && target.parent() == Some(dir.as_path());
                // Anything else inside a dataset or table being read would be taken for a part
                // of it by the next reader, or replace its log (`_delta_log/`) or its staged
                // parts (`run-*/`).
                if !read_back && target.starts_with(&dir) {
                    return Some("it is inside the input directory, which readers take whole as one dataset or table");
                }
                read_back
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

/// Refuses an output (given as the option `option`, e.g. `output`; see [`crate::spelling`])
/// that one of `inputs` reads, or would read on a rerun.
pub fn refuse_output_among_inputs(option: &str, output: &Path, inputs: &[InputLocation]) -> anyhow::Result<()> {
    for input in inputs {
        if let Some(why) = input.overlap(output) {
            bail!(
                "{} is covered by the input {} ({why}); write it somewhere the input does not cover",
                option_with(option, &output.display().to_string()),
                input.location
            );
        }
    }
    Ok(())
}

/// The name of a Delta table's log directory: a directory holding one is a table's root.
pub const DELTA_LOG: &str = "_delta_log";

/// Refuses an output (given as the option `option`) inside a Delta table, local or in a store: a file
/// there would replace a commit of its log or sit among its data files, and the table's
/// readers would fail or read it. A local path is checked against every directory above it
/// (as the file system resolves it); a storage URL by its keys' names.
pub fn refuse_output_inside_table(option: &str, output: &str) -> anyhow::Result<()> {
    let inside = if is_url(output) {
        let canonical = canonical_url(output)?;
        let segments: Vec<&str> = canonical.split('/').collect();
        segments.contains(&DELTA_LOG).then(|| {
            let root = canonical.split(&format!("/{DELTA_LOG}")).next().unwrap_or(&canonical);
            root.to_owned()
        })
    } else {
        let path = Path::new(output);
        let resolved_path = resolved(path).unwrap_or_else(|| path.to_path_buf());
        resolved_path.ancestors().skip(1).find_map(|dir| {
            if dir.file_name().is_some_and(|name| name == DELTA_LOG) {
                dir.parent().map(|root| root.display().to_string())
            } else {
                dir.join(DELTA_LOG).is_dir().then(|| dir.display().to_string())
            }
        })
    };
    if let Some(table) = inside {
        bail!(
            "{} is inside the Delta table {table}: it would replace a commit of the table's log or sit among its \
             files, and the table's readers would fail on it. Write it outside the table",
            option_with(option, output)
        );
    }
    Ok(())
}

/// Refuses a local dataset directory `dir` (given as the option `option`) that holds one of
/// the files of `inputs`: a part would replace it, or `--overwrite` delete it.
pub fn refuse_dataset_holding_inputs(option: &str, dir: &Path, inputs: &[InputLocation]) -> anyhow::Result<()> {
    let Ok(dir_resolved) = dir.canonicalize() else { return Ok(()) };
    let held = inputs
        .iter()
        .flat_map(|input| &input.files)
        .find(|file| resolved(file).is_some_and(|f| f.starts_with(&dir_resolved)));
    if let Some(file) = held {
        bail!(
            "{} holds the input file {}; write the dataset somewhere the input does not cover",
            option_with(option, &dir.display().to_string()),
            file.display()
        );
    }
    Ok(())
}

/// Why writing the storage URL `output` would clobber an input given as the storage URL
/// `input` (an object, a prefix or a glob) that expanded to the objects `files`: it is one of
/// them, it holds one of them (a dataset output, whose parts replace what is inside), or a
/// rerun would read it. Locations are compared canonically ([`canonical_url`]), so no `./`,
/// `x/../` or `%2F` alias slips past. `written` is the object a dataset output writes first.
pub fn remote_overlap(
    output: &str,
    dataset: bool,
    written: Option<&str>,
    input: &str,
    files: &[String],
) -> anyhow::Result<Option<&'static str>> {
    if !is_url(output) || !is_url(input) {
        return Ok(None);
    }
    let output = canonical_url(output)?;
    let written = written.map(canonical_url).transpose()?.unwrap_or_else(|| output.clone());
    let inside = format!("{output}/");
    for file in files.iter().filter(|f| is_url(f)) {
        let file = canonical_url(file)?;
        if file == output || file == written {
            return Ok(Some("it is one of the input files"));
        }
        if dataset && file.starts_with(&inside) {
            return Ok(Some("the input's files are inside it"));
        }
    }
    let read_on_rerun = match split_glob(input) {
        Some((base, pattern)) => {
            let base = format!("{}/", canonical_url(base)?);
            let pattern = Pattern::new(pattern).ok();
            written
                .strip_prefix(&base)
                .is_some_and(|relative| pattern.as_ref().is_some_and(|p| p.matches_with(relative, GLOB_OPTIONS)))
        }
        None => {
            // A prefix reads the *.parquet objects directly under it; an object reads itself.
            let input = canonical_url(input)?;
            if input == written || input == output {
                return Ok(Some("it is the input"));
            }
            let is_object = files.len() == 1 && files.iter().all(|f| canonical_url(f).ok().as_ref() == Some(&input));
            let read_back = written.rsplit_once('/').is_some_and(|(parent, name)| {
                parent == input && !name.starts_with(['.', '_']) && name.ends_with(".parquet")
            });
            // Anything else under a prefix being read (a dataset, or a Delta table with its
            // log and staged parts) would be taken for part of it by the next reader.
            let prefix = format!("{input}/");
            if !is_object && !read_back && (written.starts_with(&prefix) || output.starts_with(&prefix)) {
                return Ok(Some("it is inside the input prefix, which readers take whole as one dataset or table"));
            }
            !is_object && read_back
        }
    };
    Ok(read_on_rerun.then_some("a rerun would read it back as input"))
}

/// [`remote_overlap`] as a refusal naming the option `option`.
pub fn refuse_remote_output_among_inputs(
    option: &str,
    output: &str,
    dataset: bool,
    written: Option<&str>,
    input: &str,
    files: &[String],
) -> anyhow::Result<()> {
    if let Some(why) = remote_overlap(output, dataset, written, input, files)? {
        bail!(
            "{} is covered by the input {input} ({why}); write it somewhere the input does not cover",
            option_with(option, output)
        );
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
        assert!(directory.overlap(&dir.path().join("b.parquet")).is_none());

        let nested = directory.overlap(&data.join("_delta_log/00000000000000000002.json"));
        assert!(nested.is_some_and(|why| why.contains("inside the input directory")), "{nested:?}");
        assert!(directory.overlap(&data.join("report.html")).is_some(), "inside a dataset being read");

        let glob = input(&data.join("*.parquet"), &["parquet"]);
        assert_eq!(glob.files.len(), 1, "hidden files are not matched by *");
        assert!(glob.overlap(&data.join("out.parquet")).is_some());
        assert!(glob.overlap(&dir.path().join("out.parquet")).is_none());
    }

    #[test]
    fn outputs_inside_a_delta_table_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let table = dir.path().join("table");
        std::fs::create_dir_all(table.join(DELTA_LOG)).expect("mkdir");
        let at = |path: &Path| refuse_output_inside_table("output", path.to_str().expect("utf-8"));
        for inside in [
            table.join("_delta_log/00000000000000000002.json"),
            table.join("run-abc/part-00000.parquet"),
            table.join("report.html"),
            table.join("new/deeper/x.csv"),
        ] {
            let error = at(&inside).expect_err("inside the table");
            assert!(format!("{error:#}").contains("inside the Delta table"), "{error:#}");
        }
        at(&dir.path().join("report.html")).expect("beside the table");
        at(&dir.path().join("table-report.html")).expect("a sibling name");
        let error = refuse_output_inside_table("output", "s3://b/t/_delta_log/00000000000000000099.json");
        assert!(format!("{:#}", error.expect_err("a log key")).contains("the Delta table s3://b/t"));
        refuse_output_inside_table("output", "s3://b/t/report.html").expect("not known to be a table by name");
    }

    #[cfg(unix)]
    #[test]
    fn a_device_as_input_is_named_as_such() {
        let error = resolve_inputs("/dev/null", &["parquet"]).expect_err("not a file");
        assert!(format!("{error:#}").contains("is a character device"), "{error:#}");
    }

    /// Spellings of the same key that a URL parser or the store resolves: `./`, `x/../`,
    /// a percent-escaped letter.
    fn alias(segments: &[String], dots: &[usize], ups: &[usize], escape: Option<usize>) -> String {
        let mut parts: Vec<String> = Vec::new();
        for (i, segment) in segments.iter().enumerate() {
            if dots.contains(&i) {
                parts.push(".".to_owned());
            }
            if ups.contains(&i) {
                parts.push("zz".to_owned());
                parts.push("..".to_owned());
            }
            let mut segment = segment.clone();
            if escape == Some(i) {
                segment = format!("%{:02X}{}", segment.as_bytes()[0], &segment[1..]);
            }
            parts.push(segment);
        }
        parts.join("/")
    }

    proptest::proptest! {
        #[test]
        fn aliases_of_an_input_key_are_refused_as_outputs(
            bucket in "[a-z][a-z0-9-]{2,8}",
            segments in proptest::collection::vec("[a-z][a-z0-9_-]{0,5}", 1..4),
            dots in proptest::collection::vec(0usize..4, 0..3),
            ups in proptest::collection::vec(0usize..4, 0..3),
            escape in proptest::option::of(0usize..4),
            scheme in proptest::sample::select(vec!["s3", "s3a", "gs"]),
        ) {
            let plain = format!("s3://{bucket}/{}", segments.join("/"));
            let plain = if scheme == "gs" { plain.replacen("s3://", "gs://", 1) } else { plain };
            let aliased = format!("{scheme}://{bucket}/{}", alias(&segments, &dots, &ups, escape));
            proptest::prop_assert_eq!(canonical_url(&aliased).expect("canonical"), canonical_url(&plain).expect("canonical"));

            // The input object itself, written through an alias.
            let object = format!("{plain}.parquet");
            let object_alias = format!("{aliased}.parquet");
            let overlap = remote_overlap(&object_alias, false, None, &object, std::slice::from_ref(&object));
            proptest::prop_assert!(overlap.expect("checks").is_some(), "{} overwrites {}", object_alias, object);

            // A dataset prefix holding the input, reached through an alias (its --overwrite
            // would delete the input's parts).
            let part = format!("{plain}/part-00000.parquet");
            let prefix_input = format!("{plain}/");
            let written = format!("{aliased}/part-00000.parquet");
            let overlap = remote_overlap(&aliased, true, Some(&written), &prefix_input, std::slice::from_ref(&part));
            proptest::prop_assert!(overlap.expect("checks").is_some(), "{} holds {}", aliased, part);

            // A file beside a prefix input, under an alias: read on a rerun.
            let beside = format!("{aliased}/new.parquet");
            let overlap = remote_overlap(&beside, false, None, &prefix_input, std::slice::from_ref(&part));
            proptest::prop_assert_eq!(overlap.expect("checks"), Some("a rerun would read it back as input"));

            // A glob over the prefix matches the aliased output on a rerun.
            let glob = format!("{plain}/*.parquet");
            let overlap = remote_overlap(&beside, false, None, &glob, std::slice::from_ref(&part));
            proptest::prop_assert!(overlap.expect("checks").is_some());

            // Somewhere else is fine.
            let elsewhere = format!("s3://{bucket}-out/{}.parquet", segments.join("/"));
            let overlap = remote_overlap(&elsewhere, false, None, &object, std::slice::from_ref(&object));
            proptest::prop_assert!(overlap.expect("checks").is_none());
            let sibling = format!("{plain}-report.html");
            let overlap = remote_overlap(&sibling, false, None, &prefix_input, std::slice::from_ref(&part));
            proptest::prop_assert!(overlap.expect("checks").is_none());
        }
    }

    #[test]
    fn anything_inside_a_dataset_or_table_input_is_refused() {
        let parts = vec!["s3://b/ds/part-00000.parquet".to_owned()];
        let page = remote_overlap("s3://b/ds/report.html", false, None, "s3://b/ds/", &parts).expect("checks");
        assert!(page.is_some_and(|why| why.contains("inside the input prefix")));
        let log = remote_overlap("s3://b/ds/_delta_log/00000000000000000002.json", false, None, "s3://b/ds", &parts);
        assert!(log.expect("checks").is_some());
        let beside = remote_overlap("s3://b/ds-report.html", false, None, "s3://b/ds/", &parts).expect("checks");
        assert!(beside.is_none());
        let part = remote_overlap("s3://b/ds/./part-00000.parquet", false, None, "s3://b/ds/", &parts).expect("checks");
        assert_eq!(part, Some("it is one of the input files"));
    }
}

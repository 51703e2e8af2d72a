//! Writes a model package atomically: everything goes into a hidden temporary directory
//! beside the destination, is verified, and is renamed into place only when complete.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use batch_io::atomic_file::temp_dir_beside;
use prost::Message;
use runtime::package::{GRAPH_FILE, MANIFEST_FILE, Manifest, ModelPackage, TOKENIZER_FILE};
use tokenizers::Tokenizer;
use tract_onnx::pb::ModelProto;

/// Refuses an existing destination unless `force` is set, and even then replaces only a
/// valid model package holding nothing else (or an empty directory): `--force` must never
/// delete a file the user did not ask to replace. Called before training starts, so that a
/// long run does not end in a refusal, and again just before the package is moved in.
pub fn check_destination(out: &Path, force: bool) -> anyhow::Result<()> {
    let meta = match std::fs::symlink_metadata(out) {
        Ok(meta) => meta,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => bail!("cannot check --out {}: {error}", out.display()),
    };
    if !force {
        bail!("{} already exists; choose another --out or pass --force to replace it", out.display());
    }
    if !meta.is_dir() {
        bail!(
            "{} is {}, not a model package directory; --force only replaces a package (or an empty directory)",
            out.display(),
            batch_io::atomic_file::describe_file_type(meta.file_type())
        );
    }
    let mut others: Vec<String> = std::fs::read_dir(out)
        .with_context(|| format!("cannot list {}", out.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| ![GRAPH_FILE, TOKENIZER_FILE, MANIFEST_FILE].contains(&name.as_str()))
        .collect();
    if !others.is_empty() {
        others.sort();
        bail!(
            "{} holds more than a model package ({}); --force replaces only a package's own files, so move those \
             away or choose another --out",
            out.display(),
            others.join(", ")
        );
    }
    let is_empty = std::fs::read_dir(out).map(|mut d| d.next().is_none()).unwrap_or(false);
    if !is_empty {
        let not_a_package = || format!("--force replaces only a valid model package, and {} is not one", out.display());
        ModelPackage::open(out).with_context(not_a_package)?;
        Tokenizer::from_file(out.join(TOKENIZER_FILE))
            .map_err(|e| anyhow::anyhow!("{}: {e}", out.join(TOKENIZER_FILE).display()))
            .with_context(not_a_package)?;
    }
    Ok(())
}

/// Refuses an input of training (`flag` names it) that lies inside the destination `out`,
/// which `--force` replaces.
pub fn refuse_input_inside_destination(flag: &str, input: &Path, out: &Path) -> anyhow::Result<()> {
    let (Ok(input_resolved), Ok(out_resolved)) = (input.canonicalize(), out.canonicalize()) else { return Ok(()) };
    if input_resolved.starts_with(&out_resolved) {
        bail!(
            "{flag} {} is inside --out {}, which the new package replaces; move it out first",
            input.display(),
            out.display()
        );
    }
    Ok(())
}

pub struct PackageFiles<'a> {
    pub graph: &'a ModelProto,
    pub tokenizer: &'a Tokenizer,
    pub manifest: &'a Manifest,
}

/// Writes the package to `out`. `verify` runs on the complete temporary directory; if it
/// fails, nothing is left behind.
pub fn write_package(
    out: &Path,
    force: bool,
    files: PackageFiles<'_>,
    verify: impl FnOnce(&Path) -> anyhow::Result<()>,
) -> anyhow::Result<PathBuf> {
    let staging = temp_dir_beside(out)?;
    let written = |name: &str| format!("cannot write {} of the package {}", name, out.display());
    std::fs::write(staging.path().join(GRAPH_FILE), files.graph.encode_to_vec())
        .with_context(|| written(GRAPH_FILE))?;
    files
        .tokenizer
        .save(staging.path().join(TOKENIZER_FILE), false)
        .map_err(|e| anyhow::anyhow!("cannot write {TOKENIZER_FILE}: {e}"))?;
    std::fs::write(staging.path().join(MANIFEST_FILE), serde_json::to_string_pretty(files.manifest)?)
        .with_context(|| written(MANIFEST_FILE))?;
    verify(staging.path()).context("the exported package failed verification")?;

    // Checked again: the destination may have changed during training.
    check_destination(out, force)?;
    if out.is_dir() {
        std::fs::remove_dir_all(out).with_context(|| format!("cannot replace {}", out.display()))?;
    }
    staging.publish(out)?;
    Ok(out.to_path_buf())
}

//! Writes a model package atomically: everything goes into a hidden temporary directory
//! beside the destination, is verified, and is renamed into place only when complete.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use pipeline::package::{GRAPH_FILE, MANIFEST_FILE, Manifest, TOKENIZER_FILE};
use prost::Message;
use tokenizers::Tokenizer;
use tract_onnx::pb::ModelProto;

/// Refuses an existing destination unless `force` is set. Called before training starts, so
/// that a long run does not end in a refusal.
pub fn check_destination(out: &Path, force: bool) -> anyhow::Result<()> {
    if !out.exists() {
        return Ok(());
    }
    if !force {
        bail!("{} already exists; choose another --out or pass --force to replace it", out.display());
    }
    // --force replaces a package or an empty directory, never an unrelated file or folder.
    let is_package = out.join(MANIFEST_FILE).is_file();
    let is_empty_dir = out.is_dir() && std::fs::read_dir(out).map(|mut d| d.next().is_none()).unwrap_or(false);
    if !is_package && !is_empty_dir {
        bail!(
            "{} exists and is not a model package; --force only replaces a package (or an empty directory)",
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
    check_destination(out, force)?;
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).with_context(|| format!("cannot create {}", parent.display()))?;
    let name = out.file_name().and_then(|n| n.to_str()).unwrap_or("package");
    let staging = tempfile::Builder::new()
        .prefix(&format!(".{name}.partial-"))
        .tempdir_in(&parent)
        .with_context(|| format!("cannot create a temporary directory in {}", parent.display()))?;

    std::fs::write(staging.path().join(GRAPH_FILE), files.graph.encode_to_vec())?;
    files
        .tokenizer
        .save(staging.path().join(TOKENIZER_FILE), false)
        .map_err(|e| anyhow::anyhow!("cannot write {TOKENIZER_FILE}: {e}"))?;
    std::fs::write(staging.path().join(MANIFEST_FILE), serde_json::to_string_pretty(files.manifest)?)?;
    verify(staging.path()).context("the exported package failed verification")?;

    if out.is_dir() {
        std::fs::remove_dir_all(out).with_context(|| format!("cannot replace {}", out.display()))?;
    }
    // Temporary directories are private (0700); the package is an ordinary readable directory.
    #[cfg(unix)]
    std::fs::set_permissions(staging.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    let staged = staging.keep();
    std::fs::rename(&staged, out).with_context(|| format!("cannot move the package into {}", out.display()))?;
    Ok(out.to_path_buf())
}

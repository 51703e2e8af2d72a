//! Publishing a file written under a temporary name: readers see the old file or the
//! complete new one, never a half-written one.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// A temporary file in `target`'s directory (so that [`publish`] is a rename, never a copy),
/// named `.{prefix}-XXXX.partial` so it is hidden and recognisable if a crash leaves it.
pub fn temp_beside(target: &Path, prefix: &str) -> anyhow::Result<tempfile::NamedTempFile> {
    if target.is_dir() {
        bail!("output {} is a directory; give a file path", target.display());
    }
    let parent = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    tempfile::Builder::new()
        .prefix(&format!(".{prefix}-"))
        .suffix(".partial")
        .tempfile_in(&parent)
        .with_context(|| format!("cannot write to {} (is the directory there and writable?)", parent.display()))
}

/// Gives `temp` ordinary permissions (temporary files are created private, 0600) and renames
/// it to `target`, replacing what was there.
pub fn publish(temp: tempfile::NamedTempFile, target: &Path) -> anyhow::Result<()> {
    #[cfg(unix)]
    std::fs::set_permissions(temp.path(), std::os::unix::fs::PermissionsExt::from_mode(0o644))?;
    temp.persist(target).with_context(|| format!("cannot move the new file into {}", target.display()))?;
    Ok(())
}

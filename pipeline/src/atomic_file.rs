//! Publishing a file written under a temporary name: readers see the old file or the
//! complete new one, never a half-written one.

use std::path::Path;

use anyhow::Context;

/// Gives `temp` ordinary permissions (temporary files are created private, 0600) and renames
/// it to `target`, replacing what was there.
pub fn publish(temp: tempfile::NamedTempFile, target: &Path) -> anyhow::Result<()> {
    #[cfg(unix)]
    std::fs::set_permissions(temp.path(), std::os::unix::fs::PermissionsExt::from_mode(0o644))?;
    temp.persist(target).with_context(|| format!("cannot move the new file into {}", target.display()))?;
    Ok(())
}

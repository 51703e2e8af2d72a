//! Publishing output written under a temporary name: readers see the old output or the
//! complete new one, never a half-written one, and nothing but a regular file (or a symlink)
//! is ever replaced.
//!
//! A temporary sits beside its target as `.{target name}.{6 random characters}.partial` and
//! holds an exclusive lock while its writer lives. That lets a later run recognise one left
//! by a killed process (`kill -9`: its lock went with it) and remove it, while a concurrent
//! writer's temporary, still locked, is left alone. Live temporaries are also listed here,
//! so that a signal or a panic removes them before the process exits
//! ([`remove_live_temporaries`], called by `command_line`).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use anyhow::{Context, bail};

const SUFFIX: &str = ".partial";
/// A temporary's name while it is made and locked, before it takes [`SUFFIX`]: no sweep
/// looks for it, so no sweep meets a temporary unlocked.
const MAKING_SUFFIX: &str = ".making";
/// Characters tempfile puts between the prefix and the suffix.
const RANDOM_CHARS: usize = 6;

/// Temporaries (files or directories) that exist right now and are not yet published.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn live() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    LIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Keeps `path` on the list of live temporaries until dropped.
#[derive(Debug)]
pub struct Registration(PathBuf);

impl Registration {
    pub fn new(path: &Path) -> Self {
        live().push(path.to_path_buf());
        Self(path.to_path_buf())
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut live = live();
        if let Some(at) = live.iter().position(|p| p == &self.0) {
            live.swap_remove(at);
        }
    }
}

/// Removes every live temporary, and returns the unfinished outputs among them (to tell the
/// user). For a process about to exit on a signal or a panic; the list is left as it is (the
/// process ends right after).
pub fn remove_live_temporaries() -> Vec<PathBuf> {
    let paths = live().clone();
    let mut outputs = Vec::new();
    for path in paths {
        let removed = if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
        let is_output = path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(SUFFIX));
        if removed.is_ok() && is_output {
            outputs.push(path);
        }
    }
    outputs
}

/// An error for a failed write to `target` that gives the cause once: the operating
/// system's (disk full, permission) when there is one in the chain, else the writer's own.
pub fn write_failed(target: &Path, error: &(dyn std::error::Error + 'static)) -> anyhow::Error {
    match io_cause(error) {
        Some(io) => anyhow::anyhow!("cannot write {}: {io}", target.display()),
        None => anyhow::anyhow!("cannot write {}: {error}", target.display()),
    }
}

/// The operating system's error in `error`'s chain of causes, if there is one.
pub fn io_cause<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a std::io::Error> {
    let mut cause = Some(error);
    while let Some(current) = cause {
        if let Some(io) = current.downcast_ref::<std::io::Error>() {
            return Some(io);
        }
        cause = current.source();
    }
    None
}

/// What kind of thing sits at a path, for messages about things we refuse to replace.
pub fn describe_file_type(file_type: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if file_type.is_char_device() {
            return "a character device";
        }
        if file_type.is_block_device() {
            return "a block device";
        }
        if file_type.is_socket() {
            return "a socket";
        }
    }
    if file_type.is_dir() {
        return "a directory";
    }
    if file_type.is_symlink() {
        return "a symbolic link";
    }
    "a regular file"
}

/// Checks that `target` can be written by replacing it: nothing there yet, a regular file,
/// or a symlink (the link is replaced, never what it points to). A directory, device, FIFO
/// or socket is refused, and so is a missing parent directory.
pub fn check_replaceable(target: &Path) -> anyhow::Result<()> {
    match std::fs::symlink_metadata(target) {
        Ok(meta) if meta.is_file() => {}
        // A link is replaced by the new file, which is fine for a link to a file; a link to
        // anything else (`/dev/stdout`, a device, a pipe) is refused like the thing itself.
        Ok(meta) if meta.file_type().is_symlink() => match std::fs::metadata(target) {
            Ok(linked) if linked.is_dir() => {
                bail!("output {} is a link to a directory; give a file path", target.display())
            }
            Ok(linked) if !linked.is_file() => bail!(
                "output {} is a link to {}, not to a regular file; it is never replaced. Write to a file and copy it there if you need to",
                target.display(),
                describe_file_type(linked.file_type())
            ),
            _ => {}
        },
        Ok(meta) if meta.is_dir() => bail!("output {} is a directory; give a file path", target.display()),
        Ok(meta) => bail!(
            "output {} is {}, not a regular file; it is never replaced. Write to a file and copy it there if you need to",
            target.display(),
            describe_file_type(meta.file_type())
        ),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => bail!("cannot check output {}: {error}", target.display()),
    }
    let parent = parent_dir(target);
    if !parent.is_dir() {
        bail!("cannot write {}: the directory {} does not exist", target.display(), parent.display());
    }
    Ok(())
}

fn parent_dir(target: &Path) -> PathBuf {
    match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The prefix of `target`'s temporaries, `.{file name}.`.
fn temp_prefix(target: &Path) -> anyhow::Result<String> {
    let name = target
        .file_name()
        .and_then(|n| n.to_str())
        .with_context(|| format!("output {} has no usable file name", target.display()))?;
    Ok(format!(".{name}."))
}

/// Whether `entry` is a temporary of ours for the target whose prefix is `prefix`.
fn is_temporary_of(entry: &str, prefix: &str) -> bool {
    entry
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_suffix(SUFFIX))
        .is_some_and(|random| random.len() == RANDOM_CHARS && random.chars().all(|c| c.is_ascii_alphanumeric()))
}

/// The target name a temporary named `entry` is for (`out.parquet` for
/// `.out.parquet.Ab3dE9.partial`, or for `….making` while another run makes it); `None` for
/// anything that is not one of our temporaries.
pub fn temporary_target(entry: &str) -> Option<&str> {
    let name = entry.strip_prefix('.')?;
    let rest = name.strip_suffix(SUFFIX).or_else(|| name.strip_suffix(MAKING_SUFFIX))?;
    let (target, random) = rest.rsplit_once('.')?;
    let ours = !target.is_empty() && random.len() == RANDOM_CHARS && random.chars().all(|c| c.is_ascii_alphanumeric());
    ours.then_some(target)
}

/// Removes temporaries of `target` that no live process holds: what a killed run left.
/// Returns how many were removed.
pub fn remove_stale_temporaries(target: &Path) -> anyhow::Result<usize> {
    let prefix = temp_prefix(target)?;
    let parent = parent_dir(target);
    let Ok(entries) = std::fs::read_dir(&parent) else { return Ok(0) };
    let mut removed = 0;
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        if !name.to_str().is_some_and(|name| is_temporary_of(name, &prefix)) {
            continue;
        }
        // Opening anything but a file or a directory (a FIFO) could block.
        if !entry.file_type().is_ok_and(|t| t.is_file() || t.is_dir()) {
            continue;
        }
        let path = entry.path();
        // A live writer holds the lock; taking it means the writer is gone.
        let Ok(handle) = File::open(&path) else { continue };
        if handle.try_lock().is_err() {
            continue;
        }
        let result = if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
        match result {
            Ok(()) => {
                tracing::info!("removed {}, left by an interrupted run", path.display());
                removed += 1;
            }
            Err(error) => tracing::warn!("cannot remove {}, left by an interrupted run: {error}", path.display()),
        }
    }
    Ok(removed)
}

/// A temporary file beside its target, locked and registered while it lives; removed when
/// dropped unless [`TempFile::publish`]ed.
#[derive(Debug)]
pub struct TempFile {
    file: tempfile::NamedTempFile,
    _registration: Registration,
}

/// Creates a temporary for `target` in `target`'s directory (so that publishing is a rename,
/// never a copy), after checking that `target` may be replaced and clearing stale
/// temporaries of earlier, killed runs.
pub fn temp_beside(target: &Path) -> anyhow::Result<TempFile> {
    check_replaceable(target)?;
    remove_stale_temporaries(target)?;
    let parent = parent_dir(target);
    // Made under another name, locked, and only then named as a temporary: a run starting
    // beside this one (another shard) sweeps temporaries nobody holds a lock on, and once took
    // this one, made but not yet locked, for a killed run's (CI: a part gone before its rename).
    let making = tempfile::Builder::new()
        .prefix(&temp_prefix(target)?)
        .suffix(MAKING_SUFFIX)
        .rand_bytes(RANDOM_CHARS)
        .tempfile_in(&parent)
        .with_context(|| format!("cannot write to {} (is the directory writable?)", parent.display()))?;
    making.as_file().try_lock().map_err(|e| anyhow::anyhow!("cannot lock {}: {e}", making.path().display()))?;
    let name = making.path().file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(MAKING_SUFFIX));
    let path = parent.join(format!("{}{SUFFIX}", name.context("a temporary without its suffix")?));
    // The lock belongs to the open file, so it holds under the new name.
    let file = making.persist_noclobber(&path).map_err(|e| {
        anyhow::anyhow!("cannot name the temporary {} in {}: {}", path.display(), parent.display(), e.error)
    })?;
    let temp_path = tempfile::TempPath::try_from_path(&path)
        .with_context(|| format!("cannot hold the temporary {}", path.display()))?;
    let file = tempfile::NamedTempFile::from_parts(file, temp_path);
    let registration = Registration::new(file.path());
    Ok(TempFile { file, _registration: registration })
}

impl TempFile {
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// Gives the file ordinary permissions (temporaries are created private, 0600) and
    /// renames it to `target`, replacing what was there.
    pub fn publish(self, target: &Path) -> anyhow::Result<()> {
        check_replaceable(target)?;
        #[cfg(unix)]
        std::fs::set_permissions(self.file.path(), std::os::unix::fs::PermissionsExt::from_mode(0o644))?;
        let TempFile { file, _registration } = self;
        file.persist(target).with_context(|| format!("cannot move the new file into {}", target.display()))?;
        Ok(())
    }
}

impl std::io::Write for TempFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// A temporary directory beside its target, locked and registered while it lives; removed
/// when dropped unless [`TempDir::publish`]ed.
#[derive(Debug)]
pub struct TempDir {
    dir: Option<tempfile::TempDir>,
    /// An open handle on the directory that holds the lock.
    _lock: File,
    _registration: Registration,
}

/// Like [`temp_beside`], for a directory output (a model package). `target` may be an
/// existing directory; whether it may be replaced is the caller's decision.
pub fn temp_dir_beside(target: &Path) -> anyhow::Result<TempDir> {
    let parent = parent_dir(target);
    std::fs::create_dir_all(&parent).with_context(|| format!("cannot create {}", parent.display()))?;
    remove_stale_temporaries(target)?;
    let dir = tempfile::Builder::new()
        .prefix(&temp_prefix(target)?)
        .suffix(SUFFIX)
        .rand_bytes(RANDOM_CHARS)
        .tempdir_in(&parent)
        .with_context(|| format!("cannot create a temporary directory in {}", parent.display()))?;
    let lock = File::open(dir.path()).with_context(|| format!("cannot open {}", dir.path().display()))?;
    lock.try_lock().map_err(|e| anyhow::anyhow!("cannot lock {}: {e}", dir.path().display()))?;
    let registration = Registration::new(dir.path());
    Ok(TempDir { dir: Some(dir), _lock: lock, _registration: registration })
}

impl TempDir {
    pub fn path(&self) -> &Path {
        self.dir.as_ref().map_or(Path::new(""), |d| d.path())
    }

    /// Makes the directory ordinarily readable (temporaries are private, 0700) and renames it
    /// to `target`, which must not exist.
    pub fn publish(mut self, target: &Path) -> anyhow::Result<()> {
        let dir = self.dir.take().context("temporary directory already published")?;
        #[cfg(unix)]
        std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
        let staged = dir.keep();
        if let Err(error) = std::fs::rename(&staged, target) {
            // The staged directory is no longer tempfile's to remove; it is abandoned, so remove it.
            let _ = std::fs::remove_dir_all(&staged);
            return Err(error).with_context(|| format!("cannot move the new directory into {}", target.display()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporaries_are_recognised_by_exact_name() {
        assert!(is_temporary_of(".out.parquet.Ab3dE9.partial", ".out.parquet."));
        assert!(!is_temporary_of(".out.parquet.x.Ab3dE9.partial", ".out.parquet."));
        assert!(!is_temporary_of(".out.parquet.Ab3dE.partial", ".out.parquet."));
        assert!(!is_temporary_of("out.parquet", ".out.parquet."));
        assert_eq!(temporary_target(".part-00001.parquet.Ab3dE9.partial"), Some("part-00001.parquet"));
        assert_eq!(temporary_target(".part-00001.parquet.Ab3dE9.making"), Some("part-00001.parquet"));
        assert_eq!(temporary_target(".part-00001.parquet.Ab3.partial"), None);
        assert_eq!(temporary_target("part-00001.parquet"), None);
    }

    #[test]
    fn stale_temporaries_are_removed_and_live_ones_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let target = dir.path().join("out.parquet");
        let live = temp_beside(&target).expect("temp");
        // What a killed run leaves: a temporary nobody holds a lock on.
        let stale = dir.path().join(".out.parquet.AAAAAA.partial");
        std::fs::write(&stale, b"half").expect("write");
        let unrelated = dir.path().join(".other.parquet.AAAAAA.partial");
        std::fs::write(&unrelated, b"not ours to judge").expect("write");

        assert_eq!(remove_stale_temporaries(&target).expect("clean"), 1);
        assert!(!stale.exists());
        assert!(live.path().exists(), "a locked temporary belongs to a live writer");
        assert!(live.path().to_string_lossy().ends_with(SUFFIX), "{}", live.path().display());
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(MAKING_SUFFIX)), "{names:?}");
        assert!(unrelated.exists(), "temporaries of other targets are left alone");
        live.publish(&target).expect("publish");
        assert!(target.is_file());
    }

    #[test]
    fn a_full_disk_is_reported_once_without_the_writers_wrapping() {
        let full = std::io::Error::from_raw_os_error(28);
        let wrapped = parquet::errors::ParquetError::External(Box::new(full));
        let message = format!("{:#}", write_failed(Path::new("out.parquet"), &wrapped));
        assert_eq!(message, "cannot write out.parquet: No space left on device (os error 28)");
    }

    #[cfg(unix)]
    #[test]
    fn special_files_and_directories_are_never_replaced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let error = check_replaceable(Path::new("/dev/null")).expect_err("a device");
        assert!(format!("{error:#}").contains("character device"), "{error:#}");
        let error = check_replaceable(dir.path()).expect_err("a directory");
        assert!(format!("{error:#}").contains("is a directory"), "{error:#}");
        let error = check_replaceable(&dir.path().join("missing/out.parquet")).expect_err("no parent");
        assert!(format!("{error:#}").contains("does not exist"), "{error:#}");
        // A link is followed: to a device it is refused, to a regular file it may be replaced.
        let to_device = dir.path().join("null.parquet");
        std::os::unix::fs::symlink("/dev/null", &to_device).expect("symlink");
        let error = check_replaceable(&to_device).expect_err("a link to a device");
        assert!(format!("{error:#}").contains("link to a character device"), "{error:#}");
        let file = dir.path().join("old.parquet");
        std::fs::write(&file, b"old").expect("write");
        let to_file = dir.path().join("link.parquet");
        std::os::unix::fs::symlink(&file, &to_file).expect("symlink");
        check_replaceable(&to_file).expect("a link to a regular file");
    }
}

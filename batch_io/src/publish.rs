//! An output published whole, wherever it goes: a local file is written to a locked
//! temporary beside it and renamed into place (see `atomic_file`); an object is sent as a
//! multipart upload, which becomes visible only when its final request completes it.
//! Dropped before [`Sink::publish`], neither leaves anything a reader can see.
//!
//! Objects are always sent as multipart uploads, even small ones (three requests instead of
//! one PUT): an interrupted object is then always an incomplete upload, which the bucket's
//! lifecycle rule removes (deploy/) and which a listing of uploads shows while it is written.
//! Uploads in progress are also listed here, so that a signal aborts them before the process
//! exits ([`abort_live_uploads`], called by `command_line`).

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError, Weak};
use std::time::{Duration, Instant};

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, WriteMultipart};

use crate::atomic_file::{TempFile, temp_beside};
use crate::object_storage::{block_on, is_url, remote_prefix, request_failed};

/// Where an output goes.
#[derive(Clone)]
pub enum Destination {
    Local(PathBuf),
    Object { store: Arc<dyn ObjectStore>, path: ObjectPath, url: String },
}

impl Destination {
    /// An output as given on the command line: a URL of object storage, or a local path.
    pub fn parse(output: &str) -> anyhow::Result<Self> {
        if !is_url(output) {
            return Ok(Destination::Local(PathBuf::from(output)));
        }
        let object = remote_prefix(output)?;
        Ok(Destination::Object { store: object.store, path: object.path, url: object.url })
    }
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Destination::Local(path) => write!(f, "{}", path.display()),
            Destination::Object { url, .. } => f.write_str(url),
        }
    }
}

/// Bytes on their way to a [`Destination`].
pub enum Sink {
    Local { temp: TempFile, target: PathBuf },
    Object(Upload),
}

/// An object upload; aborted if dropped before it is published.
pub struct Upload {
    /// Shared with the list of live uploads, so that a signal can abort it.
    writer: SharedWriter,
    url: String,
}

/// An upload's writer: `None` once finished or aborted.
type WriterSlot = Mutex<Option<WriteMultipart>>;
type SharedWriter = Arc<WriterSlot>;

/// Uploads begun and not yet finished or aborted, by URL.
static LIVE_UPLOADS: Mutex<Vec<(String, Weak<WriterSlot>)>> = Mutex::new(Vec::new());

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Aborts every upload in progress and returns their URLs. For a process about to exit on a
/// signal: an unfinished multipart upload is invisible but billed until aborted. A writer
/// busy sending a part is waited for a few seconds; one still busy after that is left to the
/// bucket's lifecycle rule.
pub fn abort_live_uploads() -> Vec<String> {
    let uploads: Vec<(String, Weak<WriterSlot>)> = lock(&LIVE_UPLOADS).clone();
    let mut aborted = Vec::new();
    for (url, upload) in uploads {
        let Some(upload) = upload.upgrade() else { continue };
        let deadline = Instant::now() + Duration::from_secs(5);
        let writer = loop {
            match upload.try_lock() {
                Ok(mut writer) => break writer.take(),
                Err(TryLockError::Poisoned(poisoned)) => break poisoned.into_inner().take(),
                Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Err(TryLockError::WouldBlock) => break None,
            }
        };
        if let Some(writer) = writer {
            // Inside the runtime, whose timers the timeout needs.
            let abort = block_on(async { tokio::time::timeout(Duration::from_secs(10), writer.abort()).await });
            if matches!(abort, Ok(Ok(Ok(())))) {
                aborted.push(url);
            }
        }
    }
    aborted
}

/// Size of each part of an upload (S3 wants at least 5 MiB for all but the last).
const UPLOAD_PART: usize = 16 << 20;
/// Parts in flight at once; writing waits beyond that, so memory stays bounded.
const PARTS_IN_FLIGHT: usize = 2;

impl Sink {
    pub fn create(destination: &Destination) -> anyhow::Result<Self> {
        Ok(match destination {
            Destination::Local(target) => Sink::Local { temp: temp_beside(target)?, target: target.clone() },
            Destination::Object { store, path, url } => {
                let upload = block_on(store.put_multipart(path))?
                    .map_err(|e| request_failed(&format!("cannot upload {url}"), e))?;
                let writer = Arc::new(Mutex::new(Some(WriteMultipart::new_with_chunk_size(upload, UPLOAD_PART))));
                lock(&LIVE_UPLOADS).push((url.clone(), Arc::downgrade(&writer)));
                Sink::Object(Upload { writer, url: url.clone() })
            }
        })
    }

    /// Makes the output visible under its name, replacing what was there.
    pub fn publish(self) -> anyhow::Result<()> {
        match self {
            Sink::Local { temp, target } => temp.publish(&target),
            Sink::Object(upload) => {
                let Some(writer) = lock(&upload.writer).take() else {
                    anyhow::bail!("the upload of {} was aborted", upload.url)
                };
                block_on(writer.finish())?
                    .map(|_| ())
                    .map_err(|e| request_failed(&format!("cannot upload {}", upload.url), e))
            }
        }
    }
}

impl std::io::Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Sink::Local { temp, .. } => temp.write(buf),
            Sink::Object(upload) => match lock(&upload.writer).as_mut() {
                // Inside the runtime: a part that fills is sent by a task spawned there.
                Some(writer) => block_on(async {
                    writer.wait_for_capacity(PARTS_IN_FLIGHT).await?;
                    writer.write(buf);
                    Ok(buf.len())
                })
                .map_err(std::io::Error::other)?
                .map_err(|e: object_store::Error| std::io::Error::other(e)),
                None => Err(std::io::Error::other("the upload is finished")),
            },
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::Local { temp, .. } => temp.flush(),
            // Parts go out as they fill; flushing a partial one would only make more of them.
            Sink::Object { .. } => Ok(()),
        }
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        // An unfinished multipart upload is invisible but billed; abort it. (After `kill -9`
        // it cannot be: the bucket's lifecycle rule removes it, see deploy/.)
        let writer = lock(&self.writer).take();
        if let Some(writer) = writer {
            let _ = block_on(writer.abort());
        }
        lock(&LIVE_UPLOADS)
            .retain(|(_, live)| live.strong_count() > 0 && !Weak::ptr_eq(live, &Arc::downgrade(&self.writer)));
    }
}

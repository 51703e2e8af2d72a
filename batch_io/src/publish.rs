//! An output published whole, wherever it goes: a local file is written to a locked
//! temporary beside it and renamed into place (see `atomic_file`); an object is sent as a
//! multipart upload, which becomes visible only when its final request completes it.
//! Dropped before [`Sink::publish`], neither leaves anything a reader can see.
//!
//! Objects are always sent as multipart uploads, even small ones (three requests instead of
//! one PUT): an interrupted object is then always an incomplete upload, which the bucket's
//! lifecycle rule removes (deploy/) and which a listing of uploads shows while it is written.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

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
    writer: Option<WriteMultipart>,
    url: String,
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
                let upload = block_on(store.put_multipart(path))
                    .map_err(|e| request_failed(&format!("cannot upload {url}"), e))?;
                Sink::Object(Upload {
                    writer: Some(WriteMultipart::new_with_chunk_size(upload, UPLOAD_PART)),
                    url: url.clone(),
                })
            }
        })
    }

    /// Makes the output visible under its name, replacing what was there.
    pub fn publish(self) -> anyhow::Result<()> {
        match self {
            Sink::Local { temp, target } => temp.publish(&target),
            Sink::Object(mut upload) => {
                let Some(writer) = upload.writer.take() else { return Ok(()) };
                block_on(writer.finish())
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
            Sink::Object(upload) => match &mut upload.writer {
                // Inside the runtime: a part that fills is sent by a task spawned there.
                Some(writer) => block_on(async {
                    writer.wait_for_capacity(PARTS_IN_FLIGHT).await?;
                    writer.write(buf);
                    Ok(buf.len())
                })
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
        if let Some(writer) = self.writer.take() {
            let _ = block_on(writer.abort());
        }
    }
}

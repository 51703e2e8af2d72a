//! An output published whole, wherever it goes: a local file is written to a locked
//! temporary beside it and renamed into place (see `atomic_file`); an object is uploaded and
//! becomes visible only when the upload completes (one PUT, or a multipart upload's final
//! request). Dropped before [`Sink::publish`], neither leaves anything a reader can see.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use object_store::ObjectStore;
use object_store::buffered::BufWriter;
use object_store::path::Path as ObjectPath;
use tokio::io::AsyncWriteExt;

use crate::atomic_file::{TempFile, temp_beside};
use crate::object_storage::{block_on, request_failed};

/// Where an output goes.
#[derive(Clone)]
pub enum Destination {
    Local(PathBuf),
    Object { store: Arc<dyn ObjectStore>, path: ObjectPath, url: String },
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
    writer: Option<BufWriter>,
    url: String,
}

/// Data held in memory before an upload turns into a multipart upload (whose parts are then
/// sent as they fill).
const UPLOAD_BUFFER: usize = 16 << 20;

impl Sink {
    pub fn create(destination: &Destination) -> anyhow::Result<Self> {
        Ok(match destination {
            Destination::Local(target) => Sink::Local { temp: temp_beside(target)?, target: target.clone() },
            Destination::Object { store, path, url } => Sink::Object(Upload {
                writer: Some(BufWriter::with_capacity(store.clone(), path.clone(), UPLOAD_BUFFER)),
                url: url.clone(),
            }),
        })
    }

    /// Makes the output visible under its name, replacing what was there.
    pub fn publish(self) -> anyhow::Result<()> {
        match self {
            Sink::Local { temp, target } => temp.publish(&target),
            Sink::Object(mut upload) => {
                let Some(mut writer) = upload.writer.take() else { return Ok(()) };
                block_on(writer.shutdown()).map_err(|e| upload_failed(&upload.url, e))
            }
        }
    }
}

fn upload_failed(url: &str, error: std::io::Error) -> anyhow::Error {
    let what = format!("cannot upload {url}");
    match error.into_inner().map(|inner| inner.downcast::<object_store::Error>()) {
        Some(Ok(error)) => request_failed(&what, *error),
        Some(Err(other)) => anyhow::anyhow!("{what}: {other}"),
        None => anyhow::anyhow!("{what}"),
    }
}

impl std::io::Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Sink::Local { temp, .. } => temp.write(buf),
            Sink::Object(upload) => match &mut upload.writer {
                Some(writer) => block_on(writer.write_all(buf)).map(|()| buf.len()),
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
        if let Some(writer) = &mut self.writer {
            let _ = block_on(writer.abort());
        }
    }
}

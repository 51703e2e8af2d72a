//! Where a command's input files are: a local file, directory or glob, or objects in a store
//! (one object, a prefix or a glob over keys).

use crate::locations::{InputLocation, resolve_inputs};
use crate::object_storage::{is_url, list_inputs};
use crate::source::InputFile;

/// The input files, and (for local inputs) how they were given, to check outputs against.
pub struct InputFiles {
    pub local: Option<InputLocation>,
    pub files: Vec<InputFile>,
}

/// The files behind `location` with one of `extensions` (objects in a store: Parquet only).
pub fn resolve_input_files(location: &str, extensions: &[&str]) -> anyhow::Result<InputFiles> {
    if is_url(location) {
        let objects = list_inputs(location, &["parquet"])?;
        return Ok(InputFiles { local: None, files: objects.into_iter().map(InputFile::Remote).collect() });
    }
    let local = resolve_inputs(location, extensions)?;
    let files = local.files.iter().cloned().map(InputFile::Local).collect();
    Ok(InputFiles { local: Some(local), files })
}

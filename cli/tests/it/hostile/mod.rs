//! The batch-job contract under careless or hostile use: every case ends with exit code 1
//! (2 for usage errors), a message naming the file, column or row, and no existing file
//! touched. Each test reproduces a case that once broke that contract; they are grouped by
//! what the user got wrong or what went wrong around the run.

mod delta;
mod inputs;
mod outputs;
mod package;
mod resources;
mod secrets;
mod signals;
mod sql;
mod storage;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::common::*;

fn exit_code(output: &Output) -> Option<i32> {
    output.status.code()
}

/// A copy of a fixture package whose manifest `edit` changes.
fn package_with(dir: &Path, source: &str, edit: impl FnOnce(&mut Value)) -> PathBuf {
    let model = dir.join("model");
    std::fs::create_dir(&model).expect("mkdir");
    for file in ["model.onnx", "manifest.json", "tokenizer.json"] {
        std::fs::copy(repo_root().join(source).join(file), model.join(file)).expect("copy");
    }
    let text = std::fs::read_to_string(model.join("manifest.json")).expect("manifest");
    let mut manifest: Value = serde_json::from_str(&text).expect("json");
    edit(&mut manifest);
    std::fs::write(model.join("manifest.json"), manifest.to_string()).expect("write");
    model
}

fn run_with_model(model: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["run"];
    args.extend_from_slice(extra);
    pipeline(&args, &[("--input", &reviews()), ("--model", model), ("--output", out)])
}

/// Asserts a refusal: exit code `code`, every one of `needles` in the message, no output.
fn assert_refused(output: &Output, code: i32, needles: &[&str], out: &Path) {
    let err = stderr(output);
    assert_eq!(exit_code(output), Some(code), "{err}");
    for needle in needles {
        assert!(err.contains(needle), "expected `{needle}` in: {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
    assert!(!out.exists(), "{} was written", out.display());
}

fn sha(path: &Path) -> Vec<u8> {
    std::fs::read(path).expect("read")
}

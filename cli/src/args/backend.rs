//! The flags that choose and configure the inference backend, shared by `pipeline run` and
//! `pipeline sql` (for `classify()`), so both read them the same way.

use std::path::PathBuf;

use batch_io::choice::Choice;
use clap::Args;
use flags::choice;
use runtime::inference::{BackendKind, BackendOptions, Device};

#[derive(Debug, Args)]
pub struct BackendFlags {
    /// Inference backend: `auto` is ONNX Runtime where its library is found (see
    /// --ort-library), else tract.
    #[arg(long, value_parser = choice::<BackendKind>(), default_value = BackendKind::Auto.name())]
    backend: BackendKind,
    #[arg(long, value_parser = choice::<Device>(), default_value = Device::Cpu.name())]
    device: Device,
    /// On CUDA, allow TensorFloat-32 matrix products: faster, but probabilities then differ
    /// from the CPU's (by up to about 5e-4 on the default model). Off by default.
    #[arg(long)]
    tf32: bool,
    /// ONNX Runtime shared library: a file, a directory holding it, or `python` for the onnxruntime
    /// package of the python3 on PATH (default: $ORT_DYLIB_PATH, then target/onnxruntime/).
    #[arg(long)]
    ort_library: Option<PathBuf>,
}

impl BackendFlags {
    pub fn options(&self) -> BackendOptions {
        BackendOptions {
            kind: self.backend,
            device: self.device,
            intra_op_threads: 1,
            ort_library: self.ort_library.clone(),
            ort_search_dirs: Vec::new(),
            tf32: self.tf32,
        }
    }
}

//! The default backend: tract, a pure-Rust ONNX runtime (CPU only).

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use tract_onnx::prelude::*;
use tract_onnx::tract_hir::infer::Factoid;

mod lstm;

/// The largest fixed dimension a graph input may declare (package graphs declare none).
const MAX_FIXED_DIMENSION: i64 = 1 << 24;

use super::{InferenceBackend, ModelInputs, ModelOutputs, OutputTensor};
use crate::package::tensor;

pub struct TractBackend {
    plan: Arc<TypedRunnableModel>,
    output_names: Vec<String>,
}

impl TractBackend {
    /// Loads and optimises the graph once; batches then run on shared read-only plans.
    pub fn open(graph: &Path) -> anyhow::Result<Self> {
        let plan = Self::optimized_model(graph)?
            .into_runnable()
            .with_context(|| format!("tract could not prepare the ONNX graph {}", graph.display()))?;
        let typed = plan.model();
        let output_names = typed
            .output_outlets()?
            .iter()
            .map(|outlet| {
                typed.outlet_label(*outlet).map(str::to_owned).unwrap_or_else(|| typed.node(outlet.node).name.clone())
            })
            .collect();
        Ok(Self { plan, output_names })
    }

    /// The package graph as tract runs it: parsed with our LSTM lowering and optimised.
    /// Public so that `examples/tract_profile.rs` times the same model the backend runs.
    pub fn optimized_model(graph: &Path) -> anyhow::Result<TypedModel> {
        Self::optimize(graph, onnx_with_fast_lstm())
    }

    /// tract panics on some malformed graphs (an input declared with 2^40 elements, say)
    /// instead of returning an error: that is bad input, so it is guarded into one.
    fn optimize(graph: &Path, onnx: tract_onnx::Onnx) -> anyhow::Result<TypedModel> {
        batch_io::panic_guard::guarded(
            || format!("the ONNX graph {}", graph.display()),
            || Self::optimize_unguarded(graph, onnx),
        )
    }

    fn optimize_unguarded(graph: &Path, onnx: tract_onnx::Onnx) -> anyhow::Result<TypedModel> {
        let context = || format!("tract could not load the ONNX graph {}", graph.display());
        let model = onnx.model_for_path(graph).with_context(context)?;
        // Batches are fed by position; a graph with other inputs is not a package graph.
        let inputs: Vec<&str> =
            model.input_outlets()?.iter().map(|outlet| model.node(outlet.node).name.as_str()).collect();
        anyhow::ensure!(
            inputs == [tensor::INPUT_IDS, tensor::ATTENTION_MASK],
            "the graph {} has inputs {inputs:?}; a model package graph takes [\"input_ids\", \"attention_mask\"]",
            graph.display()
        );
        // A package graph takes batches of any size; a fixed dimension beyond any batch (an
        // input declared with 2^40 elements) makes tract allocate it while optimising.
        for (index, name) in inputs.iter().enumerate() {
            let fact = model.input_fact(index)?;
            let fixed = fact.shape.dims().filter_map(|d| d.concretize()).filter_map(|d| d.to_i64().ok());
            if let Some(size) = fixed.into_iter().find(|&size| size > MAX_FIXED_DIMENSION) {
                anyhow::bail!(
                    "the graph {} declares its input `{name}` with a fixed dimension of {size}; a model package \
                     graph takes batches of any size and length (symbolic dimensions): export the model again",
                    graph.display()
                );
            }
        }
        // The graph's dimensions (batch, seq, ...) are never zero: a batch holds at least one
        // token. Saying so lets tract prove sizes it otherwise treats as unknown, and pick its
        // fast element-wise kernels inside the recurrent loops (about 14 % faster on the default
        // model).
        for symbol in model.symbols.all_symbols() {
            model.symbols.add_assertion(format!("{symbol}>=1"))?;
        }
        model.into_optimized().with_context(context)
    }
}

/// tract's ONNX parser with [`lstm::lstm`] in place of its own LSTM lowering.
fn onnx_with_fast_lstm() -> tract_onnx::Onnx {
    let mut onnx = tract_onnx::onnx();
    onnx.op_register.insert("LSTM", lstm::lstm);
    onnx
}

impl InferenceBackend for TractBackend {
    fn run(&self, inputs: &ModelInputs) -> anyhow::Result<ModelOutputs> {
        // `open` promised tract that no dimension is zero.
        anyhow::ensure!(
            inputs.shape.iter().all(|&d| d > 0),
            "tract cannot run an empty batch of shape {:?}: every dimension must be at least 1",
            inputs.shape
        );
        let ids = Tensor::from_shape(&inputs.shape, &inputs.input_ids)?;
        let mask = Tensor::from_shape(&inputs.shape, &inputs.attention_mask)?;
        let outputs = batch_io::panic_guard::guarded(
            || "the model graph".to_owned(),
            || self.plan.run(tvec!(ids.into_tvalue(), mask.into_tvalue())).context("tract failed to run the batch"),
        )?;
        let mut named = ModelOutputs::new();
        for (name, value) in self.output_names.iter().zip(outputs) {
            let value = value.cast_to::<f32>()?;
            named.insert(
                name.clone(),
                OutputTensor {
                    shape: value.shape().to_vec(),
                    data: value.try_as_plain_ram()?.as_slice::<f32>()?.to_vec(),
                },
            );
        }
        Ok(named)
    }

    fn output_names(&self) -> &[String] {
        &self.output_names
    }

    fn describe(&self) -> String {
        "tract".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use tract_onnx::tract_core::ops::scan::OptScan;

    use super::*;

    fn default_graph() -> std::path::PathBuf {
        test_support::repo_root().join("fixtures/default-model/model.onnx")
    }

    /// The op names inside the model's loops.
    fn loop_ops(model: &TypedModel) -> Vec<String> {
        let bodies = model.nodes().iter().filter_map(|node| node.op_as::<OptScan>());
        bodies.flat_map(|scan| scan.plan.model().nodes().iter().map(|node| node.op.name().to_string())).collect()
    }

    #[test]
    fn lstm_loops_run_the_batched_cell() {
        let ours = TractBackend::optimized_model(&default_graph()).unwrap();
        let stock = TractBackend::optimize(&default_graph(), tract_onnx::onnx()).unwrap();
        assert_eq!(loop_ops(&ours).iter().filter(|op| *op == "LstmCell").count(), 2, "{:?}", loop_ops(&ours));
        assert!(!loop_ops(&stock).iter().any(|op| op == "LstmCell"));
    }

    #[test]
    fn batched_lstm_cell_matches_tracts_own_lowering() {
        let run = |model: TypedModel| {
            let plan = model.into_runnable().unwrap();
            // Three reviews of different lengths, right-padded: the backward direction
            // depends on each one's own length.
            let reviews: [Vec<i64>; 3] =
                [(2..40).collect(), (5..12).rev().collect(), (0..25).map(|i| 3 + (i * 37) % 500).collect()];
            let inputs = ModelInputs::right_padded(&reviews, 0);
            let ids = Tensor::from_shape(&inputs.shape, &inputs.input_ids).unwrap();
            let mask = Tensor::from_shape(&inputs.shape, &inputs.attention_mask).unwrap();
            let outputs = plan.run(tvec!(ids.into_tvalue(), mask.into_tvalue())).unwrap();
            outputs
                .iter()
                .map(|value| {
                    value.cast_to::<f32>().unwrap().try_as_plain_ram().unwrap().as_slice::<f32>().unwrap().to_vec()
                })
                .collect::<Vec<_>>()
        };
        let ours = run(TractBackend::optimized_model(&default_graph()).unwrap());
        let stock = run(TractBackend::optimize(&default_graph(), tract_onnx::onnx()).unwrap());
        assert_eq!(ours.len(), stock.len());
        for (ours, stock) in ours.iter().zip(&stock) {
            assert_eq!(ours.len(), stock.len());
            let worst = ours.iter().zip(stock).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
            assert!(worst < 1e-5, "outputs differ by up to {worst}");
        }
    }
}

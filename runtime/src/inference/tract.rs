//! The default backend: tract, a pure-Rust ONNX runtime (CPU only).

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use tract_onnx::prelude::*;

use super::{InferenceBackend, ModelInputs, ModelOutputs, OutputTensor};

pub struct TractBackend {
    plan: Arc<TypedRunnableModel>,
    output_names: Vec<String>,
}

impl TractBackend {
    /// Loads and optimises the graph once; batches then run on shared read-only plans.
    pub fn open(graph: &Path) -> anyhow::Result<Self> {
        let context = || format!("tract could not load the ONNX graph {}", graph.display());
        let model = tract_onnx::onnx().model_for_path(graph).with_context(context)?;
        // Batches are fed by position; a graph with other inputs is not a package graph.
        let inputs: Vec<&str> =
            model.input_outlets()?.iter().map(|outlet| model.node(outlet.node).name.as_str()).collect();
        anyhow::ensure!(
            inputs == ["input_ids", "attention_mask"],
            "the graph {} has inputs {inputs:?}; a model package graph takes [\"input_ids\", \"attention_mask\"]",
            graph.display()
        );
        let plan = model.into_optimized().with_context(context)?.into_runnable().with_context(context)?;
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
}

impl InferenceBackend for TractBackend {
    fn run(&self, inputs: &ModelInputs) -> anyhow::Result<ModelOutputs> {
        let ids = Tensor::from_shape(&inputs.shape, &inputs.input_ids)?;
        let mask = Tensor::from_shape(&inputs.shape, &inputs.attention_mask)?;
        let outputs =
            self.plan.run(tvec!(ids.into_tvalue(), mask.into_tvalue())).context("tract failed to run the batch")?;
        let mut named = ModelOutputs::new();
        for (name, value) in self.output_names.iter().zip(outputs) {
            let value = value.cast_to::<f32>()?;
            named.insert(
                name.clone(),
                OutputTensor {
                    shape: value.shape().to_vec(),
                    data: value.to_plain_array_view::<f32>()?.iter().copied().collect(),
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

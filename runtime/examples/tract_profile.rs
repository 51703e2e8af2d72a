//! Where tract spends its time on a package graph, node by node.
//!
//!   $CARGO_TARGET_DIR/release/examples/tract_profile [MODEL.onnx] [BATCH] [TOKENS]
//!
//! Runs the graph as the tract backend optimises it on a synthetic full batch
//! (default: the default model, 64 reviews of 233 tokens, IMDB test's mean length) and
//! prints the time per batch and the nodes that took most of it. A loop (a recurrent
//! layer) is one node; its body is listed once, under the first loop.
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use runtime::inference::TractBackend;
use tract_onnx::prelude::*;
use tract_onnx::tract_core::ops::scan::OptScan;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let graph = PathBuf::from(args.next().unwrap_or_else(|| "fixtures/default-model/model.onnx".to_owned()));
    let batch: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(64);
    let tokens: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(233);
    let plan = TractBackend::optimized_model(&graph)?.into_runnable()?;
    let model = plan.model();
    if let Some(scan) = model.nodes().iter().find_map(|node| node.op_as::<OptScan>()) {
        for node in scan.plan.model().nodes() {
            println!("loop body: {:<50} {}", node.name, node.op.name());
        }
    }

    // Token ids spread over the low end of any vocabulary; every position is a real token.
    let ids: Vec<i64> = (0..batch * tokens).map(|i| ((i * 7919) % 1000 + 2) as i64).collect();
    let mask = vec![1i64; batch * tokens];
    let runs = 20;
    let mut busy: HashMap<usize, Duration> = HashMap::new();
    let mut state = plan.spawn()?;
    let start = Instant::now();
    for _ in 0..runs {
        let inputs = tvec!(
            Tensor::from_shape(&[batch, tokens], &ids)?.into_tvalue(),
            Tensor::from_shape(&[batch, tokens], &mask)?.into_tvalue()
        );
        state.run_plan_with_eval(inputs, |context, op_state, node, inputs| {
            let started = Instant::now();
            let outputs = tract_onnx::tract_core::plan::eval(context, op_state, node, inputs);
            *busy.entry(node.id).or_default() += started.elapsed();
            outputs
        })?;
    }
    let total = start.elapsed().as_secs_f64();
    println!("{:.1} ms per [{batch}, {tokens}] batch", total * 1000.0 / runs as f64);
    let mut nodes: Vec<(usize, Duration)> = busy.into_iter().collect();
    nodes.sort_by_key(|node| std::cmp::Reverse(node.1));
    for (id, time) in nodes.iter().take(25) {
        let node = model.node(*id);
        let seconds = time.as_secs_f64();
        println!(
            "{:7.2} ms {:5.1} %  {:<60} {} -> {:?}",
            seconds * 1000.0 / runs as f64,
            100.0 * seconds / total,
            node.name,
            node.op.name(),
            model.outlet_fact(OutletId::new(node.id, 0))?
        );
    }
    Ok(())
}

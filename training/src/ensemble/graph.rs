//! One ONNX graph from several packages' graphs: each member's nodes and weights under its own
//! prefix (`member1.…`), all reading the same `input_ids` and `attention_mask`, and a head that
//! sums the members' weighted logits.
//!
//! Outputs, in the contract's order: `probs`, the softmax of `Σ wₘ·logitsₘ`; `attention`, the
//! members' attention rows one after another; `embedding`, the members' embeddings side by
//! side; `contribution`, `Σ wₘ·contributionₘ` when every member explains itself, so each
//! token's push stays its exact share of the combined centred score (each member's pushes are
//! exact for its own logits, and the sum is linear).

use std::collections::HashSet;

use anyhow::{Context, bail};
use runtime::package::tensor;
use tract_onnx::pb;

use crate::models::{declare_contribution, declare_outputs};
use crate::onnx::{Dim, ElemType, GraphBuilder, OPSET, Value};

/// A member's graph, its weight in the sum, what its manifest says of its outputs, and how
/// messages name it.
pub struct MemberGraph<'a> {
    pub name: &'a str,
    pub model: &'a pb::ModelProto,
    pub weight: f32,
    pub classes: usize,
    pub attention_heads: Option<usize>,
    pub embedding_dim: usize,
}

/// The values of one member's renamed graph that the head reads.
struct Renamed {
    graph: pb::GraphProto,
    logits: Value,
    contribution: Option<Value>,
    attention: Option<Value>,
    embedding: Value,
}

/// The combined model, and how many float32 values its weights hold; `metadata` becomes its
/// `metadata_props`.
pub fn combine(members: &[MemberGraph<'_>], metadata: &[(&str, String)]) -> anyhow::Result<(pb::ModelProto, u64)> {
    let classes = members.first().context("an ensemble needs members")?.classes;
    let mut g = GraphBuilder::new("ensemble");
    let dims = [Dim::Named("batch"), Dim::Named("seq")];
    g.input(tensor::INPUT_IDS, ElemType::Int64, &dims);
    g.input(tensor::ATTENTION_MASK, ElemType::Int64, &dims);
    // The members first: ONNX lists a node after the nodes it reads.
    let mut renamed = Vec::with_capacity(members.len());
    for (index, member) in members.iter().enumerate() {
        let wanted = [pb::OperatorSetIdProto { domain: String::new(), version: OPSET }];
        if member.model.opset_import != wanted {
            bail!("{} imports other ONNX operator sets than opset {OPSET}; export it with this build", member.name);
        }
        let mut member_values = rename(member, &format!("member{}.", index + 1))?;
        g.absorb(std::mem::take(&mut member_values.graph));
        renamed.push(member_values);
    }

    let weights: Vec<Value> =
        members.iter().enumerate().map(|(index, m)| g.scalar_f32(&format!("weight_{}", index + 1), m.weight)).collect();
    let logits = weighted_sum(&mut g, renamed.iter().map(|r| &r.logits), &weights);
    let probs = g.softmax(&logits, -1);
    let attention: Vec<(&Value, usize)> =
        renamed.iter().zip(members).filter_map(|(r, m)| Some((r.attention.as_ref()?, m.attention_heads?))).collect();
    let attention = (!attention.is_empty()).then(|| {
        let parts: Vec<&Value> = attention.iter().map(|(value, _)| *value).collect();
        (g.concat(&parts, 1), attention.iter().map(|(_, rows)| rows).sum::<usize>())
    });
    let embeddings: Vec<&Value> = renamed.iter().map(|r| &r.embedding).collect();
    let embedding = g.concat(&embeddings, 1);
    let width = members.iter().map(|m| m.embedding_dim).sum();
    declare_outputs(&mut g, (&probs, classes), attention.as_ref().map(|(v, rows)| (v, *rows)), (&embedding, width));
    let contributions: Option<Vec<&Value>> = renamed.iter().map(|r| r.contribution.as_ref()).collect();
    if let Some(contributions) = contributions {
        let summed = weighted_sum(&mut g, contributions.into_iter(), &weights);
        declare_contribution(&mut g, &summed, classes);
    }
    // Each member's own softmax and output copies: nothing reads them now.
    g.drop_unused();
    let floats = g.float_values();
    Ok((g.into_model(metadata), floats))
}

/// `Σ wₘ·valuesₘ`, one value per member in the members' order.
fn weighted_sum<'v>(g: &mut GraphBuilder, values: impl Iterator<Item = &'v Value>, weights: &[Value]) -> Value {
    let mut total: Option<Value> = None;
    for (value, weight) in values.zip(weights) {
        let weighted = g.mul(value, weight);
        total = Some(match total {
            Some(sum) => g.add(&sum, &weighted),
            None => weighted,
        });
    }
    total.unwrap_or_default()
}

/// The member's graph with every name but the inputs' under `prefix`, and the values the head
/// reads: the logits under its softmax, and its explanation outputs.
fn rename(member: &MemberGraph<'_>, prefix: &str) -> anyhow::Result<Renamed> {
    let mut graph = member.model.graph.clone().with_context(|| format!("{} holds no graph", member.name))?;
    let inputs: HashSet<String> = graph.input.iter().map(|i| i.name.clone()).collect();
    let expected: HashSet<String> = [tensor::INPUT_IDS, tensor::ATTENTION_MASK].map(str::to_owned).into();
    if inputs != expected {
        bail!(
            "{}'s graph takes inputs {:?}; an ensemble's members take `input_ids` and `attention_mask`",
            member.name,
            sorted(&inputs)
        );
    }
    if graph.node.iter().flat_map(|n| &n.attribute).any(|a| a.g.is_some() || !a.graphs.is_empty()) {
        bail!("{}'s graph has subgraphs (If, Loop); pipeline train writes none, so it cannot be combined", member.name);
    }
    let renamed = |name: &str| {
        if name.is_empty() || inputs.contains(name) { name.to_owned() } else { format!("{prefix}{name}") }
    };
    for node in &mut graph.node {
        node.name = renamed(&node.name);
        node.input.iter_mut().chain(node.output.iter_mut()).for_each(|name| *name = renamed(name));
    }
    graph.initializer.iter_mut().for_each(|tensor| tensor.name = renamed(&tensor.name));
    graph.value_info.iter_mut().for_each(|info| info.name = renamed(&info.name));
    let output = |name: &str| graph.output.iter().any(|o| o.name == name).then(|| renamed(name));

    let probs = output(tensor::PROBS).with_context(|| format!("{}'s graph has no `probs` output", member.name))?;
    let softmax =
        producer_through_identities(&graph, &probs).filter(|node| node.op_type == "Softmax").with_context(|| {
            format!("{}'s `probs` do not come from a softmax; a multi-label model cannot join", member.name)
        })?;
    let logits = softmax.input.first().cloned().context("a softmax without an input")?;
    let embedding = output(tensor::EMBEDDING).with_context(|| format!("{}'s graph has no `embedding`", member.name))?;
    let (contribution, attention) = (output(tensor::CONTRIBUTION), output(tensor::ATTENTION));
    graph.input.clear();
    graph.output.clear();
    Ok(Renamed { graph, logits, contribution, attention, embedding })
}

/// The node that computes `value`, looking through `Identity` nodes.
fn producer_through_identities<'g>(graph: &'g pb::GraphProto, value: &str) -> Option<&'g pb::NodeProto> {
    let mut value = value.to_owned();
    for _ in 0..graph.node.len() {
        let node = graph.node.iter().find(|n| n.output.contains(&value))?;
        if node.op_type != "Identity" {
            return Some(node);
        }
        value = node.input.first()?.clone();
    }
    None
}

fn sorted(names: &HashSet<String>) -> Vec<&str> {
    let mut names: Vec<&str> = names.iter().map(String::as_str).collect();
    names.sort_unstable();
    names
}

//! One ONNX graph from several packages' graphs: each member's nodes and weights under its own
//! prefix (`member1.…`), all reading the same `input_ids` and `attention_mask`, and a head that
//! sums the members' weighted logits.
//!
//! Outputs: `probs`, the softmax of `Σ wₘ·logitsₘ`; `contribution`, `Σ wₘ·contributionₘ` when
//! every member explains itself, so each token's push stays its exact share of the combined
//! centred score (each member's pushes are exact for its own logits, and the sum is linear);
//! `attention`, the members' attention rows one after another; `embedding`, the members'
//! embeddings side by side.

use std::collections::HashSet;

use anyhow::{Context, bail};
use runtime::package::tensor;
use tract_onnx::pb;

const FLOAT: i32 = pb::tensor_proto::DataType::Float as i32;

/// A member's graph, its weight in the sum, and how messages name it.
pub struct MemberGraph<'a> {
    pub name: &'a str,
    pub model: &'a pb::ModelProto,
    pub weight: f32,
}

/// What one member's renamed graph gives the head.
struct Renamed {
    graph: pb::GraphProto,
    logits: String,
    contribution: Option<String>,
    attention: Option<(String, pb::ValueInfoProto)>,
    embedding: (String, pb::ValueInfoProto),
}

/// The combined model; `metadata` becomes its `metadata_props`.
pub fn combine(members: &[MemberGraph<'_>], metadata: &[(&str, String)]) -> anyhow::Result<pb::ModelProto> {
    let first = members.first().context("an ensemble needs members")?;
    let first_graph = first.model.graph.as_ref().with_context(|| format!("{} holds no graph", first.name))?;
    let mut graph =
        pb::GraphProto { name: "ensemble".to_owned(), input: first_graph.input.clone(), ..Default::default() };
    let output_info = |name: &str| {
        first_graph.output.iter().find(|o| o.name == name).cloned().with_context(|| {
            format!("{}'s graph has no `{name}` output; was it written by pipeline train?", first.name)
        })
    };
    let (probs_info, embedding_info) = (output_info(tensor::PROBS)?, output_info(tensor::EMBEDDING)?);

    let mut renamed = Vec::with_capacity(members.len());
    for (index, member) in members.iter().enumerate() {
        if member.model.opset_import != first.model.opset_import {
            bail!("{} imports other ONNX operator sets than {}; export both with this build", member.name, first.name);
        }
        renamed.push(rename(member, &format!("member{}.", index + 1))?);
    }

    let mut head = Head { graph: &mut graph, weights: Vec::new() };
    for (index, member) in members.iter().enumerate() {
        let weight = head.weight(&format!("ensemble.weight_{}", index + 1), member.weight);
        head.weights.push(weight);
    }
    let logits: Vec<&str> = renamed.iter().map(|r| r.logits.as_str()).collect();
    let summed = head.weighted_sum("logits", &logits);
    let probs = head.node("Softmax", "ensemble.softmax", &[&summed], vec![int_attribute("axis", -1)]);
    head.output(&probs, tensor::PROBS);
    let mut outputs = vec![probs_info];

    let contributions: Option<Vec<&str>> = renamed.iter().map(|r| r.contribution.as_deref()).collect();
    if let Some(contributions) = contributions {
        let summed = head.weighted_sum("contribution", &contributions);
        head.output(&summed, tensor::CONTRIBUTION);
        outputs.push(output_info(tensor::CONTRIBUTION)?);
    }

    let attention: Vec<&(String, pb::ValueInfoProto)> = renamed.iter().filter_map(|r| r.attention.as_ref()).collect();
    if let Some((_, info)) = attention.first() {
        let rows: Option<i64> = attention.iter().map(|(_, info)| fixed_dim(info, 1)).sum();
        let rows = rows.context("a member's `attention` output has no fixed number of rows")?;
        let names: Vec<&str> = attention.iter().map(|(name, _)| name.as_str()).collect();
        let joined = head.node("Concat", "ensemble.attention", &names, vec![int_attribute("axis", 1)]);
        head.output(&joined, tensor::ATTENTION);
        outputs.push(with_fixed_dim(info, tensor::ATTENTION, 1, rows)?);
    }

    let width: Option<i64> = renamed.iter().map(|r| fixed_dim(&r.embedding.1, 1)).sum();
    let width = width.context("a member's `embedding` output has no fixed width")?;
    let embeddings: Vec<&str> = renamed.iter().map(|r| r.embedding.0.as_str()).collect();
    let joined = head.node("Concat", "ensemble.embedding", &embeddings, vec![int_attribute("axis", 1)]);
    head.output(&joined, tensor::EMBEDDING);
    outputs.push(with_fixed_dim(&embedding_info, tensor::EMBEDDING, 1, width)?);

    for member in renamed {
        graph.node.extend(member.graph.node);
        graph.initializer.extend(member.graph.initializer);
        graph.value_info.extend(member.graph.value_info);
    }
    graph.output = outputs;
    drop_unused(&mut graph);
    Ok(pb::ModelProto {
        ir_version: members.iter().map(|m| m.model.ir_version).max().unwrap_or(first.model.ir_version),
        producer_name: "pipeline combine".to_owned(),
        producer_version: env!("CARGO_PKG_VERSION").to_owned(),
        opset_import: first.model.opset_import.clone(),
        graph: Some(graph),
        metadata_props: metadata
            .iter()
            .map(|(key, value)| pb::StringStringEntryProto { key: (*key).to_owned(), value: value.clone() })
            .collect(),
        ..Default::default()
    })
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
    let output = |name: &str| graph.output.iter().find(|o| o.name == name).map(|info| (renamed(name), info.clone()));

    let (probs, _) = output(tensor::PROBS).with_context(|| format!("{}'s graph has no `probs` output", member.name))?;
    let softmax =
        producer_through_identities(&graph, &probs).filter(|node| node.op_type == "Softmax").with_context(|| {
            format!("{}'s `probs` do not come from a softmax; a multi-label model cannot join", member.name)
        })?;
    let logits = softmax.input.first().cloned().context("a softmax without an input")?;
    let embedding = output(tensor::EMBEDDING).with_context(|| format!("{}'s graph has no `embedding`", member.name))?;
    let contribution = output(tensor::CONTRIBUTION).map(|(name, _)| name);
    let attention = output(tensor::ATTENTION);
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

/// The ensemble's own nodes, named `ensemble.…`.
struct Head<'g> {
    graph: &'g mut pb::GraphProto,
    weights: Vec<String>,
}

impl Head<'_> {
    fn weight(&mut self, name: &str, value: f32) -> String {
        self.graph.initializer.push(pb::TensorProto {
            name: name.to_owned(),
            data_type: FLOAT,
            raw_data: value.to_le_bytes().to_vec(),
            ..Default::default()
        });
        name.to_owned()
    }

    fn node(&mut self, op_type: &str, name: &str, inputs: &[&str], attribute: Vec<pb::AttributeProto>) -> String {
        self.graph.node.push(pb::NodeProto {
            name: name.to_owned(),
            op_type: op_type.to_owned(),
            input: inputs.iter().map(|i| (*i).to_owned()).collect(),
            output: vec![name.to_owned()],
            attribute,
            ..Default::default()
        });
        name.to_owned()
    }

    /// `Σ wₘ·valuesₘ`, one value per member in the members' order.
    fn weighted_sum(&mut self, what: &str, values: &[&str]) -> String {
        let weighted: Vec<String> = values
            .iter()
            .zip(self.weights.clone())
            .enumerate()
            .map(|(index, (value, weight))| {
                self.node("Mul", &format!("ensemble.{what}_{}", index + 1), &[value, &weight], vec![])
            })
            .collect();
        let weighted: Vec<&str> = weighted.iter().map(String::as_str).collect();
        self.node("Sum", &format!("ensemble.{what}"), &weighted, vec![])
    }

    fn output(&mut self, value: &str, name: &str) {
        self.node("Identity", name, &[value], vec![]);
    }
}

fn int_attribute(name: &str, value: i64) -> pb::AttributeProto {
    pb::AttributeProto {
        name: name.to_owned(),
        r#type: pb::attribute_proto::AttributeType::Int as i32,
        i: value,
        ..Default::default()
    }
}

fn dims(info: &pb::ValueInfoProto) -> Option<&Vec<pb::tensor_shape_proto::Dimension>> {
    let pb::type_proto::Value::TensorType(tensor) = info.r#type.as_ref()?.value.as_ref()?;
    Some(&tensor.shape.as_ref()?.dim)
}

fn fixed_dim(info: &pb::ValueInfoProto, axis: usize) -> Option<i64> {
    match dims(info)?.get(axis)?.value.as_ref()? {
        pb::tensor_shape_proto::dimension::Value::DimValue(n) => Some(*n),
        pb::tensor_shape_proto::dimension::Value::DimParam(_) => None,
    }
}

/// `info` renamed `name`, with dimension `axis` fixed at `size`.
fn with_fixed_dim(info: &pb::ValueInfoProto, name: &str, axis: usize, size: i64) -> anyhow::Result<pb::ValueInfoProto> {
    let mut info = info.clone();
    info.name = name.to_owned();
    let dim = match info.r#type.as_mut().and_then(|t| t.value.as_mut()) {
        Some(pb::type_proto::Value::TensorType(tensor)) => tensor.shape.as_mut().and_then(|s| s.dim.get_mut(axis)),
        _ => None,
    };
    let dim = dim.with_context(|| format!("output `{name}` has no dimension {axis}"))?;
    dim.value = Some(pb::tensor_shape_proto::dimension::Value::DimValue(size));
    Ok(info)
}

/// Removes the nodes nothing reads (each member's own softmax and output copies) and the
/// weights only they read, so the graph holds what it computes.
fn drop_unused(graph: &mut pb::GraphProto) {
    loop {
        let read: HashSet<&str> = graph
            .node
            .iter()
            .flat_map(|n| n.input.iter().map(String::as_str))
            .chain(graph.output.iter().map(|o| o.name.as_str()))
            .collect();
        let unused: HashSet<usize> = graph
            .node
            .iter()
            .enumerate()
            .filter(|(_, n)| n.output.iter().all(|o| !read.contains(o.as_str())))
            .map(|(i, _)| i)
            .collect();
        if unused.is_empty() {
            break;
        }
        let mut index = 0;
        graph.node.retain(|_| {
            index += 1;
            !unused.contains(&(index - 1))
        });
    }
    let read: HashSet<String> = graph.node.iter().flat_map(|n| n.input.iter().cloned()).collect();
    graph.initializer.retain(|tensor| read.contains(&tensor.name));
    let produced: HashSet<String> = graph.node.iter().flat_map(|n| n.output.iter().cloned()).collect();
    graph.value_info.retain(|info| produced.contains(&info.name));
}

fn sorted(names: &HashSet<String>) -> Vec<&str> {
    let mut names: Vec<&str> = names.iter().map(String::as_str).collect();
    names.sort_unstable();
    names
}

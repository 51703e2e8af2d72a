//! A small ONNX graph builder over the protobuf types tract ships (`tract_onnx::pb`).
//!
//! Layers emit nodes through its typed ops (`ops.rs`). Every node, value and weight is named
//! by the layer it comes from (`san.attention.softmax`, `san.attention.ws1.weight`): layers
//! open a scope with [`GraphBuilder::scoped`], so a parity failure or a profile points at a
//! layer. It stores weights as initializers and serialises the finished model.

use std::collections::{HashMap, HashSet};

use tract_onnx::pb;

/// ONNX opset the graphs target (ARCHITECTURE.md, "The model package").
pub const OPSET: i64 = 17;
const IR_VERSION: i64 = 8;

const FLOAT: i32 = pb::tensor_proto::DataType::Float as i32;
const INT64: i32 = pb::tensor_proto::DataType::Int64 as i32;

/// A named value flowing through the graph.
pub type Value = String;

/// An attribute on a node; only the typed ops in `ops.rs` make them.
pub(super) enum Attr {
    Int(i64),
    Ints(Vec<i64>),
    Str(String),
    /// A one-element float32 tensor (e.g. `ConstantOfShape`'s `value`).
    FloatTensor(f32),
}

pub struct GraphBuilder {
    graph: pb::GraphProto,
    /// The layers we are inside, outermost first; the graph's name is the first.
    scope: Vec<String>,
    /// How often each full name was asked for, so that repeats get `_2`, `_3`, ….
    names: HashMap<String, usize>,
    /// A multi-label graph: each label's probability is its own sigmoid.
    independent_labels: bool,
}

/// Element type of a graph input or output.
#[derive(Clone, Copy)]
pub enum ElemType {
    Float,
    Int64,
}

impl ElemType {
    pub(super) fn code(self) -> i32 {
        match self {
            ElemType::Float => FLOAT,
            ElemType::Int64 => INT64,
        }
    }
}

/// A dimension of a graph input or output: fixed, or named and dynamic (`batch`, `seq`).
pub enum Dim {
    Fixed(usize),
    Named(&'static str),
}

impl GraphBuilder {
    pub fn new(name: &str) -> Self {
        Self {
            graph: pb::GraphProto { name: name.to_owned(), ..Default::default() },
            scope: vec![name.to_owned()],
            names: HashMap::new(),
            independent_labels: false,
        }
    }

    /// A multi-label graph: [`Self::probabilities`] emits a sigmoid per label, and heads
    /// explain each label's own logit rather than its share of a softmax.
    pub fn multi_label(mut self, multi_label: bool) -> Self {
        self.independent_labels = multi_label;
        self
    }

    pub fn independent_labels(&self) -> bool {
        self.independent_labels
    }

    /// Runs `emit` with `layer` appended to the names of everything it adds.
    pub fn scoped<R>(&mut self, layer: &str, emit: impl FnOnce(&mut Self) -> R) -> R {
        self.scope.push(layer.to_owned());
        let result = emit(self);
        self.scope.pop();
        result
    }

    /// `scope.hint`, made unique in the graph.
    fn fresh(&mut self, hint: &str) -> String {
        let name = format!("{}.{hint}", self.scope.join("."));
        let seen = self.names.entry(name.clone()).or_insert(0);
        *seen += 1;
        if *seen == 1 { name } else { format!("{name}_{seen}") }
    }

    pub fn input(&mut self, name: &str, elem: ElemType, dims: &[Dim]) -> Value {
        self.graph.input.push(value_info(name, elem, dims));
        name.to_owned()
    }

    /// Declares `value` as a graph output called `name` (through an Identity node).
    pub fn output(&mut self, value: &Value, name: &str, elem: ElemType, dims: &[Dim]) {
        self.graph.node.push(node(
            "Identity",
            vec![value.clone()],
            vec![name.to_owned()],
            format!("{name}_out"),
            vec![],
        ));
        self.graph.output.push(value_info(name, elem, dims));
    }

    /// How many float32 values the graph's initializers hold: its weights as exported (the
    /// fast tier folds its table into class scores and averages its members, so these are
    /// far fewer than the parameters it trained).
    pub fn float_values(&self) -> u64 {
        let floats = self.graph.initializer.iter().filter(|tensor| tensor.data_type == FLOAT);
        floats.map(|tensor| tensor.raw_data.len() as u64 / 4).sum()
    }

    /// Adds another graph's nodes, weights and value types as they are (their names must not
    /// clash with this graph's); its inputs and outputs are not this graph's.
    pub fn absorb(&mut self, graph: pb::GraphProto) {
        self.graph.node.extend(graph.node);
        self.graph.initializer.extend(graph.initializer);
        self.graph.value_info.extend(graph.value_info);
    }

    /// Removes the nodes whose outputs nothing reads (neither a node nor a graph output), and
    /// then the weights and value types nothing refers to.
    pub fn drop_unused(&mut self) {
        let graph = &mut self.graph;
        loop {
            let read: HashSet<&str> = graph
                .node
                .iter()
                .flat_map(|n| n.input.iter().map(String::as_str))
                .chain(graph.output.iter().map(|o| o.name.as_str()))
                .collect();
            let used: Vec<bool> =
                graph.node.iter().map(|n| n.output.iter().any(|o| read.contains(o.as_str()))).collect();
            if used.iter().all(|&u| u) {
                break;
            }
            let mut used = used.into_iter();
            graph.node.retain(|_| used.next().unwrap_or(true));
        }
        let read: HashSet<&String> = graph.node.iter().flat_map(|n| &n.input).collect();
        graph.initializer.retain(|tensor| read.contains(&tensor.name));
        let produced: HashSet<&String> = graph.node.iter().flat_map(|n| &n.output).collect();
        graph.value_info.retain(|info| produced.contains(&info.name));
    }

    /// A float32 weight or constant, stored as an initializer.
    pub fn weight(&mut self, hint: &str, dims: &[usize], data: &[f32]) -> Value {
        assert_eq!(dims.iter().product::<usize>(), data.len(), "weight {hint}: shape does not match data");
        self.initializer(hint, dims, FLOAT, data.iter().flat_map(|v| v.to_le_bytes()).collect())
    }

    pub fn scalar_f32(&mut self, hint: &str, value: f32) -> Value {
        self.weight(hint, &[], &[value])
    }

    /// An int64 constant of the given shape (`&[]` for a scalar).
    pub fn ints(&mut self, hint: &str, dims: &[usize], data: &[i64]) -> Value {
        assert_eq!(dims.iter().product::<usize>(), data.len(), "constant {hint}: shape does not match data");
        self.initializer(hint, dims, INT64, data.iter().flat_map(|v| v.to_le_bytes()).collect())
    }

    fn initializer(&mut self, hint: &str, dims: &[usize], data_type: i32, raw_data: Vec<u8>) -> Value {
        let name = self.fresh(hint);
        self.graph.initializer.push(pb::TensorProto {
            name: name.clone(),
            dims: dims.iter().map(|&d| d as i64).collect(),
            data_type,
            raw_data,
            ..Default::default()
        });
        name
    }

    /// Adds a node with one output, named after the node, and returns that output.
    pub(super) fn node(&mut self, op_type: &'static str, inputs: &[&Value], attrs: Vec<(&'static str, Attr)>) -> Value {
        let name = self.fresh(&snake_case(op_type));
        let inputs = inputs.iter().map(|v| (*v).clone()).collect();
        self.graph.node.push(node(op_type, inputs, vec![name.clone()], name.clone(), attrs));
        name
    }

    pub fn into_model(self, metadata: &[(&str, String)]) -> pb::ModelProto {
        pb::ModelProto {
            ir_version: IR_VERSION,
            producer_name: "export".to_owned(),
            producer_version: env!("CARGO_PKG_VERSION").to_owned(),
            opset_import: vec![pb::OperatorSetIdProto { domain: String::new(), version: OPSET }],
            graph: Some(self.graph),
            metadata_props: metadata
                .iter()
                .map(|(key, value)| pb::StringStringEntryProto { key: (*key).to_owned(), value: value.clone() })
                .collect(),
            ..Default::default()
        }
    }
}

/// `MatMul` → `matmul`, `NonZero` → `non_zero`, `ScatterND` → `scatter_nd`.
fn snake_case(op_type: &str) -> String {
    let mut out = String::new();
    let mut previous_lower = false;
    for c in op_type.chars() {
        if c.is_ascii_uppercase() && previous_lower {
            out.push('_');
        }
        previous_lower = c.is_ascii_lowercase();
        out.push(c.to_ascii_lowercase());
    }
    out.replace("mat_mul", "matmul")
}

fn node(
    op_type: &str,
    input: Vec<String>,
    output: Vec<String>,
    name: String,
    attrs: Vec<(&str, Attr)>,
) -> pb::NodeProto {
    use pb::attribute_proto::AttributeType;
    let attribute = attrs
        .into_iter()
        .map(|(name, attr)| {
            let mut proto = pb::AttributeProto { name: name.to_owned(), ..Default::default() };
            match attr {
                Attr::Int(i) => {
                    proto.r#type = AttributeType::Int as i32;
                    proto.i = i;
                }
                Attr::Ints(ints) => {
                    proto.r#type = AttributeType::Ints as i32;
                    proto.ints = ints;
                }
                Attr::Str(s) => {
                    proto.r#type = AttributeType::String as i32;
                    proto.s = s.into_bytes();
                }
                Attr::FloatTensor(value) => {
                    proto.r#type = AttributeType::Tensor as i32;
                    proto.t = Some(pb::TensorProto {
                        dims: vec![1],
                        data_type: FLOAT,
                        raw_data: value.to_le_bytes().to_vec(),
                        ..Default::default()
                    });
                }
            }
            proto
        })
        .collect();
    pb::NodeProto { input, output, name, op_type: op_type.to_owned(), attribute, ..Default::default() }
}

fn value_info(name: &str, elem: ElemType, dims: &[Dim]) -> pb::ValueInfoProto {
    use pb::tensor_shape_proto::{Dimension, dimension};
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: Some(match d {
                Dim::Fixed(n) => dimension::Value::DimValue(*n as i64),
                Dim::Named(s) => dimension::Value::DimParam((*s).to_owned()),
            }),
            ..Default::default()
        })
        .collect();
    pb::ValueInfoProto {
        name: name.to_owned(),
        r#type: Some(pb::TypeProto {
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                elem_type: elem.code(),
                shape: Some(pb::TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_layers_and_repeats_are_numbered() {
        let mut g = GraphBuilder::new("san");
        let x = g.input("input_ids", ElemType::Int64, &[Dim::Named("batch")]);
        let first = g.scoped("attention", |g| g.softmax(&x, -1));
        let second = g.scoped("attention", |g| g.softmax(&x, -1));
        let weight = g.scoped("head", |g| g.scoped("dense", |g| g.weight("weight", &[1], &[0.5])));
        let nonzero = g.non_zero(&x);
        assert_eq!(first, "san.attention.softmax");
        assert_eq!(second, "san.attention.softmax_2");
        assert_eq!(weight, "san.head.dense.weight");
        assert_eq!(nonzero, "san.non_zero");
        assert_eq!(snake_case("ScatterND"), "scatter_nd");
        assert_eq!(snake_case("ConstantOfShape"), "constant_of_shape");
    }
}

//! ONNX emission: the graph builder the layers write through.

mod builder;

pub use builder::{Attr, Dim, ElemType, GraphBuilder, OPSET, Value};

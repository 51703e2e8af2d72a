//! ONNX emission: the graph builder the layers write through, and its typed ops.

mod builder;
mod ops;

pub use builder::{Dim, ElemType, GraphBuilder, OPSET, Value};
pub use ops::RecurrentCell;

//! One method per ONNX op the layers use, so that op names, attribute names and attribute
//! types are checked by the compiler: `g.transpose(&x, &[0, 2, 1])`, not
//! `g.op("Transpose", &[&x], vec![("perm", Attr::Ints(vec![0, 2, 1]))])`.
//!
//! Semantics are opset 17's (see [`super::OPSET`]): `Unsqueeze`, `Squeeze` and `ReduceSum` take
//! their axes as an input, `ReduceMean` and `ReduceMax` still as an attribute.

use super::builder::{Attr, ElemType, GraphBuilder, Value};

/// The ONNX recurrent cells the layers emit, as forward-running single-direction nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecurrentCell {
    /// Gates i, o, f, c; states `initial_h` and `initial_c`.
    Lstm,
    /// Gates z, r, h with `linear_before_reset = 1` (the reset gate applied after the
    /// recurrent matmul, as burn's GRU does); state `initial_h`.
    Gru,
}

impl RecurrentCell {
    /// Gate blocks in W, R and each half of B.
    pub fn gates(self) -> usize {
        match self {
            Self::Lstm => 4,
            Self::Gru => 3,
        }
    }
}

macro_rules! elementwise {
    ($($(#[$doc:meta])* $method:ident => $op:literal;)*) => {$(
        $(#[$doc])*
        pub fn $method(&mut self, a: &Value, b: &Value) -> Value {
            self.node($op, &[a, b], vec![])
        }
    )*};
}

macro_rules! unary {
    ($($(#[$doc:meta])* $method:ident => $op:literal;)*) => {$(
        $(#[$doc])*
        pub fn $method(&mut self, x: &Value) -> Value {
            self.node($op, &[x], vec![])
        }
    )*};
}

impl GraphBuilder {
    elementwise! {
        add => "Add";
        sub => "Sub";
        mul => "Mul";
        div => "Div";
        matmul => "MatMul";
        equal => "Equal";
        less => "Less";
    }

    unary! {
        tanh => "Tanh";
        sigmoid => "Sigmoid";
        relu => "Relu";
        sqrt => "Sqrt";
        sin => "Sin";
        /// The shape of `x`, as int64.
        shape => "Shape";
        /// The number of elements of `x`, as an int64 scalar.
        size => "Size";
        /// `[rank, count]` int64 indices of the non-zero elements.
        non_zero => "NonZero";
    }

    pub fn softmax(&mut self, x: &Value, axis: i64) -> Value {
        self.node("Softmax", &[x], vec![("axis", Attr::Int(axis))])
    }

    /// The classes' probabilities from their `[batch, classes]` logits: a softmax over the
    /// classes, or for a multi-label graph ([`Self::multi_label`]) each label's own sigmoid.
    pub fn probabilities(&mut self, logits: &Value) -> Value {
        if self.independent_labels() { self.sigmoid(logits) } else { self.softmax(logits, -1) }
    }

    pub fn transpose(&mut self, x: &Value, perm: &[i64]) -> Value {
        self.node("Transpose", &[x], vec![("perm", Attr::Ints(perm.to_vec()))])
    }

    pub fn cast(&mut self, x: &Value, to: ElemType) -> Value {
        self.node("Cast", &[x], vec![("to", Attr::Int(i64::from(to.code())))])
    }

    pub fn concat(&mut self, parts: &[&Value], axis: i64) -> Value {
        self.node("Concat", parts, vec![("axis", Attr::Int(axis))])
    }

    pub fn gather(&mut self, data: &Value, indices: &Value, axis: i64) -> Value {
        self.node("Gather", &[data, indices], vec![("axis", Attr::Int(axis))])
    }

    /// `updates` written into `data` at `indices` (`[n, rank]`).
    pub fn scatter_nd(&mut self, data: &Value, indices: &Value, updates: &Value) -> Value {
        self.node("ScatterND", &[data, indices, updates], vec![])
    }

    /// `x` reshaped to `shape` (int64; 0 keeps a dimension, -1 infers one).
    pub fn reshape(&mut self, x: &Value, shape: &Value) -> Value {
        self.node("Reshape", &[x, shape], vec![])
    }

    /// `x` broadcast to `shape` (int64).
    pub fn expand(&mut self, x: &Value, shape: &Value) -> Value {
        self.node("Expand", &[x, shape], vec![])
    }

    /// `x` with size-1 dimensions inserted at `axes` (an int64 constant).
    pub fn unsqueeze(&mut self, x: &Value, axes: &Value) -> Value {
        self.node("Unsqueeze", &[x, axes], vec![])
    }

    /// `x` without its size-1 dimensions `axes` (an int64 constant).
    pub fn squeeze(&mut self, x: &Value, axes: &Value) -> Value {
        self.node("Squeeze", &[x, axes], vec![])
    }

    /// `x[starts..ends]` along `axes` (int64 tensors).
    pub fn slice(&mut self, x: &Value, starts: &Value, ends: &Value, axes: &Value) -> Value {
        self.node("Slice", &[x, starts, ends, axes], vec![])
    }

    /// `start, start + delta, …` below `limit` (scalars).
    pub fn range(&mut self, start: &Value, limit: &Value, delta: &Value) -> Value {
        self.node("Range", &[start, limit, delta], vec![])
    }

    /// `if_true` where `condition` holds, else `if_false` (ONNX `Where`).
    pub fn select(&mut self, condition: &Value, if_true: &Value, if_false: &Value) -> Value {
        self.node("Where", &[condition, if_true, if_false], vec![])
    }

    /// A float32 tensor of `shape` (int64) filled with `value`.
    pub fn constant_of_shape(&mut self, shape: &Value, value: f32) -> Value {
        self.node("ConstantOfShape", &[shape], vec![("value", Attr::FloatTensor(value))])
    }

    /// Sum over `axes` (an int64 constant).
    pub fn reduce_sum(&mut self, x: &Value, axes: &Value, keep_dims: bool) -> Value {
        self.node("ReduceSum", &[x, axes], vec![("keepdims", Attr::Int(i64::from(keep_dims)))])
    }

    pub fn reduce_mean(&mut self, x: &Value, axes: &[i64], keep_dims: bool) -> Value {
        let attrs = vec![("axes", Attr::Ints(axes.to_vec())), ("keepdims", Attr::Int(i64::from(keep_dims)))];
        self.node("ReduceMean", &[x], attrs)
    }

    pub fn reduce_max(&mut self, x: &Value, axes: &[i64], keep_dims: bool) -> Value {
        let attrs = vec![("axes", Attr::Ints(axes.to_vec())), ("keepdims", Attr::Int(i64::from(keep_dims)))];
        self.node("ReduceMax", &[x], attrs)
    }

    /// A 1-D convolution of `[batch, channels, length]` with `weight` `[filters, channels,
    /// width]`, padded with `pads` (left, right) zeros.
    pub fn conv1d(&mut self, x: &Value, weight: &Value, bias: Option<&Value>, width: usize, pads: [usize; 2]) -> Value {
        let mut inputs = vec![x, weight];
        inputs.extend(bias);
        let pads = vec![pads[0] as i64, pads[1] as i64];
        self.node("Conv", &inputs, vec![("kernel_shape", Attr::Ints(vec![width as i64])), ("pads", Attr::Ints(pads))])
    }

    /// One forward-running recurrent node over time-major `x` `[seq, batch, in]`, without
    /// `sequence_lens` (tract refuses non-uniform ones; ARCHITECTURE.md). `w` `[1, gates·H, in]`,
    /// `r` `[1, gates·H, H]`, `b` `[1, 2·gates·H]`; every initial state is `initial`
    /// `[1, batch, H]`. Returns `Y`, `[seq, 1, batch, H]`.
    #[allow(clippy::too_many_arguments)]
    pub fn recurrent(
        &mut self,
        cell: RecurrentCell,
        x: &Value,
        w: &Value,
        r: &Value,
        b: &Value,
        initial: &Value,
        hidden: usize,
    ) -> Value {
        let no_sequence_lens = String::new();
        let mut inputs = vec![x, w, r, b, &no_sequence_lens, initial];
        let mut attrs = vec![("hidden_size", Attr::Int(hidden as i64)), ("direction", Attr::Str("forward".into()))];
        let op = match cell {
            RecurrentCell::Lstm => {
                inputs.push(initial);
                "LSTM"
            }
            RecurrentCell::Gru => {
                attrs.push(("linear_before_reset", Attr::Int(1)));
                "GRU"
            }
        };
        self.node(op, &inputs, attrs)
    }
}

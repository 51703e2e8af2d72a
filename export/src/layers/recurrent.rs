//! Bidirectional LSTM that is correct on right-padded batches.
//!
//! The forward direction ignores trailing padding by construction (later steps never feed
//! earlier ones). The backward direction runs forwards over each example reversed within its
//! own length, then reverses its outputs back, so padding never reaches a real token. The
//! ONNX graph does the same with two forward `LSTM` nodes and index arithmetic, because tract
//! rejects non-uniform `sequence_lens`.

use burn::module::Param;
use burn::nn::Linear;
use burn::prelude::*;
use burn::tensor::Distribution;
use burn::tensor::activation::sigmoid;

use super::dense::dense;
use super::{GraphBatch, TokenBatch, values};
use crate::onnx::{Attr, GraphBuilder, Value};

/// Gates are laid out in ONNX order: input, output, forget, cell.
#[derive(Module, Debug)]
pub struct BiLstm {
    /// Input projections `[in, 4H]` with the gate biases, one per direction.
    input_forward: Linear,
    input_backward: Linear,
    /// Recurrent weights `[2 directions, H, 4H]`.
    recurrent: Param<Tensor<3>>,
}

impl BiLstm {
    pub fn new(d_input: usize, hidden: usize, device: &Device) -> Self {
        let bound = 1.0 / (hidden as f64).sqrt();
        let recurrent = Tensor::random([2, hidden, 4 * hidden], Distribution::Uniform(-bound, bound), device);
        let mut layer = Self {
            input_forward: dense(d_input, 4 * hidden, true, device),
            input_backward: dense(d_input, 4 * hidden, true, device),
            recurrent: Param::from_tensor(recurrent),
        };
        // A forget-gate bias of 1 lets gradients flow through long reviews from the start.
        layer.input_forward = with_forget_bias(layer.input_forward, hidden);
        layer.input_backward = with_forget_bias(layer.input_backward, hidden);
        layer
    }

    pub fn hidden(&self) -> usize {
        self.recurrent.dims()[1]
    }

    /// `[batch, seq, in]` → `[batch, seq, 2H]` (forward states, then backward states).
    pub fn forward(&self, x: Tensor<3>, batch: &TokenBatch) -> Tensor<3> {
        let hidden = self.hidden();
        let [b, t, _] = x.dims();
        let reversed = batch.reverse_within_lengths(x.clone());
        // [2, B, T, 4H]: both directions advance in one loop through batched matmuls.
        let projected =
            Tensor::stack::<4>(vec![self.input_forward.forward(x), self.input_backward.forward(reversed)], 0);
        let recurrent = self.recurrent.val();
        let device = projected.device();
        let mut h = Tensor::<3>::zeros([2, b, hidden], &device);
        let mut c = Tensor::<3>::zeros([2, b, hidden], &device);
        let mut states = Vec::with_capacity(t);
        // Slicing a tracked tensor costs a full-size gradient per slice in backward, so the
        // sequence is cut into blocks first and steps are sliced from their (smaller) block.
        let block = (t as f64).sqrt().ceil().max(1.0) as usize;
        for block_start in (0..t).step_by(block) {
            let block_len = block.min(t - block_start);
            let block_values = projected.clone().narrow(2, block_start, block_len);
            for step in 0..block_len {
                let gates = block_values.clone().narrow(2, step, 1).reshape([2, b, 4 * hidden])
                    + h.clone().matmul(recurrent.clone());
                let input_gate = sigmoid(gates.clone().narrow(2, 0, hidden));
                let output_gate = sigmoid(gates.clone().narrow(2, hidden, hidden));
                let forget_gate = sigmoid(gates.clone().narrow(2, 2 * hidden, hidden));
                let candidate = gates.narrow(2, 3 * hidden, hidden).tanh();
                c = forget_gate * c + input_gate * candidate;
                h = output_gate * c.clone().tanh();
                states.push(h.clone());
            }
        }
        let states = Tensor::stack::<4>(states, 2); // [2, B, T, H]
        let forward = states.clone().narrow(0, 0, 1).reshape([b, t, hidden]);
        let backward = batch.reverse_within_lengths(states.narrow(0, 1, 1).reshape([b, t, hidden]));
        Tensor::cat(vec![forward, backward], 2)
    }

    /// Emits the layer for a `[batch, seq, in]` value; returns `[batch, seq, 2H]`.
    pub fn emit(&self, g: &mut GraphBuilder, batch: &GraphBatch, x: &Value) -> Value {
        let hidden = self.hidden();
        let recurrent = values(self.recurrent.val()); // [2, H, 4H]
        let forward =
            emit_direction(g, batch, x, &self.input_forward, &recurrent[..hidden * 4 * hidden], hidden, "lstm_fw");
        let reversed_input = batch.reverse_within_lengths(g, x);
        let backward_reversed = emit_direction(
            g,
            batch,
            &reversed_input,
            &self.input_backward,
            &recurrent[hidden * 4 * hidden..],
            hidden,
            "lstm_bw",
        );
        let backward = batch.reverse_within_lengths(g, &backward_reversed);
        g.op("Concat", &[&forward, &backward], vec![("axis", Attr::Int(2))])
    }
}

fn with_forget_bias(mut layer: Linear, hidden: usize) -> Linear {
    if let Some(bias) = layer.bias.take() {
        let device = bias.val().device();
        let mut initial = values(bias.val());
        initial[2 * hidden..3 * hidden].fill(1.0);
        let len = initial.len();
        layer.bias = Some(Param::from_tensor(Tensor::from_data(TensorData::new(initial, [len]), &device)));
    }
    layer
}

/// One forward-running ONNX LSTM over `[batch, seq, in]`, returning `[batch, seq, H]`.
/// `recurrent` is this direction's `[H, 4H]` block.
fn emit_direction(
    g: &mut GraphBuilder,
    batch: &GraphBatch,
    x: &Value,
    input: &Linear,
    recurrent: &[f32],
    hidden: usize,
    hint: &str,
) -> Value {
    let [d_input, gates] = input.weight.dims();
    // ONNX wants W as [1, 4H, in] and R as [1, 4H, H]: transposes of burn's layout.
    let w = transpose(&values(input.weight.val()), d_input, gates);
    let r = transpose(recurrent, hidden, gates);
    let mut b = match &input.bias {
        Some(bias) => values(bias.val()),
        None => vec![0.0; gates],
    };
    b.extend(std::iter::repeat_n(0.0, gates)); // recurrent bias Rb = 0
    let w = g.weight(&format!("{hint}_W"), &[1, gates, d_input], &w);
    let r = g.weight(&format!("{hint}_R"), &[1, gates, hidden], &r);
    let b = g.weight(&format!("{hint}_B"), &[1, 2 * gates], &b);
    let time_major = g.op("Transpose", &[x], vec![("perm", Attr::Ints(vec![1, 0, 2]))]);
    let zero_state = batch.zero_state(g, hidden);
    let no_sequence_lens = String::new();
    let y = g.op(
        "LSTM",
        &[&time_major, &w, &r, &b, &no_sequence_lens, &zero_state, &zero_state],
        vec![("hidden_size", Attr::Int(hidden as i64)), ("direction", Attr::Str("forward".into()))],
    ); // [T, 1, B, H]
    let axis1 = g.ints("axis1", &[1], &[1]);
    let y = g.op("Squeeze", &[&y, &axis1], vec![]);
    g.op("Transpose", &[&y], vec![("perm", Attr::Ints(vec![1, 0, 2]))])
}

/// Row-major `[rows, cols]` → `[cols, rows]`.
fn transpose(data: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; data.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = data[r * cols + c];
        }
    }
    out
}

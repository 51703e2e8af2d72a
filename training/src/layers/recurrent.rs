//! Bidirectional LSTM and GRU layers that are correct on right-padded batches.
//!
//! The forward direction ignores trailing padding by construction (later steps never feed
//! earlier ones). The backward direction runs forwards over each example reversed within its
//! own length, then reverses its outputs back, so padding never reaches a real token. The
//! ONNX graph does the same with two forward-running recurrent nodes and index arithmetic,
//! because tract rejects non-uniform `sequence_lens`.

use burn::module::Param;
use burn::nn::Linear;
use burn::prelude::*;
use burn::tensor::Distribution;
use burn::tensor::activation::sigmoid;

use super::dense::dense;
use super::{GraphBatch, TokenBatch, values};
use crate::onnx::{GraphBuilder, RecurrentCell, Value};

/// LSTM with gates laid out in ONNX order: input, output, forget, cell.
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
        let mut input_forward = dense(d_input, 4 * hidden, true, device);
        let mut input_backward = dense(d_input, 4 * hidden, true, device);
        // A forget-gate bias of 1 lets gradients flow through long reviews from the start.
        input_forward = with_bias_block(input_forward, 2 * hidden..3 * hidden, 1.0);
        input_backward = with_bias_block(input_backward, 2 * hidden..3 * hidden, 1.0);
        Self { input_forward, input_backward, recurrent: recurrent_weights(hidden, 4, device) }
    }

    pub fn hidden(&self) -> usize {
        self.recurrent.dims()[1]
    }

    /// `[batch, seq, in]` → `[batch, seq, 2H]` (forward states, then backward states).
    pub fn forward(&self, x: Tensor<3>, batch: &TokenBatch) -> Tensor<3> {
        let hidden = self.hidden();
        let projected = project_both_directions(&self.input_forward, &self.input_backward, x, batch);
        let [_, b, _, _] = projected.dims();
        let recurrent = self.recurrent.val();
        let mut h = Tensor::<3>::zeros([2, b, hidden], &projected.device());
        let mut c = h.clone();
        let states = run_recurrence(projected, |x_gates| {
            let gates = x_gates + h.clone().matmul(recurrent.clone());
            let input_gate = sigmoid(gates.clone().narrow(2, 0, hidden));
            let output_gate = sigmoid(gates.clone().narrow(2, hidden, hidden));
            let forget_gate = sigmoid(gates.clone().narrow(2, 2 * hidden, hidden));
            let candidate = gates.narrow(2, 3 * hidden, hidden).tanh();
            c = forget_gate * c.clone() + input_gate * candidate;
            h = output_gate * c.clone().tanh();
            h.clone()
        });
        join_directions(states, batch)
    }

    /// Emits the layer for a `[batch, seq, in]` value; returns `[batch, seq, 2H]`.
    pub fn emit(&self, g: &mut GraphBuilder, batch: &GraphBatch, x: &Value) -> Value {
        let cell = RecurrentCell::Lstm;
        let no_recurrent_bias = vec![0.0; 2 * 4 * self.hidden()];
        g.scoped("bilstm", |g| {
            let inputs = [&self.input_forward, &self.input_backward];
            emit_bidirectional(g, batch, x, cell, inputs, &self.recurrent.val(), &no_recurrent_bias)
        })
    }
}

/// GRU with gates in ONNX order (update z, reset r, candidate n) and the reset gate applied
/// after the recurrent product (`linear_before_reset = 1`, as cuDNN and PyTorch do):
/// `n = tanh(x·W_n + b_n + r ∘ (h·R_n + rb_n))`, `h' = (1 − z) ∘ n + z ∘ h`.
#[derive(Module, Debug)]
pub struct BiGru {
    /// Input projections `[in, 3H]` with the input-side biases, one per direction.
    input_forward: Linear,
    input_backward: Linear,
    /// Recurrent weights `[2 directions, H, 3H]`.
    recurrent: Param<Tensor<3>>,
    /// Recurrent-side biases `[2 directions, 1, 3H]`; only the candidate's third matters, since
    /// it sits inside the reset gate, but ONNX takes all three.
    recurrent_bias: Param<Tensor<3>>,
}

impl BiGru {
    pub fn new(d_input: usize, hidden: usize, device: &Device) -> Self {
        Self {
            input_forward: dense(d_input, 3 * hidden, true, device),
            input_backward: dense(d_input, 3 * hidden, true, device),
            recurrent: recurrent_weights(hidden, 3, device),
            recurrent_bias: Param::from_tensor(Tensor::zeros([2, 1, 3 * hidden], device)),
        }
    }

    pub fn hidden(&self) -> usize {
        self.recurrent.dims()[1]
    }

    /// `[batch, seq, in]` → `[batch, seq, 2H]` (forward states, then backward states).
    pub fn forward(&self, x: Tensor<3>, batch: &TokenBatch) -> Tensor<3> {
        let hidden = self.hidden();
        let projected = project_both_directions(&self.input_forward, &self.input_backward, x, batch);
        let [_, b, _, _] = projected.dims();
        let (recurrent, recurrent_bias) = (self.recurrent.val(), self.recurrent_bias.val());
        let mut h = Tensor::<3>::zeros([2, b, hidden], &projected.device());
        let states = run_recurrence(projected, |x_gates| {
            let h_gates = h.clone().matmul(recurrent.clone()) + recurrent_bias.clone();
            let update = sigmoid(x_gates.clone().narrow(2, 0, hidden) + h_gates.clone().narrow(2, 0, hidden));
            let reset = sigmoid(x_gates.clone().narrow(2, hidden, hidden) + h_gates.clone().narrow(2, hidden, hidden));
            let candidate =
                (x_gates.narrow(2, 2 * hidden, hidden) + reset * h_gates.narrow(2, 2 * hidden, hidden)).tanh();
            h = candidate.clone() + update * (h.clone() - candidate);
            h.clone()
        });
        join_directions(states, batch)
    }

    /// Emits the layer for a `[batch, seq, in]` value; returns `[batch, seq, 2H]`.
    pub fn emit(&self, g: &mut GraphBuilder, batch: &GraphBatch, x: &Value) -> Value {
        let cell = RecurrentCell::Gru;
        let recurrent_bias = values(self.recurrent_bias.val());
        g.scoped("bigru", |g| {
            let inputs = [&self.input_forward, &self.input_backward];
            emit_bidirectional(g, batch, x, cell, inputs, &self.recurrent.val(), &recurrent_bias)
        })
    }
}

fn recurrent_weights(hidden: usize, gates: usize, device: &Device) -> Param<Tensor<3>> {
    let bound = 1.0 / (hidden as f64).sqrt();
    Param::from_tensor(Tensor::random([2, hidden, gates * hidden], Distribution::Uniform(-bound, bound), device))
}

fn with_bias_block(mut layer: Linear, block: std::ops::Range<usize>, value: f32) -> Linear {
    if let Some(bias) = layer.bias.take() {
        let device = bias.val().device();
        let mut initial = values(bias.val());
        initial[block].fill(value);
        let len = initial.len();
        layer.bias = Some(Param::from_tensor(Tensor::from_data(TensorData::new(initial, [len]), &device)));
    }
    layer
}

/// Input projections of both directions, `[2, batch, seq, gates]`; the backward direction
/// sees each example reversed within its length.
fn project_both_directions(forward: &Linear, backward: &Linear, x: Tensor<3>, batch: &TokenBatch) -> Tensor<4> {
    let reversed = batch.reverse_within_lengths(x.clone());
    Tensor::stack::<4>(vec![forward.forward(x), backward.forward(reversed)], 0)
}

/// Runs `step` over the time axis of `[2, batch, seq, gates]` projections (both directions
/// advance together through batched matmuls); `step` takes `[2, batch, gates]` and returns
/// the new hidden state `[2, batch, H]`. Returns `[2, batch, seq, H]`.
fn run_recurrence(projected: Tensor<4>, mut step: impl FnMut(Tensor<3>) -> Tensor<3>) -> Tensor<4> {
    let [directions, b, t, gates] = projected.dims();
    let mut states = Vec::with_capacity(t);
    // Slicing a tracked tensor costs a full-size gradient per slice in backward, so the
    // sequence is cut into blocks first and steps are sliced from their (smaller) block.
    let block = (t as f64).sqrt().ceil().max(1.0) as usize;
    for block_start in (0..t).step_by(block) {
        let block_len = block.min(t - block_start);
        let block_values = projected.clone().narrow(2, block_start, block_len);
        for offset in 0..block_len {
            states.push(step(block_values.clone().narrow(2, offset, 1).reshape([directions, b, gates])));
        }
    }
    Tensor::stack::<4>(states, 2)
}

/// `[2, batch, seq, H]` → `[batch, seq, 2H]`, the backward states put back in reading order.
fn join_directions(states: Tensor<4>, batch: &TokenBatch) -> Tensor<3> {
    let [_, b, t, hidden] = states.dims();
    let forward = states.clone().narrow(0, 0, 1).reshape([b, t, hidden]);
    let backward = batch.reverse_within_lengths(states.narrow(0, 1, 1).reshape([b, t, hidden]));
    Tensor::cat(vec![forward, backward], 2)
}

/// Both directions as forward-running ONNX nodes, the backward one on reversed inputs. The
/// nodes run time-major, so the layer transposes on the way in; one row gather joins the
/// directions back into batch-major order on the way out.
fn emit_bidirectional(
    g: &mut GraphBuilder,
    batch: &GraphBatch,
    x: &Value,
    cell: RecurrentCell,
    inputs: [&Linear; 2],
    recurrent: &Tensor<3>,
    recurrent_bias: &[f32],
) -> Value {
    let hidden = recurrent.dims()[1];
    let d_input = inputs[0].weight.dims()[0];
    let per_direction = hidden * cell.gates() * hidden;
    let recurrent = values(recurrent.clone());
    let bias_width = cell.gates() * hidden;
    let time_major = g.transpose(x, &[1, 0, 2]);
    let forward = g.scoped("forward", |g| {
        emit_direction(
            g,
            batch,
            &time_major,
            cell,
            inputs[0],
            &recurrent[..per_direction],
            &recurrent_bias[..bias_width],
        )
    });
    let reversal = batch.time_major_reversal(g);
    let reversed_input = reversal.apply(g, &time_major, d_input);
    let backward_reversed = g.scoped("backward", |g| {
        emit_direction(
            g,
            batch,
            &reversed_input,
            cell,
            inputs[1],
            &recurrent[per_direction..],
            &recurrent_bias[bias_width..],
        )
    });
    reversal.join_directions(g, &forward, &backward_reversed, hidden)
}

/// One forward-running ONNX recurrent node over time-major `[seq, batch, in]`, returning
/// `[seq, batch, H]`. `recurrent` is this direction's `[H, gates·H]` block.
#[allow(clippy::too_many_arguments)]
fn emit_direction(
    g: &mut GraphBuilder,
    batch: &GraphBatch,
    time_major: &Value,
    cell: RecurrentCell,
    input: &Linear,
    recurrent: &[f32],
    recurrent_bias: &[f32],
) -> Value {
    let [d_input, gates] = input.weight.dims();
    let hidden = gates / cell.gates();
    // ONNX wants W as [1, gates, in] and R as [1, gates, H]: transposes of burn's layout.
    let w = transpose(&values(input.weight.val()), d_input, gates);
    let r = transpose(recurrent, hidden, gates);
    let mut b = match &input.bias {
        Some(bias) => values(bias.val()),
        None => vec![0.0; gates],
    };
    b.extend_from_slice(recurrent_bias);
    let w = g.weight("W", &[1, gates, d_input], &w);
    let r = g.weight("R", &[1, gates, hidden], &r);
    let b = g.weight("B", &[1, 2 * gates], &b);
    let zero_state = batch.zero_state(g, hidden);
    let y = g.recurrent(cell, time_major, &w, &r, &b, &zero_state, hidden); // [T, 1, B, H]
    let axis1 = g.ints("axis1", &[1], &[1]);
    g.squeeze(&y, &axis1)
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

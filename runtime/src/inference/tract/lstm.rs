//! tract's ONNX `LSTM`, with a cell step that works on the whole batch at once.
//!
//! tract lowers an LSTM to a loop whose body ends in a fused cell op. That op calls the
//! sigmoid and tanh kernels once per batch row and gate block: three calls per row, 192 per
//! step at batch 64, and the calls cost more than the arithmetic. [`LstmCell`] lays the gates
//! out so that each activation is one call over the batch, and adds the recurrent product
//! while it does so. The rest of the lowering (the loop, the lifted input projection, the
//! state) is tract's own, reused through its `CommonRec`.
//!
//! The ONNX semantics are tract's: sigmoid and tanh activations (the graph's `activations`
//! attribute is ignored, as tract ignores it), no peepholes. A node with peepholes goes to
//! tract's own lowering.

use tract_onnx::model::ParsingContext;
use tract_onnx::ops::rec::common::{CommonRec, WireBody};
use tract_onnx::pb::NodeProto;
use tract_onnx::tract_core::internal::*;
use tract_onnx::tract_core::ops::array::Slice;
use tract_onnx::tract_core::ops::einsum::EinSum;
use tract_onnx::tract_core::ops::math::add;
use tract_onnx::tract_core::tract_linalg::routines::Func;
use tract_onnx::tract_hir::internal::InferenceOp;
use tract_onnx::tract_hir::ops::expandable::expand;

/// The ONNX `LSTM` builder to register in place of tract's.
pub fn lstm(ctx: &ParsingContext, node: &NodeProto) -> TractResult<(Box<dyn InferenceOp>, Vec<String>)> {
    let common = CommonRec::from_node_and_options(node, 3, 0, Box::new(LstmBody))?;
    if common.optional_p_input.is_some() {
        return tract_onnx::ops::rec::lstm::lstm(ctx, node);
    }
    Ok((expand(common), vec![]))
}

/// One loop step: `LstmCell(Xt·Wᵀ, Ht-1·Rᵀ, Wb + Rb, Ct-1)`. `Xt·Wᵀ` depends on no state, so
/// tract lifts it out of the loop and computes it for all steps in one matrix product.
#[derive(Debug, Clone)]
struct LstmBody;

impl WireBody for LstmBody {
    fn name(&self) -> &'static str {
        "LSTM"
    }

    fn w_b_multipliers(&self) -> (usize, usize) {
        (4, 8)
    }

    fn have_extra_c_state(&self) -> bool {
        true
    }

    fn wire_body(&self, prefix: &str, body: &mut TypedModel) -> TractResult<()> {
        let source =
            |body: &TypedModel, name: &str| -> TractResult<OutletId> { Ok(body.node_by_name(name)?.id.into()) };
        let (x, w, r) = (source(body, "Xt")?, source(body, "W")?, source(body, "R")?);
        let (h_prev, c_prev) = (source(body, "Ht_1")?, source(body, "Ct_1")?);
        let bias = body.node_by_name("b").ok().map(|node| OutletId::from(node.id));
        let hidden_dim = body.outlet_fact(r)?.shape.get(1).cloned().context("R must be [gates, hidden]")?;
        let hidden = hidden_dim.to_usize().context("the LSTM hidden size must be a constant")?;
        let datum_type = body.outlet_fact(r)?.datum_type;

        let gates = 4 * hidden;
        let times_transposed = EinSum::new("mk,nk->mn".parse()?, datum_type);
        let mut wire = |name: &str, op: Box<dyn TypedOp>, inputs: &[OutletId]| -> TractResult<OutletId> {
            single(body.wire_node(format!("{prefix}.{name}"), op, inputs)?)
        };
        let x_gates = wire("x_gates", Box::new(times_transposed.clone()), &[x, w])?;
        let h_gates = wire("h_gates", Box::new(times_transposed), &[h_prev, r])?;
        let bias = match bias {
            Some(bias) => {
                let input_bias = wire("input_bias", Box::new(Slice::new(1, 0, gates)), &[bias])?;
                let recurrent_bias = wire("recurrent_bias", Box::new(Slice::new(1, gates, 2 * gates)), &[bias])?;
                wire("bias", Box::new(add()), &[input_bias, recurrent_bias])?
            }
            None => body.add_const(format!("{prefix}.bias"), Tensor::zero::<f32>(&[1, gates])?)?,
        };
        let cell = body.wire_node(format!("{prefix}.cell"), LstmCell { hidden }, &[x_gates, h_gates, bias, c_prev])?;
        let &[h, c] = cell.as_slice() else { bail!("LstmCell has two outputs") };
        let h = single(body.wire_node(format!("{prefix}.h"), AxisOp::Add(1), &[h])?)?;
        let c = single(body.wire_node(format!("{prefix}.c"), AxisOp::Add(1), &[c])?)?;
        body.select_output_outlets(&[h, c])
    }
}

/// One LSTM step over a batch, gates in ONNX order (input, output, forget, cell):
/// `(x_gates [B, 4H], h_gates [B, 4H], bias [1, 4H], c_prev [B, H]) → (h [B, H], c [B, H])`.
#[derive(Debug, Clone, Hash, PartialEq, Eq)]
pub struct LstmCell {
    pub hidden: usize,
}

impl Op for LstmCell {
    fn name(&self) -> StaticName {
        "LstmCell".into()
    }

    fn info(&self) -> TractResult<Vec<String>> {
        Ok(vec![format!("hidden={}", self.hidden)])
    }

    op_as_typed_op!();
}

impl EvalOp for LstmCell {
    op_out_of_plan!();

    fn eval(&self, _ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let [x_gates, h_gates, bias, c_prev] = &inputs[..] else {
            bail!("LstmCell takes [x_gates, h_gates, bias, c_prev], got {} inputs", inputs.len())
        };
        let h = self.hidden;
        let (x, hg, bias, c_prev_values) = (read(x_gates)?, read(h_gates)?, read(bias)?, read(c_prev)?);
        let rows = c_prev_values.len() / h;
        ensure!(
            x.len() == rows * 4 * h && hg.len() == rows * 4 * h && bias.len() == 4 * h,
            "LstmCell expects gates shaped [{rows}, {}], got {:?}, {:?} and a bias of {}",
            4 * h,
            x_gates.shape(),
            h_gates.shape(),
            bias.len()
        );
        // The pre-activations go into two contiguous blocks, so that each activation is one
        // kernel call: [B, 3H] for the sigmoid gates (input, output, forget) and [B, H] for
        // the candidate.
        let mut sigmoid_gates = vec![0f32; rows * 3 * h];
        let mut candidate = vec![0f32; rows * h];
        let (bias_sigmoid, bias_candidate) = bias.split_at(3 * h);
        let row_blocks = x.chunks_exact(4 * h).zip(hg.chunks_exact(4 * h));
        let out_blocks = sigmoid_gates.chunks_exact_mut(3 * h).zip(candidate.chunks_exact_mut(h));
        for ((x, hg), (sigmoid_out, candidate_out)) in row_blocks.zip(out_blocks) {
            let ((x_sigmoid, x_candidate), (hg_sigmoid, hg_candidate)) = (x.split_at(3 * h), hg.split_at(3 * h));
            add3(sigmoid_out, x_sigmoid, hg_sigmoid, bias_sigmoid);
            add3(candidate_out, x_candidate, hg_candidate, bias_candidate);
        }
        let (sigmoid, tanh) = (Func::Sigmoid.ew_f32()?, Func::Tanh.ew_f32()?);
        sigmoid.run(&mut sigmoid_gates)?;
        tanh.run(&mut candidate)?;

        // c = forget ∘ c_prev + input ∘ candidate;  h = output ∘ tanh(c)
        let mut c = Tensor::zero::<f32>(c_prev.shape())?;
        let mut h_out = Tensor::zero::<f32>(c_prev.shape())?;
        {
            let mut c_view = c.try_as_plain_ram_mut()?;
            let c_values = c_view.as_slice_mut::<f32>()?;
            let mut h_view = h_out.try_as_plain_ram_mut()?;
            let h_values = h_view.as_slice_mut::<f32>()?;
            let gates =
                sigmoid_gates.chunks_exact(3 * h).zip(candidate.chunks_exact(h)).zip(c_prev_values.chunks_exact(h));
            for (((gates, candidate), c_prev), c) in gates.zip(c_values.chunks_exact_mut(h)) {
                let (input, output_and_forget) = gates.split_at(h);
                let forget = output_and_forget.split_at(h).1;
                for ((((c, input), forget), candidate), c_prev) in
                    c.iter_mut().zip(input).zip(forget).zip(candidate).zip(c_prev)
                {
                    *c = forget * c_prev + input * candidate;
                }
            }
            h_values.copy_from_slice(c_values);
            tanh.run(h_values)?;
            for (h_row, gates) in h_values.chunks_exact_mut(h).zip(sigmoid_gates.chunks_exact(3 * h)) {
                let output = gates.split_at(h).1.split_at(h).0;
                for (value, output) in h_row.iter_mut().zip(output) {
                    *value *= output;
                }
            }
        }
        Ok(tvec!(h_out.into_tvalue(), c.into_tvalue()))
    }
}

fn add3(out: &mut [f32], a: &[f32], b: &[f32], c: &[f32]) {
    for (((out, a), b), c) in out.iter_mut().zip(a).zip(b).zip(c) {
        *out = a + b + c;
    }
}

fn single(outlets: TVec<OutletId>) -> TractResult<OutletId> {
    outlets.first().copied().context("a node with no output")
}

fn read(value: &TValue) -> TractResult<&[f32]> {
    value.try_as_plain_ram()?.as_slice::<f32>()
}

impl TypedOp for LstmCell {
    as_op!();

    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        ensure!(inputs.iter().all(|fact| fact.datum_type == f32::datum_type()), "LstmCell runs in f32");
        let &[_, _, _, c_prev] = inputs else { bail!("LstmCell takes [x_gates, h_gates, bias, c_prev]") };
        let fact = c_prev.datum_type.fact(c_prev.shape.clone());
        Ok(tvec!(fact.clone(), fact))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sigmoid(x: f32) -> f32 {
        1.0 / (1.0 + (-x).exp())
    }

    /// The cell against the LSTM equations written out one value at a time: catches a gate
    /// read from the wrong block, or a bias added to the wrong one.
    #[test]
    fn cell_matches_the_lstm_equations() {
        let (rows, h) = (3usize, 5usize);
        let values = |n: usize, seed: usize| -> Vec<f32> {
            (0..n).map(|i| ((i * 7 + seed * 13) % 29) as f32 * 0.25 - 3.5).collect()
        };
        let (x, hg, bias, c_prev) =
            (values(rows * 4 * h, 1), values(rows * 4 * h, 2), values(4 * h, 3), values(rows * h, 4));
        let tensor = |shape: &[usize], data: &[f32]| Tensor::from_shape(shape, data).unwrap().into_tvalue();
        let outputs = LstmCell { hidden: h }
            .eval(
                &EvalContext::out_of_plan(),
                tvec!(
                    tensor(&[rows, 4 * h], &x),
                    tensor(&[rows, 4 * h], &hg),
                    tensor(&[1, 4 * h], &bias),
                    tensor(&[rows, h], &c_prev)
                ),
            )
            .unwrap();
        let (h_out, c_out) = (read(&outputs[0]).unwrap(), read(&outputs[1]).unwrap());
        for row in 0..rows {
            for j in 0..h {
                let pre =
                    |gate: usize| x[row * 4 * h + gate * h + j] + hg[row * 4 * h + gate * h + j] + bias[gate * h + j];
                let (input, output, forget, candidate) =
                    (sigmoid(pre(0)), sigmoid(pre(1)), sigmoid(pre(2)), pre(3).tanh());
                let c = forget * c_prev[row * h + j] + input * candidate;
                let expected_h = output * c.tanh();
                assert!((c_out[row * h + j] - c).abs() < 1e-5, "c at ({row}, {j}): {} vs {c}", c_out[row * h + j]);
                assert!((h_out[row * h + j] - expected_h).abs() < 1e-5, "h at ({row}, {j})");
            }
        }
    }
}

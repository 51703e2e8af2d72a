//! Building blocks shared by the model variants. Each layer holds its burn parameters,
//! runs in burn for training, and emits the same computation as ONNX nodes, so that a
//! variant is trained and exported from one definition.

pub mod attention;
pub mod contribution;
pub mod dense;
pub mod embedding;
pub mod encoder;
pub mod head;
pub mod norm;
pub mod pooling;
pub mod positions;
pub mod recurrent;
pub mod window;

use burn::nn::conv::Conv1d;
use burn::prelude::*;
use runtime::inference::ModelInputs;

use crate::onnx::{Dim, ElemType, GraphBuilder, Value};

/// A right-padded batch of token ids as the burn models consume it.
pub struct TokenBatch {
    /// `[batch, seq]` token ids.
    pub ids: Tensor<2, Int>,
    /// `[batch, seq]`, 1.0 on tokens and 0.0 on padding.
    pub mask: Tensor<2>,
    /// `[batch * seq]` row indices that reverse each example within its own length, leaving
    /// padding in place (an involution: applying it twice restores the order).
    pub reversal: Tensor<1, Int>,
    pub batch: usize,
    pub seq: usize,
    /// For `[documents, sentences, words]` inputs, the rows above are the real (non-padding)
    /// sentences and this says where they go in the document-level batch.
    pub documents: Option<Box<DocumentBatch>>,
}

/// The document level of a `[documents, sentences, words]` batch.
pub struct DocumentBatch {
    /// One row per document, one position per sentence (its ids are unused zeros).
    pub sentences: TokenBatch,
    /// `[real sentences]`: each real sentence's row in the flattened `[documents · sentences]`.
    pub rows: Tensor<1, Int>,
}

impl TokenBatch {
    /// From `[batch, seq]` or `[documents, sentences, words]` model inputs.
    pub fn new(inputs: &ModelInputs, device: &Device) -> Self {
        match inputs.shape[..] {
            [documents, sentences, words] => {
                // Only real sentences go through the word level: padding sentences would
                // cost as much as real ones and change nothing.
                let sentence_mask: Vec<i64> = inputs
                    .attention_mask
                    .chunks(words)
                    .map(|sentence| i64::from(sentence.iter().any(|&m| m != 0)))
                    .collect();
                let rows: Vec<i64> =
                    (0..documents * sentences).filter(|&r| sentence_mask[r] != 0).map(|r| r as i64).collect();
                let gather = |values: &[i64]| -> Vec<i64> {
                    rows.iter()
                        .flat_map(|&r| values[r as usize * words..(r as usize + 1) * words].iter().copied())
                        .collect()
                };
                let (ids, mask) = (gather(&inputs.input_ids), gather(&inputs.attention_mask));
                let mut batch = Self::from_rows(&ids, &mask, rows.len(), words, device);
                let document_ids = vec![0; documents * sentences];
                let document_level = Self::from_rows(&document_ids, &sentence_mask, documents, sentences, device);
                let real = rows.len();
                batch.documents = Some(Box::new(DocumentBatch {
                    sentences: document_level,
                    rows: Tensor::from_data(TensorData::new(rows, [real]), device),
                }));
                batch
            }
            _ => Self::from_rows(&inputs.input_ids, &inputs.attention_mask, inputs.shape[0], inputs.shape[1], device),
        }
    }

    fn from_rows(ids: &[i64], mask: &[i64], batch: usize, seq: usize, device: &Device) -> Self {
        let mut reversal = Vec::with_capacity(batch * seq);
        for row in 0..batch {
            let length = mask[row * seq..(row + 1) * seq].iter().filter(|&&m| m != 0).count();
            let base = (row * seq) as i64;
            reversal.extend((0..seq).map(|t| base + if t < length { (length - 1 - t) as i64 } else { t as i64 }));
        }
        let mask: Vec<f32> = mask.iter().map(|&m| m as f32).collect();
        Self {
            ids: Tensor::from_data(TensorData::new(ids.to_vec(), [batch, seq]), device),
            mask: Tensor::from_data(TensorData::new(mask, [batch, seq]), device),
            reversal: Tensor::from_data(TensorData::new(reversal, [batch * seq]), device),
            batch,
            seq,
            documents: None,
        }
    }

    /// `x` (`[batch, seq, features]`) with its padding positions zeroed.
    pub fn zero_padding(&self, x: Tensor<3>) -> Tensor<3> {
        x * self.mask.clone().unsqueeze_dim::<3>(2)
    }

    /// Reverses every example of `x` (`[batch, seq, features]`) within its own length.
    pub fn reverse_within_lengths(&self, x: Tensor<3>) -> Tensor<3> {
        let features = x.dims()[2];
        x.reshape([self.batch * self.seq, features])
            .select(0, self.reversal.clone())
            .reshape([self.batch, self.seq, features])
    }
}

/// The graph-side twin of [`TokenBatch`]: the declared inputs and the values derived from them.
pub struct GraphBatch {
    pub ids: Value,
    /// `[batch, seq]` int64 mask as given.
    pub mask: Value,
    /// `[batch, seq]` float mask.
    pub mask_f32: Value,
    /// `[batch, seq]` int64 positions that reverse each example within its own length,
    /// leaving padding in place (see [`TokenBatch::reversal`]).
    pub reversal: Value,
    /// `[1]` int64: the batch size, for building state shapes.
    pub batch_size: Value,
}

impl GraphBatch {
    /// Declares `input_ids` and `attention_mask` (`[batch, seq]`, int64) and derives the rest.
    pub fn declare(g: &mut GraphBuilder) -> Self {
        let dims = [Dim::Named("batch"), Dim::Named("seq")];
        let ids = g.input(runtime::package::tensor::INPUT_IDS, ElemType::Int64, &dims);
        let mask = g.input(runtime::package::tensor::ATTENTION_MASK, ElemType::Int64, &dims);
        g.scoped("mask", |g| Self::from_mask(g, ids, mask))
    }

    /// The float mask and reversal indices of an int64 `[rows, seq]` mask, derived with
    /// Range/Less/Where, which both runtimes support. `ids` is carried along as given.
    pub fn from_mask(g: &mut GraphBuilder, ids: Value, mask: Value) -> Self {
        let mask_f32 = g.cast(&mask, ElemType::Float);

        let shape = g.shape(&mask);
        let zero = g.ints("zero", &[], &[0]);
        let one = g.ints("one", &[], &[1]);
        let seq = g.gather(&shape, &one, 0);

        let axis1 = g.ints("axis1", &[1], &[1]);
        let lengths = g.reduce_sum(&mask, &axis1, true); // [B,1]
        let positions = g.range(&zero, &seq, &one); // [T]
        let axis0 = g.ints("axis0", &[1], &[0]);
        let positions = g.unsqueeze(&positions, &axis0); // [1,T]
        let last = g.sub(&lengths, &one);
        let reversed = g.sub(&last, &positions); // [B,T]
        let inside = g.less(&positions, &lengths);
        let within_row = g.select(&inside, &reversed, &positions); // [B,T]
        let first = g.ints("first", &[1], &[0]);
        let batch_size = g.gather(&shape, &first, 0);
        Self { ids, mask, mask_f32, reversal: within_row, batch_size }
    }

    /// Graph twin of [`TokenBatch::zero_padding`].
    pub fn zero_padding(&self, g: &mut GraphBuilder, x: &Value) -> Value {
        let axis2 = g.ints("axis2", &[1], &[2]);
        let token_mask = g.unsqueeze(&self.mask_f32, &axis2);
        g.mul(x, &token_mask)
    }

    /// A float zero tensor `[1, batch, width]`: the initial state of a recurrent layer
    /// (tract needs it explicit when the batch size is dynamic).
    pub fn zero_state(&self, g: &mut GraphBuilder, width: usize) -> Value {
        let one = g.ints("one_1d", &[1], &[1]);
        let width = g.ints("state_width", &[1], &[width as i64]);
        let shape = g.concat(&[&one, &self.batch_size, &width], 0);
        g.constant_of_shape(&shape, 0.0)
    }

    /// The reversal as rows of a time-major `[seq · batch, features]` view, for recurrent
    /// layers, which run time-major.
    pub fn time_major_reversal(&self, g: &mut GraphBuilder) -> TimeMajorReversal {
        let zero = g.ints("zero", &[], &[0]);
        let one = g.ints("one", &[], &[1]);
        // The time-major row of (t, b) is t·B + b, so (t, b) reads row reversal[b, t]·B + b.
        // Built from a grid of row numbers: tract cannot multiply by the symbolic batch size.
        let steps = g.transpose(&self.reversal, &[1, 0]); // [T,B]: reversal[b, t]
        let count = g.size(&self.mask);
        let row_numbers = g.range(&zero, &count, &one); // [T·B]
        let grid_shape = g.shape(&steps);
        let grid = g.reshape(&row_numbers, &grid_shape); // grid[t, b] = t·B + b
        let batch_rows = g.gather(&grid_shape, &one, 0);
        let columns = g.range(&zero, &batch_rows, &one); // [B]
        let rows = rows_reading(g, &grid, &steps, &columns);
        let all = g.ints("all", &[1], &[-1]);
        let rows = g.reshape(&rows, &all);
        TimeMajorReversal { rows, grid, steps, columns }
    }
}

/// `[T,B]`: `grid[steps[t, b], b]`, for a `grid` of row numbers whose rows are time steps
/// (`grid[s, b] = s·B + b` plus an offset); `columns` is `[B]`: `0 … B−1`.
fn rows_reading(g: &mut GraphBuilder, grid: &Value, steps: &Value, columns: &Value) -> Value {
    let zero = g.ints("zero", &[], &[0]);
    let step_starts = g.gather(grid, &zero, 1); // [S]: s·B (+ offset)
    let starts = g.gather(&step_starts, steps, 0); // [T,B]
    g.add(&starts, columns)
}

/// Row indices for time-major `[seq, batch, features]` values (`B` the batch size, `T` the
/// sequence length). Row `Gather`s, not `GatherElements`: tract runs `GatherElements` one
/// element at a time, which took 29 % of the default model's run.
///
/// Index arithmetic never adds a size to a tensor: tract keeps sizes as symbolic integers
/// (`batch·seq`), and an element-wise sum with one costs microseconds per element. Offsets
/// come from `Range`s over the data instead, which evaluate to plain numbers.
pub struct TimeMajorReversal {
    /// `[T·B]`: the rows that reverse each example within its own length (an involution).
    rows: Value,
    /// `[T,B]`: `t·B + b`, the row of (t, b).
    grid: Value,
    /// `[T,B]`: `reversal[b, t]`, the step (t, b) reads when reversing.
    steps: Value,
    /// `[B]`: `0 … B−1`.
    columns: Value,
}

impl TimeMajorReversal {
    /// Graph twin of [`TokenBatch::reverse_within_lengths`] for `[seq, batch, features]`.
    pub fn apply(&self, g: &mut GraphBuilder, x: &Value, features: usize) -> Value {
        let shape = g.shape(x);
        let rows = g.ints("rows", &[2], &[-1, features as i64]);
        let flat = g.reshape(x, &rows);
        let reversed = g.gather(&flat, &self.rows, 0);
        g.reshape(&reversed, &shape)
    }

    /// `[batch, seq, 2·features]` from a forward `[seq, batch, features]` value and a backward
    /// one still in reversed order: `out[b, t] = forward[t, b] ++ backward[reversal(b, t), b]`.
    /// One row `Gather` from the two stacked does the reversal, the concatenation and the
    /// transpose back to batch-major, which would otherwise be three copies.
    pub fn join_directions(&self, g: &mut GraphBuilder, forward: &Value, backward: &Value, features: usize) -> Value {
        let zero = g.ints("zero", &[], &[0]);
        let one = g.ints("one", &[], &[1]);
        let stacked = g.concat(&[forward, backward], 0); // [2T, B, F]
        let rows = g.ints("rows", &[2], &[-1, features as i64]);
        let table = g.reshape(&stacked, &rows); // [2·T·B, F]: forward rows, then backward rows
        // Row numbers of the whole table, as a [2T, B] grid; the backward block is its
        // second half.
        let table_rows = g.shape(&table);
        let table_rows = g.gather(&table_rows, &zero, 0);
        let all_rows = g.range(&zero, &table_rows, &one);
        let stacked_shape = g.shape(&stacked);
        let zero_1d = g.ints("zero_1d", &[1], &[0]);
        let two = g.ints("two", &[1], &[2]);
        let axis0 = g.ints("axis0", &[1], &[0]);
        let grid_shape = g.slice(&stacked_shape, &zero_1d, &two, &axis0);
        let table_grid = g.reshape(&all_rows, &grid_shape); // [2T, B]
        let forward_shape = g.shape(forward);
        let one_1d = g.ints("one_1d", &[1], &[1]);
        let seq_len = g.slice(&forward_shape, &zero_1d, &one_1d, &axis0); // [1]: T
        let end = g.ints("end", &[1], &[i64::MAX]);
        let backward_grid = g.slice(&table_grid, &seq_len, &end, &axis0); // [T, B]
        let backward_rows = rows_reading(g, &backward_grid, &self.steps, &self.columns);

        let forward_rows = g.transpose(&self.grid, &[1, 0]); // [B,T]
        let backward_rows = g.transpose(&backward_rows, &[1, 0]); // [B,T]
        let last = g.ints("axis_last", &[1], &[2]);
        let forward_rows = g.unsqueeze(&forward_rows, &last);
        let backward_rows = g.unsqueeze(&backward_rows, &last);
        let both = g.concat(&[&forward_rows, &backward_rows], 2); // [B,T,2]
        let gathered = g.gather(&table, &both, 0); // [B,T,2,F]
        let joined = g.ints("joined", &[3], &[0, 0, 2 * features as i64]);
        g.reshape(&gathered, &joined)
    }
}

/// A burn `Conv1d` over `[batch, channels, length]` as one ONNX `Conv` node, its input padded
/// with `pads` (left, right) zeros.
pub fn emit_conv1d(g: &mut GraphBuilder, conv: &Conv1d, x: &Value, pads: [usize; 2]) -> Value {
    let [filters, channels, width] = conv.weight.dims();
    let weight = g.weight("weight", &[filters, channels, width], &values(conv.weight.val()));
    let bias = conv.bias.as_ref().map(|bias| g.weight("bias", &[filters], &values(bias.val())));
    g.conv1d(x, &weight, bias.as_ref(), width, pads)
}

/// Copies a tensor's values out for the graph writer.
// `convert::<f32>()` makes the data f32, so reading it as f32 cannot fail.
#[allow(clippy::expect_used)]
pub fn values<const D: usize>(tensor: Tensor<D>) -> Vec<f32> {
    tensor.into_data().convert::<f32>().try_to_vec::<f32>().expect("float tensor data converts to f32")
}

//! Sinusoidal positional encoding (Vaswani et al. 2017), added to `[batch, seq, d]` values:
//! `PE[t, i] = sin(t · ω_i + φ_i)` with `ω_i = 10000^(−2⌊i/2⌋/d)` and `φ_i = π/2` on odd
//! features, so odd features carry the cosine. One `Sin` over a `Range` keeps the graph valid
//! for any sequence length.

use burn::prelude::*;

use crate::onnx::{ElemType, GraphBuilder, Value};

fn frequencies_and_phases(dim: usize) -> (Vec<f32>, Vec<f32>) {
    let frequency = |i: usize| 10000f32.powf(-((2 * (i / 2)) as f32) / dim as f32);
    let phase = |i: usize| if i % 2 == 1 { std::f32::consts::FRAC_PI_2 } else { 0.0 };
    ((0..dim).map(frequency).collect(), (0..dim).map(phase).collect())
}

/// `x + PE` for `x` of shape `[batch, seq, d]`.
pub fn add_positions(x: Tensor<3>) -> Tensor<3> {
    let [_, seq, dim] = x.dims();
    let device = x.device();
    let (frequencies, phases) = frequencies_and_phases(dim);
    let positions = Tensor::<1, Int>::arange(0..seq as i64, &device).float().reshape([1, seq, 1]);
    let frequencies = Tensor::<1>::from_data(TensorData::new(frequencies, [dim]), &device).reshape([1, 1, dim]);
    let phases = Tensor::<1>::from_data(TensorData::new(phases, [dim]), &device).reshape([1, 1, dim]);
    x + (positions * frequencies + phases).sin()
}

/// Graph twin of [`add_positions`].
pub fn emit_add_positions(g: &mut GraphBuilder, x: &Value, dim: usize) -> Value {
    g.scoped("positions", |g| emit_add_positions_unscoped(g, x, dim))
}

fn emit_add_positions_unscoped(g: &mut GraphBuilder, x: &Value, dim: usize) -> Value {
    let (frequencies, phases) = frequencies_and_phases(dim);
    let shape = g.shape(x);
    let one = g.ints("one", &[], &[1]);
    let zero = g.ints("zero", &[], &[0]);
    let seq = g.gather(&shape, &one, 0);
    let positions = g.range(&zero, &seq, &one); // [T] int64
    let positions = g.cast(&positions, ElemType::Float);
    let axes = g.ints("axes_0_2", &[2], &[0, 2]);
    let positions = g.unsqueeze(&positions, &axes); // [1, T, 1]
    let frequencies = g.weight("frequencies", &[dim], &frequencies);
    let phases = g.weight("phases", &[dim], &phases);
    let angles = g.mul(&positions, &frequencies);
    let angles = g.add(&angles, &phases);
    let encoding = g.sin(&angles);
    g.add(x, &encoding)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::values;

    #[test]
    fn even_features_are_sines_and_odd_features_cosines_of_the_position() {
        let device = Device::flex();
        let (seq, dim) = (50, 8);
        let encoding = values(add_positions(Tensor::zeros([1, seq, dim], &device)));
        for t in [0usize, 1, 7, 49] {
            let row = &encoding[t * dim..(t + 1) * dim];
            for pair in 0..dim / 2 {
                let angle = t as f32 * 10000f32.powf(-((2 * pair) as f32) / dim as f32);
                assert!((row[2 * pair] - angle.sin()).abs() < 1e-4, "sin at t={t}, pair {pair}");
                assert!((row[2 * pair + 1] - angle.cos()).abs() < 1e-4, "cos at t={t}, pair {pair}");
            }
        }
    }
}

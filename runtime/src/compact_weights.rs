//! The compact encoding of `--attention compact` (the default): weights as bytes scaled to
//! the heaviest of their list, which is what a heat map draws, at a fifth of the size of
//! 32-bit floats after compression (RESULTS.md, #27). What a byte cannot hold, the entropy of
//! each hop, is written exactly beside it.

/// Each weight as `round(255 · w / heaviest)`: the heaviest token of the list is 255. A list
/// with no positive weight is all 0.
pub fn quantise_weights(weights: &[f32]) -> Vec<u8> {
    let heaviest = weights.iter().copied().filter(|w| w.is_finite()).fold(0.0f32, f32::max);
    if heaviest <= 0.0 {
        return vec![0; weights.len()];
    }
    // Clamped to 0–255, so the cast cannot wrap.
    weights.iter().map(|&w| (255.0 * w / heaviest).round().clamp(0.0, 255.0) as u8).collect()
}

/// Each value as `round(127 · v / largest |v|)`, keeping its sign: the strongest push either
/// way is ±127. A list of zeros (or of non-finite values) is all 0.
pub fn quantise_signed(values: &[f32]) -> Vec<i8> {
    let largest = values.iter().copied().filter(|v| v.is_finite()).fold(0.0f32, |m, v| m.max(v.abs()));
    if largest <= 0.0 {
        return vec![0; values.len()];
    }
    // Clamped to ±127, so the cast cannot wrap.
    values.iter().map(|&v| (127.0 * v / largest).round().clamp(-127.0, 127.0) as i8).collect()
}

/// Shannon entropy in nats of the weights renormalised to sum to one; `None` when they sum
/// to nothing. Negative and non-finite weights are left out. The one definition behind the
/// `attention_entropy` column, SQL's `attention_entropy()` and the report's hop entropies.
pub fn entropy(weights: impl IntoIterator<Item = f32>) -> Option<f64> {
    let weights: Vec<f64> = weights.into_iter().map(f64::from).filter(|w| w.is_finite() && *w > 0.0).collect();
    let total: f64 = weights.iter().sum();
    (total > 0.0).then(|| {
        weights
            .iter()
            .map(|w| {
                let p = w / total;
                -p * p.ln()
            })
            .sum::<f64>()
            .max(0.0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_heaviest_weight_is_255_and_the_others_scale_with_it() {
        assert_eq!(quantise_weights(&[0.5, 0.25, 0.001, 0.0]), vec![255, 128, 1, 0]);
        assert_eq!(quantise_weights(&[0.0, 0.0]), vec![0, 0]);
        assert_eq!(quantise_weights(&[f32::NAN, 0.2]), vec![0, 255]);
        assert_eq!(quantise_signed(&[-0.5, 0.25, 0.0]), vec![-127, 64, 0]);
        assert_eq!(quantise_signed(&[]), Vec::<i8>::new());
    }

    #[test]
    fn entropy_is_zero_for_one_token_and_ln_n_for_an_even_spread() {
        assert_eq!(entropy([0.0, 1.0, 0.0]), Some(0.0));
        let even = entropy([0.25f32; 4]).expect("entropy");
        assert!((even - 4f64.ln()).abs() < 1e-9);
        assert_eq!(entropy([0.0f32, 0.0]), None);
        assert_eq!(entropy([0.0f32, 2.0, f32::NAN, -1.0]), Some(0.0));
        assert_eq!(entropy([]), None);
    }

    proptest! {
        /// A byte is within half a step of the weight it stands for, relative to the heaviest.
        #[test]
        fn bytes_stay_within_half_a_step(weights in proptest::collection::vec(0.0f32..1.0, 1..50)) {
            let heaviest = weights.iter().copied().fold(0.0f32, f32::max);
            prop_assume!(heaviest > 0.0);
            for (&w, &q) in weights.iter().zip(&quantise_weights(&weights)) {
                prop_assert!((f32::from(q) / 255.0 - w / heaviest).abs() <= 0.5 / 255.0 + 1e-6);
            }
        }
    }
}

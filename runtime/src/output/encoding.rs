//! The `--attention` choice as one type, [`AttentionEncoding`]: which explanation columns an
//! output keeps, and whether their values are floats, floats with only the heaviest kept, or
//! bytes. Here too are the byte encoding of `compact` (the default) and `hops`: weights as
//! bytes scaled to the heaviest of their list, which is what a heat map draws, at a fifth of
//! the size of 32-bit floats after compression (RESULTS.md, #27), its decoding, and the exact
//! entropy written beside the bytes, since a byte cannot hold it.

use arrow::datatypes::DataType;

use crate::explain::{heaviest, strongest};

/// How much of the attention and explanation an output keeps (`--attention`): per-hop
/// attention in 32-bit floats is most of an output's size (220 of 273 MB on IMDB test).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AttentionEncoding {
    /// What the report's cards and word tables, the SQL functions and Python show, and no
    /// more: the hops' summary as bytes relative to the heaviest token, and the contributions
    /// as signed bytes relative to the strongest, with each row's scale back to logit units.
    /// Every hop's own weights were most of the bytes and are read by few (#50).
    #[default]
    Compact,
    /// `compact`, every hop's weights as bytes and each hop's exact entropy (what `compact`
    /// wrote before #50).
    Hops,
    /// Every hop's weights, their summary and the contributions as 32-bit floats.
    Full,
    /// Only `attention_summary` (the hops summed per token) and the contributions, as floats.
    Summary,
    /// Every hop and the summary, each keeping only its N heaviest weights; the others are
    /// written as 0 (and compress to almost nothing).
    TopK(usize),
    /// No attention column, nor `contribution`.
    None,
}

/// The explanation columns, as far as the encoding decides which are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Explanation {
    /// `attention`: every hop's weights.
    Hops,
    /// `attention_entropy`: each hop's exact entropy, beside weights held as bytes.
    HopEntropy,
    /// `attention_summary`: the hops summed per token.
    Summary,
    /// `contribution`: each token's signed push towards the second of two classes, or the
    /// predicted one of more.
    Contribution,
    /// `contribution_scale`: logit units per step of the pushes held as bytes, so that rows
    /// can be compared and summed.
    ContributionScale,
}

/// How an encoding writes weights and pushes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Values {
    /// 32-bit floats; with `Some(k)`, each list keeps only its `k` heaviest weights.
    Floats { keep_heaviest: Option<usize> },
    /// Bytes relative to the heaviest weight (0–255) or the strongest push (±127).
    Bytes,
}

impl AttentionEncoding {
    /// Whether outputs in this encoding have the `part` column (when the model produces it).
    pub fn keeps(self, part: Explanation) -> bool {
        use Explanation::*;
        match self {
            Self::Hops => true,
            Self::Compact => !matches!(part, Hops | HopEntropy),
            // The exact entropies and the scale only complete values held as bytes.
            Self::Full | Self::TopK(_) => !matches!(part, HopEntropy | ContributionScale),
            Self::Summary => matches!(part, Summary | Contribution),
            Self::None => false,
        }
    }

    pub fn values(self) -> Values {
        match self {
            Self::Compact | Self::Hops => Values::Bytes,
            Self::TopK(k) => Values::Floats { keep_heaviest: Some(k) },
            Self::Full | Self::Summary | Self::None => Values::Floats { keep_heaviest: None },
        }
    }

    /// The type of one attention weight.
    pub fn weight_type(self) -> DataType {
        match self.values() {
            Values::Bytes => DataType::UInt8,
            Values::Floats { .. } => DataType::Float32,
        }
    }

    /// The type of one contribution (a signed push).
    pub fn push_type(self) -> DataType {
        match self.values() {
            Values::Bytes => DataType::Int8,
            Values::Floats { .. } => DataType::Float32,
        }
    }

    /// Whether most values are written as 0 (so Parquet is better off without dictionaries).
    pub fn is_sparse(self) -> bool {
        matches!(self.values(), Values::Floats { keep_heaviest: Some(_) })
    }
}

impl std::str::FromStr for AttentionEncoding {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "compact" => Ok(Self::Compact),
            "hops" => Ok(Self::Hops),
            "full" => Ok(Self::Full),
            "summary" => Ok(Self::Summary),
            "none" => Ok(Self::None),
            _ => match text.strip_prefix("top-k:").map(str::parse::<usize>) {
                Some(Ok(k)) if k > 0 => Ok(Self::TopK(k)),
                _ => Err(format!("`{text}` is not one of compact, hops, full, summary, top-k:N (N at least 1), none")),
            },
        }
    }
}

impl std::fmt::Display for AttentionEncoding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Compact => f.write_str("compact"),
            Self::Hops => f.write_str("hops"),
            Self::Full => f.write_str("full"),
            Self::Summary => f.write_str("summary"),
            Self::TopK(k) => write!(f, "top-k:{k}"),
            Self::None => f.write_str("none"),
        }
    }
}

/// `weights` with all but the `k` heaviest set to 0 (of equal weights, the first ones kept).
pub fn keep_heaviest(weights: &[f32], k: usize) -> Vec<f32> {
    if weights.len() <= k {
        return weights.to_vec();
    }
    let mut order: Vec<(usize, f32)> = weights.iter().copied().enumerate().collect();
    order.sort_by(|(a, wa), (b, wb)| wb.total_cmp(wa).then(a.cmp(b)));
    let mut kept = vec![0.0f32; weights.len()];
    for &(i, w) in order.iter().take(k) {
        if let Some(slot) = kept.get_mut(i) {
            *slot = w;
        }
    }
    kept
}

/// Each weight as `round(255 · w / heaviest)`: the heaviest token of the list is 255. A list
/// with no positive weight is all 0.
pub fn quantise_weights(weights: &[f32]) -> Vec<u8> {
    let heaviest = heaviest(weights.iter().copied());
    if heaviest <= 0.0 {
        return vec![0; weights.len()];
    }
    // Clamped to 0–255, so the cast cannot wrap.
    weights.iter().map(|&w| (255.0 * w / heaviest).round().clamp(0.0, 255.0) as u8).collect()
}

/// Logit units per step of [`quantise_signed`]'s bytes for `values`: a byte times this gives
/// the push back (to within half a step). `None` when every value is 0.
pub fn signed_scale(values: &[f32]) -> Option<f32> {
    let largest = strongest(values.iter().copied());
    (largest > 0.0).then(|| largest / 127.0)
}

/// Each value as `round(127 · v / largest |v|)`, keeping its sign: the strongest push either
/// way is ±127. A list of zeros (or of non-finite values) is all 0.
pub fn quantise_signed(values: &[f32]) -> Vec<i8> {
    let largest = strongest(values.iter().copied());
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

//! Reading a row's tokens together with its weights, and ranking tokens by attention mass.

use std::collections::HashMap;

use datafusion::arrow::array::{Array, AsArray, Float32Array, ListArray, StringArray};
use datafusion::arrow::datatypes::Float32Type;
use datafusion::common::Result;

use super::args::{Parameters, Role, value_error};

/// The arguments of the functions that rank tokens: `(tokens, weights, k)`.
pub const fn tokens_weights_k(function: &'static str) -> Parameters {
    Parameters {
        function,
        names: &["tokens", "weights", "k"],
        roles: &[Role::Tokens, Role::Weights, Role::Count],
        optional: 0,
    }
}

/// Row `row` of a tokens column and a weights column (both canonical lists); `None` when
/// either is null. Lists of different lengths are an error: the weights belong to other
/// tokens (a hop of another document, or a list cut differently).
pub fn row_pairs(
    function: &str,
    tokens: &ListArray,
    weights: &ListArray,
    row: usize,
) -> Result<Option<(StringArray, Float32Array)>> {
    if tokens.is_null(row) || weights.is_null(row) {
        return Ok(None);
    }
    let row_tokens = tokens.value(row).as_string::<i32>().clone();
    let row_weights = weights.value(row).as_primitive::<Float32Type>().clone();
    if row_tokens.len() != row_weights.len() {
        return Err(value_error(
            function,
            format!(
                "a row has {} tokens but {} weights; pass a row's tokens with weights over the same tokens \
                 (attention_summary, or head_attention(attention, i))",
                row_tokens.len(),
                row_weights.len()
            ),
        ));
    }
    Ok(Some((row_tokens, row_weights)))
}

/// What a group of rows gave one token: the attention on its occurrences, and the attention
/// those occurrences would have had if every row spread its weight evenly.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct TokenStats {
    pub mass: f64,
    pub even_mass: f64,
}

impl TokenStats {
    /// How much more attention the token drew than an even spread would give it, smoothed
    /// toward 1 by one row's worth of attention (a row's weights sum to 1), so that a token
    /// seen a few times cannot outrank one the model keeps coming back to:
    /// `(mass + 1) / (even_mass + 1)`.
    pub fn distinctiveness(self) -> f64 {
        (self.mass + 1.0) / (self.even_mass + 1.0)
    }
}

/// How tokens are ranked over a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ranking {
    /// By attention mass: frequent tokens rise.
    Mass,
    /// By [`TokenStats::distinctiveness`]: tokens attended beyond their frequency rise.
    Distinctive,
}

/// Attention per distinct token over a group of rows. Null tokens and null or non-finite
/// weights are left out.
#[derive(Debug, Default, Clone)]
pub struct TokenAttention {
    stats: HashMap<String, TokenStats>,
}

impl TokenAttention {
    pub fn add(&mut self, token: &str, stats: TokenStats) {
        if !(stats.mass.is_finite() && stats.even_mass.is_finite()) {
            return;
        }
        match self.stats.get_mut(token) {
            Some(total) => {
                total.mass += stats.mass;
                total.even_mass += stats.even_mass;
            }
            None => {
                self.stats.insert(token.to_owned(), stats);
            }
        }
    }

    pub fn add_row(&mut self, tokens: &StringArray, weights: &Float32Array) {
        let pairs = || {
            tokens.iter().zip(weights.iter()).filter_map(|pair| match pair {
                (Some(token), Some(weight)) if weight.is_finite() => Some((token, f64::from(weight))),
                _ => None,
            })
        };
        let (count, total) = pairs().fold((0usize, 0.0), |(n, sum), (_, w)| (n + 1, sum + w));
        // Each row is one document's worth of attention: renormalised to sum to 1, so that
        // compact output's bytes (relative to the heaviest) and top-k rows count like floats.
        let scale = if total > 0.0 { 1.0 / total } else { 0.0 };
        let even = if count == 0 { 0.0 } else { total * scale / count as f64 };
        for (token, weight) in pairs() {
            self.add(token, TokenStats { mass: weight * scale, even_mass: even });
        }
    }

    pub fn entries(&self) -> impl Iterator<Item = (&str, TokenStats)> {
        self.stats.iter().map(|(t, s)| (t.as_str(), *s))
    }

    pub fn len(&self) -> usize {
        self.stats.len()
    }

    pub fn is_empty(&self) -> bool {
        self.stats.is_empty()
    }

    /// The `k` tokens ranked first, best first; ties go to the token that sorts first, so
    /// results do not depend on hashing or on how rows were partitioned.
    pub fn top(&self, k: usize, ranking: Ranking) -> Vec<&str> {
        let score = |stats: TokenStats| match ranking {
            Ranking::Mass => stats.mass,
            Ranking::Distinctive => stats.distinctiveness(),
        };
        let mut ranked: Vec<(&str, f64)> = self.entries().map(|(t, s)| (t, score(s))).collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        ranked.into_iter().take(k).map(|(token, _)| token).collect()
    }

    /// Bytes held, for DataFusion's memory accounting.
    pub fn size(&self) -> usize {
        self.stats.capacity() * std::mem::size_of::<(String, TokenStats)>()
            + self.stats.keys().map(String::capacity).sum::<usize>()
    }
}

/// `k` from an Int64 column: null stays null, a negative value is an error.
pub fn top_k(function: &str, k: Option<i64>) -> Result<Option<usize>> {
    match k {
        None => Ok(None),
        Some(k) => {
            usize::try_from(k).map(Some).map_err(|_| value_error(function, format!("k must be 0 or more, got {k}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(tokens: &[&str], weights: &[f32]) -> (StringArray, Float32Array) {
        (StringArray::from(tokens.to_vec()), Float32Array::from(weights.to_vec()))
    }

    #[test]
    fn repeated_tokens_add_up_and_ties_sort_by_token() {
        let mut attention = TokenAttention::default();
        let (tokens, weights) = row(&["good", "the", "good", "bad", "x"], &[0.2, 0.1, 0.2, 0.1, f32::NAN]);
        attention.add_row(&tokens, &weights);
        assert_eq!(attention.top(10, Ranking::Mass), vec!["good", "bad", "the"]);
        assert_eq!(attention.top(1, Ranking::Mass), vec!["good"]);
        assert_eq!(attention.len(), 3);
    }

    #[test]
    fn distinctive_ranking_discounts_frequency_and_rare_tokens() {
        let mut attention = TokenAttention::default();
        // "the" is everywhere and draws the most mass; "great" draws far more than its share.
        for _ in 0..50 {
            let (tokens, weights) =
                row(&["the", "the", "the", "the", "great", "plot"], &[0.15, 0.15, 0.15, 0.15, 0.3, 0.1]);
            attention.add_row(&tokens, &weights);
        }
        // Seen once, with almost all of its row's attention.
        let (tokens, weights) = row(&["gawd", "the", "the", "the", "the"], &[0.96, 0.01, 0.01, 0.01, 0.01]);
        attention.add_row(&tokens, &weights);
        assert_eq!(attention.top(1, Ranking::Mass), vec!["the"]);
        assert_eq!(attention.top(3, Ranking::Distinctive), vec!["great", "gawd", "the"]);
        let great = attention.entries().find(|(t, _)| *t == "great").map(|(_, s)| s);
        // 50 occurrences at 0.3 against an even 1/6: (15 + 1) / (50/6 + 1), up to f32 rounding.
        assert!((great.expect("great").distinctiveness() - 16.0 / (50.0 / 6.0 + 1.0)).abs() < 1e-5);
    }
}

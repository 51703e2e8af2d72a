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

/// Attention mass per distinct token. Null tokens and null or non-finite weights are left out.
#[derive(Debug, Default, Clone)]
pub struct TokenMass {
    mass: HashMap<String, f64>,
}

impl TokenMass {
    pub fn add(&mut self, token: &str, weight: f64) {
        if weight.is_finite() {
            match self.mass.get_mut(token) {
                Some(total) => *total += weight,
                None => {
                    self.mass.insert(token.to_owned(), weight);
                }
            }
        }
    }

    pub fn add_row(&mut self, tokens: &StringArray, weights: &Float32Array) {
        for (token, weight) in tokens.iter().zip(weights.iter()) {
            if let (Some(token), Some(weight)) = (token, weight) {
                self.add(token, f64::from(weight));
            }
        }
    }

    pub fn entries(&self) -> impl Iterator<Item = (&str, f64)> {
        self.mass.iter().map(|(t, m)| (t.as_str(), *m))
    }

    pub fn len(&self) -> usize {
        self.mass.len()
    }

    /// The `k` tokens with the most mass, heaviest first; ties go to the token that sorts
    /// first, so results do not depend on hashing or on how rows were partitioned.
    pub fn top(&self, k: usize) -> Vec<&str> {
        let mut ranked: Vec<(&str, f64)> = self.entries().collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        ranked.into_iter().take(k).map(|(token, _)| token).collect()
    }

    /// Bytes held, for DataFusion's memory accounting.
    pub fn size(&self) -> usize {
        self.mass.capacity() * std::mem::size_of::<(String, f64)>()
            + self.mass.keys().map(String::capacity).sum::<usize>()
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

    #[test]
    fn repeated_tokens_add_up_and_ties_sort_by_token() {
        let mut mass = TokenMass::default();
        for (token, weight) in [("good", 0.2), ("the", 0.1), ("good", 0.2), ("bad", 0.1), ("x", f64::NAN)] {
            mass.add(token, weight);
        }
        assert_eq!(mass.top(10), vec!["good", "bad", "the"]);
        assert_eq!(mass.top(1), vec!["good"]);
        assert_eq!(mass.len(), 3);
    }
}

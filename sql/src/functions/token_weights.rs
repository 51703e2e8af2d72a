//! Reading a row's tokens together with its weights (the ranking itself is
//! `runtime::explain`'s, shared with the report).

use datafusion::arrow::array::{Array, AsArray, Float32Array, ListArray, StringArray};
use datafusion::arrow::datatypes::Float32Type;
use datafusion::common::Result;

use super::args::{Parameters, Role, value_error};
pub use runtime::explain::{Ranking, TokenAttention, TokenStats};

/// The arguments of the functions that rank tokens: `(tokens, weights, k)`.
pub const fn tokens_weights_k(function: &'static str, help: &'static str) -> Parameters {
    Parameters {
        function,
        names: &["tokens", "weights", "k"],
        roles: &[Role::Tokens, Role::Weights, Role::Count],
        optional: 0,
        help,
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

/// `k` from an Int64 column: null stays null, a negative value is an error.
pub fn top_k(function: &str, k: Option<i64>) -> Result<Option<usize>> {
    match k {
        None => Ok(None),
        Some(k) => {
            usize::try_from(k).map(Some).map_err(|_| value_error(function, format!("k must be 0 or more, got {k}")))
        }
    }
}

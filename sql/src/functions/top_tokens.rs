//! `top_tokens(tokens, weights, k)`: the k tokens of one document that carry the most
//! attention (weights of repeated tokens add up), heaviest first.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, ListBuilder, StringBuilder};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;

use super::args::{Parameters, int_argument, list_argument, list_of};
use super::row_function::RowFunction;
use super::token_weights::{Ranking, TokenAttention, row_pairs, tokens_weights_k, top_k};

const NAME: &str = "top_tokens";
const PARAMETERS: Parameters =
    tokens_weights_k(NAME, "the k tokens of a row with the most weight (repeats add up), heaviest first");

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct TopTokens;

impl RowFunction for TopTokens {
    const PARAMETERS: Parameters = PARAMETERS;

    fn return_type(&self) -> DataType {
        list_of(DataType::Utf8)
    }

    fn evaluate(&self, arrays: &[ArrayRef]) -> Result<ArrayRef> {
        let (tokens, weights) = (list_argument(NAME, arrays, 0)?, list_argument(NAME, arrays, 1)?);
        let k = int_argument(NAME, arrays, 2)?;
        let mut out = ListBuilder::new(StringBuilder::new());
        for row in 0..tokens.len() {
            let pairs = row_pairs(NAME, tokens, weights, row)?;
            let k = top_k(NAME, k.is_valid(row).then(|| k.value(row)))?;
            let (Some((row_tokens, row_weights)), Some(k)) = (pairs, k) else {
                out.append_null();
                continue;
            };
            let mut attention = TokenAttention::default();
            attention.add_row(&row_tokens, &row_weights);
            for token in attention.top(k, Ranking::Mass) {
                out.values().append_value(token);
            }
            out.append(true);
        }
        Ok(Arc::new(out.finish()))
    }
}

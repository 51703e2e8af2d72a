//! `top_tokens(tokens, weights, k)`: the k tokens of one document that carry the most
//! attention (weights of repeated tokens add up), heaviest first.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ListBuilder, StringBuilder};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{Parameters, Role, int_argument, list_argument, list_of};
use super::token_weights::{TokenMass, row_pairs, top_k};

const NAME: &str = "top_tokens";
const PARAMETERS: Parameters = Parameters {
    function: NAME,
    names: &["tokens", "weights", "k"],
    roles: &[Role::Tokens, Role::Weights, Role::Count],
    optional: 0,
};

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct TopTokens {
    signature: Signature,
}

impl TopTokens {
    pub fn new() -> Self {
        Self { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for TopTokens {
    fn name(&self) -> &str {
        NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        PARAMETERS.coerce(arg_types)
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(list_of(DataType::Utf8))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let (tokens, weights) = (list_argument(NAME, &arrays, 0)?, list_argument(NAME, &arrays, 1)?);
        let k = int_argument(NAME, &arrays, 2)?;
        let mut out = ListBuilder::new(StringBuilder::new());
        for row in 0..tokens.len() {
            let pairs = row_pairs(NAME, tokens, weights, row)?;
            let k = top_k(NAME, k.is_valid(row).then(|| k.value(row)))?;
            let (Some((row_tokens, row_weights)), Some(k)) = (pairs, k) else {
                out.append_null();
                continue;
            };
            let mut mass = TokenMass::default();
            mass.add_row(&row_tokens, &row_weights);
            for token in mass.top(k) {
                out.values().append_value(token);
            }
            out.append(true);
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

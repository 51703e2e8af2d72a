//! `tokens(text, token_spans)`: a row's tokens, read from the text at the places `pipeline run`
//! wrote for them (`runtime::output::token_spans`), to pass wherever a `tokens` column went.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, ListBuilder, StringBuilder};
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::common::Result;
use runtime::output::token_spans;

use super::args::{Parameters, Role, list_argument, list_of, value_error};
use super::row_function::RowFunction;

const NAME: &str = "tokens";
const PARAMETERS: Parameters = Parameters {
    function: NAME,
    names: &["text", "token_spans"],
    roles: &[Role::Text, Role::Spans],
    optional: 0,
    help: "a row's tokens, read from its text at the places in token_spans (what the model read: \
           lower case, [UNK] for a word it does not know)",
};

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Tokens;

impl RowFunction for Tokens {
    const PARAMETERS: Parameters = PARAMETERS;

    fn return_type(&self) -> DataType {
        list_of(DataType::Utf8)
    }

    fn evaluate(&self, arrays: &[ArrayRef]) -> Result<ArrayRef> {
        let texts = arrays.first().and_then(|a| a.as_string_opt::<i32>()).ok_or_else(|| {
            datafusion::common::DataFusionError::Internal(format!(
                "{NAME}: the text is not the string it was planned as"
            ))
        })?;
        let spans = list_argument(NAME, arrays, 1)?;
        let mut out = ListBuilder::new(StringBuilder::new());
        for row in 0..spans.len().min(texts.len()) {
            if texts.is_null(row) || spans.is_null(row) {
                out.append_null();
                continue;
            }
            let values = spans.value(row);
            let Some(values) = values.as_primitive_opt::<Int64Type>().filter(|v| v.null_count() == 0) else {
                return Err(value_error(NAME, "a row's token_spans holds a null"));
            };
            let tokens = token_spans::decode(texts.value(row), values.values()).map_err(|e| {
                value_error(NAME, format!("{e:#}; pass the text column the output holds beside token_spans"))
            })?;
            for token in tokens {
                out.values().append_value(token);
            }
            out.append(true);
        }
        Ok(Arc::new(out.finish()))
    }
}

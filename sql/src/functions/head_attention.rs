//! `head_attention(attention, i)`: hop `i` (numbered from 1, like SQL arrays) of a
//! document's `attention` column, as one weight per token.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Float32Builder, ListBuilder};
use datafusion::arrow::datatypes::{DataType, Float32Type};
use datafusion::common::Result;

use super::args::{Parameters, Role, int_argument, list_argument, list_of, value_error};
use super::row_function::RowFunction;

const NAME: &str = "head_attention";
const PARAMETERS: Parameters = Parameters {
    function: NAME,
    names: &["attention", "i"],
    roles: &[Role::HeadWeights, Role::Count],
    optional: 0,
    help: "hop i (from 1) of the attention column: one weight per token",
};

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct HeadAttention;

impl RowFunction for HeadAttention {
    const PARAMETERS: Parameters = PARAMETERS;

    fn return_type(&self) -> DataType {
        list_of(DataType::Float32)
    }

    fn evaluate(&self, arrays: &[ArrayRef]) -> Result<ArrayRef> {
        let attention = list_argument(NAME, arrays, 0)?;
        let index = int_argument(NAME, arrays, 1)?;
        let mut out = ListBuilder::new(Float32Builder::new());
        for row in 0..attention.len() {
            if attention.is_null(row) || index.is_null(row) {
                out.append_null();
                continue;
            }
            let i = index.value(row);
            if i < 1 {
                return Err(value_error(NAME, format!("heads are numbered from 1, got {i}")));
            }
            let heads = attention.value(row);
            let heads = heads.as_list::<i32>();
            // A hop past the model's last one is null, as indexing past an array's end is.
            match usize::try_from(i - 1).ok().filter(|&h| h < heads.len() && heads.is_valid(h)) {
                Some(h) => {
                    let weights = heads.value(h);
                    out.values().extend(weights.as_primitive::<Float32Type>().iter());
                    out.append(true);
                }
                None => out.append_null(),
            }
        }
        Ok(Arc::new(out.finish()))
    }
}

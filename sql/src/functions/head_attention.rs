//! `head_attention(attention, i)`: hop `i` (numbered from 1, like SQL arrays) of a
//! document's `attention` column, as one weight per token.

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, Float32Builder, ListBuilder};
use datafusion::arrow::datatypes::{DataType, Float32Type};
use datafusion::common::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{Parameters, Role, int_argument, list_argument, list_of, value_error};

const NAME: &str = "head_attention";
const PARAMETERS: Parameters =
    Parameters { function: NAME, names: &["attention", "i"], roles: &[Role::HeadWeights, Role::Count], optional: 0 };

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct HeadAttention {
    signature: Signature,
}

impl HeadAttention {
    pub fn new() -> Self {
        Self { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for HeadAttention {
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
        Ok(list_of(DataType::Float32))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let attention = list_argument(NAME, &arrays, 0)?;
        let index = int_argument(NAME, &arrays, 1)?;
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
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

//! `top_attended(tokens, weights, k)`, an aggregate: the k tokens that carry the most
//! attention mass summed over every row of a group, heaviest first. Grouped by prediction it
//! gives the words each class attends to (Table 4 of Mehta et al.).

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Float64Builder, ListBuilder, StringBuilder};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Float64Type};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{Accumulator, AggregateUDFImpl, Signature, Volatility};

use super::args::{Parameters, int_argument, list_argument, list_of, value_error};
use super::token_weights::{TokenMass, row_pairs, tokens_weights_k, top_k};

const NAME: &str = "top_attended";
const PARAMETERS: Parameters = tokens_weights_k(NAME);

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct TopAttended {
    signature: Signature,
}

impl TopAttended {
    pub fn new() -> Self {
        Self { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl AggregateUDFImpl for TopAttended {
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

    fn accumulator(&self, _args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::<TopAttendedAccumulator>::default())
    }

    /// Partial results travel between partitions as (tokens, masses, k).
    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![
            Arc::new(Field::new(format!("{}[tokens]", args.name), list_of(DataType::Utf8), true)),
            Arc::new(Field::new(format!("{}[masses]", args.name), list_of(DataType::Float64), true)),
            Arc::new(Field::new(format!("{}[k]", args.name), DataType::Int64, true)),
        ])
    }
}

#[derive(Debug, Default)]
struct TopAttendedAccumulator {
    mass: TokenMass,
    k: Option<usize>,
}

impl TopAttendedAccumulator {
    fn set_k(&mut self, k: Option<usize>) -> Result<()> {
        match (self.k, k) {
            (_, None) => Ok(()),
            (None, Some(k)) => {
                self.k = Some(k);
                Ok(())
            }
            (Some(a), Some(b)) if a == b => Ok(()),
            (Some(a), Some(b)) => Err(value_error(NAME, format!("k must be the same for every row, got {a} and {b}"))),
        }
    }
}

impl Accumulator for TopAttendedAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let (tokens, weights) = (list_argument(NAME, values, 0)?, list_argument(NAME, values, 1)?);
        let k = int_argument(NAME, values, 2)?;
        for row in 0..tokens.len() {
            self.set_k(top_k(NAME, k.is_valid(row).then(|| k.value(row)))?)?;
            if let Some((row_tokens, row_weights)) = row_pairs(NAME, tokens, weights, row)? {
                self.mass.add_row(&row_tokens, &row_weights);
            }
        }
        Ok(())
    }

    /// Null when no row gave k (an empty group, or k always null).
    fn evaluate(&mut self) -> Result<ScalarValue> {
        let mut out = ListBuilder::new(StringBuilder::new());
        match self.k {
            Some(k) => {
                for token in self.mass.top(k) {
                    out.values().append_value(token);
                }
                out.append(true);
            }
            None => out.append_null(),
        }
        Ok(ScalarValue::List(Arc::new(out.finish())))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.mass.size()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let mut tokens = ListBuilder::new(StringBuilder::with_capacity(self.mass.len(), 0));
        let mut masses = ListBuilder::new(Float64Builder::with_capacity(self.mass.len()));
        for (token, mass) in self.mass.entries() {
            tokens.values().append_value(token);
            masses.values().append_value(mass);
        }
        tokens.append(true);
        masses.append(true);
        let k = self.k.map(|k| i64::try_from(k).unwrap_or(i64::MAX));
        Ok(vec![
            ScalarValue::List(Arc::new(tokens.finish())),
            ScalarValue::List(Arc::new(masses.finish())),
            ScalarValue::Int64(k),
        ])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let (tokens, masses) = (list_argument(NAME, states, 0)?, list_argument(NAME, states, 1)?);
        let k = int_argument(NAME, states, 2)?;
        for row in 0..tokens.len() {
            self.set_k(top_k(NAME, k.is_valid(row).then(|| k.value(row)))?)?;
            if tokens.is_null(row) || masses.is_null(row) {
                continue;
            }
            let row_tokens = tokens.value(row);
            let row_masses = masses.value(row);
            for (token, mass) in
                row_tokens.as_string::<i32>().iter().zip(row_masses.as_primitive::<Float64Type>().iter())
            {
                if let (Some(token), Some(mass)) = (token, mass) {
                    self.mass.add(token, mass);
                }
            }
        }
        Ok(())
    }
}

//! Aggregates that rank the tokens a group of rows attends to, best first:
//! - `top_attended(tokens, weights, k)`: by attention mass summed over the group. Grouped by
//!   prediction it gives the words each class attends to (Table 4 of Mehta et al.), which
//!   frequent words dominate.
//! - `distinctive_attended(tokens, weights, k)`: by how much more attention a token drew than
//!   an even spread over its rows would give it (see [`TokenStats::distinctiveness`]), so that
//!   "great, worst, waste" rise above "this, movie".

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Float64Builder, ListBuilder, StringBuilder};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Float64Type};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{Accumulator, AggregateUDFImpl, DocSection, Documentation, Signature, Volatility};

use super::args::{Parameters, int_argument, list_argument, list_of, value_error};
use super::token_weights::{Ranking, TokenAttention, TokenStats, row_pairs, tokens_weights_k, top_k};

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct AttendedTokens {
    ranking: Ranking,
    signature: Signature,
    documentation: Documentation,
}

impl AttendedTokens {
    pub fn new(ranking: Ranking) -> Self {
        let signature = Signature::user_defined(Volatility::Immutable);
        let mut function =
            Self { ranking, signature, documentation: Documentation::builder(DocSection::default(), "", "").build() };
        function.documentation = function.parameters().documentation();
        function
    }

    fn parameters(&self) -> Parameters {
        let help = match self.ranking {
            Ranking::Mass => "aggregate: the k tokens with the most attention mass over a group",
            Ranking::Distinctive => {
                "aggregate: the k tokens attended most beyond their frequency: (mass + 1) / (even-spread mass + 1)"
            }
        };
        tokens_weights_k(name(self.ranking), help)
    }
}

fn name(ranking: Ranking) -> &'static str {
    match ranking {
        Ranking::Mass => "top_attended",
        Ranking::Distinctive => "distinctive_attended",
    }
}

impl AggregateUDFImpl for AttendedTokens {
    fn name(&self) -> &str {
        name(self.ranking)
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn documentation(&self) -> Option<&Documentation> {
        Some(&self.documentation)
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.parameters().coerce(arg_types)
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(list_of(DataType::Utf8))
    }

    fn accumulator(&self, _args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(AttendedAccumulator { ranking: self.ranking, attention: TokenAttention::default(), k: None }))
    }

    /// Partial results travel between partitions as (tokens, masses, even masses, k).
    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![
            Arc::new(Field::new(format!("{}[tokens]", args.name), list_of(DataType::Utf8), true)),
            Arc::new(Field::new(format!("{}[masses]", args.name), list_of(DataType::Float64), true)),
            Arc::new(Field::new(format!("{}[even_masses]", args.name), list_of(DataType::Float64), true)),
            Arc::new(Field::new(format!("{}[k]", args.name), DataType::Int64, true)),
        ])
    }
}

#[derive(Debug)]
struct AttendedAccumulator {
    ranking: Ranking,
    attention: TokenAttention,
    k: Option<usize>,
}

impl AttendedAccumulator {
    fn set_k(&mut self, k: Option<usize>) -> Result<()> {
        match (self.k, k) {
            (_, None) => Ok(()),
            (None, Some(k)) => {
                self.k = Some(k);
                Ok(())
            }
            (Some(a), Some(b)) if a == b => Ok(()),
            (Some(a), Some(b)) => {
                Err(value_error(name(self.ranking), format!("k must be the same for every row, got {a} and {b}")))
            }
        }
    }
}

impl Accumulator for AttendedAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let function = name(self.ranking);
        let (tokens, weights) = (list_argument(function, values, 0)?, list_argument(function, values, 1)?);
        let k = int_argument(function, values, 2)?;
        for row in 0..tokens.len() {
            self.set_k(top_k(function, k.is_valid(row).then(|| k.value(row)))?)?;
            if let Some((row_tokens, row_weights)) = row_pairs(function, tokens, weights, row)? {
                self.attention.add_row(&row_tokens, &row_weights);
            }
        }
        Ok(())
    }

    /// Null when no row gave k (an empty group, or k always null).
    fn evaluate(&mut self) -> Result<ScalarValue> {
        let mut out = ListBuilder::new(StringBuilder::new());
        match self.k {
            Some(k) => {
                for token in self.attention.top(k, self.ranking) {
                    out.values().append_value(token);
                }
                out.append(true);
            }
            None => out.append_null(),
        }
        Ok(ScalarValue::List(Arc::new(out.finish())))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.attention.size()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let entries = self.attention.len();
        let mut tokens = ListBuilder::new(StringBuilder::with_capacity(entries, 0));
        let mut masses = ListBuilder::new(Float64Builder::with_capacity(entries));
        let mut even_masses = ListBuilder::new(Float64Builder::with_capacity(entries));
        for (token, stats) in self.attention.entries() {
            tokens.values().append_value(token);
            masses.values().append_value(stats.mass);
            even_masses.values().append_value(stats.even_mass);
        }
        tokens.append(true);
        masses.append(true);
        even_masses.append(true);
        let k = self.k.map(|k| i64::try_from(k).unwrap_or(i64::MAX));
        Ok(vec![
            ScalarValue::List(Arc::new(tokens.finish())),
            ScalarValue::List(Arc::new(masses.finish())),
            ScalarValue::List(Arc::new(even_masses.finish())),
            ScalarValue::Int64(k),
        ])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let function = name(self.ranking);
        let tokens = list_argument(function, states, 0)?;
        let (masses, even_masses) = (list_argument(function, states, 1)?, list_argument(function, states, 2)?);
        let k = int_argument(function, states, 3)?;
        for row in 0..tokens.len() {
            self.set_k(top_k(function, k.is_valid(row).then(|| k.value(row)))?)?;
            if tokens.is_null(row) || masses.is_null(row) || even_masses.is_null(row) {
                continue;
            }
            let row_tokens = tokens.value(row);
            let row_masses = masses.value(row);
            let row_even = even_masses.value(row);
            let stats = row_masses.as_primitive::<Float64Type>().iter().zip(row_even.as_primitive::<Float64Type>());
            for (token, (mass, even_mass)) in row_tokens.as_string::<i32>().iter().zip(stats) {
                if let (Some(token), Some(mass), Some(even_mass)) = (token, mass, even_mass) {
                    self.attention.add(token, TokenStats { mass, even_mass });
                }
            }
        }
        Ok(())
    }
}

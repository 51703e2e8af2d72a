//! `attention_entropy(weights)`: Shannon entropy, in nats, of one document's attention.
//! Weights are renormalised to sum to one first. A distribution spread evenly over n tokens
//! scores ln n; one focused on a single token scores 0.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Float64Builder};
use datafusion::arrow::datatypes::{DataType, Float32Type};
use datafusion::common::Result;

use super::args::{Parameters, Role, list_argument};
use super::row_function::RowFunction;

const NAME: &str = "attention_entropy";
const PARAMETERS: Parameters = Parameters {
    function: NAME,
    names: &["weights"],
    roles: &[Role::Weights],
    optional: 0,
    help: "entropy in nats of a row's attention: 0 = one token, ln n = spread evenly",
};

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct AttentionEntropy;

/// Entropy of `weights` after renormalising ([`runtime::output::encoding::entropy`]); `None`
/// when there is no positive mass. Null, negative and non-finite weights are left out.
pub fn entropy(weights: impl Iterator<Item = Option<f32>>) -> Option<f64> {
    runtime::output::encoding::entropy(weights.flatten())
}

impl RowFunction for AttentionEntropy {
    const PARAMETERS: Parameters = PARAMETERS;

    fn return_type(&self) -> DataType {
        DataType::Float64
    }

    fn evaluate(&self, arrays: &[ArrayRef]) -> Result<ArrayRef> {
        let weights = list_argument(NAME, arrays, 0)?;
        let mut out = Float64Builder::with_capacity(weights.len());
        for row in 0..weights.len() {
            let value = weights.is_valid(row).then(|| entropy(weights.value(row).as_primitive::<Float32Type>().iter()));
            out.append_option(value.flatten());
        }
        Ok(Arc::new(out.finish()))
    }
}

#[cfg(test)]
mod tests {
    use super::entropy;

    #[test]
    fn uniform_is_ln_n_and_focused_is_zero() {
        let uniform = entropy([Some(0.25f32); 4].into_iter()).unwrap_or(f64::NAN);
        assert!((uniform - 4f64.ln()).abs() < 1e-9, "{uniform}");
        assert_eq!(entropy([Some(0.0f32), Some(2.0), None].into_iter()), Some(0.0));
        assert_eq!(entropy([Some(0.0f32)].into_iter()), None);
        assert_eq!(entropy(std::iter::empty()), None);
    }
}

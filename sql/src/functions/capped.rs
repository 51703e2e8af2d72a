//! DataFusion's string-building functions (`repeat`, `lpad`, `rpad`, `replace`) with a cap on
//! what one call may build: their output is allocated outside the query's memory pool, so
//! `repeat('x', 2000000000)` would take 2 GB at once and a container's memory limit would kill
//! the process. Each call first bounds its output from its arguments and refuses past
//! [`MAX_BUILT_BYTES`], naming the function; otherwise DataFusion's own function runs.

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray};
use arrow::compute::kernels::length::length;
use arrow::datatypes::{DataType, FieldRef, Int64Type};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
};
use datafusion::prelude::SessionContext;

/// The most bytes one call of a string-building function may build, over all its rows.
pub const MAX_BUILT_BYTES: u64 = 256 << 20;

/// How a function's output size is bounded from its arguments (as arrays of the batch's rows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Bound {
    /// `repeat(text, n)`: the text's bytes `n` times.
    Repeat,
    /// `lpad(text, n[, fill])`, `rpad(…)`: `n` characters of up to 4 bytes each.
    Pad,
    /// `replace(text, from, to)`: at most one `to` between any two bytes of the text.
    Replace,
}

const CAPPED: [(&str, Bound); 4] =
    [("repeat", Bound::Repeat), ("lpad", Bound::Pad), ("rpad", Bound::Pad), ("replace", Bound::Replace)];

/// Replaces the session's string-building functions with their capped forms.
pub fn register(ctx: &SessionContext) {
    let state = ctx.state();
    for (name, bound) in CAPPED {
        if let Some(inner) = state.scalar_functions().get(name) {
            ctx.register_udf(ScalarUDF::new_from_impl(Capped { inner: inner.clone(), bound }));
        }
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Capped {
    inner: Arc<ScalarUDF>,
    bound: Bound,
}

/// Each row's value of an integer argument (null as 0).
fn integers(array: &ArrayRef) -> Result<Vec<i64>> {
    let cast = arrow::compute::cast(array, &DataType::Int64)?;
    Ok(cast.as_primitive::<Int64Type>().iter().map(|v| v.unwrap_or(0)).collect())
}

/// Each row's byte length of a string argument (null as 0).
fn byte_lengths(array: &ArrayRef) -> Result<Vec<i64>> {
    let lengths = length(array.as_ref())?;
    integers(&lengths)
}

impl Capped {
    /// An upper bound on the bytes this call builds.
    fn bound(&self, args: &[ColumnarValue]) -> Result<u64> {
        let arrays = ColumnarValue::values_to_arrays(args)?;
        let arg = |i: usize| {
            arrays.get(i).ok_or_else(|| DataFusionError::Plan(format!("{} takes more arguments", self.inner.name())))
        };
        let positive = |v: i64| u64::try_from(v).unwrap_or(0);
        let total: u64 = match self.bound {
            Bound::Repeat => {
                let (texts, counts) = (byte_lengths(arg(0)?)?, integers(arg(1)?)?);
                texts
                    .iter()
                    .zip(&counts)
                    .map(|(t, n)| positive(*t).saturating_mul(positive(*n)))
                    .fold(0, u64::saturating_add)
            }
            Bound::Pad => {
                integers(arg(1)?)?.iter().map(|n| positive(*n).saturating_mul(4)).fold(0, u64::saturating_add)
            }
            Bound::Replace => {
                let (texts, to) = (byte_lengths(arg(0)?)?, byte_lengths(arg(2)?)?);
                texts
                    .iter()
                    .zip(&to)
                    .map(|(t, to)| {
                        positive(*t).saturating_add(positive(*t).saturating_add(1).saturating_mul(positive(*to)))
                    })
                    .fold(0, u64::saturating_add)
            }
        };
        Ok(total)
    }
}

impl ScalarUDFImpl for Capped {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        self.inner.return_field_from_args(args)
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let built = self.bound(&args.args)?;
        if built > MAX_BUILT_BYTES {
            return Err(DataFusionError::Execution(format!(
                "{}() would build up to {} MB of text in one batch of rows, more than the {} MB a string function may \
                 build; ask for less (a smaller count or length), or build it outside SQL",
                self.inner.name(),
                built >> 20,
                MAX_BUILT_BYTES >> 20
            )));
        }
        self.inner.invoke_with_args(args)
    }
}

//! DataFusion's string-building functions (`repeat`, `lpad`, `rpad`, `replace`, `concat`,
//! `concat_ws`) with a cap on
//! what one call may build: their output is allocated outside the query's memory pool, so
//! `repeat('x', 2000000000)` would take 2 GB at once and a container's memory limit would kill
//! the process. Each call first bounds its output from its arguments and refuses past
//! [`MAX_BUILT_BYTES`], naming the function; otherwise DataFusion's own function runs.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray};
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
    /// `concat(a, b, …)`: the arguments' bytes.
    Concat,
    /// `concat_ws(sep, a, b, …)`: the arguments' bytes and a separator between each two.
    ConcatWs,
}

const CAPPED: [(&str, Bound); 6] = [
    ("repeat", Bound::Repeat),
    ("lpad", Bound::Pad),
    ("rpad", Bound::Pad),
    ("replace", Bound::Replace),
    ("concat", Bound::Concat),
    ("concat_ws", Bound::ConcatWs),
];

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

/// Each row's byte length of a string argument (null as 0); a value of another type (a number
/// concat turns into text) as at most 64 bytes.
fn byte_lengths(array: &ArrayRef) -> Result<Vec<i64>> {
    match array.data_type() {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Binary | DataType::LargeBinary => {
            integers(&length(array.as_ref())?)
        }
        _ => Ok(vec![64; array.len()]),
    }
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
            Bound::Concat | Bound::ConcatWs => {
                let mut total = 0u64;
                for (i, array) in arrays.iter().enumerate() {
                    // concat_ws's separator stands between each two of the other arguments.
                    let times =
                        if self.bound == Bound::ConcatWs && i == 0 { arrays.len().saturating_sub(2) } else { 1 };
                    let bytes = byte_lengths(array)?;
                    total = bytes
                        .iter()
                        .fold(total, |sum, b| sum.saturating_add(positive(*b).saturating_mul(times as u64)));
                }
                total
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

//! What every scalar attention function shares, written once: a DataFusion scalar function
//! whose name, arguments and coercion come from its [`Parameters`], and whose body maps the
//! coerced argument arrays to one result array.

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use super::args::Parameters;

/// The body of a scalar function over whole argument arrays.
pub trait RowFunction: std::fmt::Debug + PartialEq + Eq + std::hash::Hash + Send + Sync + 'static {
    const PARAMETERS: Parameters;
    fn return_type(&self) -> DataType;
    /// The result for every row; `arrays` hold the arguments coerced to their roles' types.
    fn evaluate(&self, arrays: &[ArrayRef]) -> Result<ArrayRef>;
}

/// A [`RowFunction`] as DataFusion sees it.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Scalar<F> {
    function: F,
    signature: Signature,
    documentation: Documentation,
}

/// Registers `function` under its name.
pub fn scalar_udf<F: RowFunction>(function: F) -> ScalarUDF {
    let signature = Signature::user_defined(Volatility::Immutable);
    ScalarUDF::new_from_impl(Scalar { function, signature, documentation: F::PARAMETERS.documentation() })
}

impl<F: RowFunction> ScalarUDFImpl for Scalar<F> {
    fn name(&self) -> &str {
        F::PARAMETERS.function
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn documentation(&self) -> Option<&Documentation> {
        Some(&self.documentation)
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        F::PARAMETERS.coerce(arg_types)
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(self.function.return_type())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        Ok(ColumnarValue::Array(self.function.evaluate(&arrays)?))
    }
}

//! Argument checking shared by the attention functions: each function coerces its arguments
//! to one canonical type per role, so the bodies handle one layout whatever Parquet or a
//! literal produced (`Utf8View` tokens, `Float64` weights, large lists).

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, AsArray, Float64Array, Int64Array, ListArray};
use datafusion::arrow::datatypes::{DataType, Field, Float64Type, Int64Type};
use datafusion::common::{DataFusionError, Result, plan_err};
use datafusion::logical_expr::{DocSection, Documentation};

/// What an argument stands for, and the type it is coerced to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A list of strings → `List<Utf8>`.
    Tokens,
    /// A list of numbers → `List<Float32>`.
    Weights,
    /// A list of lists of numbers (heads × tokens) → `List<List<Float32>>`.
    HeadWeights,
    /// An integer → `Int64`.
    Count,
    /// A number → `Float64`.
    Number,
    /// A string → `Utf8`.
    Text,
    /// A list of whole numbers (`token_spans`) → `List<Int64>`.
    Spans,
}

impl Role {
    fn describe(self) -> &'static str {
        match self {
            Role::Tokens => "a list of strings",
            Role::Weights => "a list of numbers",
            Role::HeadWeights => "a list of lists of numbers",
            Role::Count => "an integer",
            Role::Number => "a number",
            Role::Text => "a string",
            Role::Spans => "a list of whole numbers (token_spans)",
        }
    }

    pub fn data_type(self) -> DataType {
        match self {
            Role::Tokens => list_of(DataType::Utf8),
            Role::Weights => list_of(DataType::Float32),
            Role::HeadWeights => list_of(list_of(DataType::Float32)),
            Role::Count => DataType::Int64,
            Role::Number => DataType::Float64,
            Role::Text => DataType::Utf8,
            Role::Spans => list_of(DataType::Int64),
        }
    }

    fn accepts(self, data_type: &DataType) -> bool {
        if data_type.is_null() {
            return true;
        }
        match self {
            Role::Tokens => list_item(data_type).is_some_and(|t| is_string(t) || t.is_null()),
            Role::Weights => list_item(data_type).is_some_and(|t| t.is_numeric() || t.is_null()),
            Role::HeadWeights => list_item(data_type)
                .is_some_and(|t| t.is_null() || list_item(t).is_some_and(|t| t.is_numeric() || t.is_null())),
            Role::Count => data_type.is_integer(),
            Role::Number => data_type.is_numeric(),
            Role::Text => is_string(data_type),
            Role::Spans => list_item(data_type).is_some_and(|t| t.is_integer() || t.is_null()),
        }
    }
}

pub fn list_of(item: DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(item, true)))
}

fn list_item(data_type: &DataType) -> Option<&DataType> {
    match data_type {
        DataType::List(f) | DataType::LargeList(f) | DataType::ListView(f) | DataType::FixedSizeList(f, _) => {
            Some(f.data_type())
        }
        _ => None,
    }
}

fn is_string(data_type: &DataType) -> bool {
    matches!(data_type, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

/// A function's call shape: its name, parameter names and roles; `optional` trailing
/// parameters may be left out.
pub struct Parameters {
    pub function: &'static str,
    pub names: &'static [&'static str],
    pub roles: &'static [Role],
    pub optional: usize,
    /// What the function gives, in one line: its documentation, shown by `\h` and
    /// DataFusion's `documentation()`.
    pub help: &'static str,
}

impl Parameters {
    /// How a call is written: `classify(text[, model])`.
    pub fn syntax(&self) -> String {
        let required = self.names.len() - self.optional;
        let mut syntax = format!("{}(", self.function);
        for (i, name) in self.names.iter().enumerate() {
            let separator = if i == 0 { "" } else { ", " };
            if i < required {
                syntax.push_str(&format!("{separator}{name}"));
            } else {
                syntax.push_str(&format!("[{separator}{name}]"));
            }
        }
        syntax.push(')');
        syntax
    }

    /// The function's documentation, as DataFusion carries it.
    pub fn documentation(&self) -> Documentation {
        Documentation::builder(DocSection::default(), self.help, self.syntax()).build()
    }

    fn usage(&self) -> String {
        let required = self.names.len() - self.optional;
        let shown: Vec<String> = self
            .names
            .iter()
            .enumerate()
            .map(|(i, n)| if i >= required { format!("[{n}]") } else { (*n).to_owned() })
            .collect();
        let expected: Vec<&str> = self.roles.iter().map(|r| r.describe()).collect();
        format!("{}({}) expects ({})", self.function, shown.join(", "), expected.join(", "))
    }

    /// The canonical types for `arg_types`, or a planning error naming the function, the
    /// types it expects and the types it got.
    pub fn coerce(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let required = self.names.len() - self.optional;
        let got = || arg_types.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", ");
        if arg_types.len() < required || arg_types.len() > self.names.len() {
            return plan_err!("{}; got {} argument(s): ({})", self.usage(), arg_types.len(), got());
        }
        for (i, (data_type, role)) in arg_types.iter().zip(self.roles).enumerate() {
            if !role.accepts(data_type) {
                return plan_err!(
                    "{}; argument {} (`{}`) has type {data_type}, not {}; got ({})",
                    self.usage(),
                    i + 1,
                    self.names.get(i).unwrap_or(&"?"),
                    role.describe(),
                    got()
                );
            }
        }
        Ok(self.roles.iter().take(arg_types.len()).map(|r| r.data_type()).collect())
    }
}

/// Argument `i` of a call as a list array. Arity and types were fixed when the call was
/// planned ([`Parameters::coerce`]), so a mismatch here is an internal error.
pub fn list_argument<'a>(function: &str, arrays: &'a [ArrayRef], i: usize) -> Result<&'a ListArray> {
    arrays.get(i).and_then(|a| a.as_list_opt::<i32>()).ok_or_else(|| planned_differently(function, i))
}

/// Argument `i` of a call as an Int64 array (see [`list_argument`]).
pub fn int_argument<'a>(function: &str, arrays: &'a [ArrayRef], i: usize) -> Result<&'a Int64Array> {
    arrays.get(i).and_then(|a| a.as_primitive_opt::<Int64Type>()).ok_or_else(|| planned_differently(function, i))
}

/// Argument `i` of a call as a Float64 array (see [`list_argument`]).
pub fn float_argument<'a>(function: &str, arrays: &'a [ArrayRef], i: usize) -> Result<&'a Float64Array> {
    arrays.get(i).and_then(|a| a.as_primitive_opt::<Float64Type>()).ok_or_else(|| planned_differently(function, i))
}

fn planned_differently(function: &str, i: usize) -> DataFusionError {
    DataFusionError::Internal(format!("{function}: argument {} does not have the type it was planned with", i + 1))
}

/// An error about a value met while evaluating, naming the function.
pub fn value_error(function: &str, message: impl std::fmt::Display) -> DataFusionError {
    DataFusionError::Execution(format!("{function}: {message}"))
}

#[cfg(test)]
mod tests {
    use super::{Parameters, Role};

    #[test]
    fn the_syntax_brackets_optional_arguments_and_the_documentation_carries_it() {
        let parameters = Parameters {
            function: "classify",
            names: &["text", "model"],
            roles: &[Role::Text, Role::Text],
            optional: 1,
            help: "classify raw text",
        };
        assert_eq!(parameters.syntax(), "classify(text[, model])");
        let documentation = parameters.documentation();
        assert_eq!(
            (documentation.syntax_example.as_str(), documentation.description.as_str()),
            ("classify(text[, model])", "classify raw text")
        );
    }
}

//! The options of `pipeline run` as one table, in the manner of DataFusion's
//! `config_namespace!`: `spec.rs` declares each option once in `run_options!` (its name,
//! type, scope, whether it changes results, default, help and how it sets a `RunSpec`).
//! This module is what the table is made of: from a table the macro makes `RUN_OPTIONS`,
//! which the command line turns into flags and the Python module into keyword arguments,
//! and `RunSpec::set`, the name-keyed setter both call. Errors name an option as
//! [`InvalidOption`]; each front end spells it its own way (`--batch-size` / `batch_size=`).

use std::fmt;
use std::path::PathBuf;

use batch_io::values::{at_least_one, count_at_least_one, probability, probability_in_range};

/// Which calls take an option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// How documents are classified: `pipeline run`, and Python's `Classifier` and `run`.
    Classify,
    /// How a run reads and writes its files: `pipeline run` and Python's `run`.
    Run,
    /// Where the output goes and how the run reports itself: `pipeline run` and Python's `run`.
    OutputAndReporting,
}

/// What an option's value is, which says how a front end reads it.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Text,
    Path,
    /// A whole number of at least 1.
    Count,
    /// On when named (a flag without a value; `True` in Python).
    Flag,
    Probability,
    /// A list of names (comma-separated on the command line).
    Names,
    /// One of a fixed set of names, with a line of help each.
    Choice(fn() -> Vec<(&'static str, &'static str)>),
    /// Text in a form of its own (`top-k:8`, `0/4`): the option's value name shows it.
    Parsed,
}

/// An option's value as a front end hands it over.
#[derive(Debug, Clone, PartialEq)]
pub enum OptionValue {
    Text(String),
    Path(PathBuf),
    Count(usize),
    Flag(bool),
    Probability(f32),
    Names(Vec<String>),
}

impl OptionValue {
    /// `text` as a value of `kind`, as a flag's argument (or a default) spells it.
    pub fn from_text(kind: Kind, text: &str) -> Result<Self, String> {
        Ok(match kind {
            Kind::Text | Kind::Choice(_) | Kind::Parsed => Self::Text(text.to_owned()),
            Kind::Path => Self::Path(PathBuf::from(text)),
            Kind::Count => Self::Count(at_least_one(text)?),
            Kind::Flag => Self::Flag(text.parse().map_err(|_| format!("`{text}` is not true or false"))?),
            Kind::Probability => Self::Probability(probability(text)?),
            Kind::Names => Self::Names(text.split(',').map(str::to_owned).collect()),
        })
    }

    /// The value as a Python caller wrote it (`'text'`, `True`, `['a', 'b']`).
    fn as_python(&self) -> String {
        match self {
            Self::Text(text) => format!("{text:?}"),
            Self::Path(path) => format!("{:?}", path.display().to_string()),
            Self::Count(count) => count.to_string(),
            Self::Flag(on) => if *on { "True" } else { "False" }.to_owned(),
            Self::Probability(p) => p.to_string(),
            Self::Names(names) => format!("{names:?}"),
        }
    }

    /// The value as a command line wrote it (`text`, `a,b`).
    fn as_flag(&self) -> String {
        match self {
            // Quoted where a shell would have needed quotes to pass it, and where a URL's query
            // would run into the message after it.
            Self::Text(text) if text.is_empty() || text.contains(|c: char| c.is_whitespace() || "?#&;".contains(c)) => {
                format!("{text:?}")
            }
            Self::Text(text) => text.clone(),
            Self::Path(path) => path.display().to_string(),
            Self::Count(count) => count.to_string(),
            Self::Flag(on) => on.to_string(),
            Self::Probability(p) => p.to_string(),
            Self::Names(names) => {
                let joined = names.join(",");
                if joined.trim().is_empty() || joined.contains(char::is_whitespace) {
                    format!("{joined:?}")
                } else {
                    joined
                }
            }
        }
    }
}

/// One row of the table.
#[derive(Debug, Clone, Copy)]
pub struct RunOption {
    /// As Python spells it; the flag is the same with `-` for `_`.
    pub name: &'static str,
    pub scope: Scope,
    pub kind: Kind,
    /// Whether a run with another value writes other results, so that a dataset or a table
    /// begun with one value is refused when resumed with another.
    pub changes_results: bool,
    pub help: &'static str,
    /// As a flag's argument spells it; `None`: the option is off, or decided at run time.
    pub default: Option<&'static str>,
    /// An environment variable read where the caller gives no value.
    pub env: Option<&'static str>,
    /// How help shows the value (`P`, `COLUMN,...`); `None`: the name in capitals.
    pub value_name: Option<&'static str>,
    /// Checks a value as `RunSpec::set` would, without a spec to set.
    pub check: fn(OptionValue) -> Result<(), String>,
}

impl RunOption {
    /// The option of `pipeline run` (`--batch-size`).
    pub fn flag(&self) -> String {
        batch_io::spelling::flag(self.name)
    }

    /// `text`, as a flag's argument, checked as the option's value.
    pub fn parse_text(&self, text: &str) -> Result<OptionValue, String> {
        let value = OptionValue::from_text(self.kind, text)?;
        (self.check)(value.clone())?;
        Ok(value)
    }
}

/// A type an option's value can be: how it reads an [`OptionValue`], and what kind of value
/// front ends hand it.
pub trait OptionType: Sized {
    const KIND: Kind;
    fn from_value(value: OptionValue) -> Result<Self, String>;
}

/// The error for a value of a kind that the option's type does not read: a front end's bug.
fn wrong_kind(value: &OptionValue, expected: &str) -> String {
    format!("expected {expected}, got {}", value.as_flag())
}

impl OptionType for String {
    const KIND: Kind = Kind::Text;
    fn from_value(value: OptionValue) -> Result<Self, String> {
        match value {
            OptionValue::Text(text) => Ok(text),
            other => Err(wrong_kind(&other, "text")),
        }
    }
}

impl OptionType for PathBuf {
    const KIND: Kind = Kind::Path;
    fn from_value(value: OptionValue) -> Result<Self, String> {
        let path = match value {
            OptionValue::Path(path) => path,
            OptionValue::Text(text) => PathBuf::from(text),
            other => return Err(wrong_kind(&other, "a path")),
        };
        if path.as_os_str().is_empty() {
            return Err("an empty path: give a file, or leave the option out".to_owned());
        }
        Ok(path)
    }
}

impl OptionType for usize {
    const KIND: Kind = Kind::Count;
    fn from_value(value: OptionValue) -> Result<Self, String> {
        match value {
            OptionValue::Count(count) => count_at_least_one(count),
            other => Err(wrong_kind(&other, "a whole number")),
        }
    }
}

impl OptionType for bool {
    const KIND: Kind = Kind::Flag;
    fn from_value(value: OptionValue) -> Result<Self, String> {
        match value {
            OptionValue::Flag(on) => Ok(on),
            other => Err(wrong_kind(&other, "true or false")),
        }
    }
}

/// A probability: the only option of floating-point type.
impl OptionType for f32 {
    const KIND: Kind = Kind::Probability;
    fn from_value(value: OptionValue) -> Result<Self, String> {
        match value {
            OptionValue::Probability(p) => probability_in_range(p, &p.to_string()),
            other => Err(wrong_kind(&other, "a probability")),
        }
    }
}

impl OptionType for Vec<String> {
    const KIND: Kind = Kind::Names;
    fn from_value(value: OptionValue) -> Result<Self, String> {
        match value {
            // `--drop "contribution, embedding"` names `embedding`, not ` embedding`.
            OptionValue::Names(names) if names.iter().any(|name| name.trim().is_empty()) => {
                Err("an empty name: give names separated by commas, such as a,b".to_owned())
            }
            OptionValue::Names(names) => Ok(names.into_iter().map(|name| name.trim().to_owned()).collect()),
            other => Err(wrong_kind(&other, "a list of names")),
        }
    }
}

/// Options whose values are `batch_io::choice::Choice`s: read by name.
macro_rules! choice_option_types {
    ($($type:ty),* $(,)?) => {$(
        impl $crate::job::options::OptionType for $type {
            const KIND: $crate::job::options::Kind = $crate::job::options::Kind::Choice(|| {
                <$type as batch_io::choice::Choice>::CHOICES.iter().map(|(_, name, help)| (*name, *help)).collect()
            });
            fn from_value(value: $crate::job::options::OptionValue) -> Result<Self, String> {
                use batch_io::choice::Choice;
                let text = <String as $crate::job::options::OptionType>::from_value(value)?;
                <$type as Choice>::from_name(&text).ok_or_else(|| {
                    let names: Vec<&str> = <$type as Choice>::CHOICES.iter().map(|(_, name, _)| *name).collect();
                    format!("not one of: {}", names.join(", "))
                })
            }
        }
    )*};
}

choice_option_types!(
    runtime::inference::BackendKind,
    runtime::inference::Device,
    runtime::long_documents::Mode,
    runtime::long_documents::Aggregate,
);

/// Options whose values have a text form of their own (`FromStr`).
macro_rules! parsed_option_types {
    ($($type:ty),* $(,)?) => {$(
        impl OptionType for $type {
            const KIND: Kind = Kind::Parsed;
            fn from_value(value: OptionValue) -> Result<Self, String> {
                String::from_value(value)?.parse().map_err(|e| format!("{e:#}"))
            }
        }
    )*};
}

parsed_option_types!(runtime::output::AttentionEncoding, crate::units::Shard);

/// An option given a value it cannot take, or that the run's other options rule out. It names
/// the option as the front end spells it ([`batch_io::spelling`]): `--batch-size 0: must be
/// at least 1` on the command line, `batch_size=0: must be at least 1` in Python.
#[derive(Debug, Clone)]
pub struct InvalidOption {
    pub option: &'static str,
    /// The value as given, where the problem is with it.
    pub given: Option<OptionValue>,
    pub problem: String,
}

impl InvalidOption {
    pub fn new(option: &'static str, given: Option<OptionValue>, problem: impl Into<String>) -> Self {
        Self { option, given, problem: problem.into() }
    }

    /// As a Python caller reads it: the option as the keyword argument they passed.
    fn in_python(&self) -> String {
        let given = self.given.as_ref().map_or(String::new(), OptionValue::as_python);
        format!("{}={given}: {}", self.option, self.problem)
    }
}

impl fmt::Display for InvalidOption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let flag = batch_io::spelling::flag(self.option);
        match &self.given {
            Some(OptionValue::Text(name)) if self.option.is_empty() => write!(f, "`{name}` {}", self.problem),
            _ if batch_io::spelling::keywords() => f.write_str(&self.in_python()),
            Some(OptionValue::Flag(_)) | None => write!(f, "{flag}: {}", self.problem),
            Some(given) => write!(f, "{flag} {}: {}", given.as_flag(), self.problem),
        }
    }
}

impl std::error::Error for InvalidOption {}

/// Declares the run options: for each, its help (doc comment), name and type, scope, whether it
/// changes results, then optionally its `default`, `env` and `value_name`, and how a value of
/// its type sets a `RunSpec`. Makes `RUN_OPTIONS` and `RunSpec::set`.
macro_rules! run_options {
    (@results changes_results) => { true };
    (@results same_results) => { false };
    (@optional) => { None };
    (@optional $value:expr) => { Some($value) };
    ($(
        $(#[doc = $doc:literal])+
        $name:ident: $type:ty, $scope:ident, $results:ident
        $(, default $default:expr)?
        $(, env $env:literal)?
        $(, value_name $value_name:literal)?
        => |$spec:ident, $value:ident| $set:expr;
    )*) => {
        /// Every option of `pipeline run` and of the Python module's `run`, in the order help
        /// lists them.
        pub const RUN_OPTIONS: &[$crate::job::options::RunOption] = &[$(
            $crate::job::options::RunOption {
                name: stringify!($name),
                scope: $crate::job::options::Scope::$scope,
                kind: <$type as $crate::job::options::OptionType>::KIND,
                changes_results: run_options!(@results $results),
                help: concat!($($doc),+),
                default: run_options!(@optional $($default)?),
                env: run_options!(@optional $($env)?),
                value_name: run_options!(@optional $($value_name)?),
                check: |value| <$type as $crate::job::options::OptionType>::from_value(value).map(|_| ()),
            },
        )*];

        impl RunSpec {
            /// Sets the option `name` (as Python spells it) to `value`; an unknown name or a
            /// value the option cannot take is an [`InvalidOption`].
            pub fn set(
                &mut self,
                name: &str,
                value: $crate::job::options::OptionValue,
            ) -> Result<(), $crate::job::options::InvalidOption> {
                match name {
                    $(stringify!($name) => {
                        let given = value.clone();
                        let $value = <$type as $crate::job::options::OptionType>::from_value(value).map_err(
                            |problem| $crate::job::options::InvalidOption::new(stringify!($name), Some(given), problem),
                        )?;
                        let $spec = self;
                        $set;
                    })*
                    _ => {
                        let problem = "is not an option of pipeline run";
                        return Err($crate::job::options::InvalidOption::new("", Some($crate::job::options::OptionValue::Text(name.to_owned())), problem));
                    }
                }
                Ok(())
            }
        }
    };
}

pub(crate) use {choice_option_types, run_options};

//! The run options' table (`pipeline::job::RUN_OPTIONS`) as flags: each row is one flag, with
//! its help, default, environment variable and value parser taken from the row. The values
//! given set a `RunSpec` through `RunSpec::set`, the setter that the Python module's keyword
//! arguments also call. `pipeline run` takes every option; `pipeline sql` and `pipeline eval`
//! take the groups they need ([`BackendFlags`], [`LongDocumentFlags`]).

use std::marker::PhantomData;

use clap::builder::{PossibleValue, PossibleValuesParser};
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use pipeline::job::options::Kind;
use pipeline::job::{InvalidOption, OptionValue, RUN_OPTIONS, RunOption, RunSpec};
use runtime::inference::BackendOptions;
use runtime::long_documents::LongDocuments;

/// Which rows of the table a command takes as flags.
pub trait OptionGroup {
    fn has(option: &RunOption) -> bool;
}

/// The flags of some run options, and the values given to them.
pub struct OptionFlags<G: OptionGroup> {
    given: Vec<(&'static str, OptionValue)>,
    /// The options whose value came from their environment variable, not a flag.
    from_environment: Vec<&'static RunOption>,
    group: PhantomData<G>,
}

impl<G: OptionGroup> OptionFlags<G> {
    /// Sets the options given in `spec`.
    pub fn apply(&self, spec: &mut RunSpec) -> Result<(), InvalidOption> {
        for (name, value) in &self.given {
            spec.set(name, value.clone())?;
        }
        Ok(())
    }

    /// Where `option`'s value came from an environment variable, its name: a refusal of the
    /// value then says where to change it.
    pub fn environment_variable_of(&self, option: &str) -> Option<&'static str> {
        self.from_environment.iter().find(|given| given.name == option).and_then(|given| given.env)
    }

    /// A run's options with these flags applied, and the rest at their defaults.
    fn spec(&self) -> Result<RunSpec, InvalidOption> {
        let mut spec = RunSpec::new(String::new());
        self.apply(&mut spec)?;
        Ok(spec)
    }

    fn rows() -> impl Iterator<Item = &'static RunOption> {
        RUN_OPTIONS.iter().filter(|option| G::has(option))
    }
}

/// Every run option: `pipeline run`'s flags.
pub struct EveryOption;

impl OptionGroup for EveryOption {
    fn has(_: &RunOption) -> bool {
        true
    }
}

/// The options that choose and configure the inference backend.
pub struct Backend;

impl OptionGroup for Backend {
    fn has(option: &RunOption) -> bool {
        ["backend", "device", "tf32", "ort_library"].contains(&option.name)
    }
}

/// The options that say what happens to documents longer than the token limit.
pub struct LongDocumentGroup;

impl OptionGroup for LongDocumentGroup {
    fn has(option: &RunOption) -> bool {
        ["long_documents", "long_document_stride", "long_document_aggregate"].contains(&option.name)
    }
}

pub type RunOptionFlags = OptionFlags<EveryOption>;
pub type BackendFlags = OptionFlags<Backend>;
pub type LongDocumentFlags = OptionFlags<LongDocumentGroup>;

impl BackendFlags {
    pub fn options(&self) -> anyhow::Result<BackendOptions> {
        Ok(self.spec()?.backend)
    }
}

impl LongDocumentFlags {
    pub fn mode(&self) -> anyhow::Result<LongDocuments> {
        Ok(self.spec()?.long_documents()?)
    }
}

/// The flag of one row of the table.
fn flag(option: &'static RunOption) -> Arg {
    // As clap's derive writes a one-paragraph doc comment: without its final full stop.
    let help = option.help.trim();
    let arg = Arg::new(option.name).long(option.name.replace('_', "-")).help(help.strip_suffix('.').unwrap_or(help));
    let arg = match option.env {
        Some(variable) => arg.env(variable),
        None => arg,
    };
    let arg = match option.default {
        Some(default) => arg.default_value(default),
        None => arg,
    };
    let arg = arg.value_name(option.value_name.map_or_else(|| option.name.to_uppercase(), str::to_owned));
    // `--min-confidence -0.1` is a bad value, not an unknown flag `-0`.
    let arg = arg.allow_negative_numbers(true);
    match option.kind {
        Kind::Flag => arg.action(ArgAction::SetTrue),
        Kind::Names => arg.action(ArgAction::Append).value_delimiter(',').value_parser(checked(option)),
        Kind::Choice(choices) => {
            let choices = choices().into_iter().map(|(name, help)| PossibleValue::new(name).help(help));
            arg.value_parser(PossibleValuesParser::new(choices))
        }
        _ => arg.value_parser(checked(option)),
    }
}

/// A value parser that checks a flag's argument as the option's setter would.
fn checked(option: &'static RunOption) -> impl Fn(&str) -> Result<String, String> + Clone + Send + Sync + 'static {
    move |text: &str| {
        // A list's names are checked one at a time, as the command line splits them.
        if matches!(option.kind, Kind::Names) {
            return Ok(text.to_owned());
        }
        option.parse_text(text).map(|_| text.to_owned())
    }
}

impl<G: OptionGroup> Args for OptionFlags<G> {
    fn augment_args(command: Command) -> Command {
        Self::rows().fold(command, |command, option| command.arg(flag(option)))
    }

    fn augment_args_for_update(command: Command) -> Command {
        Self::augment_args(command)
    }
}

impl<G: OptionGroup> FromArgMatches for OptionFlags<G> {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut given = Vec::new();
        let mut from_environment = Vec::new();
        for option in Self::rows() {
            // Defaults are the spec's own; only what the user (or the environment) gave is set.
            match matches.value_source(option.name) {
                None | Some(ValueSource::DefaultValue) => continue,
                Some(ValueSource::EnvVariable) => from_environment.push(option),
                Some(_) => {}
            }
            let value = match option.kind {
                Kind::Flag => OptionValue::Flag(matches.get_flag(option.name)),
                Kind::Names => {
                    OptionValue::Names(matches.get_many::<String>(option.name).into_iter().flatten().cloned().collect())
                }
                _ => {
                    let Some(text) = matches.get_one::<String>(option.name) else { continue };
                    option.parse_text(text).map_err(|problem| {
                        clap::Error::raw(
                            clap::error::ErrorKind::ValueValidation,
                            format!("{}: {problem}\n", option.flag()),
                        )
                    })?
                }
            };
            given.push((option.name, value));
        }
        Ok(Self { given, from_environment, group: PhantomData })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

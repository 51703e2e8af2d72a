//! What `pipeline`'s command line and the training crate's flag groups share: the `--log-format`
//! flag, parsing with usage errors reported as logs (exit code 2), and value parsers for
//! counts and named choices. The libraries take no command-line crate; this one turns their
//! settings into flags.

use std::process::ExitCode;

use batch_io::choice::Choice;
use batch_io::command_line::{LogFormat, MAX_THREADS, log_to_stderr};

/// The `--log-format` flag both programs take. It is read from the raw arguments before
/// parsing (see [`parse_command_line`]); the field is here for `--help` and validation.
#[derive(Debug, Clone, clap::Args)]
pub struct LogFormatFlag {
    /// Logs on stderr: `human`, or `json` (one object per line: progress, per-stage metrics,
    /// warnings, errors, usage errors and signals as fields, for log shippers).
    #[arg(long, global = true, value_parser = choice::<LogFormat>(), default_value = LogFormat::Human.name())]
    pub log_format: LogFormat,
}

/// Whether the raw arguments ask for JSON logs (`--log-format json` or `--log-format=json`):
/// read before parsing, so that a usage error is reported in the format asked for.
fn asks_for_json_logs(args: impl Iterator<Item = std::ffi::OsString>) -> bool {
    let args: Vec<String> = args.map(|a| a.to_string_lossy().into_owned()).collect();
    args.iter().any(|a| a == "--log-format=json")
        || args.windows(2).any(|pair| matches!(pair, [flag, value] if flag == "--log-format" && value == "json"))
}

/// Sets up logging and parses the command line. A usage error is reported on stderr (as a
/// JSON event with `--log-format json`) and becomes the exit code 2 to return; `--help` and
/// `--version` print as usual and exit 0.
/// `args` are the program's name and its arguments, as the caller has them (`pipeline` rewrites
/// an old spelling first).
pub fn parse_command_line<T: clap::Parser>(args: Vec<std::ffi::OsString>) -> Result<T, ExitCode> {
    let json = asks_for_json_logs(args.iter().cloned());
    log_to_stderr(if json { LogFormat::Json } else { LogFormat::Human });
    T::try_parse_from(args).map_err(|error| {
        use clap::error::ErrorKind;
        let code = u8::try_from(error.exit_code()).unwrap_or(2);
        if matches!(error.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) || !json {
            let _ = error.print();
        } else {
            tracing::error!(exit_code = code, error = %error.render().to_string().trim_end(), "usage error");
        }
        ExitCode::from(code)
    })
}

/// A flag's parser for a [`Choice`]: its names as the possible values, with their help.
pub fn choice<T: Choice>() -> impl clap::builder::TypedValueParser<Value = T> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(T::CHOICES.iter().map(|(_, name, help)| PossibleValue::new(*name).help(*help)))
        .try_map(|name| T::from_name(&name).ok_or("not one of the possible values"))
}

pub use batch_io::values::{at_least_one, probability};

/// A thread count in `1..=MAX_THREADS`, for a flag's value parser.
pub fn thread_count(value: &str) -> Result<usize, String> {
    let count = at_least_one(value)?;
    if count > MAX_THREADS {
        return Err(format!("must be at most {MAX_THREADS}"));
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_count_is_bounded() {
        assert_eq!(thread_count("3"), Ok(3));
        assert!(thread_count("5000").is_err_and(|e| e.contains("at most")));
    }
}

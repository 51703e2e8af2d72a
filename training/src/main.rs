//! `export`, the old name of `pipeline train|eval|vectors`, kept for one release: `export` is
//! a shell builtin, so once the binary is on PATH `export train` never reaches it. It runs the
//! same commands and says which name to use.

use std::process::ExitCode;

use clap::Parser;

#[derive(Parser)]
#[command(
    version,
    about = "The old name of `pipeline train|eval|vectors` (removed in the next release): train attention classifiers and export them as ONNX model packages"
)]
struct Cli {
    #[command(subcommand)]
    command: training::commands::Command,
    /// Read from the raw arguments before parsing (see `parse_command_line`).
    #[command(flatten)]
    #[allow(dead_code)]
    logs: flags::LogFormatFlag,
}

fn main() -> ExitCode {
    runtime::inference::keep_telemetry_off();
    // Logging is set up from `--log-format` before parsing, so usage errors use it too.
    match flags::parse_command_line::<Cli>() {
        Ok(cli) => batch_io::command_line::run_main(|| {
            tracing::warn!(
                "`export` is deprecated and goes away in the next release: run `pipeline {}` instead, with the same flags",
                cli.command.name()
            );
            training::commands::run(cli.command)
        }),
        Err(code) => code,
    }
}

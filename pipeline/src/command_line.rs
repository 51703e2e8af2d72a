//! What both command-line programs (`pipeline`, `export`) do around their work: log to
//! stderr (level from `RUST_LOG`, `info` by default) and turn an error into its full cause
//! chain on stderr and a non-zero exit.

use std::io::Write;
use std::process::ExitCode;

pub fn run_main(work: impl FnOnce() -> anyhow::Result<()>) -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    match work() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Writes a report to stdout. A closed pipe (`pipeline inspect | head`) ends the output
/// quietly instead of panicking as `println!` would.
pub fn print_report(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        result => Ok(result?),
    }
}

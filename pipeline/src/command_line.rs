//! What both command-line programs (`pipeline`, `export`) do around their work: log to
//! stderr (level from `RUST_LOG`, `info` by default) and turn an error into its full cause
//! chain on stderr and a non-zero exit.

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

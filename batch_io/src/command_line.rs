//! What the command-line program (`pipeline`) does around its work: log to
//! stderr, turn an error into its cause chain on stderr, and end with an exit code from one
//! table (docs/contract.md, its exit codes):
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success |
//! | 1 | bad input or configuration: the message says which file, column or row, and what to do |
//! | 2 | usage: an unknown flag or a value the command line refuses (the `flags` crate) |
//! | 70 | internal error (a bug): please report it |
//! | 75 | object storage failed after retries (a timeout, a refused connection, a server error): rerun later |
//! | 128 + N | stopped by signal N (130 for Ctrl-C, 143 for SIGTERM) |
//!
//! A signal or a panic removes the unfinished output (see `atomic_file`) before the process
//! exits, so an interrupted run leaves nothing behind.

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::atomic_file::remove_live_temporaries;
use crate::choice::Choice;

/// Bad input or configuration.
pub const EXIT_BAD_INPUT: u8 = 1;
/// An internal error: a panic, which is a bug.
pub const EXIT_INTERNAL: u8 = 70;
/// A transient failure of object storage that persisted after retries (`EX_TEMPFAIL`).
pub const EXIT_TRANSIENT_IO: u8 = 75;

/// How logs are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// Lines for a person (and a progress bar on a terminal).
    #[default]
    Human,
    /// One JSON object per line, for log shippers: progress, metrics and warnings as fields.
    Json,
}

static JSON_LOGS: AtomicBool = AtomicBool::new(false);

impl Choice for LogFormat {
    const CHOICES: &'static [(Self, &'static str, &'static str)] = &[
        (Self::Human, "human", "lines for a person (and a progress bar on a terminal)"),
        (Self::Json, "json", "one JSON object per line, for log shippers: progress, metrics and warnings as fields"),
    ];
}

/// Whether logs are JSON lines (then no progress bar is drawn, even on a terminal).
pub fn logs_are_json() -> bool {
    JSON_LOGS.load(Ordering::Relaxed)
}

/// Sends logs to stderr, so that stdout carries only results and reports; the level comes from
/// `RUST_LOG`, `info` by default. Colours only on a terminal (and not with `NO_COLOR`), so
/// that a log file or a pipe gets plain text. A write that fails (stderr closed, as in
/// `2>&1 | head -1`) is dropped: logs must never stop a run.
pub fn log_to_stderr(format: LogFormat) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER));
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .log_internal_errors(false);
    match format {
        LogFormat::Human => logs.init(),
        LogFormat::Json => {
            JSON_LOGS.store(true, Ordering::Relaxed);
            logs.json().flatten_event(true).with_current_span(false).init();
        }
    }
}

/// Writes `text` and a newline to stderr, ignoring failure: with stderr closed a message
/// cannot be shown, and `eprintln!` would panic (and the panic's own message abort the
/// process) instead.
pub fn say(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "{text}");
    let _ = stderr.flush();
}

/// An error a person or a log shipper must see: a JSON event with `--log-format json`,
/// otherwise `error: TEXT` on stderr, with the credentials of any URL in it hidden. Never
/// fails.
pub fn say_error(text: &str) {
    // A message quoting a URL never shows its credentials (`crate::redact`).
    let text = &crate::redact::redact_urls(text);
    if logs_are_json() {
        tracing::error!(error = text, "run failed");
    } else {
        say(&format!("error: {text}"));
    }
}

/// A notice about the process itself (a signal, removed output): a JSON event with
/// `--log-format json`, otherwise a plain line. Never fails.
fn notice(text: &str) {
    if logs_are_json() {
        tracing::warn!("{text}");
    } else {
        say(text);
    }
}

/// Our events and the libraries' from `info`, but for delta-rs's: it narrates every log read,
/// and logs as errors what are none for us (a table not created yet, a lost race to create
/// it), while every failure of its reaches us as an error we report.
const DEFAULT_LOG_FILTER: &str = "info,deltalake_core=off,buoyant_kernel=off,buoyant_kernel_engine=off";

/// Set once a signal has arrived: the process is on its way out with 128 + N.
static STOPPING: AtomicBool = AtomicBool::new(false);

/// What a process stopped by a signal still says, each given the exit code it ends with:
/// registered by whoever has something to report (a run's failure, to its metrics and
/// lineage services). Each must bound its own time: the process waits for them.
type StopHook = Box<dyn Fn(u8) + Send>;
static STOP_HOOKS: std::sync::Mutex<Vec<(u64, StopHook)>> = std::sync::Mutex::new(Vec::new());
static NEXT_STOP_HOOK: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Runs `hook` if a signal stops the process while the returned guard lives.
pub fn on_stop(hook: impl Fn(u8) + Send + 'static) -> StopHookGuard {
    let id = NEXT_STOP_HOOK.fetch_add(1, Ordering::SeqCst);
    STOP_HOOKS.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((id, Box::new(hook)));
    StopHookGuard { id }
}

/// Removes its hook when dropped.
pub struct StopHookGuard {
    id: u64,
}

impl Drop for StopHookGuard {
    fn drop(&mut self) {
        STOP_HOOKS.lock().unwrap_or_else(std::sync::PoisonError::into_inner).retain(|(id, _)| *id != self.id);
    }
}

fn run_stop_hooks(code: u8) {
    let hooks = std::mem::take(&mut *STOP_HOOKS.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    for (_, hook) in hooks {
        hook(code);
    }
}

/// Runs a program's work under the exit-code table.
pub fn run_main(work: impl FnOnce() -> anyhow::Result<()>) -> ExitCode {
    install_panic_hook();
    if let Err(error) = clean_up_on_signals() {
        tracing::warn!("cannot handle interrupt signals ({error}); an interrupted run may leave a .partial file");
    }
    let result = work();
    // A signal's clean-up removes files the work may still be reading (the unpacked default
    // model, say), so an error now is the signal's doing: leave the exit to its thread.
    while STOPPING.load(Ordering::SeqCst) {
        std::thread::park_timeout(std::time::Duration::from_millis(100));
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            say_error(&format!("{error:#}"));
            ExitCode::from(exit_code_for(&error))
        }
    }
}

/// The exit code a failed run's `error` ends the process with: an internal error (70),
/// transient I/O (75) or bad input (1).
pub fn exit_code_for(error: &anyhow::Error) -> u8 {
    if error.chain().any(|cause| cause.is::<InternalError>()) {
        return EXIT_INTERNAL;
    }
    let transient = error.chain().any(|cause| cause.is::<crate::object_storage::TransientIo>());
    if transient { EXIT_TRANSIENT_IO } else { EXIT_BAD_INPUT }
}

/// A failure that is our bug, or a library's, rather than the input's: a library's own
/// "internal error" said in our words. The process ends with [`EXIT_INTERNAL`].
#[derive(Debug)]
pub struct InternalError(pub String);

impl std::fmt::Display for InternalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "internal error, please report it with the command that caused it (version {}): {}",
            env!("CARGO_PKG_VERSION"),
            self.0
        )
    }
}

impl std::error::Error for InternalError {}

/// Ends the process at once with `code`, without running exit handlers or static destructors:
/// other threads may still be inside ONNX Runtime, whose teardown then crashes (SIGSEGV or
/// SIGABRT instead of our exit code).
fn exit_now(code: i32) -> ! {
    let _ = std::io::stderr().flush();
    let _ = std::io::stdout().flush();
    // SAFETY: `_exit` only ends the process; it takes no pointers and is async-signal-safe.
    unsafe { libc::_exit(code) }
}

/// A panic is a bug: say so, with where it happened, remove the unfinished output and exit
/// with [`EXIT_INTERNAL`] at once, whichever thread panicked.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        // A decoder's panic on a corrupt file becomes an error (see `panic_guard`).
        if crate::panic_guard::is_guarded() {
            return;
        }
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".to_owned());
        let location = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        let thread = std::thread::current();
        let thread = thread.name().unwrap_or("unnamed");
        let text = format!(
            "internal error, please report: {message}{location} (thread {thread}, version {}). \
             Run with RUST_BACKTRACE=1 for a backtrace to include in the report.",
            env!("CARGO_PKG_VERSION")
        );
        if logs_are_json() {
            tracing::error!(exit_code = EXIT_INTERNAL, error = text, "internal error");
        } else {
            say(&text);
        }
        if std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0") {
            say(&std::backtrace::Backtrace::force_capture().to_string());
        }
        clean_up();
        exit_now(i32::from(EXIT_INTERNAL));
    }));
}

/// On SIGINT, SIGTERM or SIGHUP: remove the unfinished output and exit with 128 + the
/// signal's number, as a shell reports it.
fn clean_up_on_signals() -> std::io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
    std::thread::Builder::new().name("signals".to_owned()).spawn(move || {
        if let Some(signal) = signals.forever().next() {
            STOPPING.store(true, Ordering::SeqCst);
            clean_up();
            notice(&format!("stopped by signal {signal}"));
            run_stop_hooks(u8::try_from(128 + signal).unwrap_or(u8::MAX));
            exit_now(128 + signal);
        }
    })?;
    Ok(())
}

/// Removes what an interrupted process leaves unfinished: local temporaries, and uploads
/// in progress (which would otherwise stay on the bucket's books until its lifecycle rule).
fn clean_up() {
    for path in remove_live_temporaries() {
        notice(&format!("removed the unfinished {}", path.display()));
    }
    for url in crate::publish::abort_live_uploads() {
        notice(&format!("aborted the unfinished upload of {url}"));
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

/// The most worker threads a run may ask for (`--threads`, Python's `threads=`): more is a
/// typo, and each thread costs a stack.
pub const MAX_THREADS: usize = 1024;

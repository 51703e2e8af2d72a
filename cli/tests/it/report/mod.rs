//! `pipeline report` as a user runs it: on predictions of the embedded default model (a file
//! and a dataset of parts), on a HAN model's, on inputs it must refuse, and in a browser.

mod browser;
mod layouts;
mod refusals;
mod sections;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use headless_chrome::protocol::cdp::types::Event;
use headless_chrome::{Browser, LaunchOptions};

use crate::common::*;

/// Predictions of the embedded default model (SAN, 8 hops) on the 300 fixture reviews.
fn default_predictions(dir: &Path) -> PathBuf {
    let output = dir.join("predictions.parquet");
    let run = pipeline(&["run"], &[("--input", &reviews()), ("--output", &output)]);
    assert!(run.status.success(), "{}", stderr(&run));
    output
}

/// The same with `--attention hops --pass-through id,label`: every hop's weights as bytes, and
/// the tokens as strings, since the text is not in the output (the layout before #50).
fn hops_predictions(dir: &Path) -> PathBuf {
    let output = dir.join("hops.parquet");
    let flags = ["run", "--attention", "hops", "--pass-through", "id,label"];
    let run = pipeline(&flags, &[("--input", &reviews()), ("--output", &output)]);
    assert!(run.status.success(), "{}", stderr(&run));
    output
}

/// The same with `--attention full`: every weight and push as a float (and the tokens as
/// strings, like [`hops_predictions`]).
fn full_predictions(dir: &Path) -> PathBuf {
    let output = dir.join("full.parquet");
    let flags = ["run", "--attention", "full", "--pass-through", "id,label"];
    let run = pipeline(&flags, &[("--input", &reviews()), ("--output", &output)]);
    assert!(run.status.success(), "{}", stderr(&run));
    output
}

/// The last line `pipeline sql --format csv` prints for `query` over `predictions` as table `p`.
fn sql_last_line(predictions: &Path, query: &str) -> String {
    let sql = pipeline(
        &["sql", "--format", "csv", query],
        &[("--table", &PathBuf::from(format!("p={}", predictions.display())))],
    );
    assert!(sql.status.success(), "{}", stderr(&sql));
    String::from_utf8_lossy(&sql.stdout).lines().last().expect("a result").to_owned()
}

fn report(input: &Path, output: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["report"];
    args.extend_from_slice(extra);
    pipeline(&args, &[("--input", input), ("--output", output)])
}

/// Chromium's path, or `None` (with a loud note) where it is not installed, outside CI.
fn chromium(test: &str) -> Option<PathBuf> {
    let candidates = [std::env::var_os("CHROME").map(PathBuf::from), Some("/usr/bin/chromium".into())];
    let found = candidates.into_iter().flatten().find(|p| p.is_file());
    let why = "no Chromium (run scripts/install-chromium.sh, or set CHROME=/path/to/chromium)";
    test_support::or_skip(test, found.ok_or(why))
}

/// A report page open in headless Chromium, with what its console said.
struct OpenPage {
    _browser: Browser,
    tab: Arc<headless_chrome::Tab>,
    problems: Arc<Mutex<Vec<String>>>,
}

impl OpenPage {
    fn new(chrome: PathBuf, html: &Path) -> Self {
        // Without the background-networking flags Chromium tries (and fails) to reach Google.
        let args: Vec<&std::ffi::OsStr> = [
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ]
        .iter()
        .map(std::ffi::OsStr::new)
        .collect();
        let options = LaunchOptions::default_builder()
            .path(Some(chrome))
            .sandbox(false) // Debian's Chromium as root
            .window_size(Some((1280, 1600)))
            .args(args)
            .build()
            .expect("launch options");
        let browser = Browser::new(options).expect("start Chromium");
        let tab = browser.new_tab().expect("tab");
        let problems: Arc<Mutex<Vec<String>>> = Arc::default();
        let seen = problems.clone();
        tab.add_event_listener(Arc::new(move |event: &Event| {
            let problem = match event {
                Event::LogEntryAdded(entry) => format!("{:?}", entry.params.entry),
                Event::RuntimeExceptionThrown(thrown) => format!("{:?}", thrown.params.exception_details),
                Event::RuntimeConsoleAPICalled(call) => {
                    format!("console {:?}: {:?}", call.params.Type, call.params.args)
                }
                _ => return,
            };
            seen.lock().expect("lock").push(problem);
        }))
        .expect("listen");
        tab.enable_log().expect("log").enable_runtime().expect("runtime");
        let url = format!("file://{}", html.display());
        tab.navigate_to(&url).expect("navigate").wait_until_navigated().expect("loaded");
        Self { _browser: browser, tab, problems }
    }

    fn value(&self, expression: &str) -> serde_json::Value {
        self.tab.evaluate(expression, false).expect("evaluate").value.unwrap_or(serde_json::Value::Null)
    }

    /// Replaces what the filter box holds, typing it as a person would.
    fn filter(&self, text: &str) {
        self.value("(() => { const f = document.getElementById('example-filter'); f.value = ''; })()");
        let filter = self.tab.find_element("#example-filter").expect("the filter box");
        filter.click().expect("focus").type_into(text).expect("type");
    }

    fn assert_no_console_messages(&self) {
        let problems = self.problems.lock().expect("lock");
        assert!(problems.is_empty(), "console errors or messages: {problems:?}");
    }
}

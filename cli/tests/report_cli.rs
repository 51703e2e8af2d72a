//! `pipeline report` as a user runs it: on predictions of the embedded default model (a file
//! and a dataset of parts), on a HAN model's, on inputs it must refuse; and the page opened in
//! headless Chromium through the DevTools protocol, which sees console errors a screenshot
//! cannot. Chromium comes from `scripts/install-chromium.sh` (run by .ci/run); where it is
//! missing the browser test skips loudly, and under `CI=true` it fails.

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arrow::array::{Float32Array, ListArray, ListBuilder, StringArray, StringBuilder};
use arrow::datatypes::Float32Type;
use common::*;
use headless_chrome::protocol::cdp::Page::CaptureScreenshotFormatOption;
use headless_chrome::protocol::cdp::types::Event;
use headless_chrome::{Browser, LaunchOptions};

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

/// The report page, as HTML, of a fixture package's predictions on the 300 fixture reviews.
fn fixture_report(dir: &Path, package: &str) -> String {
    let predictions = dir.join(format!("{package}.parquet"));
    let run = run_fixture(package, &predictions, &[]);
    assert!(run.status.success(), "{}", stderr(&run));
    let html_path = dir.join(format!("{package}.html"));
    let output = report(&predictions, &html_path, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    std::fs::read_to_string(&html_path).expect("report")
}

fn report(input: &Path, output: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["report"];
    args.extend_from_slice(extra);
    pipeline(&args, &[("--input", input), ("--output", output)])
}

#[test]
fn a_report_on_default_predictions_has_every_section() {
    let dir = tempfile::tempdir().expect("tempdir");
    let predictions = default_predictions(dir.path());
    let html_path = dir.path().join("report.html");
    let output = report(&predictions, &html_path, &["--examples", "3"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("300 rows from 1 file(s)"));
    let html = std::fs::read_to_string(&html_path).expect("report");
    for section in [
        "id=\"run-summary\"",
        "id=\"confusion-matrix\"",
        "id=\"reliability\"",
        "id=\"confidence\"",
        "id=\"class-tokens\"",
        "id=\"most-confident\"",
        "id=\"least-confident\"",
        "id=\"misclassified\"",
        // Misclassified examples of each true label, each under its own heading.
        "data-label=\"neg\"",
        "data-label=\"pos\"",
    ] {
        assert!(html.contains(section), "{section} missing");
    }
    // Self-contained: nothing fetched (SVG's xmlns names a namespace, it loads nothing), one
    // inline script (the examples' filter) that asks the network for nothing.
    for fetching in ["src=", "href=", "<link", "@import", "url(", "<iframe", "fetch(", "XMLHttpRequest"] {
        assert!(!html.contains(fetching), "the page contains {fetching}");
    }
    assert_eq!(html.matches("<script").count(), 1, "one inline script");
    assert!(html.contains("<td>san</td>"), "the model variant from the Parquet metadata");
    // Each hop's weights and entropies are `--attention hops` only.
    assert!(!html.contains("id=\"hop-tokens\"") && !html.contains("id=\"hop-entropy\""));

    // The same predictions as a dataset of parts give the same page but for the input line.
    let parts = dir.path().join("parts");
    let run = pipeline(&["run", "--rows-per-part", "100"], &[("--input", &reviews()), ("--output", &parts)]);
    assert!(run.status.success(), "{}", stderr(&run));
    let from_parts = dir.path().join("from-parts.html");
    let output = report(&parts, &from_parts, &["--examples", "3"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("300 rows from 3 file(s)"));
    let accuracy =
        |page: &str| page.split("id=\"accuracy\">").nth(1).and_then(|s| s.split('<').next()).map(str::to_owned);
    let parts_html = std::fs::read_to_string(&from_parts).expect("report");
    assert_eq!(accuracy(&html), accuracy(&parts_html));
    assert!(accuracy(&html).is_some());
}

/// Weights as bytes lose nothing the report shows: the same confusion matrix, the same tokens
/// per class and per hop up to near-equal neighbours, the same examples, the same
/// contributions.
#[test]
fn compact_predictions_give_the_report_of_full_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let compact = hops_predictions(dir.path());
    let full = full_predictions(dir.path());
    assert!(std::fs::metadata(&compact).expect("compact").len() * 3 < std::fs::metadata(&full).expect("full").len());
    let page = |predictions: &Path, name: &str| {
        let html_path = dir.path().join(name);
        let output = report(predictions, &html_path, &["--examples", "3"]);
        assert!(output.status.success(), "{}", stderr(&output));
        std::fs::read_to_string(&html_path).expect("report")
    };
    let (compact, full) = (page(&compact, "compact.html"), page(&full, "full.html"));
    let table = |html: &str, id: &str| -> String {
        let start = html.find(&format!("id=\"{id}\"")).unwrap_or_else(|| panic!("no {id}"));
        html[start..].split("</table>").next().unwrap_or_default().to_owned()
    };
    assert_eq!(table(&compact, "confusion-matrix"), table(&full, "confusion-matrix"));
    // Token lists ranked by attention mass: bytes round each weight to 1/255 of its hop's
    // heaviest, which can reorder tokens of near-equal mass (the default model's hops, trained
    // without the penalty, spread their weight over many tokens) but not move one far.
    let lists = |html: &str, id: &str| -> Vec<Vec<String>> {
        table(html, id)
            .split("<td class=\"tokens\">")
            .skip(1)
            .map(|cell| cell.split('<').next().unwrap_or_default().split(", ").map(str::to_owned).collect())
            .collect()
    };
    for id in ["class-tokens", "hop-tokens"] {
        let (compact_lists, full_lists) = (lists(&compact, id), lists(&full, id));
        assert!(!full_lists.is_empty() && compact_lists.len() == full_lists.len(), "{id}");
        for (compact_list, full_list) in compact_lists.iter().zip(&full_lists) {
            let shared = compact_list.iter().filter(|t| full_list.contains(t)).count();
            assert!(shared + 2 >= full_list.len(), "{id}: {compact_list:?} vs {full_list:?}");
            for (rank, token) in compact_list.iter().enumerate() {
                if let Some(full_rank) = full_list.iter().position(|t| t == token) {
                    assert!(rank.abs_diff(full_rank) <= 3, "{id}: {token} at {rank} vs {full_rank}");
                }
            }
        }
    }
    // Each example's tokens, in the same order, with the same pushes to two decimals.
    let tokens = |html: &str| -> Vec<String> {
        let text =
            |span: &str| span.split_once('>').map(|(_, rest)| rest.split('<').next().unwrap_or_default().to_owned());
        html.split("class=\"tok\"").skip(1).filter_map(text).collect()
    };
    let (compact_tokens, full_tokens) = (tokens(&compact), tokens(&full));
    assert!(
        compact_tokens == full_tokens,
        "the examples differ ({} vs {} tokens)",
        compact_tokens.len(),
        full_tokens.len()
    );
    let pushes = |html: &str| -> Vec<f32> {
        html.split("data-push=\"").skip(1).filter_map(|s| s.split('"').next()?.parse().ok()).collect()
    };
    let (compact_pushes, full_pushes) = (pushes(&compact), pushes(&full));
    assert!(!full_pushes.is_empty(), "the default model explains its predictions");
    assert_eq!(compact_pushes.len(), full_pushes.len());
    let largest = compact_pushes.iter().zip(&full_pushes).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    assert!(largest <= 0.005, "pushes differ by up to {largest}");
}

/// The default output (token spans, no hop's own weights; #50) gives the report and the SQL
/// answers of the layout before it (token strings, every hop), whatever it left out.
#[test]
fn the_default_output_gives_the_report_and_sql_of_the_layout_before_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (default, before) = (default_predictions(dir.path()), hops_predictions(dir.path()));
    let columns = |path: &Path| {
        sql_last_line(
            path,
            "SELECT array_to_string(array_agg(column_name), ' ') FROM (SELECT column_name FROM information_schema.columns WHERE table_name = 'p')",
        )
    };
    assert!(
        columns(&default).contains("token_spans") && !columns(&default).contains("attention "),
        "{}",
        columns(&default)
    );
    assert!(columns(&before).contains("tokens") && !columns(&before).contains("token_spans"), "{}", columns(&before));
    // The README's queries and docs/sql.md's, each over both.
    let queries = [
        "SELECT id, top_tokens(tokens, attention_summary, 4) FROM p ORDER BY id",
        "SELECT prediction, top_attended(tokens, attention_summary, 20) FROM p GROUP BY prediction ORDER BY prediction",
        "SELECT prediction, distinctive_attended(tokens, attention_summary, 10) FROM p GROUP BY prediction ORDER BY prediction",
        "SELECT t, sum(x) FROM (SELECT unnest(tokens) AS t, unnest(contribution) * contribution_scale AS x FROM p) GROUP BY t ORDER BY 2 DESC, 1 LIMIT 20",
        "SELECT id, attention_html(tokens, attention_summary), contribution_html(tokens, contribution, contribution_scale) FROM p ORDER BY id",
    ];
    for query in queries {
        let whole = |path: &Path| {
            let sql = pipeline(
                &["sql", "--format", "csv", query],
                &[("--table", &PathBuf::from(format!("p={}", path.display())))],
            );
            assert!(sql.status.success(), "{query}: {}", stderr(&sql));
            String::from_utf8_lossy(&sql.stdout).into_owned()
        };
        let (answer, answer_before) = (whole(&default), whole(&before));
        assert!(answer.lines().count() > 1, "{query}: {answer}");
        let first_difference = answer.lines().zip(answer_before.lines()).find(|(a, b)| a != b);
        assert_eq!(first_difference, None, "{query}");
        assert_eq!(answer.lines().count(), answer_before.lines().count(), "{query}");
    }
    // The report: every section both have, alike to the byte.
    let page = |predictions: &Path, name: &str| {
        let html_path = dir.path().join(name);
        let output = report(predictions, &html_path, &["--examples", "3"]);
        assert!(output.status.success(), "{}", stderr(&output));
        std::fs::read_to_string(&html_path).expect("report")
    };
    let (default_page, before_page) = (page(&default, "default.html"), page(&before, "before.html"));
    let section = |html: &str, id: &str, end: &str| -> String {
        let start = html.find(&format!("id=\"{id}\"")).unwrap_or_else(|| panic!("no {id}"));
        html[start..].split(end).next().unwrap_or_default().to_owned()
    };
    let sections = [("confusion-matrix", "</table>"), ("class-tokens", "</table>"), ("class-pushes", "</table>")];
    for (id, end) in sections {
        assert_eq!(section(&default_page, id, end), section(&before_page, id, end), "{id}");
    }
    // Each card's pushes and summed attention, token by token (the layout before also drew each
    // hop).
    let examples = |html: &str| {
        let maps = html.split("class=\"heatmap ").skip(1).filter(|map| !map.starts_with("hop"));
        maps.map(|map| map.split("</div>").next().unwrap_or_default().to_owned()).collect::<Vec<_>>()
    };
    assert!(examples(&default_page).len() > 4);
    assert_eq!(examples(&default_page), examples(&before_page));
    assert!(!default_page.contains("id=\"hop-tokens\"") && before_page.contains("id=\"hop-tokens\""));
}

#[test]
fn a_han_report_shades_sentences() {
    let dir = tempfile::tempdir().expect("tempdir");
    let html = fixture_report(dir.path(), "tiny-han");
    assert!(html.contains("class=\"sentence\""), "sentence blocks");
    assert!(html.contains("data-sentence-weight="));
}

#[test]
fn a_model_without_attention_gets_a_report_without_attention_sections() {
    let dir = tempfile::tempdir().expect("tempdir");
    let html = fixture_report(dir.path(), "tiny-avg");
    assert!(html.contains("id=\"confusion-matrix\"") && html.contains("id=\"confidence\""));
    for absent in ["id=\"class-tokens\"", "id=\"hop-entropy\"", "class=\"tok\""] {
        assert!(!html.contains(absent), "{absent} without attention columns");
    }
}

#[test]
fn bad_inputs_are_refused_with_what_to_do_and_no_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    let html_path = dir.path().join("report.html");

    // Not an output of `pipeline run`: the missing columns are named.
    let output = report(&reviews(), &html_path, &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("no column `prediction`, `confidence`"), "{}", stderr(&output));

    // An unknown label column.
    let predictions = default_predictions(dir.path());
    let output = report(&predictions, &html_path, &["--label-column", "stars"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("no label column `stars`"), "{}", stderr(&output));

    // Attention that does not belong to the row's tokens: the row is named.
    let mismatched = dir.path().join("mismatched.parquet");
    write_mismatched_predictions(&mismatched);
    let output = report(&mismatched, &html_path, &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("row 1: attention_summary has 2 weights for 3 tokens"), "{}", stderr(&output));

    // The output is the input.
    let output = report(&predictions, &predictions, &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(read(&predictions).num_rows() == 300, "the input is untouched");

    assert!(!html_path.exists(), "no report is left behind");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).expect("dir").flatten().map(|e| e.file_name()).collect();
    assert_eq!(leftovers.len(), 2, "only the two inputs: {leftovers:?}");
}

/// A file's entropies that `pipeline run` cannot have written (infinite, negative) are
/// computed again from the weights: the report finishes (an infinite one made it loop) and
/// shows finite entropies.
#[test]
fn entropies_that_are_not_entropies_are_recomputed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let compact = read(&hops_predictions(dir.path()));
    let rows = compact.num_rows();
    let mut entropies = ListBuilder::new(arrow::array::Float32Builder::new());
    for row in 0..rows {
        entropies.append_value((0..8).map(|hop| Some(if (row + hop) % 2 == 0 { f32::INFINITY } else { -5.0 })));
    }
    let mut columns: Vec<(&str, arrow::array::ArrayRef)> = Vec::new();
    let schema = compact.schema();
    for (field, column) in schema.fields().iter().zip(compact.columns()) {
        let column = if field.name() == "attention_entropy" { Arc::new(entropies.finish()) } else { column.clone() };
        columns.push((field.name().as_str(), column));
    }
    let edited = dir.path().join("edited.parquet");
    write_parquet(&edited, columns);
    let html_path = dir.path().join("edited.html");
    let output = report(&edited, &html_path, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let html = std::fs::read_to_string(&html_path).expect("report");
    let hop_table = html.split("id=\"hop-tokens\"").nth(1).expect("hop table");
    let hop_table = hop_table.split("</table>").next().unwrap_or_default();
    assert!(!hop_table.contains("inf") && !hop_table.contains("-5.00"), "{hop_table}");
}

/// `batch` written to `path` with the column `name` replaced by `column`.
fn write_with_column(path: &Path, batch: &arrow::array::RecordBatch, name: &str, column: arrow::array::ArrayRef) {
    let schema = batch.schema();
    let columns: Vec<(&str, arrow::array::ArrayRef)> = schema
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(field, old)| (field.name().as_str(), if field.name() == name { column.clone() } else { old.clone() }))
        .collect();
    write_parquet(path, columns);
}

#[test]
fn columns_of_the_wrong_type_or_not_finite_are_refused_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let full = full_predictions(dir.path());
    let batch = read(&full);
    let rows = batch.num_rows();
    let html_path = dir.path().join("report.html");
    let refused = |edited: &Path, needles: &[&str]| {
        let output = report(edited, &html_path, &[]);
        assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
        for needle in needles {
            assert!(stderr(&output).contains(needle), "expected `{needle}` in: {}", stderr(&output));
        }
        assert!(!html_path.exists(), "no report written");
    };

    // A string confidence became all-NULL and empty charts, exit 0.
    let text = dir.path().join("text-confidence.parquet");
    let confidences: Vec<String> = (0..rows).map(|row| format!("{row}%")).collect();
    write_with_column(&text, &batch, "confidence", Arc::new(StringArray::from(confidences)));
    refused(&text, &["text-confidence.parquet", "column `confidence` is Utf8", "floating-point numbers"]);

    // A NaN confidence vanished from the charts.
    let nan = dir.path().join("nan-confidence.parquet");
    let confidences: Vec<f32> = (0..rows).map(|row| if row == 3 { f32::NAN } else { 0.9 }).collect();
    write_with_column(&nan, &batch, "confidence", Arc::new(Float32Array::from(confidences)));
    refused(&nan, &["nan-confidence.parquet", "row 3", "`confidence` is NaN"]);

    // A NaN weight was written into a title.
    let summary = batch.column_by_name("attention_summary").expect("summary").as_any().downcast_ref::<ListArray>();
    let summary = summary.expect("list");
    let mut weights = ListBuilder::new(arrow::array::Float32Builder::new());
    for row in 0..rows {
        let values = summary.value(row);
        let values = values.as_any().downcast_ref::<Float32Array>().expect("floats");
        weights
            .append_value(values.iter().enumerate().map(|(i, w)| if row == 7 && i == 0 { Some(f32::NAN) } else { w }));
    }
    let nan_weight = dir.path().join("nan-weight.parquet");
    write_with_column(&nan_weight, &batch, "attention_summary", Arc::new(weights.finish()));
    refused(&nan_weight, &["nan-weight.parquet", "row 7", "`attention_summary`", "not finite"]);
}

fn write_mismatched_predictions(path: &Path) {
    let mut tokens = ListBuilder::new(StringBuilder::new());
    tokens.append_value([Some("a"), Some("b")]);
    tokens.append_value([Some("x"), Some("y"), Some("z")]);
    let weights = ListArray::from_iter_primitive::<Float32Type, _, _>(vec![
        Some(vec![Some(0.5), Some(0.5)]),
        Some(vec![Some(0.5), Some(0.5)]),
    ]);
    write_parquet(
        path,
        vec![
            ("prediction", Arc::new(StringArray::from(vec!["pos", "neg"]))),
            ("confidence", Arc::new(Float32Array::from(vec![0.9, 0.8]))),
            ("tokens", Arc::new(tokens.finish())),
            ("attention_summary", Arc::new(weights)),
        ],
    );
}

/// Chromium's path, or `None` (with a loud note) where it is not installed, outside CI.
fn chromium(test: &str) -> Option<PathBuf> {
    let candidates = [std::env::var_os("CHROME").map(PathBuf::from), Some("/usr/bin/chromium".into())];
    let found = candidates.into_iter().flatten().find(|p| p.is_file());
    let why = "no Chromium (run scripts/install-chromium.sh, or set CHROME=/path/to/chromium)";
    test_support::or_skip(test, found.ok_or(why))
}

#[test]
fn the_report_renders_in_chromium_without_errors_and_shades_by_weight() {
    let Some(chrome) = chromium("the_report_renders_in_chromium_without_errors_and_shades_by_weight") else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    // With every hop's weights: every section the page can have.
    let predictions = hops_predictions(dir.path());
    let html_path = dir.path().join("report.html");
    let output = report(&predictions, &html_path, &["--examples", "2"]);
    assert!(output.status.success(), "{}", stderr(&output));

    let page = OpenPage::new(chrome, &html_path);
    let value = |expression: &str| page.value(expression);
    let tab = &page.tab;
    // Present and visible: a box with an area, not hidden by CSS nor inside a closed <details>.
    let visible = |selector: &str| -> bool {
        let script = format!(
            "(() => {{ const e = document.querySelector('{selector}'); if (!e) return false; \
             const r = e.getBoundingClientRect(); \
             return r.width > 0 && r.height > 0 && e.checkVisibility({{visibilityProperty: true}}); }})()"
        );
        value(&script) == serde_json::Value::Bool(true)
    };
    for selector in ["#confusion-matrix", "#reliability svg", "#confidence svg", "#hop-entropy svg", "#class-tokens"] {
        assert!(visible(selector), "{selector} is not visible");
    }
    // The pushes lead each card; where the model looked is one click away.
    assert!(visible(".heatmap.pushed .tok"), "the pushes are not visible");
    assert!(!visible(".heatmap.summed .tok"), "attention is shown before it is asked for");
    tab.find_element(".example details.attention summary").expect("the attention toggle").click().expect("open it");
    assert!(visible(".heatmap.summed .tok"), "attention does not open");
    // One colour per meaning: attention is a neutral grey, never a push's hue.
    let attention_colours = value(
        "JSON.stringify([...document.querySelectorAll('.heatmap.summed .tok')].map(t => getComputedStyle(t).backgroundColor))",
    );
    let attention_colours: Vec<String> =
        serde_json::from_str(attention_colours.as_str().expect("a JSON string")).expect("colours");
    assert!(attention_colours.iter().all(|c| c.starts_with("rgba(110, 110, 110") || c == "rgba(0, 0, 0, 0)"));
    // Word tables hold words: no [UNK] (every rare word at once) leading them; hops that look at
    // the same words are one row.
    let tables = value(
        "document.getElementById('class-tokens').textContent + document.getElementById('hop-tokens').textContent",
    );
    assert!(!tables.as_str().unwrap_or("[UNK]").contains("[UNK]"), "{tables}");
    let hop_rows = value("document.querySelectorAll('#hop-tokens tr[data-hops]').length").as_u64().expect("a count");
    assert!((1..8).contains(&hop_rows), "the default model's 8 hops, alike, in {hop_rows} rows");

    // Which way each token pushed: two hues, blue for towards the prediction and orange for
    // against, as the browser paints them, and stronger pushes more opaque.
    let pushes = value(
        "JSON.stringify([...document.querySelectorAll('.heatmap.pushed .tok')].map(\
         t => [parseFloat(t.dataset.push), getComputedStyle(t).backgroundColor]))",
    );
    let pushes: Vec<(f64, String)> = serde_json::from_str(pushes.as_str().expect("a JSON string")).expect("pushes");
    let towards = pushes.iter().filter(|(p, c)| *p > 0.5 && c.starts_with("rgba(40, 110, 220")).count();
    let against = pushes.iter().filter(|(p, c)| *p < -0.1 && c.starts_with("rgba(235, 130, 30")).count();
    assert!(towards > 0 && against > 0, "not two hues: {towards} towards, {against} against");
    for (push, colour) in &pushes {
        assert!((alpha(colour) - 0.85 * push.abs()).abs() < 0.01, "push {push} painted {colour}");
    }
    // A hue names one class on every card: the legend says blue is pos and orange neg, and a
    // confident card's pushes lean blue where it predicted pos and orange where it predicted neg.
    let legend = value("document.querySelector('.legend').textContent").as_str().unwrap_or("").to_owned();
    assert!(legend.contains("towards pos") && legend.contains("towards neg"), "{legend}");
    let cards = value(
        "JSON.stringify([...document.querySelectorAll('.example')].map(c => [\
         c.querySelector('h4 strong').textContent, parseFloat(c.querySelector('h4').textContent.split('(')[1]), \
         [...c.querySelectorAll('.heatmap.pushed .tok')].reduce((sum, t) => sum + parseFloat(t.dataset.push), 0)]))",
    );
    let cards: Vec<(String, f64, f64)> = serde_json::from_str(cards.as_str().expect("a JSON string")).expect("cards");
    // 0.7: the fixture report's pos cards are its least sure (0.71 and 0.76 with the default model).
    let confident: Vec<&(String, f64, f64)> = cards.iter().filter(|(_, confidence, _)| *confidence > 0.7).collect();
    for class in ["neg", "pos"] {
        assert!(confident.iter().any(|(p, _, _)| p == class), "a confident {class} card: {cards:?}");
    }
    for (prediction, confidence, net) in &confident {
        assert_eq!(*net > 0.0, prediction == "pos", "a card predicted {prediction} ({confidence}) nets {net}");
    }
    // Word-level pushes (#36): no card's strongest push lands on a word that carries its
    // neighbours' meaning rather than its own (the paper's SAN put it on `this` or `movie`
    // in a quarter of IMDB's test reviews).
    let strongest = value(
        "JSON.stringify([...document.querySelectorAll('.heatmap.pushed')].flatMap(m => \
         [...m.querySelectorAll('.tok')].filter(t => Math.abs(parseFloat(t.dataset.push)) === 1)\
         .map(t => t.textContent.trim())))",
    );
    let strongest: Vec<String> = serde_json::from_str(strongest.as_str().expect("a JSON string")).expect("tokens");
    assert!(strongest.len() >= cards.len(), "each card has its strongest push: {strongest:?}");
    let carriers = ["this", ".", "movie", "film", "the", "a", ",", "it", "is", "and"];
    assert!(!strongest.iter().any(|t| carriers.contains(&t.as_str())), "a carrier pushed hardest: {strongest:?}");

    // A token's shading follows its weight: heavier never lighter, the heaviest darkest.
    let shades = value(
        "JSON.stringify([...document.querySelector('.heatmap.summed').querySelectorAll('.tok')].map(\
         t => [parseFloat(t.dataset.weight), getComputedStyle(t).backgroundColor]))",
    );
    let pairs: Vec<(f64, String)> = serde_json::from_str(shades.as_str().expect("a JSON string")).expect("pairs");
    let mut shaded: Vec<(f64, f64)> = pairs.iter().map(|(w, colour)| (*w, alpha(colour))).collect();
    shaded.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert!(shaded.len() > 3, "{pairs:?}");
    for pair in shaded.windows(2) {
        assert!(pair[1].1 + 1e-6 >= pair[0].1, "a heavier token is lighter: {pair:?}");
    }
    let (lightest, heaviest) = (shaded[0], shaded[shaded.len() - 1]);
    assert!(heaviest.1 > lightest.1 + 0.3, "shading barely varies: {lightest:?} .. {heaviest:?}");

    // The filter: typed into like a person would, it hides the examples without the words.
    let shown = || {
        value("[...document.querySelectorAll('.example')].filter(e => e.getClientRects().length > 0).length")
            .as_u64()
            .expect("a count")
    };
    let all = shown();
    assert!(all >= 4, "{all} examples");
    let filter = tab.find_element("#example-filter").expect("the filter box");
    filter.click().expect("focus").type_into("no-such-word-anywhere").expect("type");
    assert_eq!(shown(), 0, "nothing holds that word");
    assert!(value("document.getElementById('filter-count').textContent").as_str().unwrap_or("").starts_with("0 of "));
    value(
        "(() => { const f = document.getElementById('example-filter'); f.value = ''; f.dispatchEvent(new Event('input')); })()",
    );
    filter.click().expect("focus").type_into("label pos").expect("type");
    let matching = shown();
    assert!(matching > 0 && matching < all, "{matching} of {all} cards say `label pos`");

    // The artefact: what a person sees.
    let png = tab.capture_screenshot(CaptureScreenshotFormatOption::Png, None, None, true).expect("screenshot");
    let artefacts = repo_root().join("target/test-artifacts");
    std::fs::create_dir_all(&artefacts).expect("artefact dir");
    std::fs::write(artefacts.join("report.png"), &png).expect("write screenshot");
    assert!(png.len() > 10_000, "an empty screenshot");

    page.assert_no_console_messages();
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

/// The alpha of a CSS colour as `getComputedStyle` gives it: `rgba(r, g, b, a)` or `rgb(r, g, b)`.
fn alpha(colour: &str) -> f64 {
    let inside = colour.split_once('(').and_then(|(_, rest)| rest.strip_suffix(')')).expect("a CSS colour");
    let parts: Vec<&str> = inside.split(',').map(str::trim).collect();
    match parts.as_slice() {
        [_, _, _, a] => a.parse().expect("alpha"),
        [_, _, _] => 1.0,
        _ => panic!("unexpected colour {colour}"),
    }
}

/// The fixture reviews with their `label` column replaced by `labels`.
fn reviews_labelled(path: &Path, labels: Arc<dyn arrow::array::Array>) {
    let batch = read(&reviews());
    let schema = batch.schema();
    let columns: Vec<(&str, Arc<dyn arrow::array::Array>)> = schema
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(field, column)| {
            (field.name().as_str(), if field.name() == "label" { labels.clone() } else { column.clone() })
        })
        .collect();
    write_parquet(path, columns);
}

#[test]
fn float_labels_are_read_as_label_indices_and_label_columns_that_mostly_miss_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let accuracy =
        |page: &str| page.split("id=\"accuracy\">").nth(1).and_then(|s| s.split('<').next()).map(str::to_owned);
    let names = strings(&read(&reviews()), "label");
    let page_for = |labels: Arc<dyn arrow::array::Array>, name: &str| {
        let input = dir.path().join(format!("{name}-reviews.parquet"));
        reviews_labelled(&input, labels);
        let predictions = dir.path().join(format!("{name}-predictions.parquet"));
        assert!(run(&input, &predictions, &[]).status.success());
        let page = dir.path().join(format!("{name}.html"));
        let output = report(&predictions, &page, &[]);
        (output, std::fs::read_to_string(&page).unwrap_or_default())
    };
    let as_strings: Arc<dyn arrow::array::Array> = Arc::new(StringArray::from(names.clone()));
    let (output, by_name) = page_for(as_strings, "strings");
    assert!(output.status.success(), "{}", stderr(&output));
    // pandas writes an integer column with nulls as 0.0/1.0.
    let floats: Vec<Option<f64>> =
        names.iter().map(|l| l.as_deref().map(|l| if l == "pos" { 1.0 } else { 0.0 })).collect();
    let (output, by_float) = page_for(Arc::new(arrow::array::Float64Array::from(floats)), "floats");
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(accuracy(&by_name).is_some());
    assert_eq!(accuracy(&by_float), accuracy(&by_name), "0.0/1.0 are the labels neg/pos");
    assert!(!stderr(&output).contains("no true label matches"), "{}", stderr(&output));

    // Labels in other words than the model's: every row would count as wrong; stop (this
    // was a warning beside an accuracy of 0).
    let other: Vec<Option<String>> = names
        .iter()
        .map(|l| l.as_deref().map(|l| if l == "pos" { "positive" } else { "negative" }.to_owned()))
        .collect();
    let (output, page) = page_for(Arc::new(StringArray::from(other)), "other-words");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("300 of 300 labelled rows have a true label that is none of the model's"));
    assert!(stderr(&output).contains("`negative`, `positive`"), "{}", stderr(&output));
    assert!(page.is_empty(), "no report written");

    // A rating (1..=10): its 1 and 0 read as the indices of pos and neg, the rest as nothing
    // (accuracy 0.0068 with a warning, before).
    let ratings: Vec<i64> = (0..names.len()).map(|row| i64::try_from(row % 10).expect("small") + 1).collect();
    let (output, _) = page_for(Arc::new(arrow::array::Int64Array::from(ratings)), "ratings");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("270 of 300 labelled rows have a true label that is none"), "{}", stderr(&output));

    // An id column: stopped as soon as it shows itself (3,000 rows made a 1.7 GB page).
    let ids: Vec<String> = (0..names.len()).map(|row| format!("doc-{row}")).collect();
    let (output, _) = page_for(Arc::new(StringArray::from(ids)), "ids");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("more than 50 distinct values that are not the model's labels"));
    assert!(stderr(&output).contains("it is not a column of true labels"), "{}", stderr(&output));

    // A float that is no label index is refused.
    let halves: Vec<Option<f64>> = names.iter().map(|_| Some(0.5)).collect();
    let (output, _) = page_for(Arc::new(arrow::array::Float64Array::from(halves)), "halves");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("holds 0.5, which is not a label index"), "{}", stderr(&output));
}

#[test]
fn the_report_never_takes_the_name_of_predictions_or_of_a_run_manifest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let predictions = dir.path().join("predictions.parquet");
    assert!(run(&reviews(), &predictions, &[]).status.success());
    let before = std::fs::read(&predictions).expect("read");
    for name in ["other.parquet", "_SUCCESS"] {
        let target = dir.path().join(name);
        let output = report(&predictions, &target, &[]);
        assert_eq!(output.status.code(), Some(1), "{name}: {}", stderr(&output));
        assert!(stderr(&output).contains("give it a name ending in .html"), "{}", stderr(&output));
        assert!(!target.exists());
    }
    // Inside a dataset, a part's name is refused too.
    let parts = dir.path().join("parts");
    assert!(run(&reviews(), &parts, &["--rows-per-part", "100"]).status.success());
    let part = parts.join("part-00000.parquet");
    let part_before = std::fs::read(&part).expect("read");
    let output = report(&parts, &part, &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert_eq!(std::fs::read(&part).expect("read"), part_before);
    assert_eq!(std::fs::read(&predictions).expect("read"), before);
}

/// The number in the report's "truncated" row.
fn truncated_rows(html: &str) -> Option<u64> {
    let row = html.split("id=\"truncated-rows\"").nth(1)?;
    row.split("<td class=\"num\">").nth(1)?.split('<').next()?.parse().ok()
}

#[test]
fn truncated_documents_are_counted_and_marked() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Read in windows (the default), no review loses a token.
    let html = std::fs::read_to_string({
        let page = dir.path().join("windows.html");
        assert!(report(&default_predictions(dir.path()), &page, &[]).status.success());
        page
    })
    .expect("report");
    assert_eq!(truncated_rows(&html), Some(0), "windows leave nothing out");
    // Cut at the limit, the long reviews are counted, and marked among the examples.
    let cut = dir.path().join("cut.parquet");
    let run = pipeline(&["run", "--long-documents", "truncate"], &[("--input", &reviews()), ("--output", &cut)]);
    assert!(run.status.success(), "{}", stderr(&run));
    let page = dir.path().join("cut.html");
    assert!(report(&cut, &page, &["--examples", "200"]).status.success());
    let html = std::fs::read_to_string(&page).expect("report");
    let truncated = truncated_rows(&html).expect("a truncated row");
    assert!(truncated > 10, "{truncated} of 300 fixture reviews over 400 tokens");
    assert!(html.contains("<span class=\"truncated\""), "long examples are marked");
}

/// A document read whole in windows can have thousands of tokens: its example is drawn as
/// an excerpt around its most attended token, so the page stays small.
#[test]
fn a_very_long_document_is_drawn_as_an_excerpt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("long.parquet");
    let long = format!("{}what a wonderful film . {}", "the plot . ".repeat(1500), "the cast . ".repeat(1500));
    let texts: Arc<dyn arrow::array::Array> = Arc::new(StringArray::from(vec![long.as_str()]));
    write_parquet(&input, vec![("text", texts)]);
    let predictions = dir.path().join("long-predictions.parquet");
    let run = pipeline(&["run"], &[("--input", &input), ("--output", &predictions)]);
    assert!(run.status.success(), "{}", stderr(&run));
    let page = dir.path().join("long.html");
    let output = report(&predictions, &page, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let html = std::fs::read_to_string(&page).expect("report");
    assert!(html.contains(" of 9005, around the most attended one"), "the excerpt is said");
    // 600 tokens in nine heat maps, in each of the two lists the one row is in.
    assert!(html.len() < 1_500_000, "a {} byte page", html.len());
}

/// The cards of a page: each card's heading (`id · predicted … · label …`).
fn card_headings(html: &str) -> Vec<String> {
    html.split("<div class=\"example\"><h4>")
        .skip(1)
        .map(|card| card.split("</h4>").next().unwrap_or_default().replace("<strong>", "").replace("</strong>", ""))
        .collect()
}

#[test]
fn a_where_condition_chooses_the_documents_drawn_and_the_run_section_names_the_modes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let predictions = default_predictions(dir.path());
    let html_path = dir.path().join("report.html");

    // Counted independently, by `pipeline sql` over the same predictions.
    let condition = "label <> prediction AND array_length(tokens) > 100";
    let counted = sql_last_line(&predictions, &format!("SELECT count(*) AS n FROM p WHERE {condition}"));
    let expected: usize = counted.parse().expect("a count");
    assert!(expected > 3, "the condition should pick several rows, not {expected}");

    let output = report(&predictions, &html_path, &["--where", condition, "--examples", "200"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let html = std::fs::read_to_string(&html_path).expect("report");
    let cards = card_headings(&html);
    assert_eq!(cards.len(), expected, "{cards:?}");
    assert!(html.contains(&format!("{expected} of {expected} matching rows drawn")), "{html}");
    for card in &cards {
        let predicted = card.split("predicted ").nth(1).and_then(|p| p.split(' ').next());
        let label = card.split("label ").nth(1).and_then(|l| l.split(' ').next());
        assert!(predicted.is_some() && label.is_some() && predicted != label, "{card}");
    }
    // Only the chosen documents: none of the default groups.
    assert!(!html.contains("id=\"most-confident\"") && !html.contains("id=\"misclassified\""));
    // The tallies still cover every row.
    assert!(html.contains("<th>rows</th><td class=\"num\">300</td>"), "the Run section counts all rows");

    // One document by its id, and fewer cards than matches said so.
    let output = report(&predictions, &html_path, &["--where", "id = 'test_pos_6461'"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let html = std::fs::read_to_string(&html_path).expect("report");
    assert_eq!(card_headings(&html).len(), 1);
    assert!(card_headings(&html)[0].starts_with("test_pos_6461 · "), "{:?}", card_headings(&html));
    let output = report(&predictions, &html_path, &["--where", "label = 'pos'", "--examples", "2"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let html = std::fs::read_to_string(&html_path).expect("report");
    assert!(html.contains("2 of 150 matching rows drawn, in input order (raise --examples"), "{html}");

    // The Run section names the modes and the rows read in windows, as the run counted them.
    let run = pipeline(&["run"], &[("--input", &reviews()), ("--output", &dir.path().join("again.parquet"))]);
    let said = String::from_utf8_lossy(&run.stdout).to_string();
    let windowed = said.split(" in windows").next().and_then(|s| s.rsplit(' ').next()).expect("the run's count");
    assert!(
        html.contains(&format!("read in windows (more than 400 tokens)</th><td class=\"num\">{windowed}<")),
        "{html}"
    );
    assert!(html.contains("<td>windows(even, no overlap, mean)</td>") && html.contains("<td>compact</td>"), "{html}");

    // What is not a condition is refused, naming it, and no page is written.
    std::fs::remove_file(&html_path).expect("remove");
    for (bad, says) in
        [("confidence", "non-boolean"), ("no_such_column = 1", "no_such_column"), ("label = ", "not valid SQL")]
    {
        let output = report(&predictions, &html_path, &["--where", bad]);
        assert!(!output.status.success(), "{bad} was accepted");
        let message = stderr(&output);
        assert!(message.contains(&format!("--where {bad:?}")) && message.contains(says), "{bad}: {message}");
        assert!(!html_path.exists(), "{bad} left a page behind");
    }
}

#[test]
fn the_filter_matches_whole_words_and_ids_and_hides_groups_left_empty() {
    let test = "the_filter_matches_whole_words_and_ids_and_hides_groups_left_empty";
    let Some(chrome) = chromium(test) else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let predictions = default_predictions(dir.path());
    let html_path = dir.path().join("report.html");
    let output = report(&predictions, &html_path, &["--examples", "3"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let page = OpenPage::new(chrome, &html_path);
    let count = |selector: &str| {
        let script =
            format!("[...document.querySelectorAll('{selector}')].filter(e => e.getClientRects().length > 0).length");
        page.value(&script).as_u64().expect("a count")
    };
    let all = count(".example");
    let groups = count(".example-group");
    assert!(all >= 8 && groups >= 4, "{all} cards in {groups} groups");
    let said = || page.value("document.getElementById('filter-count').textContent").as_str().unwrap_or("").to_owned();

    // An id: its card alone, and only the groups that hold it.
    let id = page.value("document.querySelector('#least-confident .example h4').textContent.split(' ')[0]");
    let id = id.as_str().expect("an id").to_owned();
    page.filter(&id);
    assert_eq!(count(".example"), 1, "{id}");
    assert_eq!(said(), format!("1 of {all} cards match"));
    assert_eq!(count(".example-group"), 1, "only the group holding {id} shows");

    // Part of a word is no word: `test_po` is in every pos id, and matches none.
    page.filter("test_po");
    assert_eq!(count(".example"), 0);
    assert_eq!(count(".example-group"), 0, "groups without cards are hidden");
    assert_eq!(said(), format!("0 of {all} cards match"));

    // A label as a whole word: every card whose heading names it as prediction or label, or
    // that has it as a token, and no other. (The heading's last word runs into the first
    // token in the card's text; a filter over that text missed the label.)
    page.filter("neg");
    let neg = count(".example");
    let expected = page.value(
        "[...document.querySelectorAll('.example')].filter(c => \
         /(predicted|label) neg( |$)/.test(c.querySelector('h4').textContent.trim()) || \
         [...c.querySelectorAll('.tok')].some(t => t.textContent.trim() === 'neg')).length",
    );
    assert_eq!(expected.as_u64(), Some(neg), "the cards that say `neg`");
    assert!(neg > 0 && neg < all, "{neg} of {all}");

    // Cleared, everything is back.
    page.filter(" ");
    assert_eq!(count(".example"), all);
    assert_eq!(count(".example-group"), groups);
    page.assert_no_console_messages();
}

/// The word a SQL query over `predictions` finds with the largest mean push towards `class`
/// (in logit units, over rows predicted as it, seen at least 10 times). The pushes point at
/// `pos`, the second label, on every row: towards `neg` is the most negative.
fn strongest_push_by_sql(predictions: &Path, class: &str, pushes: &str) -> String {
    let towards = if class == "pos" { "DESC" } else { "ASC" };
    let query = format!(
        "SELECT t FROM (SELECT unnest(tokens) AS t, {pushes} AS p FROM p WHERE prediction = '{class}') \
         GROUP BY t HAVING count(*) >= 10 ORDER BY avg(p) {towards}, t LIMIT 1"
    );
    sql_last_line(predictions, &query)
}

#[test]
fn the_class_tables_rank_words_by_their_push_in_logit_units() {
    let dir = tempfile::tempdir().expect("tempdir");
    let compact = default_predictions(dir.path());
    let full = full_predictions(dir.path());
    for (predictions, pushes) in
        [(&compact, "unnest(contribution) * contribution_scale"), (&full, "unnest(contribution)")]
    {
        let html_path = dir.path().join("report.html");
        let output = report(predictions, &html_path, &[]);
        assert!(output.status.success(), "{}", stderr(&output));
        let html = std::fs::read_to_string(&html_path).expect("report");
        let table = html.split("id=\"class-pushes\"").nth(1).expect("a push table").split("</table>").next().unwrap();
        for class in ["neg", "pos"] {
            let word = strongest_push_by_sql(predictions, class, pushes);
            let row = table.split(&format!("<th>{class}</th>")).nth(1).expect("a row per class");
            assert!(row.starts_with(&format!("<td class=\"tokens\">{word} (+")), "{class}: {word} first? {row}");
        }
    }
}

/// The key-value metadata of the Parquet file at `path` (the run's: model, labels, encoding,
/// where the pushes point), without Arrow's schema, less the keys `drop` names.
fn run_metadata(path: &Path, drop: &[&str]) -> Vec<parquet::file::metadata::KeyValue> {
    let source = std::fs::File::open(path).expect("open");
    let builder = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(source).expect("parquet");
    let metadata: Vec<parquet::file::metadata::KeyValue> = builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|kv| kv.key != "ARROW:schema" && !drop.contains(&kv.key.as_str()))
        .collect();
    assert!(metadata.iter().any(|kv| kv.key == "model.sha256"), "{metadata:?}");
    metadata
}

/// Writes `batch` to `path` with `metadata` as the file's key-value metadata.
fn write_with_metadata(
    path: &Path,
    batch: &arrow::array::RecordBatch,
    metadata: Vec<parquet::file::metadata::KeyValue>,
) {
    let schema = Arc::new(batch.schema().as_ref().clone().with_metadata(Default::default()));
    let batch = arrow::array::RecordBatch::try_new(schema, batch.columns().to_vec()).expect("same columns");
    let properties =
        parquet::file::properties::WriterProperties::builder().set_key_value_metadata(Some(metadata)).build();
    let file = std::fs::File::create(path).expect("create");
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), Some(properties)).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
}

/// A dataset resumed across versions: a part written before `contribution_scale` beside one
/// with it. The report reads both and leaves the push table out, as for an old file alone.
#[test]
fn parts_with_and_without_contribution_scale_report_together_without_the_push_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let parts = dir.path().join("parts");
    std::fs::create_dir(&parts).expect("mkdir");
    let new = default_predictions(dir.path());
    std::fs::copy(&new, parts.join("part-00000.parquet")).expect("copy");
    let batch = read(&new);
    let keep: Vec<usize> =
        (0..batch.num_columns()).filter(|&i| batch.schema().field(i).name() != "contribution_scale").collect();
    let old = batch.project(&keep).expect("project");
    write_with_metadata(&parts.join("part-00001.parquet"), &old, run_metadata(&new, &[]));

    let html_path = dir.path().join("report.html");
    let output = report(&parts, &html_path, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let html = std::fs::read_to_string(&html_path).expect("report");
    assert!(html.contains("<th>rows</th><td class=\"num\">600</td>"), "both parts are read");
    assert!(!html.contains("id=\"class-pushes\""), "bytes without their scale are not logit units");
    // The new part alone has it.
    let output = report(&new, &html_path, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(std::fs::read_to_string(&html_path).expect("report").contains("id=\"class-pushes\""));
}

/// An output written before `pipeline.contribution_towards` holds each row's pushes towards
/// its prediction. The report turns both kinds towards each card's prediction, so the same
/// pushes give the same page; a table of the two kinds at once is refused, naming the key.
#[test]
fn pushes_towards_each_prediction_from_before_the_key_report_as_the_same_page() {
    use arrow::array::{Array, AsArray, Int8Builder};
    let dir = tempfile::tempdir().expect("tempdir");
    let new = default_predictions(dir.path());
    let batch = read(&new);
    let predictions = batch.column_by_name("prediction").expect("prediction").as_string::<i32>().clone();
    let pushes = batch.column_by_name("contribution").expect("contribution").as_list::<i32>().clone();
    // What the earlier version wrote: the pushes of `neg` rows the other way round.
    let mut flipped = ListBuilder::new(Int8Builder::new());
    for row in 0..batch.num_rows() {
        if pushes.is_null(row) {
            flipped.append_null();
            continue;
        }
        let sign: i8 = if predictions.value(row) == "neg" { -1 } else { 1 };
        let bytes = pushes.value(row);
        flipped.values().append_slice(
            &bytes.as_primitive::<arrow::datatypes::Int8Type>().values().iter().map(|b| sign * b).collect::<Vec<_>>(),
        );
        flipped.append(true);
    }
    let index = batch.schema().index_of("contribution").expect("contribution");
    let mut columns = batch.columns().to_vec();
    columns[index] = Arc::new(flipped.finish());
    let schema = batch.schema();
    let old = arrow::array::RecordBatch::try_new(schema, columns).expect("same schema");
    let old_path = dir.path().join("old.parquet");
    write_with_metadata(&old_path, &old, run_metadata(&new, &["pipeline.contribution_towards"]));

    let page = |input: &Path| {
        let html_path = dir.path().join("report.html");
        let output = report(input, &html_path, &[]);
        assert!(output.status.success(), "{}", stderr(&output));
        let html = std::fs::read_to_string(&html_path).expect("report");
        // From the push table on; the cards name their file, which differs.
        let from_pushes = html.split("id=\"class-pushes\"").nth(1).expect("a push table");
        from_pushes.replace(&input.file_name().expect("a file").to_string_lossy().to_string(), "FILE")
    };
    let (from_new, from_old) = (page(&new), page(&old_path));
    assert!(from_new.contains("towards <strong>pos</strong>"), "the legend names the class");
    if let Some(at) = from_new.bytes().zip(from_old.bytes()).position(|(a, b)| a != b) {
        let around = |page: &str| page.get(at.saturating_sub(200)..(at + 200).min(page.len())).unwrap_or("").to_owned();
        panic!("the pages differ at byte {at}:\n{}\nvs\n{}", around(&from_new), around(&from_old));
    }
    assert_eq!(from_new.len(), from_old.len(), "the same pushes, pointed two ways, draw one page");

    let parts = dir.path().join("parts");
    std::fs::create_dir(&parts).expect("mkdir");
    std::fs::copy(&new, parts.join("part-00000.parquet")).expect("copy");
    std::fs::copy(&old_path, parts.join("part-00001.parquet")).expect("copy");
    let output = report(&parts, &dir.path().join("mixed.html"), &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("pipeline.contribution_towards"), "{}", stderr(&output));
    assert!(!dir.path().join("mixed.html").exists(), "nothing written");

    // Through `pipeline sql --output`, which keeps the column and says where it points: the
    // same push table and the same pushes on the cards.
    let through_sql = dir.path().join("through-sql.parquet");
    let query = format!("SELECT * FROM '{}'", new.display());
    let sql = pipeline(&["sql", &query], &[("--output", &through_sql)]);
    assert!(sql.status.success(), "{}", stderr(&sql));
    let pushes_of = |html: &str| -> (String, Vec<String>) {
        let table = html.split("</table>").next().unwrap_or_default().to_owned();
        let pushes =
            html.split("data-push=\"").skip(1).filter_map(|s| s.split('"').next()).map(str::to_owned).collect();
        (table, pushes)
    };
    assert_eq!(pushes_of(&page(&through_sql)), pushes_of(&from_new), "pushes read back the same way round");

    // A label that is none of the model's would turn every card's pushes round: refused.
    let altered = dir.path().join("altered.parquet");
    let mut metadata = run_metadata(&new, &["pipeline.contribution_towards"]);
    metadata.push(parquet::file::metadata::KeyValue::new(
        "pipeline.contribution_towards".to_owned(),
        "label:positive".to_owned(),
    ));
    write_with_metadata(&altered, &batch, metadata);
    let output = report(&altered, &dir.path().join("altered.html"), &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(message.contains("altered.parquet") && message.contains("`positive`"), "{message}");
    assert!(!dir.path().join("altered.html").exists(), "nothing written");
}

/// Spans whose text column is not named, or names no text, are left unread with a warning that
/// says why, never read from another column; `tokens(text, token_spans)` still reads them,
/// and a Parquet output of `pipeline sql` keeps the key that names their text.
#[test]
fn token_spans_without_their_text_column_are_named_not_misread() {
    let dir = tempfile::tempdir().expect("tempdir");
    let predictions = default_predictions(dir.path());
    let batch = read(&predictions);
    let key = "pipeline.token_spans_text";
    // A copy by a tool that drops the Parquet metadata, and one whose key names a number.
    let lost = dir.path().join("lost.parquet");
    write_with_metadata(&lost, &batch, run_metadata(&predictions, &[key]));
    let number = dir.path().join("number.parquet");
    let mut metadata = run_metadata(&predictions, &[key]);
    metadata.push(parquet::file::metadata::KeyValue::new(key.to_owned(), "confidence".to_owned()));
    write_with_metadata(&number, &batch, metadata);
    for (file, why) in [(&lost, "no `pipeline.token_spans_text` key"), (&number, "is Float32, not text")] {
        let html = dir.path().join("page.html");
        let output = report(file, &html, &[]);
        assert!(output.status.success(), "{}", stderr(&output));
        assert!(
            stderr(&output).contains("token_spans cannot be read") && stderr(&output).contains(why),
            "{}",
            stderr(&output)
        );
        assert!(!std::fs::read_to_string(&html).expect("report").contains("class=\"tok\""), "no tokens read");
    }
    let first_token =
        |path: &Path| sql_last_line(path, "SELECT tokens(text, token_spans)[1] FROM p ORDER BY id LIMIT 1");
    assert_eq!(first_token(&lost), first_token(&predictions));
    let copy = dir.path().join("copy.parquet");
    let sql = pipeline(
        &["sql", "SELECT id, text, token_spans FROM p", "--output", &copy.to_string_lossy()],
        &[("--table", &PathBuf::from(format!("p={}", predictions.display())))],
    );
    assert!(sql.status.success(), "{}", stderr(&sql));
    let tokens = |path: &Path| sql_last_line(path, "SELECT sum(array_length(tokens)) FROM p");
    assert_eq!(tokens(&copy), tokens(&predictions));
}

//! The report's sections on predictions of each kind: cards, hops, sentences, truncated and
//! very long documents, `--where`, the page's filter and the class tables.

use arrow::array::StringArray;

use super::*;

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

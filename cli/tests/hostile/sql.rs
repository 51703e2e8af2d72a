//! Queries that would take more memory than a process has stop with exit code 1 and a
//! message, not an abort; the report's `--where` takes what `pipeline sql` takes.

use super::*;

#[test]
fn a_string_built_past_the_cap_is_refused_at_once() {
    let started = Instant::now();
    let output = pipeline(&["sql", "SELECT length(repeat('x', 2000000000)) AS n"], &[]);
    assert_eq!(exit_code(&output), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("repeat() would build"), "{}", stderr(&output));
    assert!(started.elapsed() < Duration::from_secs(30), "refused before building anything");
    let query = format!("SELECT repeat(text, 100000) AS t FROM '{}' ORDER BY t", reviews().display());
    let output = pipeline(&["sql", &query, "--format", "csv"], &[]);
    assert_eq!(exit_code(&output), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("repeat() would build"), "{}", stderr(&output));
    let concatenated =
        "SELECT length(concat(s, s, s, s, s, s, s, s, s)) AS n FROM (SELECT repeat('x', 250000000) AS s)";
    let output = pipeline(&["sql", concatenated], &[]);
    assert_eq!(exit_code(&output), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("concat() would build"), "{}", stderr(&output));
    // Within the cap, the functions work as DataFusion's own.
    let query = "SELECT repeat('ab', 3) AS r, lpad('7', 3, '0') AS p, concat_ws('-', 'a', 'b') AS c";
    let output = pipeline(&["sql", query, "--format", "csv"], &[]);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "r,p,c\nababab,007,a-b\n", "{}", stderr(&output));
}

#[test]
fn a_query_past_its_memory_limit_stops_with_a_message() {
    // A hash join's build side cannot spill.
    let query = format!("SELECT a.id FROM '{0}' a JOIN '{0}' b ON a.text = b.text", reviews().display());
    let output = pipeline(&["sql", &query, "--format", "csv", "--memory-limit", "64K"], &[]);
    assert_eq!(exit_code(&output), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("needs more memory than"), "{}", stderr(&output));
    assert!(stderr(&output).contains("--memory-limit"), "{}", stderr(&output));
    let output = pipeline(&["sql", &query, "--format", "csv", "--memory-limit", "lots"], &[]);
    assert_eq!(exit_code(&output), Some(2), "{}", stderr(&output));
    let output = pipeline(&["sql", &query, "--format", "csv"], &[]);
    assert!(output.status.success(), "{}", stderr(&output));
}

#[test]
fn report_where_takes_the_functions_of_a_query_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.parquet");
    assert!(run(&reviews(), &out, &[]).status.success());
    let page = dir.path().join("page.html");
    let output = pipeline(&["report", "--where", "now() > '2020-01-01'"], &[("--input", &out), ("--output", &page)]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(std::fs::read_to_string(&page).expect("page").contains("now()"), "the condition is named on the page");

    // A generated condition too long to plan is refused with what works, quoted by its start.
    let terms: Vec<String> = (0..5000).map(|i| format!("id = 'review-{i}'")).collect();
    let condition = terms.join(" OR ");
    let output = pipeline(&["report", "--where", &condition], &[("--input", &out), ("--output", &page)]);
    let err = stderr(&output);
    assert_eq!(exit_code(&output), Some(1), "{err}");
    assert!(err.contains("IN ('a', 'b', …)") && !err.contains("subquery"), "{err}");
    assert!(err.len() < 2000, "the condition is not quoted whole: {} bytes", err.len());
}

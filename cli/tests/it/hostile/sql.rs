//! Queries that would take more memory than a process has stop with exit code 1 and a
//! message, not an abort; the report's `--where` takes what `pipeline sql` takes.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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

#[test]
fn sql_never_writes_over_a_table_it_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let table = dir.path().join("p.parquet");
    std::fs::copy(reviews(), &table).expect("copy");
    let before = sha(&table);
    let registered = format!("p={}", table.display());
    let output = pipeline(&["sql", "SELECT id FROM p", "--table", &registered], &[("--output", &table)]);
    assert_eq!(exit_code(&output), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("is one of the input files"), "{}", stderr(&output));
    // A path named in the query itself.
    let query = format!("SELECT id FROM '{}'", table.display());
    let output = pipeline(&["sql", &query], &[("--output", &table)]);
    assert_eq!(exit_code(&output), Some(1), "{}", stderr(&output));
    assert_eq!(sha(&table), before);
    assert_eq!(files_in(dir.path()), ["p.parquet"]);
}

#[test]
fn a_deeply_nested_query_is_refused_instead_of_overflowing_the_stack() {
    // About 8 KB of SQL; this aborted the process (exit 134) before.
    let sum = vec!["1"; 4000].join(" + ");
    let output = pipeline(&["sql", &format!("SELECT {sum} AS total")], &[]);
    assert_eq!(exit_code(&output), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("nests expressions more than 500 deep"), "{}", stderr(&output));
    // Far larger (400 KB of SQL, read from stdin), still a clear refusal.
    let mut child = Command::new(env!("CARGO_BIN_EXE_pipeline"))
        .arg("sql")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let sum = vec!["1"; 200_000].join("+");
    std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), format!("SELECT {sum}").as_bytes())
        .expect("write the query");
    let output = child.wait_with_output().expect("wait");
    assert_eq!(exit_code(&output), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("nests expressions more than 500 deep"), "{}", stderr(&output));
    // A deep but reasonable query still runs.
    let sum = vec!["1"; 400].join(" + ");
    let output = pipeline(&["sql", &format!("SELECT {sum} AS total"), "--format", "csv"], &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "total\n400\n");
}

/// Runs `command` for at most `limit`; `None` if it had to be killed.
fn output_within(mut command: Command, limit: Duration) -> Option<Output> {
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(child.wait_with_output().expect("output"))
}

#[test]
fn deeply_bracketed_queries_are_refused_at_once_and_shallow_ones_run() {
    let nested = |depth: usize, open: &str, close: &str| {
        let mut expression = "1".to_owned();
        for _ in 0..depth {
            expression = format!("{open}{expression}{close}");
        }
        format!("SELECT {expression} AS v")
    };
    let sql = |query: &str, extra: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_pipeline"));
        command.arg("sql").arg(query).args(extra);
        output_within(command, Duration::from_secs(30)).expect("an answer within 30 s, not a spin")
    };
    // These spun at 100 % CPU for ever; now they run.
    for query in [nested(49, "CAST(", " AS BIGINT)"), nested(48, "ARRAY[", "]")] {
        let output = sql(&query, &["--format", "csv"]);
        assert!(output.status.success(), "{}", stderr(&output));
    }
    // Past the bracket limit, a refusal at once.
    for query in [nested(65, "CAST(", " AS BIGINT)"), nested(65, "ARRAY[", "]"), nested(65, "(", ")")] {
        let output = sql(&query, &[]);
        assert_eq!(exit_code(&output), Some(1), "{}", stderr(&output));
        assert!(stderr(&output).contains("nests brackets 65 deep, more than the 64 allowed"), "{}", stderr(&output));
    }
    // Nested scalar subqueries double the planning time at each level: refused past 16.
    let mut query = "SELECT 1 AS v".to_owned();
    for _ in 0..20 {
        query = format!("SELECT ({query}) AS v");
    }
    let output = sql(&query, &[]);
    assert_eq!(exit_code(&output), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("nests subqueries more than 16 deep"), "{}", stderr(&output));
    // Brackets in a string literal or a comment are not nesting.
    let deep = "(".repeat(70);
    let output = sql(&format!("SELECT '{deep}' AS s -- {deep}\n"), &["--format", "csv"]);
    assert!(output.status.success(), "{}", stderr(&output));
    // Shallow nesting still runs.
    let output = sql(&nested(8, "CAST(", " AS BIGINT)"), &["--format", "csv"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "v\n1\n");
}

#[test]
fn a_syntax_error_inside_nested_calls_ends_within_the_parse_deadline() {
    let sql = |query: &str| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_pipeline"));
        command.arg("sql").arg(query);
        let started = Instant::now();
        let output = output_within(command, Duration::from_secs(30)).expect("an answer within 30 s, not a spin");
        (output, started.elapsed())
    };
    // Twenty calls deep, unclosed: the parser backtracks about 3x per level (10 of these
    // pairs spun for minutes), so it is stopped at its deadline.
    let (output, took) = sql(&format!("SELECT {}1", "POSITION(CAST(".repeat(10)));
    assert_eq!(exit_code(&output), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("the SQL parser gave up after 5 s"), "{}", stderr(&output));
    assert!(took < Duration::from_secs(15), "took {took:?}");
    // A shallow syntax error is reported by the parser itself, at once.
    let (output, took) = sql("SELECT CAST(1");
    assert_eq!(exit_code(&output), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("Expected: AS"), "{}", stderr(&output));
    assert!(took < Duration::from_secs(4), "took {took:?}");
}

#[test]
fn ctes_that_double_at_each_link_are_refused_before_planning() {
    let chain = |links: usize| {
        let mut query = "WITH a0 AS (SELECT 1 AS x)".to_owned();
        for i in 1..=links {
            query.push_str(&format!(", a{i} AS (SELECT p.x FROM a{} p JOIN a{} q ON p.x = q.x)", i - 1, i - 1));
        }
        format!("{query} SELECT count(*) AS n FROM a{links}")
    };
    let sql = |query: &str| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_pipeline"));
        command.arg("sql").arg(query).args(["--format", "csv"]);
        output_within(command, Duration::from_secs(30)).expect("an answer within 30 s")
    };
    // 2^14 table reads once expanded: planning this took minutes.
    let output = sql(&chain(14));
    assert_eq!(exit_code(&output), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("reads tables 16384 times once its CTEs are expanded"), "{}", stderr(&output));
    // 2^4 is fine, and gives the right answer.
    let output = sql(&chain(4));
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "n\n1\n");
}

#[test]
fn sql_and_the_report_refuse_outputs_of_different_runs_in_one_location() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mixed = dir.path().join("mixed");
    std::fs::create_dir(&mixed).expect("mkdir");
    assert!(run(&reviews(), &mixed.join("a-compact.parquet"), &["--attention", "compact"]).status.success());
    assert!(run(&reviews(), &mixed.join("b-full.parquet"), &["--attention", "full"]).status.success());
    let location = format!("{}/", mixed.display());
    // SQL took the first file's schema and cast the other's float weights to bytes, exit 0.
    let query = format!("SELECT id, top_tokens(tokens, attention_summary, 3) FROM '{location}'");
    let output = pipeline(&["sql", &query], &[]);
    let err = stderr(&output);
    assert_eq!(exit_code(&output), Some(1), "{err}");
    for needle in ["a-compact.parquet", "b-full.parquet", "different runs", "--attention `full`", "separate tables"] {
        assert!(err.contains(needle), "expected `{needle}` in: {err}");
    }
    // A table of one run's files still reads.
    let query = format!("SELECT count(*) AS n FROM '{}'", mixed.join("a-compact.parquet").display());
    assert!(pipeline(&["sql", &query], &[]).status.success());

    // The report blended them, and outputs of another model, into one tally.
    let html = dir.path().join("report.html");
    let output = pipeline(&["report", "--input", &location, "--output", &html.to_string_lossy()], &[]);
    assert_refused(&output, 1, &["a-compact.parquet", "b-full.parquet", "different runs"], &html);
    std::fs::remove_file(mixed.join("b-full.parquet")).expect("clean");
    let other_model = mixed.join("c-avg.parquet");
    assert!(run_fixture("tiny-avg-3class", &other_model, &[]).status.success());
    let output = pipeline(&["report", "--input", &location, "--output", &html.to_string_lossy()], &[]);
    assert_refused(&output, 1, &["c-avg.parquet", "different runs", "report on each run's output separately"], &html);
    std::fs::remove_file(&other_model).expect("clean");
    let output = pipeline(&["report", "--input", &location, "--output", &html.to_string_lossy()], &[]);
    assert!(output.status.success(), "{}", stderr(&output));
}

//! Generated SQL arguments for the functions the `sql` crate adds: every call, however wrong its
//! arguments (types, arity, NULLs, negative or huge counts, lists of other lengths), must
//! end in a result or an error, never a panic.
//!
//! CI runs a few dozen cases. The long run (docs/contract.md, "Bad-input suite"):
//! `PROPTEST_CASES=25000 cargo test --release --workspace --test it bad_input:: -- --nocapture`.

use std::cell::Cell;

use super::predictions::make_predictions;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestRunner};
use runtime::inference::BackendOptions;
use sql::{ClassifyOptions, SqlSession};
use test_support::repo_root;

/// Each function with arguments that plan; a case replaces some of them, or changes the
/// arity, so that most cases reach the function's body rather than stop at type checking.
const CALLS: [(&str, &[&str]); 11] = [
    ("top_tokens", &["tokens", "attention_summary", "3"]),
    ("head_attention", &["attention", "2"]),
    ("attention_entropy", &["attention_summary"]),
    ("attention_html", &["tokens", "attention_summary"]),
    ("contribution_html", &["tokens", "attention_summary"]),
    ("top_attended", &["tokens", "attention_summary", "5"]),
    ("distinctive_attended", &["tokens", "attention_summary", "5"]),
    ("classify", &["text"]),
    ("tokens", &["text", "token_spans"]),
    ("classify_explain", &["text"]),
    ("top_tokens", &["make_array('a', 'b', 'a')", "make_array(0.5, 0.25, 0.25)", "2"]),
];

/// Every function the crate registers is called here, so none escapes the generated cases.
#[test]
fn the_calls_cover_every_registered_function() {
    let registered: std::collections::BTreeSet<String> = sql::function_help()
        .into_iter()
        .map(|(syntax, _)| syntax.split('(').next().unwrap_or_default().to_owned())
        .collect();
    let called: std::collections::BTreeSet<String> = CALLS.iter().map(|(name, _)| (*name).to_owned()).collect();
    assert_eq!(called, registered);
}

const COLUMNS: [&str; 10] = [
    "tokens",
    "token_spans",
    "attention",
    "attention_summary",
    "probabilities",
    "prediction",
    "confidence",
    "text",
    "prediction_index",
    "embedding",
];

/// A SQL expression: a column, a literal of any type, or a list of them.
fn argument() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        prop::sample::select(COLUMNS.to_vec()).prop_map(str::to_owned),
        Just("NULL".to_owned()),
        (-3i64..12).prop_map(|n| n.to_string()),
        (-3i64..12).prop_map(|n| n.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| format!("{f:e}")),
        "\\PC{0,10}".prop_map(|s| format!("'{}'", s.replace('\'', "''"))),
        Just("arrow_cast(make_array(), 'List(Float32)')".to_owned()),
        Just("arrow_cast(make_array(), 'List(Utf8)')".to_owned()),
    ];
    leaf.prop_recursive(2, 12, 4, |inner| {
        prop::collection::vec(inner, 0..4).prop_map(|items| format!("make_array({})", items.join(", ")))
    })
}

fn call() -> impl Strategy<Value = String> {
    let replacements = prop::collection::vec((any::<usize>(), argument()), 0..3);
    let arity = prop::option::weighted(0.15, any::<bool>());
    (prop::sample::select(CALLS.to_vec()), replacements, arity).prop_map(
        |((function, canonical), replacements, arity)| {
            let mut args: Vec<String> = canonical.iter().map(|a| (*a).to_owned()).collect();
            for (at, argument) in replacements {
                let len = args.len().max(1);
                if let Some(slot) = args.get_mut(at % len) {
                    *slot = argument;
                }
            }
            match arity {
                Some(true) => args.push("1".to_owned()),
                Some(false) => {
                    args.pop();
                }
                None => {}
            }
            format!("{function}({})", args.join(", "))
        },
    )
}

#[test]
fn generated_function_calls_answer_or_fail_clearly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let table = make_predictions(dir.path(), true).expect("pipeline run");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let mut session = SqlSession::new(ClassifyOptions {
        default_model: Some(repo_root().join("fixtures/tiny-san")),
        backend: BackendOptions::default(),
        batch_size: 8,
        long_documents: runtime::long_documents::LongDocuments::default(),
        min_confidence: None,
    })
    .expect("session");
    runtime.block_on(session.register_table("p", &table.display().to_string())).expect("register");

    // The same cases every run (CI is reproducible) unless PROPTEST_RNG_SEED picks others.
    let defaults = Config::default();
    let cases = if std::env::var_os("PROPTEST_CASES").is_some() { defaults.cases } else { 96 };
    let rng_seed = if std::env::var_os("PROPTEST_RNG_SEED").is_some() { defaults.rng_seed } else { RngSeed::Fixed(12) };
    let mut runner = TestRunner::new(Config { cases, rng_seed, failure_persistence: None, ..defaults });
    let (total, planned, answered) = (Cell::new(0), Cell::new(0), Cell::new(0));
    let grouped = prop::bool::ANY;
    let result = runner.run(&(call(), grouped), |(call, grouped)| {
        total.set(total.get() + 1);
        // Seven rows keep classify() cheap; grouping exercises the aggregate's merge.
        let query = if grouped {
            format!("SELECT prediction, {call} FROM (SELECT * FROM p LIMIT 7) GROUP BY prediction")
        } else {
            format!("SELECT {call} FROM (SELECT * FROM p LIMIT 7)")
        };
        let outcome = runtime.block_on(async {
            let frame = session.query(&query).await?;
            planned.set(planned.get() + 1);
            frame.collect().await.map_err(anyhow::Error::from)
        });
        answered.set(answered.get() + usize::from(outcome.is_ok()));
        Ok(())
    });
    result.unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "SQL function calls: {} cases, {} past the first check (the query plans), {} answered, no panic escaped",
        total.get(),
        planned.get(),
        answered.get()
    );
}

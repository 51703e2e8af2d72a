//! The word-level fast path gives exactly the ids, tokens, truncation and offsets of the
//! `tokenizers` crate (tokens are spelled from the vocabulary by id, so the crate's own token
//! strings are checked against that spelling; the crate's offsets are bytes, ours characters): on generated text here (in CI), and over all of IMDB with
//! `cargo test --release --workspace --test fast_tokenizer -- --ignored --nocapture`.

use std::path::Path;
use std::time::Instant;

use proptest::prelude::*;
use runtime::output::token_spans;
use runtime::text::{TextEncoder, WordLevelFast};
use test_support::repo_root;
use tokenizers::Tokenizer;

fn tokenizer(package: &str) -> Tokenizer {
    Tokenizer::from_file(repo_root().join(package).join("tokenizer.json")).expect("tokenizer.json")
}

/// The fast path and the crate alone, on the same tokenizer and limit.
fn both(package: &str, max_tokens: usize) -> (TextEncoder, TextEncoder) {
    let fast = TextEncoder::new(tokenizer(package), max_tokens);
    assert!(fast.has_fast_path(), "{package}: the fast path should recognise its tokenizer");
    (fast, TextEncoder::without_fast_path(tokenizer(package), max_tokens))
}

fn assert_same(fast: &TextEncoder, crate_only: &TextEncoder, texts: &[&str]) {
    assert_eq!(differences(fast, crate_only, texts), Vec::<String>::new());
}

/// Each text on which the fast path's ids, truncation or spans differ from the crate's ids,
/// truncation and offsets, or on which the vocabulary spells the crate's ids other than the
/// crate's own token strings.
fn differences(fast: &TextEncoder, crate_only: &TextEncoder, texts: &[&str]) -> Vec<String> {
    let (a, b) = (fast.encode_batch(texts).expect("fast"), crate_only.encode_batch(texts).expect("crate"));
    let crate_tokens = crate_only.tokenizer().encode_batch(texts.to_vec(), false).expect("crate encodes");
    let mut differences = Vec::new();
    for (((text, a), b), encoding) in texts.iter().zip(&a).zip(&b).zip(&crate_tokens) {
        let expected: Vec<&str> =
            encoding.get_tokens().iter().take(crate_only.max_tokens()).map(String::as_str).collect();
        let spelled = crate_only.vocabulary().tokens(&b.ids).expect("the crate's ids are in its vocabulary");
        let in_characters = |byte: usize| text.get(..byte).map(|before| before.chars().count());
        let offsets: Vec<Option<std::ops::Range<usize>>> = encoding
            .get_offsets()
            .iter()
            .take(crate_only.max_tokens())
            .map(|&(start, end)| Some(in_characters(start)?..in_characters(end)?))
            .collect();
        let spans: Option<Vec<Option<std::ops::Range<usize>>>> =
            a.spans.as_ref().map(|spans| spans.iter().cloned().map(Some).collect());
        if (&a.ids, a.truncated) != (&b.ids, b.truncated) {
            differences.push(format!("ids differ on {text:?}: fast {a:?}, crate {b:?}"));
        } else if spelled != expected {
            differences.push(format!("tokens differ on {text:?}: {spelled:?}, crate {expected:?}"));
        } else if spans.as_ref() != Some(&offsets) {
            differences.push(format!("spans differ on {text:?}: fast {:?}, crate {offsets:?}", a.spans));
        } else if read_back(fast, text, &a.ids, a.spans.as_deref().unwrap_or_default()) != spelled {
            let got = read_back(fast, text, &a.ids, a.spans.as_deref().unwrap_or_default());
            differences.push(format!("token_spans read back {got:?} on {text:?}, not {spelled:?}"));
        }
    }
    differences
}

/// The tokens the output's `token_spans` give back for `ids` at `spans` in `text`, as a reader
/// reads them (`runtime::output::token_spans`).
fn read_back(encoder: &TextEncoder, text: &str, ids: &[i64], spans: &[std::ops::Range<usize>]) -> Vec<String> {
    let unknown =
        |i: usize| ids.get(i).and_then(|&id| encoder.vocabulary().token(id)) == Some(token_spans::UNKNOWN_TOKEN);
    let values = token_spans::encode(spans, unknown).expect("spans in order");
    token_spans::decode(text, &values).unwrap_or_else(|error| vec![format!("{error:#}")])
}

#[test]
fn every_committed_package_has_the_fast_path() {
    for package in ["fixtures/tiny-san", "fixtures/tiny-han", "fixtures/tiny-avg", "fixtures/default-model"] {
        assert!(TextEncoder::new(tokenizer(package), 256).has_fast_path(), "{package}");
    }
}

#[test]
fn a_tokenizer_it_does_not_know_falls_back_to_the_crate() {
    let spec = std::fs::read_to_string(repo_root().join("fixtures/tiny-san/tokenizer.json")).expect("read");
    let changed = [
        spec.replace(r#"{"type":"Lowercase"}"#, r#"{"type":"NFC"}"#),
        spec.replace(r#""pre_tokenizer":{"type":"BertPreTokenizer"}"#, r#""pre_tokenizer":{"type":"Whitespace"}"#),
        spec.replace(r#""lstrip":false"#, r#""lstrip":true"#),
    ];
    for changed in changed {
        assert_ne!(changed, spec, "the edit must apply to the fixture's JSON");
        let tokenizer: Tokenizer = changed.parse().expect("a valid tokenizer.json");
        assert!(WordLevelFast::recognise(&tokenizer).is_none());
        let encoder = TextEncoder::new(tokenizer, 64);
        assert!(!encoder.has_fast_path());
        assert!(!encoder.encode_batch(&["Still works."]).expect("the crate encodes").is_empty());
    }
}

#[test]
fn known_tricky_texts() {
    let (fast, crate_only) = both("fixtures/tiny-san", 12);
    assert_same(
        &fast,
        &crate_only,
        &[
            "",
            "   ",
            "A GREAT film!!! <br /><br />Really.",
            "<BR>upper-case tags stay<br/>lower ones go<br  \t/>",
            "[UNK] and [PAD] are special; [unk] is not. x[PAD]y",
            "İstanbul ΣΊΣΥΦΟΣ straße ǅ",
            "«quotes» — dashes… and 「brackets」",
            "\u{a0}no-break\u{3000}ideographic\u{2028}line",
            "one two three four five six seven eight nine ten eleven twelve thirteen",
        ],
    );
    // Words on both sides of the 15 bytes the fast path keys inline (`cinématographe` is 15
    // bytes in 14 characters), and words that differ from known ones only by trailing NULs.
    let (fast, crate_only) = both("fixtures/default-model", 64);
    assert_same(
        &fast,
        &crate_only,
        &[
            "Unintentionally CINEMATOGRAPHER cinématographe: characterization, enthusiastically incomprehensible.",
            "characterizations uncharacteristically film\0 film\0\0 \0film a\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0",
        ],
    );
    // Many special tokens, past a high limit: the same tokens (and no scan per occurrence).
    let (fast, crate_only) = both("fixtures/tiny-san", 100_000);
    assert_same(&fast, &crate_only, &["[PAD][UNK] film".repeat(5_000).as_str(), "[PAD]".repeat(20_000).as_str()]);
}

/// Pieces that exercise every step: words (known and not), tags in both cases, the special
/// tokens, punctuation, odd whitespace and arbitrary characters.
fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec!["the", "film", "good", "bad", "movie", "I", "Great", "ACTING"])
            .prop_map(String::from),
        "[a-zA-Z]{1,8}",
        "[!-/:-@\\[-`{-~]{1,3}",
        prop::sample::select(vec![
            "<br />",
            "<br>",
            "<BR>",
            "<br/>",
            "<br  \n/>",
            "<b>",
            "[UNK]",
            "[PAD]",
            "[unk]",
            "[UN",
            "K]"
        ])
        .prop_map(String::from),
        prop::sample::select(vec![" ", "  ", "\t", "\n", "\u{a0}", "\u{3000}", "\u{200b}"]).prop_map(String::from),
        any::<char>().prop_map(String::from),
        "\\PC{1,4}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn generated_texts_tokenize_as_the_crate_does(pieces in prop::collection::vec(piece(), 0..40), limit in 1usize..30) {
        let (fast, crate_only) = both("fixtures/tiny-san", limit);
        let text: String = pieces.concat();
        prop_assert_eq!(differences(&fast, &crate_only, &[&text]), Vec::<String>::new());
    }
}

/// All 100,000 IMDB reviews in `../shared/datasets/imdb` (train, test, unsup) through the
/// default model's tokenizer, both ways; prints the speed of each on one core.
#[test]
#[ignore = "reads ../shared/datasets (100,000 reviews); run by hand, see the module comment"]
fn all_of_imdb_tokenizes_as_the_crate_does() {
    let dir = repo_root().join("../shared/datasets/imdb");
    let mut texts = Vec::new();
    for split in ["train", "test", "unsup"] {
        texts.extend(read_texts(&dir.join(format!("{split}.parquet"))));
    }
    println!("{} reviews", texts.len());
    let (fast, crate_only) = both("fixtures/default-model", 256);
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut different = Vec::new();
    for chunk in texts.chunks(2048) {
        different.extend(differences(&fast, &crate_only, chunk));
    }
    println!("{} reviews tokenized differently", different.len());
    // One core each: the per-core figure of the issue, without rayon.
    let one_core = |encoder: &TextEncoder| {
        let started = Instant::now();
        for text in &texts[..20_000] {
            std::hint::black_box(encoder.encode_batch(std::slice::from_ref(text)).expect("encode"));
        }
        20_000.0 / started.elapsed().as_secs_f64()
    };
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("pool");
    let (fast_speed, crate_speed) = pool.install(|| (one_core(&fast), one_core(&crate_only)));
    println!(
        "one core, first 20,000 reviews: fast path {fast_speed:.0} docs/s, tokenizers crate {crate_speed:.0} docs/s ({:.1}×)",
        fast_speed / crate_speed
    );
    assert_eq!(different.len(), 0, "first: {:?}", different.first());
}

fn read_texts(path: &Path) -> Vec<String> {
    let source = batch_io::source::open_parquet(path, &["text"], 8192).expect("IMDB parquet");
    let mut texts = Vec::new();
    for batch in source.batches {
        let batch = batch.expect("batch");
        let values = batch_io::source::string_values(batch.column(0)).expect("text column");
        texts.extend(values.into_iter().flatten().map(str::to_owned));
    }
    texts
}

/// Split over threads (as on a GPU), every text keeps its own ids, truncation and place.
#[test]
fn threads_give_the_ids_of_one_thread_in_input_order() {
    let encoder = TextEncoder::new(tokenizer("fixtures/tiny-san"), 256);
    let owned: Vec<String> =
        (0..1000).map(|i| format!("Review {i}: {} the film.", "a good and bad ".repeat(i % 7))).collect();
    let texts: Vec<&str> = owned.iter().map(String::as_str).collect();
    let one = encoder.encode_batch_up_to(&texts, 12, 1).expect("one thread");
    assert!(one.iter().any(|e| e.truncated) && one.iter().any(|e| !e.truncated), "both kinds of texts are covered");
    for threads in [2, 3, 16, 1000] {
        assert_eq!(encoder.encode_batch_up_to(&texts, 12, threads).expect("threads"), one, "{threads} threads");
    }
    // Ids differ from text to text, so a text out of place would show.
    assert_ne!(one.first(), one.get(1));
}

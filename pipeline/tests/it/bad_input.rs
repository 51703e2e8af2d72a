//! Generated bad input for the code that reads what users hand us: model manifests,
//! `tokenizer.json`, and Parquet / Arrow IPC files. Every case must end in `Ok` or an error,
//! never a panic. Cases are made by mutating valid files (random bytes would stop at the
//! first magic-number check); each property prints how many got past its first check.
//!
//! CI runs a few dozen cases per property, the same ones every run. The long run (docs/contract.md, "Bad-input suite"):
//! `PROPTEST_CASES=25000 cargo test --release --workspace --test it bad_input:: -- --nocapture`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use arrow::array::{ArrayRef, DictionaryArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{Field, Int32Type, Schema};
use batch_io::source::{open_batches, open_parquet, string_values, text_array};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestRunner};
use runtime::classifier::Classifier;
use runtime::inference::{BackendOptions, InferenceBackend, open_backend};
use runtime::output::{AttentionEncoding, OutputTable};
use runtime::package::{MANIFEST_FILE, ModelPackage, TOKENIZER_FILE};
use serde_json::Value;
use test_support::repo_root;

/// Cases per property: `PROPTEST_CASES`, or a CI-sized default. The same cases every run
/// (so CI is reproducible) unless `PROPTEST_RNG_SEED` picks others.
fn runner() -> TestRunner {
    let defaults = Config::default();
    let cases = if std::env::var_os("PROPTEST_CASES").is_some() { defaults.cases } else { 48 };
    let rng_seed = if std::env::var_os("PROPTEST_RNG_SEED").is_some() { defaults.rng_seed } else { RngSeed::Fixed(12) };
    TestRunner::new(Config { cases, rng_seed, failure_persistence: None, ..defaults })
}

/// How far generated cases got, printed at the end of each property.
#[derive(Default)]
struct Tally {
    cases: AtomicUsize,
    past_first_check: AtomicUsize,
    accepted: AtomicUsize,
}

impl Tally {
    fn count(&self, stage: &AtomicUsize) {
        stage.fetch_add(1, Ordering::Relaxed);
    }

    fn report(&self, what: &str, first_check: &str) {
        eprintln!(
            "{what}: {} cases, {} past the first check ({first_check}), {} accepted end to end, no panic escaped",
            self.cases.load(Ordering::Relaxed),
            self.past_first_check.load(Ordering::Relaxed),
            self.accepted.load(Ordering::Relaxed)
        );
    }
}

/// A change to a file's bytes; positions wrap around the file's length.
#[derive(Debug, Clone)]
enum ByteEdit {
    Flip {
        at: usize,
        mask: u8,
    },
    Overwrite {
        at: usize,
        bytes: Vec<u8>,
    },
    /// Counted from the end, where Parquet keeps its footer.
    FlipNearEnd {
        from_end: usize,
        mask: u8,
    },
    Truncate {
        keep: usize,
    },
    Delete {
        at: usize,
        len: usize,
    },
    Insert {
        at: usize,
        bytes: Vec<u8>,
    },
}

fn byte_edit() -> impl Strategy<Value = ByteEdit> {
    prop_oneof![
        4 => (any::<usize>(), 1u8..).prop_map(|(at, mask)| ByteEdit::Flip { at, mask }),
        2 => (any::<usize>(), prop::collection::vec(any::<u8>(), 1..9)).prop_map(|(at, bytes)| ByteEdit::Overwrite { at, bytes }),
        3 => (0usize..400, 1u8..).prop_map(|(from_end, mask)| ByteEdit::FlipNearEnd { from_end, mask }),
        1 => any::<usize>().prop_map(|keep| ByteEdit::Truncate { keep }),
        1 => (any::<usize>(), 1usize..64).prop_map(|(at, len)| ByteEdit::Delete { at, len }),
        1 => (any::<usize>(), prop::collection::vec(any::<u8>(), 1..16)).prop_map(|(at, bytes)| ByteEdit::Insert { at, bytes }),
    ]
}

fn apply(base: &[u8], edits: &[ByteEdit]) -> Vec<u8> {
    let mut bytes = base.to_vec();
    for edit in edits {
        let len = bytes.len().max(1);
        match edit {
            ByteEdit::Flip { at, mask } => {
                if let Some(b) = bytes.get_mut(at % len) {
                    *b ^= mask;
                }
            }
            ByteEdit::Overwrite { at, bytes: new } => {
                for (i, value) in new.iter().enumerate() {
                    if let Some(b) = bytes.get_mut((at + i) % len) {
                        *b = *value;
                    }
                }
            }
            ByteEdit::FlipNearEnd { from_end, mask } => {
                let at = len.saturating_sub(1 + from_end % len);
                if let Some(b) = bytes.get_mut(at) {
                    *b ^= mask;
                }
            }
            ByteEdit::Truncate { keep } => bytes.truncate(keep % len),
            ByteEdit::Delete { at, len: n } => {
                let start = at % len;
                let end = (start + n).min(bytes.len());
                if start < end {
                    bytes.drain(start..end);
                }
            }
            ByteEdit::Insert { at, bytes: new } => {
                let at = at % (bytes.len() + 1);
                bytes.splice(at..at, new.iter().copied());
            }
        }
    }
    bytes
}

/// Any JSON value, nested a little.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-3i64..600).prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "\\PC{0,12}".prop_map(Value::from),
        Just(Value::from("sentences_words")),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,12}", inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// A JSON document changed in place: values replaced at random paths, or its text edited.
#[derive(Debug, Clone)]
enum JsonEdit {
    Replace {
        path: Vec<usize>,
        value: Value,
    },
    /// Adds `delta` to an integer: keeps the type, so the file still parses.
    Nudge {
        path: Vec<usize>,
        delta: i64,
    },
    /// Repeats an element of an array (a label twice, a vocabulary id reused).
    Repeat {
        path: Vec<usize>,
    },
    Remove {
        path: Vec<usize>,
    },
    Text(ByteEdit),
}

fn json_edit() -> impl Strategy<Value = JsonEdit> {
    let path = prop::collection::vec(any::<usize>(), 1..5);
    prop_oneof![
        4 => (path.clone(), json_value()).prop_map(|(path, value)| JsonEdit::Replace { path, value }),
        4 => (path.clone(), prop_oneof![-3i64..4, any::<i64>()]).prop_map(|(path, delta)| JsonEdit::Nudge { path, delta }),
        1 => path.clone().prop_map(|path| JsonEdit::Repeat { path }),
        1 => path.prop_map(|path| JsonEdit::Remove { path }),
        1 => byte_edit().prop_map(JsonEdit::Text),
    ]
}

/// The child of `value` that index `i` picks (wrapping), for objects and arrays.
fn child(value: &mut Value, i: usize) -> Option<&mut Value> {
    match value {
        Value::Object(map) => {
            let len = map.len();
            if len == 0 {
                return None;
            }
            map.values_mut().nth(i % len)
        }
        Value::Array(items) => {
            let len = items.len();
            if len == 0 {
                return None;
            }
            items.get_mut(i % len)
        }
        _ => None,
    }
}

fn edit_json(base: &Value, edits: &[JsonEdit]) -> Vec<u8> {
    let mut value = base.clone();
    let mut text_edits = Vec::new();
    for edit in edits {
        match edit {
            JsonEdit::Replace { path, value: new } => {
                if let Some(slot) = descend(&mut value, path) {
                    *slot = new.clone();
                }
            }
            JsonEdit::Nudge { path, delta } => {
                if let Some(slot) = descend(&mut value, path)
                    && let Some(n) = slot.as_i64()
                {
                    *slot = Value::from(n.wrapping_add(*delta));
                }
            }
            JsonEdit::Repeat { path } => {
                if let Some(Value::Array(items)) = descend_to_container(&mut value, path)
                    && let Some(item) = items.first().cloned()
                {
                    items.push(item);
                }
            }
            JsonEdit::Remove { path } => {
                if let Some((last, parents)) = path.split_last() {
                    match descend(&mut value, parents) {
                        Some(Value::Object(map)) if !map.is_empty() => {
                            let key = map.keys().nth(last % map.len()).cloned();
                            key.map(|key| map.remove(&key));
                        }
                        Some(Value::Array(items)) if !items.is_empty() => {
                            items.remove(last % items.len());
                        }
                        _ => {}
                    }
                }
            }
            JsonEdit::Text(byte) => text_edits.push(byte.clone()),
        }
    }
    let text = serde_json::to_vec_pretty(&value).expect("serialise");
    apply(&text, &text_edits)
}

/// The deepest array or object on `path`.
fn descend_to_container<'a>(value: &'a mut Value, path: &[usize]) -> Option<&'a mut Value> {
    let mut at = value;
    for &i in path {
        let go_on = child(at, i).is_some_and(|next| next.is_object() || next.is_array());
        if !go_on {
            break;
        }
        at = child(at, i)?;
    }
    Some(at)
}

/// The value `path` leads to, each index picking a child (wrapping around); the walk ends
/// early at a leaf, which is then the value picked.
fn descend<'a>(value: &'a mut Value, path: &[usize]) -> Option<&'a mut Value> {
    let mut at = value;
    for &i in path {
        if !(at.is_object() || at.is_array()) {
            break;
        }
        at = child(at, i)?;
    }
    Some(at)
}

/// A scratch copy of a fixture package, with the tract backend for its graph loaded once.
struct Scratch {
    _dir: tempfile::TempDir,
    package: PathBuf,
    backend: Arc<dyn InferenceBackend>,
}

fn scratch_package(fixture: &str) -> Scratch {
    let dir = tempfile::tempdir().expect("tempdir");
    let package = dir.path().join("package");
    std::fs::create_dir(&package).expect("mkdir");
    for file in ["model.onnx", "tokenizer.json", "manifest.json"] {
        std::fs::copy(repo_root().join(fixture).join(file), package.join(file)).expect("copy");
    }
    let backend = open_backend(&package.join("model.onnx"), &BackendOptions::default()).expect("backend");
    Scratch { _dir: dir, package, backend: Arc::from(backend) }
}

/// Opens the package in `scratch` and, if that works, classifies `texts` and builds the
/// output columns. `Ok(true)` when every step accepted the input.
fn open_and_classify(scratch: &Scratch, texts: &[Option<&str>], tally: &Tally) -> bool {
    let Ok(package) = ModelPackage::open(&scratch.package) else { return false };
    tally.count(&tally.past_first_check);
    let labels = package.manifest.labels.clone();
    let Ok(classifier) = Classifier::with_backend(package, scratch.backend.clone(), None) else { return false };
    let Ok((predictions, _)) = classifier.predict(texts, 2) else { return false };
    OutputTable::for_model(classifier.optional_columns(true), AttentionEncoding::Full)
        .build(&predictions, &labels, classifier.vocabulary())
        .is_ok()
}

const TEXTS: [Option<&str>; 4] =
    [Some("a wonderful film . truly great"), None, Some(""), Some("dull , awful and far too long !")];

#[test]
fn mutated_manifests_open_or_fail_clearly() {
    for fixture in ["fixtures/tiny-san", "fixtures/tiny-han"] {
        let scratch = scratch_package(fixture);
        let manifest_path = scratch.package.join(MANIFEST_FILE);
        let base: Value = serde_json::from_slice(&std::fs::read(&manifest_path).expect("read")).expect("json");
        let tally = Tally::default();
        let result = runner().run(&prop::collection::vec(json_edit(), 1..4), |edits| {
            tally.count(&tally.cases);
            std::fs::write(&manifest_path, edit_json(&base, &edits)).expect("write");
            if open_and_classify(&scratch, &TEXTS, &tally) {
                tally.count(&tally.accepted);
            }
            Ok(())
        });
        result.unwrap_or_else(|e| panic!("{fixture}: {e}"));
        tally.report(&format!("manifests of {fixture}"), "the manifest parses");
    }
}

#[test]
fn mutated_tokenizers_load_or_fail_clearly() {
    let scratch = scratch_package("fixtures/tiny-san");
    let tokenizer_path = scratch.package.join(TOKENIZER_FILE);
    let base: Value = serde_json::from_slice(&std::fs::read(&tokenizer_path).expect("read")).expect("json");
    let tally = Tally::default();
    let texts = prop::collection::vec(proptest::option::of("\\PC{0,60}"), 1..5);
    let result = runner().run(&(prop::collection::vec(json_edit(), 1..4), texts), |(edits, texts)| {
        tally.count(&tally.cases);
        std::fs::write(&tokenizer_path, edit_json(&base, &edits)).expect("write");
        let texts: Vec<Option<&str>> = texts.iter().map(Option::as_deref).collect();
        if tokenizers::Tokenizer::from_file(&tokenizer_path).is_ok() {
            tally.count(&tally.past_first_check);
            let package = ModelPackage::open(&scratch.package).expect("the manifest is untouched");
            let classifier = Classifier::with_backend(package, scratch.backend.clone(), None);
            if let Ok(classifier) = classifier
                && classifier.predict(&texts, 3).is_ok()
            {
                tally.count(&tally.accepted);
            }
        }
        Ok(())
    });
    result.unwrap_or_else(|e| panic!("{e}"));
    tally.report("tokenizer.json", "the tokenizers crate loads it");
}

/// Small valid inputs to mutate: Parquet (plain strings, a dictionary text column, and
/// uncompressed pages, whose bytes are the values themselves) and Arrow IPC.
fn base_files(dir: &Path) -> Vec<PathBuf> {
    let texts: Vec<Option<&str>> = (0..40)
        .map(|i| match i % 5 {
            0 => None,
            1 => Some("a wonderful film"),
            2 => Some("dull , awful and far too long ."),
            3 => Some(""),
            _ => Some("great acting !"),
        })
        .collect();
    let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(0..40));
    let plain: ArrayRef = Arc::new(StringArray::from(texts.clone()));
    let dictionary: ArrayRef = Arc::new(texts.iter().copied().collect::<DictionaryArray<Int32Type>>());
    let mut files = Vec::new();
    for (name, text, compression) in [
        ("plain.parquet", plain.clone(), parquet::basic::Compression::SNAPPY),
        ("dictionary.parquet", dictionary, parquet::basic::Compression::ZSTD(Default::default())),
        ("uncompressed.parquet", plain.clone(), parquet::basic::Compression::UNCOMPRESSED),
    ] {
        let batch = batch_of(&ids, &text);
        let properties = WriterProperties::builder().set_compression(compression).set_max_row_group_row_count(Some(16));
        let path = dir.join(name);
        let mut writer = ArrowWriter::try_new(
            std::fs::File::create(&path).expect("create"),
            batch.schema(),
            Some(properties.build()),
        )
        .expect("writer");
        writer.write(&batch).expect("write");
        writer.close().expect("close");
        files.push(path);
    }
    let batch = batch_of(&ids, &plain);
    let path = dir.join("file.arrow");
    let mut ipc =
        arrow::ipc::writer::FileWriter::try_new(std::fs::File::create(&path).expect("create"), &batch.schema())
            .expect("ipc");
    ipc.write(&batch).expect("write");
    ipc.finish().expect("finish");
    files.push(path);
    files
}

fn batch_of(ids: &ArrayRef, text: &ArrayRef) -> RecordBatch {
    let schema = Schema::new(vec![
        Field::new("id", ids.data_type().clone(), false),
        Field::new("text", text.data_type().clone(), true),
    ]);
    RecordBatch::try_new(Arc::new(schema), vec![ids.clone(), text.clone()]).expect("batch")
}

#[test]
fn mutated_parquet_and_arrow_files_read_or_fail_clearly() {
    let scratch = scratch_package("fixtures/tiny-san");
    let package = ModelPackage::open(&scratch.package).expect("package");
    let classifier = Classifier::with_backend(package, scratch.backend.clone(), None).expect("classifier");
    let labels = classifier.labels().to_vec();
    let dir = tempfile::tempdir().expect("tempdir");
    let bases: Vec<(PathBuf, Vec<u8>)> = base_files(dir.path())
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).expect("read");
            (p, bytes)
        })
        .collect();
    let mutated = dir.path().join("mutated");
    let tally = Tally::default();
    let strategy = (0..bases.len(), prop::collection::vec(byte_edit(), 1..4), 1usize..20);
    let result = runner().run(&strategy, |(which, edits, window)| {
        tally.count(&tally.cases);
        let (_, base) = &bases[which];
        std::fs::write(&mutated, apply(base, &edits)).expect("write");
        // The projected reader `pipeline train` trains from.
        if let Ok(source) = open_parquet(&mutated, &["text"], window) {
            source.batches.take_while(Result::is_ok).for_each(drop);
        }
        let Ok(stream) = open_batches(&mutated, window) else { return Ok(()) };
        tally.count(&tally.past_first_check);
        for batch in stream.batches {
            let Ok(batch) = batch else { return Ok(()) };
            let Some(text) = batch.column_by_name("text") else { return Ok(()) };
            let Ok(text) = text_array(text) else { return Ok(()) };
            let Some(texts) = string_values(&text) else { return Ok(()) };
            let Ok((predictions, _)) = classifier.predict(&texts, 4) else { return Ok(()) };
            if OutputTable::for_model(classifier.optional_columns(false), AttentionEncoding::Full)
                .build(&predictions, &labels, classifier.vocabulary())
                .is_err()
            {
                return Ok(());
            }
        }
        tally.count(&tally.accepted);
        Ok(())
    });
    result.unwrap_or_else(|e| panic!("{e}"));
    tally.report("Parquet and Arrow IPC files", "the file opens");
}

#[test]
fn the_mutators_change_what_they_are_given() {
    // The suite would prove nothing if its edits left the files as they were.
    let base = b"PAR1 some bytes PAR1".to_vec();
    assert_ne!(apply(&base, &[ByteEdit::Flip { at: 3, mask: 1 }]), base);
    assert_eq!(apply(&base, &[ByteEdit::Truncate { keep: 4 }]), b"PAR1");
    let json: Value = serde_json::json!({"a": [1, 2], "b": "x"});
    let edited = edit_json(&json, &[JsonEdit::Replace { path: vec![0, 1], value: Value::Null }]);
    assert_eq!(serde_json::from_slice::<Value>(&edited).expect("json"), serde_json::json!({"a": [1, null], "b": "x"}));
    let edited = edit_json(&json, &[JsonEdit::Remove { path: vec![1] }]);
    assert_eq!(serde_json::from_slice::<Value>(&edited).expect("json"), serde_json::json!({"a": [1, 2]}));
}

//! Parity of each variant's exported graph: burn vs tract vs ONNX Runtime on one right-padded
//! batch mixing lengths from 1 to 256 tokens, and every example alone vs its row of the batch.
//! The models are trained inside the test on the committed IMDB slice.

use std::path::Path;
use std::sync::OnceLock;

use runtime::inference::{
    BackendKind, BackendOptions, InferenceBackend, ModelInputs, ModelOutputs, OrtBackend, TractBackend,
};
use runtime::package::{InputLayout, ModelPackage};
use runtime::text::{TextEncoder, sentence_lengths};
use test_support::repo_root;
use training::data::corpus::Columns;
use training::data::vocabulary::VocabularyConfig;
use training::fit::forward_probs;
use training::job::{TrainOutcome, TrainRequest, run_variant};
use training::models::PooledValues;
use training::models::lama::AttentionScale;
use training::models::{ModelConfig, ModelFlags, Network, Variant};
use training::schedule::{ClassWeighting, TrainingFlags};

const RUNTIME_TOLERANCE: f32 = 1e-4;
const ALONE_TOLERANCE: f32 = 1e-5;
/// Deliberately unsorted, from a single token to the package's 256-token limit.
const LENGTHS: [usize; 9] = [64, 1, 256, 17, 200, 2, 131, 5, 240];

pub(crate) struct Trained<M> {
    _dir: tempfile::TempDir,
    pub(crate) package: ModelPackage,
    pub(crate) model: M,
}

fn tiny_flags() -> ModelFlags {
    ModelFlags {
        embedding_dim: Some(24),
        buckets: Some(5000),
        ngrams: 3,
        feature_weights: training::models::ngram::FeatureWeights::NaiveBayes,
        members: Some(2),
        encoder: training::models::Encoder::Bilstm,
        conv_width: 3,
        lstm_hidden: 8,
        gru_hidden: 8,
        attention_dim: 8,
        hops: 3,
        heads: 2,
        // The new code path; golden_graphs covers the paper's formula.
        attention_scale: AttentionScale::Learned,
        averaging_dim: 4,
        layers: 2,
        feed_forward_dim: 16,
        sentence_words: 12,
        filters: 8,
        kernel_widths: vec![2, 5],
        mlp_hidden: 16,
        dropout: Some(0.1),
        penalty: Some(1.0),
        pooled_values: Some(PooledValues::States),
    }
}

/// Trains a tiny model of `variant` on the committed IMDB slice (a few seconds).
fn train_tiny<C: ModelConfig>(variant: Variant, config: &C) -> Trained<C::Model> {
    let _training = crate::burn_random_generator();
    let dir = tempfile::tempdir().expect("temporary directory");
    let request = TrainRequest {
        variant,
        train: repo_root().join("fixtures/imdb-train-600.parquet"),
        valid: None,
        columns: Columns { text: "text".into(), label: "label".into() },
        multi_label: false,
        out: dir.path().join(variant.name()),
        force: false,
        valid_fraction: 0.2,
        max_tokens: 256,
        vocabulary: VocabularyConfig { min_count: 2, max_vocab: 4000 },
        training: TrainingFlags {
            epochs: Some(6),
            patience: Some(6),
            batch_size: Some(32),
            learning_rate: Some(5e-3),
            clip_norm: Some(0.5),
            seed: 7,
            class_weights: ClassWeighting::None,
            // NAL's tiny model stays near chance on these 480 reviews: calibrated, its
            // probabilities would be flat (T at its bound) and the comparison weak. The
            // others' graphs are compared calibrated.
            calibrate: variant != Variant::Nal,
            adversarial: None,
            virtual_adversarial: None,
        },
        model: tiny_flags(),
        word_vectors: None,
        freeze_word_vectors: false,
        // Random words, as the golden graphs were trained.
        random_words: true,
        teacher: None,
        unlabelled: None,
    };
    let TrainOutcome { report, model } = run_variant(&request, config).expect("training a tiny model");
    let package = ModelPackage::open(&report.package).expect("package written by export");
    Trained { _dir: dir, package, model }
}

/// One tiny model per variant and flags, trained once for every test in this file.
type Cell<C> = OnceLock<Trained<<C as ModelConfig>::Model>>;

fn trained<C: ModelConfig>(variant: Variant, flags: ModelFlags, cell: &'static Cell<C>) -> &'static Trained<C::Model> {
    cell.get_or_init(|| train_tiny(variant, &C::from(&flags)))
}

/// [`tiny_flags`] with the hops pooling the words' embeddings (`--pooled-values words`).
fn words_flags() -> ModelFlags {
    ModelFlags { pooled_values: Some(PooledValues::Words), ..tiny_flags() }
}

/// Token ids of fixture reviews cut to `LENGTHS`, right-padded into one batch.
pub(crate) fn mixed_length_batch(package: &ModelPackage) -> (ModelInputs, Vec<Vec<i64>>) {
    let (documents, _) = mixed_length_documents(package);
    let sequences: Vec<Vec<i64>> = documents.into_iter().map(|(ids, _)| ids).collect();
    (ModelInputs::right_padded(&sequences, package.manifest.padding_id), sequences)
}

/// A document's token ids and its sentence lengths.
type Document = (Vec<i64>, Vec<usize>);

/// Fixture reviews cut to `LENGTHS` tokens, as (ids, sentence lengths) with the package's
/// sentence limit (or 50), and those documents padded to `[batch, sentences, words]`.
fn mixed_length_documents(package: &ModelPackage) -> (Vec<Document>, ModelInputs) {
    let encoder = TextEncoder::from_file(&package.tokenizer_path(), package.manifest.max_tokens).expect("tokenizer");
    let source = batch_io::source::open_parquet(&repo_root().join("fixtures/reviews.parquet"), &["text"], 1024)
        .expect("fixture reviews");
    let mut long_reviews = Vec::new();
    for batch in source.batches {
        let batch = batch.expect("record batch");
        let texts = batch_io::source::string_values(batch.column(0)).expect("string column");
        let texts: Vec<&str> = texts.into_iter().flatten().collect();
        for encoded in encoder.encode_batch(&texts).expect("encode") {
            if encoded.ids.len() >= 256 {
                long_reviews.push(encoded);
            }
        }
    }
    assert!(long_reviews.len() >= LENGTHS.len(), "fixture needs {} reviews of 256+ tokens", LENGTHS.len());
    let sentence_words = package.manifest.max_sentence_words.unwrap_or(50);
    let documents: Vec<Document> = LENGTHS
        .iter()
        .zip(&long_reviews)
        .map(|(&len, e)| {
            let tokens = encoder.vocabulary().tokens(&e.ids[..len]).expect("ids of this tokenizer");
            (e.ids[..len].to_vec(), sentence_lengths(&tokens, sentence_words))
        })
        .collect();
    let views: Vec<(&[i64], &[usize])> = documents.iter().map(|(ids, l)| (ids.as_slice(), l.as_slice())).collect();
    let inputs = ModelInputs::sentences_padded(&views, package.manifest.padding_id);
    (documents, inputs)
}

pub(crate) fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "compared tensors differ in size");
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

pub(crate) fn ort_backend(graph: &Path) -> OrtBackend {
    let library = test_support::onnxruntime_library().expect("installing the ONNX Runtime library for tests");
    let options = BackendOptions { kind: BackendKind::Ort, ort_library: Some(library), ..BackendOptions::default() };
    OrtBackend::open(graph, &options).expect("ONNX Runtime opens the graph")
}
fn check_against_burn<M: Network>(trained: &Trained<M>, outputs: &ModelOutputs, inputs: &ModelInputs, runtime: &str) {
    let burn = forward_probs(&trained.model, inputs, training::fit::Task::OneClass);
    let (probs, attention) = (burn.probs, burn.attention);
    let probs_diff = max_abs_diff(&probs, &outputs["probs"].data);
    println!("{runtime}: max |Δprobs| = {probs_diff:.2e}");
    // A model that learned nothing would make the comparison weak: its rows must differ.
    let positive: Vec<f32> = probs.chunks(2).map(|p| p[1]).collect();
    let spread = positive.iter().fold(0.0f32, |m, &p| m.max(p)) - positive.iter().fold(1.0f32, |m, &p| m.min(p));
    println!("{runtime}: P(pos) spread over the batch = {spread:.3}");
    assert!(spread > 0.05, "the tiny model gives nearly constant probabilities ({spread}); the test is too weak");
    assert!(probs_diff <= RUNTIME_TOLERANCE, "{runtime} probs differ from burn by {probs_diff}");
    // Hierarchical graphs name their word-level attention `word_attention`.
    let attention_output = if burn.sentence_attention.is_some() { "word_attention" } else { "attention" };
    assert_eq!(attention.is_some(), outputs.contains_key(attention_output), "graph and burn disagree on attention");
    if let Some(attention) = attention {
        let attention_diff = max_abs_diff(&attention, &outputs[attention_output].data);
        println!("{runtime}: max |Δ{attention_output}| = {attention_diff:.2e}");
        assert!(attention_diff <= RUNTIME_TOLERANCE, "{runtime} attention differs from burn by {attention_diff}");
    }
    assert_eq!(
        burn.contribution.is_some(),
        outputs.contains_key("contribution"),
        "graph and burn disagree on contribution"
    );
    if let Some(contribution) = burn.contribution {
        let diff = max_abs_diff(&contribution, &outputs["contribution"].data);
        let largest = contribution.iter().fold(0.0f32, |m, c| m.max(c.abs()));
        println!("{runtime}: max |Δcontribution| = {diff:.2e} (largest |contribution| {largest:.2e})");
        assert!(largest > 1e-3, "the contributions are all about zero; the comparison is too weak");
        assert!(diff <= RUNTIME_TOLERANCE * largest.max(1.0), "{runtime} contribution differs from burn by {diff}");
    }
    if let Some(sentence_attention) = burn.sentence_attention {
        let diff = max_abs_diff(&sentence_attention, &outputs["sentence_attention"].data);
        println!("{runtime}: max |Δsentence_attention| = {diff:.2e}");
        assert!(diff <= RUNTIME_TOLERANCE, "{runtime} sentence attention differs from burn by {diff}");
    }
}

/// Each example run alone gives its row of the padded batch; padding gets no attention.
pub(crate) fn check_alone_equals_batch(backend: &dyn InferenceBackend, inputs: &ModelInputs, sequences: &[Vec<i64>]) {
    let batch = backend.run(inputs).expect("batch run");
    let seq = inputs.shape[1];
    let hops = batch.get("attention").map_or(0, |a| a.shape[1]);
    for (row, sequence) in sequences.iter().enumerate() {
        let alone = backend.run(&ModelInputs::right_padded(&[sequence], 0)).expect("single run");
        let probs_diff = max_abs_diff(batch["probs"].row(row).expect("row"), &alone["probs"].data);
        assert!(probs_diff <= ALONE_TOLERANCE, "{}: row {row} probs differ alone by {probs_diff}", backend.describe());
        for hop in 0..hops {
            let batched = &batch["attention"].row(row).expect("row")[hop * seq..(hop + 1) * seq];
            let single = &alone["attention"].row(0).expect("row")[hop * sequence.len()..(hop + 1) * sequence.len()];
            let diff = max_abs_diff(&batched[..sequence.len()], single);
            assert!(
                diff <= ALONE_TOLERANCE,
                "{}: row {row} hop {hop} attention differs alone by {diff}",
                backend.describe()
            );
            assert!(batched[sequence.len()..].iter().all(|&w| w == 0.0), "attention leaked onto padding");
            let total: f32 = batched.iter().sum();
            assert!((total - 1.0).abs() < 1e-5, "attention row sums to {total}");
        }
        if let Some(contribution) = batch.get("contribution") {
            let classes = contribution.shape[1];
            let batched = contribution.row(row).expect("row");
            let single = alone["contribution"].row(0).expect("row");
            for class in 0..classes {
                let batched = &batched[class * seq..(class + 1) * seq];
                let single = &single[class * sequence.len()..(class + 1) * sequence.len()];
                let diff = max_abs_diff(&batched[..sequence.len()], single);
                assert!(diff <= ALONE_TOLERANCE * 10.0, "row {row} class {class} contribution differs alone by {diff}");
                assert!(batched[sequence.len()..].iter().all(|&c| c == 0.0), "contribution leaked onto padding");
            }
        }
        let embedding_diff = max_abs_diff(batch["embedding"].row(row).expect("row"), &alone["embedding"].data);
        assert!(embedding_diff <= ALONE_TOLERANCE, "row {row} embedding differs alone by {embedding_diff}");
    }
}

/// The padded batch a variant takes: `[batch, seq]`, or `[batch, sentences, words]` for
/// hierarchical variants.
fn mixed_inputs(package: &ModelPackage) -> ModelInputs {
    match package.manifest.input_layout {
        InputLayout::Tokens => mixed_length_batch(package).0,
        InputLayout::SentencesWords => {
            let (_, inputs) = mixed_length_documents(package);
            assert!(inputs.shape[1] > 5, "the batch should hold documents of many sentences: {:?}", inputs.shape);
            inputs
        }
    }
}

fn runtimes_match_burn<M: Network>(trained: &Trained<M>) {
    let inputs = mixed_inputs(&trained.package);
    let tract = TractBackend::open(&trained.package.graph_path()).expect("tract opens the graph");
    check_against_burn(trained, &tract.run(&inputs).expect("tract run"), &inputs, "tract");
    let ort = ort_backend(&trained.package.graph_path());
    check_against_burn(trained, &ort.run(&inputs).expect("ort run"), &inputs, "onnxruntime");
}

fn single_examples_equal_batch_rows<M: Network>(trained: &Trained<M>) {
    let graph = trained.package.graph_path();
    let backends: [Box<dyn InferenceBackend>; 2] =
        [Box::new(TractBackend::open(&graph).expect("tract opens the graph")), Box::new(ort_backend(&graph))];
    for backend in &backends {
        match trained.package.manifest.input_layout {
            InputLayout::Tokens => {
                let (inputs, sequences) = mixed_length_batch(&trained.package);
                check_alone_equals_batch(backend.as_ref(), &inputs, &sequences);
            }
            InputLayout::SentencesWords => {
                let (documents, inputs) = mixed_length_documents(&trained.package);
                check_han_alone_equals_batch(backend.as_ref(), &documents, &inputs);
            }
        }
    }
}

/// A module with a tiny model of `$variant` trained from `$flags` (once for every test in this
/// file) and both parity checks as two tests.
macro_rules! parity_module {
    ($module:ident, $variant:ident, $config:ty, $flags:expr) => {
        pub(crate) mod $module {
            use super::*;

            pub fn model() -> &'static Trained<<$config as ModelConfig>::Model> {
                static CELL: Cell<$config> = OnceLock::new();
                trained::<$config>(Variant::$variant, $flags, &CELL)
            }

            #[test]
            fn on_tract_and_onnx_runtime_matches_burn_on_a_mixed_length_padded_batch() {
                runtimes_match_burn(model());
            }

            #[test]
            fn single_examples_equal_their_batch_rows() {
                single_examples_equal_batch_rows(model());
            }
        }
    };
}

/// For every variant in the registry, its [`parity_module!`] with the tiny flags.
macro_rules! parity_tests {
    ($($(#[$doc:meta])* $variant:ident = $name:literal, $module:ident: $config:ty;)*) => {$(
        parity_module!($module, $variant, $config, tiny_flags());
    )*};
}

training::for_each_variant!(parity_tests);

#[test]
fn san_package_declares_its_contract() {
    let manifest = &san::model().package.manifest;
    assert_eq!(manifest.variant, "san");
    assert_eq!(manifest.labels, vec!["neg".to_owned(), "pos".to_owned()]);
    assert_eq!(manifest.attention_heads, Some(3));
    assert_eq!(manifest.embedding_dim, 3 * 16); // hops × 2 directions × 8 units
    assert_eq!(manifest.max_tokens, 256);
    assert!(manifest.parameter_count > 0);
    let tract = TractBackend::open(&san::model().package.graph_path()).expect("tract opens the graph");
    assert_eq!(tract.output_names(), ["probs", "attention", "embedding", "contribution"]);
}

// SAN and LAMA pooling the words' embeddings (`--pooled-values words`): the same checks as
// every variant.
parity_module!(san_words, San, training::models::san::SanConfig, words_flags());
parity_module!(lama_words, Lama, training::models::lama::LamaConfig, words_flags());
// SAN reading the words with a window convolution (`--encoder conv`) instead of the biLSTM.
parity_module!(san_conv, San, training::models::san::SanConfig, conv_flags());
// The document's mean word added at every position (`--encoder conv-mean`), the hops pooling
// the convolution's outputs (`--pooled-values states`).
parity_module!(
    san_conv_mean,
    San,
    training::models::san::SanConfig,
    ModelFlags { encoder: training::models::Encoder::ConvMean, conv_width: 5, ..tiny_flags() }
);

// Each pooled word scaled by a factor read from its state (`--pooled-values gated-words`).
parity_module!(
    san_gated,
    San,
    training::models::san::SanConfig,
    ModelFlags { pooled_values: Some(PooledValues::GatedWords), ..tiny_flags() }
);

/// [`words_flags`] with a window convolution before the hops (`--encoder conv`).
fn conv_flags() -> ModelFlags {
    ModelFlags { encoder: training::models::Encoder::Conv, ..words_flags() }
}

/// The widths that follow from pooling embeddings, not states.
#[test]
fn san_words_package_pools_one_embedding_per_hop() {
    let manifest = &san_words::model().package.manifest;
    assert_eq!(manifest.embedding_dim, 3 * 24); // hops × the embedding width
    assert_eq!(manifest.hyper_parameters["pooled_values"], "words");
    assert_eq!(san::model().package.manifest.hyper_parameters["pooled_values"], "states");
    let tract = TractBackend::open(&san_words::model().package.graph_path()).expect("tract opens the graph");
    assert_eq!(tract.output_names(), ["probs", "attention", "embedding", "contribution"]);
}

/// The convolution's width and filters are recorded, and it leaves the graph's contract as
/// the biLSTM's.
#[test]
fn san_conv_package_records_its_window() {
    let manifest = &san_conv::model().package.manifest;
    assert_eq!(manifest.embedding_dim, 3 * 24);
    assert_eq!(manifest.hyper_parameters["encoder"], "conv");
    assert_eq!(manifest.hyper_parameters["conv_width"], 3);
    assert_eq!(san_conv_mean::model().package.manifest.hyper_parameters["encoder"], "conv-mean");
    assert_eq!(san_words::model().package.manifest.hyper_parameters["encoder"], "bilstm");
    assert!(!san_words::model().package.manifest.hyper_parameters.contains_key("conv_width"));
    let tract = TractBackend::open(&san_conv::model().package.graph_path()).expect("tract opens the graph");
    assert_eq!(tract.output_names(), ["probs", "attention", "embedding", "contribution"]);
    let graph = std::fs::read(san_conv::model().package.graph_path()).expect("graph");
    assert!(!graph.windows(4).any(|w| w == b"LSTM"), "no LSTM node in the conv encoder's graph");
}

/// Gated words pool one embedding per hop, as words do, and the manifest names the gate.
#[test]
fn san_gated_package_pools_gated_words() {
    let manifest = &san_gated::model().package.manifest;
    assert_eq!(manifest.embedding_dim, 3 * 24);
    assert_eq!(manifest.hyper_parameters["pooled_values"], "gated-words");
    let graph = std::fs::read(san_gated::model().package.graph_path()).expect("graph");
    assert!(graph.windows(10).any(|w| w == b"value_gate"), "the gate's weights are in the graph");
}

#[test]
fn lama_words_package_pools_one_embedding_per_head() {
    check_contract(lama_words::model(), "lama", 2, 2 * 24); // heads × the embedding width
    assert_eq!(lama_words::model().package.manifest.hyper_parameters["pooled_values"], "words");
}

#[test]
fn avg_package_has_no_attention() {
    let manifest = &avg::model().package.manifest;
    assert_eq!(manifest.variant, "avg");
    assert_eq!(manifest.attention_heads, None);
    assert_eq!(manifest.embedding_dim, 24);
    assert!(!manifest.hyper_parameters.contains_key("hops"), "only the flags avg uses are recorded");
    let tract = TractBackend::open(&avg::model().package.graph_path()).expect("tract opens the graph");
    assert_eq!(tract.output_names(), ["probs", "embedding"]);
}

#[test]
fn cnn_package_pools_one_feature_per_filter_and_width() {
    let manifest = &cnn::model().package.manifest;
    assert_eq!(manifest.variant, "cnn");
    assert_eq!(manifest.attention_heads, None);
    assert_eq!(manifest.embedding_dim, 8 * 2);
    assert_eq!(manifest.hyper_parameters["kernel_widths"], serde_json::json!([2, 5]));
}

/// The manifest's attention rows and embedding width, and the graph's outputs.
fn check_contract<M: Network>(trained: &Trained<M>, variant: &str, heads: usize, embedding_dim: usize) {
    let explains = ["lama", "lama-ctx", "nal"].contains(&variant);
    let manifest = &trained.package.manifest;
    assert_eq!(manifest.variant, variant);
    assert_eq!(manifest.attention_heads, Some(heads));
    assert_eq!(manifest.embedding_dim, embedding_dim);
    let tract = TractBackend::open(&trained.package.graph_path()).expect("tract opens the graph");
    let mut expected = vec!["probs", "attention", "embedding"];
    expected.extend(explains.then_some("contribution"));
    assert_eq!(tract.output_names(), expected);
}

#[test]
fn bigru_package_has_one_argmax_share_row_over_the_pooled_states() {
    check_contract(bigru::model(), "bigru", 1, 2 * 8);
    assert!(!bigru::model().package.manifest.hyper_parameters.contains_key("lstm_hidden"));
}

#[test]
fn lama_packages_record_where_their_context_comes_from() {
    check_contract(lama::model(), "lama", 2, 2 * 2 * 8); // heads × 2 directions × 8 units
    check_contract(lama_ctx::model(), "lama-ctx", 2, 2 * 2 * 8);
    assert_eq!(lama::model().package.manifest.hyper_parameters["context"], "global");
    assert_eq!(lama_ctx::model().package.manifest.hyper_parameters["context"], "document_mean");
    assert_eq!(lama::model().package.manifest.hyper_parameters["attention_scale"], "learned");
}

#[test]
fn nal_package_averages_each_hop_through_its_own_projection() {
    check_contract(nal::model(), "nal", 3, 3 * 4); // hops × averaging width
}

#[test]
fn te_package_reads_out_the_first_position() {
    check_contract(te::model(), "te", 2, 24);
    assert_eq!(te::model().package.manifest.hyper_parameters["layers"], 2);
}

/// Each document alone gives its row of the `[batch, sentences, words]` batch; padding words
/// and padding sentences get no attention; each level's weights sum to one.
fn check_han_alone_equals_batch(
    backend: &dyn InferenceBackend,
    documents: &[(Vec<i64>, Vec<usize>)],
    inputs: &ModelInputs,
) {
    let batch = backend.run(inputs).expect("batch run");
    let (sentences, words) = (inputs.shape[1], inputs.shape[2]);
    for (row, (ids, lengths)) in documents.iter().enumerate() {
        let alone = backend.run(&ModelInputs::sentences_padded(&[(ids, lengths)], 0)).expect("single run");
        let alone_words = alone["word_attention"].shape[2];
        let describe = backend.describe();
        let probs_diff = max_abs_diff(batch["probs"].row(row).expect("row"), &alone["probs"].data);
        assert!(probs_diff <= ALONE_TOLERANCE, "{describe}: row {row} probs differ alone by {probs_diff}");
        let batched_sentences = batch["sentence_attention"].row(row).expect("row");
        let n = lengths.len();
        let diff = max_abs_diff(&batched_sentences[..n], &alone["sentence_attention"].data);
        assert!(diff <= ALONE_TOLERANCE, "{describe}: row {row} sentence attention differs alone by {diff}");
        assert!(batched_sentences[n..].iter().all(|&w| w == 0.0), "sentence attention leaked onto padding");
        let total: f32 = batched_sentences.iter().sum();
        assert!((total - 1.0).abs() < 1e-5, "sentence attention sums to {total}");
        let batched_words = batch["word_attention"].row(row).expect("row");
        for sentence in 0..sentences {
            let here = &batched_words[sentence * words..(sentence + 1) * words];
            let Some(&len) = lengths.get(sentence) else {
                assert!(here.iter().all(|&w| w == 0.0), "a padding sentence got word attention");
                continue;
            };
            let single = &alone["word_attention"].data[sentence * alone_words..sentence * alone_words + len];
            let diff = max_abs_diff(&here[..len], single);
            assert!(diff <= ALONE_TOLERANCE, "{describe}: row {row} sentence {sentence} words differ alone by {diff}");
            assert!(here[len..].iter().all(|&w| w == 0.0), "word attention leaked onto padding");
            let total: f32 = here.iter().sum();
            assert!((total - 1.0).abs() < 1e-5, "a sentence's word attention sums to {total}");
        }
    }
}

#[test]
fn han_package_is_hierarchical_and_the_pipeline_reads_it() {
    let trained = han::model();
    let manifest = &trained.package.manifest;
    assert_eq!(manifest.variant, "han");
    assert_eq!(manifest.input_layout, InputLayout::SentencesWords);
    assert_eq!(manifest.max_sentence_words, Some(12));
    let tract = TractBackend::open(&trained.package.graph_path()).expect("tract opens the graph");
    assert_eq!(tract.output_names(), ["probs", "word_attention", "sentence_attention", "embedding"]);

    // What `pipeline run` does with it: one attention row per document (word × sentence
    // weight, summing to one) and the sentences' lengths and weights.
    let classifier = runtime::classifier::Classifier::open(trained.package.clone(), &BackendOptions::default(), None)
        .expect("the pipeline opens a hierarchical package");
    let texts = [Some("A fine film. The acting was great! Would I watch it again? Yes."), Some("dull"), None];
    let (predictions, counts) = classifier.predict(&texts, 2).expect("prediction");
    assert_eq!(counts.predicted, 2);
    let first = predictions[0].as_ref().expect("a prediction for the first text");
    let sentences = first.sentences.as_ref().expect("sentence attention");
    assert_eq!(sentences.lengths.iter().sum::<usize>(), first.token_ids.len());
    let tokens = classifier.vocabulary().tokens(&first.token_ids).expect("ids of this tokenizer");
    assert_eq!(sentences.lengths.len(), 4, "tokens {tokens:?}");
    assert!((sentences.weights.iter().sum::<f32>() - 1.0).abs() < 1e-5);
    let attention = first.attention.as_ref().expect("document-level word attention");
    assert_eq!(attention.len(), 1);
    assert_eq!(attention[0].len(), first.token_ids.len());
    assert!((attention[0].iter().sum::<f32>() - 1.0).abs() < 1e-5);
    assert!(predictions[2].is_none());
}

//! A model package opened for inference: texts in, per-document predictions out.
//!
//! Shared by `pipeline run` (one chunk of a file at a time) and SQL's `classify()` (one
//! Arrow array at a time), so both tokenize, batch and read the graph's outputs identically.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context;
use rayon::prelude::*;

use crate::contract;
use crate::inference::{BackendOptions, InferenceBackend, ModelInputs, OutputTensor, open_backend};
use crate::long_documents::{self, LongDocuments};
use crate::output::{DocumentPrediction, OptionalColumns, SentenceAttention};
use crate::package::{InputLayout, ModelPackage, tensor};
use crate::text::{DEFAULT_SENTENCE_WORDS, EncodedText, TextEncoder, Vocabulary, sentence_lengths};

pub struct Classifier {
    package: ModelPackage,
    encoder: TextEncoder,
    backend: Arc<dyn InferenceBackend>,
    has_attention: bool,
    /// The graph has a `contribution` output.
    has_contribution: bool,
    /// `Some(max words per sentence)` for hierarchical models, fed `[batch, sentences, words]`.
    sentence_words: Option<usize>,
    /// What happens to documents past the token limit.
    long_documents: LongDocuments,
    /// Time spent inside the backend's runs, summed over concurrent runs, waits for a free
    /// session left out (nanoseconds).
    session_nanos: AtomicU64,
    /// Threads that tokenize each call's texts: one when inference computes on the CPU
    /// (tokenizing outruns it many times over on one). Up to four when it leaves the cores
    /// free (a GPU): on the H100 machine one thread tokenized about 41,000 IMDB docs/s, and
    /// sixteen took cores from the threads that feed the GPU (RESULTS.md, #34).
    tokenize_threads: usize,
}

/// What happened to the texts of one [`Classifier::predict`] call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TextCounts {
    pub predicted: usize,
    /// Of those, the rows below `--min-confidence`, written without a prediction (counted
    /// by the run, which knows the threshold; the classifier leaves it 0).
    pub abstained: usize,
    pub null_texts: usize,
    /// Texts with no token the tokenizer knows how to produce (their prediction is null).
    pub empty_texts: usize,
    /// Texts of which tokens were left out (past the token limit, or the middle in
    /// `head-tail` mode).
    pub truncated: usize,
    /// Texts past the token limit classified in windows.
    pub windowed: usize,
    /// Tokens of the texts (as far as they were read).
    pub tokens: usize,
}

impl TextCounts {
    /// Adds another chunk's counts to these.
    pub fn add(&mut self, other: TextCounts) {
        self.predicted += other.predicted;
        self.abstained += other.abstained;
        self.null_texts += other.null_texts;
        self.empty_texts += other.empty_texts;
        self.truncated += other.truncated;
        self.windowed += other.windowed;
        self.tokens += other.tokens;
    }
}

impl Classifier {
    /// Loads the tokenizer and the graph, and checks the package contract (see [`contract`]).
    /// `max_tokens` overrides the package's token limit.
    pub fn open(package: ModelPackage, backend: &BackendOptions, max_tokens: Option<usize>) -> anyhow::Result<Self> {
        let backend = open_backend(&package.graph_path(), backend)?;
        Self::with_backend(package, Arc::from(backend), max_tokens)
    }

    /// Like [`Classifier::open`], on a backend already loaded from the package's graph.
    pub fn with_backend(
        package: ModelPackage,
        backend: Arc<dyn InferenceBackend>,
        max_tokens: Option<usize>,
    ) -> anyhow::Result<Self> {
        let max_tokens = max_tokens.unwrap_or(package.manifest.max_tokens);
        anyhow::ensure!(max_tokens > 0, "the token limit must be at least 1");
        let encoder = TextEncoder::from_file(&package.tokenizer_path(), max_tokens)?;
        let outputs = contract::check_graph_outputs(&package, backend.as_ref())?;
        contract::check_labels_and_vocabulary(&package, encoder.tokenizer())?;
        let sentence_words = match package.manifest.input_layout {
            InputLayout::Tokens => None,
            InputLayout::SentencesWords => Some(package.manifest.max_sentence_words.unwrap_or(DEFAULT_SENTENCE_WORDS)),
        };
        let tokenize_threads = if backend.computes_on_cpu() { 1 } else { rayon::current_num_threads().min(4) };
        Ok(Self {
            package,
            encoder,
            backend,
            has_attention: outputs.attention,
            has_contribution: outputs.contribution,
            sentence_words,
            long_documents: LongDocuments::default(),
            session_nanos: AtomicU64::new(0),
            tokenize_threads,
        })
    }

    /// Sets what happens to documents past the token limit (default: windows, the most
    /// accurate on IMDB; RESULTS.md).
    pub fn with_long_documents(mut self, mode: LongDocuments) -> anyhow::Result<Self> {
        mode.check(self.max_tokens())?;
        self.long_documents = mode.normalised(self.max_tokens());
        Ok(self)
    }

    pub fn long_documents(&self) -> LongDocuments {
        self.long_documents
    }

    pub fn backend(&self) -> &dyn InferenceBackend {
        self.backend.as_ref()
    }

    /// The backend, to share with another classifier on the same graph.
    pub fn shared_backend(&self) -> Arc<dyn InferenceBackend> {
        self.backend.clone()
    }

    /// Seconds spent inside the backend's runs so far, summed over runs that overlapped: the
    /// model's own share of the work, for comparing a run with session-only speed.
    pub fn session_seconds(&self) -> f64 {
        self.session_nanos.load(Ordering::Relaxed) as f64 / 1e9
    }

    /// The token strings of the `token_ids` in its predictions.
    pub fn vocabulary(&self) -> &Vocabulary {
        self.encoder.vocabulary()
    }

    pub fn labels(&self) -> &[String] {
        &self.package.manifest.labels
    }

    /// The package this classifier runs.
    pub fn package(&self) -> &ModelPackage {
        &self.package
    }

    pub fn max_tokens(&self) -> usize {
        self.encoder.max_tokens()
    }

    /// Whether the output can hold each token's place in the text instead of its string.
    pub fn gives_token_spans(&self) -> bool {
        self.encoder.gives_token_spans()
    }

    /// The optional output columns this model fills.
    pub fn optional_columns(&self, with_embedding: bool) -> OptionalColumns {
        OptionalColumns {
            attention: self.has_attention,
            contribution: self.has_contribution,
            sentences: self.sentence_words.is_some(),
            embedding_dim: with_embedding.then_some(self.package.manifest.embedding_dim),
            label_thresholds: self.package.manifest.label_thresholds.as_deref().map(Into::into),
        }
    }

    /// Tokenizes `texts` (see [`TextEncoder::encode_batch`]), runs them in shape-sorted batches of `batch_size`
    /// (less padding) on all cores, and returns the predictions in input order: `None` for
    /// null texts and texts without tokens.
    pub fn predict(
        &self,
        texts: &[Option<&str>],
        batch_size: usize,
    ) -> anyhow::Result<(Vec<Option<DocumentPrediction>>, TextCounts)> {
        let encoded = self.encode(texts)?;
        let counts = encoded.counts;
        Ok((self.infer(encoded, BatchLimit::documents(batch_size))?, counts))
    }

    /// The tokenizing half of [`Classifier::predict`]: `texts` tokenized and sorted by the
    /// shape they pad to.
    pub fn encode(&self, texts: &[Option<&str>]) -> anyhow::Result<EncodedTexts> {
        let mut counts = TextCounts::default();
        let present: Vec<(usize, &str)> = texts.iter().enumerate().filter_map(|(i, t)| t.map(|t| (i, t))).collect();
        counts.null_texts = texts.len() - present.len();
        let strings: Vec<&str> = present.iter().map(|(_, t)| *t).collect();
        let limit = self.max_tokens();
        let keep = self.long_documents.tokens_to_read(limit);
        let encoded = self.encoder.encode_batch_up_to(&strings, keep, self.tokenize_threads)?;
        let mut documents: Vec<Document> = Vec::with_capacity(encoded.len());
        let mut windowed = HashMap::new();
        for ((row, _), mut encoding) in present.iter().zip(encoded) {
            if encoding.ids.is_empty() {
                counts.empty_texts += 1;
                continue;
            }
            counts.tokens += encoding.ids.len();
            match self.long_documents {
                _ if encoding.ids.len() <= limit => {}
                LongDocuments::Truncate => {
                    encoding.ids.truncate(limit);
                    if let Some(spans) = &mut encoding.spans {
                        spans.truncate(limit);
                    }
                }
                LongDocuments::HeadTail => {
                    encoding.ids = long_documents::head_and_tail(&encoding.ids, limit);
                    encoding.spans = encoding.spans.map(|spans| long_documents::head_and_tail(&spans, limit));
                    encoding.truncated = true;
                }
                LongDocuments::Windows { stride, .. } => {
                    counts.windowed += 1;
                    counts.truncated += usize::from(encoding.truncated);
                    let stride = long_documents::bounded_stride(
                        encoding.ids.len(),
                        limit,
                        stride.unwrap_or(long_documents::default_stride(limit)),
                    );
                    for window in long_documents::windows(encoding.ids.len(), limit, stride) {
                        let start = window.start;
                        let ids = encoding.ids.get(window).unwrap_or_default().to_vec();
                        let piece = EncodedText { ids, spans: None, truncated: encoding.truncated };
                        documents.push(self.document(*row, start, piece)?);
                    }
                    let sentence_lengths = self.sentence_lengths(&encoding.ids)?;
                    windowed.insert(*row, (encoding, sentence_lengths));
                    continue;
                }
            }
            counts.truncated += usize::from(encoding.truncated);
            documents.push(self.document(*row, 0, encoding)?);
        }
        counts.predicted = present.len() - counts.empty_texts;
        documents.sort_by_key(Document::padded_shape);
        Ok(EncodedTexts { rows: texts.len(), documents, windowed, counts })
    }

    /// One piece of text to classify, starting at token `start` of the text in row `row`.
    fn document(&self, row: usize, start: usize, encoding: EncodedText) -> anyhow::Result<Document> {
        let sentence_lengths = self.sentence_lengths(&encoding.ids)?;
        Ok(Document { row, start, encoding, sentence_lengths })
    }

    /// Words per sentence of `ids`, for hierarchical models.
    fn sentence_lengths(&self, ids: &[i64]) -> anyhow::Result<Option<Vec<usize>>> {
        self.sentence_words
            .map(|max_words| anyhow::Ok(sentence_lengths(&self.vocabulary().tokens(ids)?, max_words)))
            .transpose()
    }

    /// The inference half of [`Classifier::predict`]: batches within `limit` on all cores,
    /// predictions back in input order.
    pub fn infer(&self, encoded: EncodedTexts, limit: BatchLimit) -> anyhow::Result<Vec<Option<DocumentPrediction>>> {
        anyhow::ensure!(limit.documents > 0, "the batch size must be at least 1");
        let ranges = batch_ranges(encoded.documents.iter().map(Document::padded_shape), limit);
        let batches: Vec<anyhow::Result<Vec<(usize, usize, DocumentPrediction)>>> = ranges
            .into_par_iter()
            .map(|range| encoded.documents.get(range).map_or_else(|| Ok(Vec::new()), |batch| self.predict_batch(batch)))
            .collect();
        let mut rows: Vec<Option<DocumentPrediction>> = vec![None; encoded.rows];
        let mut windows: HashMap<usize, Vec<(usize, DocumentPrediction)>> = HashMap::new();
        let mut not_finite = NonFiniteOutput::default();
        for batch in batches {
            for (row, start, doc) in batch? {
                not_finite.check(row, &doc);
                if encoded.windowed.contains_key(&row) {
                    windows.entry(row).or_default().push((start, doc));
                } else if let Some(slot) = rows.get_mut(row) {
                    // `row` came from enumerating the texts, which `rows` mirrors.
                    *slot = Some(doc);
                }
            }
        }
        if !not_finite.rows.is_empty() {
            not_finite.rows.sort_unstable();
            not_finite.rows.dedup();
            return Err(not_finite.into());
        }
        let aggregate = match self.long_documents {
            LongDocuments::Windows { aggregate, .. } => aggregate,
            _ => long_documents::Aggregate::Mean,
        };
        for (row, (whole, sentence_lengths)) in encoded.windowed {
            let pieces = windows.remove(&row).unwrap_or_default();
            let doc = long_documents::combine(pieces, whole, sentence_lengths, aggregate)?;
            if let Some(slot) = rows.get_mut(row) {
                *slot = Some(doc);
            }
        }
        Ok(rows)
    }

    /// Runs one batch; each prediction comes with its document's row and first token.
    fn predict_batch(&self, chunk: &[Document]) -> anyhow::Result<Vec<(usize, usize, DocumentPrediction)>> {
        let pad = self.package.manifest.padding_id;
        let inputs = if self.sentence_words.is_some() {
            let documents: Vec<(&[i64], &[usize])> =
                chunk.iter().map(|d| (d.encoding.ids.as_slice(), d.sentences())).collect();
            ModelInputs::sentences_padded(&documents, pad)
        } else {
            let sequences: Vec<&[i64]> = chunk.iter().map(|d| d.encoding.ids.as_slice()).collect();
            ModelInputs::right_padded(&sequences, pad)
        };
        let (outputs, in_model) = self.backend.run_timed(&inputs)?;
        let nanos = u64::try_from(in_model.as_nanos()).unwrap_or(u64::MAX);
        self.session_nanos.fetch_add(nanos, Ordering::Relaxed);
        let output = |name: &str| outputs.get(name).with_context(|| format!("the graph returned no `{name}` output"));
        let probs = output(tensor::PROBS)?;
        let attention = outputs.get(tensor::ATTENTION);
        let contribution = outputs.get(tensor::CONTRIBUTION);
        let embedding = outputs.get(tensor::EMBEDDING);
        let hierarchical = match self.sentence_words {
            Some(_) => Some((output(tensor::WORD_ATTENTION)?, output(tensor::SENTENCE_ATTENTION)?)),
            None => None,
        };
        let mut predictions = Vec::with_capacity(chunk.len());
        for (i, document) in chunk.iter().enumerate() {
            let len = document.encoding.ids.len();
            let mut doc = DocumentPrediction {
                probabilities: probs.row(i)?.to_vec(),
                token_ids: document.encoding.ids.clone(),
                token_spans: document.encoding.spans.clone(),
                attention: attention.map(|a| a.heads(i, len)).transpose()?,
                contribution: contribution.map(|c| c.heads(i, len)).transpose()?,
                embedding: embedding.map(|e| e.row(i).map(<[f32]>::to_vec)).transpose()?,
                sentences: None,
                truncated: document.encoding.truncated,
            };
            if let Some((words, sentences)) = &hierarchical {
                let (attention, sentences) = document_attention(document.sentences(), words, sentences, i)?;
                doc.attention = Some(vec![attention]);
                doc.sentences = Some(sentences);
            }
            predictions.push((document.row, document.start, doc));
        }
        Ok(predictions)
    }
}

/// The model gave values that are not finite (NaN or infinity) for these documents, numbered
/// from 0 in the texts given. Probabilities would label them all with the first class and a
/// NaN confidence; attention or contributions would be written as NaN, or as bytes of 0 in
/// compact output, which reads as "no push".
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NonFiniteOutput {
    /// The first output found not finite (`probs`, `attention`, `contribution`, …).
    pub output: &'static str,
    pub rows: Vec<usize>,
}

impl NonFiniteOutput {
    /// Records `row` if any of `doc`'s values is not finite.
    fn check(&mut self, row: usize, doc: &DocumentPrediction) {
        let all_finite = |values: &[f32]| values.iter().all(|v| v.is_finite());
        let rows_finite = |rows: &Option<Vec<Vec<f32>>>| rows.iter().flatten().all(|r| all_finite(r));
        let bad = if !all_finite(&doc.probabilities) {
            Some(tensor::PROBS)
        } else if !rows_finite(&doc.attention) {
            Some(tensor::ATTENTION)
        } else if !rows_finite(&doc.contribution) {
            Some(tensor::CONTRIBUTION)
        } else if !doc.embedding.as_deref().is_none_or(all_finite) {
            Some(tensor::EMBEDDING)
        } else if !doc.sentences.as_ref().is_none_or(|s| all_finite(&s.weights)) {
            Some(tensor::SENTENCE_ATTENTION)
        } else {
            None
        };
        if let Some(output) = bad {
            if self.rows.is_empty() {
                self.output = output;
            }
            self.rows.push(row);
        }
    }

    /// What went wrong, the rows numbered from `first_row` (the first ten, then a count).
    pub fn message(&self, first_row: usize) -> String {
        let shown: Vec<String> = self.rows.iter().take(10).map(|row| (row + first_row).to_string()).collect();
        let more = self.rows.len().saturating_sub(10);
        let rows = if more > 0 { format!("{} and {more} more", shown.join(", ")) } else { shown.join(", ") };
        let what = match self.output {
            tensor::PROBS => "probabilities",
            tensor::ATTENTION => "attention weights",
            tensor::CONTRIBUTION => "contributions",
            tensor::SENTENCE_ATTENTION => "sentence attention weights",
            _ => "embedding values",
        };
        format!(
            "the model gave {what} that are not finite (NaN or infinity) for row(s) {rows}; the graph is \
             broken on these documents: check the model (retrain it, or export it again)"
        )
    }
}

impl std::fmt::Display for NonFiniteOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message(0))
    }
}

impl std::error::Error for NonFiniteOutput {}

/// Texts tokenized by [`Classifier::encode`], waiting for [`Classifier::infer`].
pub struct EncodedTexts {
    /// How many texts were given, null ones included.
    rows: usize,
    /// The texts with tokens (a long one as several windows), sorted by the shape they pad to.
    documents: Vec<Document>,
    /// Texts classified in windows, by row: all their tokens, and their sentences' lengths
    /// for hierarchical models.
    windowed: HashMap<usize, (EncodedText, Option<Vec<usize>>)>,
    pub counts: TextCounts,
}

/// How large an inference batch may grow: at most `documents` documents and, when `tokens`
/// is given, at most that many padded tokens (documents × the longest, in words × sentences
/// for HAN), whichever comes first. A document over the token budget alone is a batch alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimit {
    pub documents: usize,
    pub tokens: Option<usize>,
}

impl BatchLimit {
    pub fn documents(documents: usize) -> Self {
        Self { documents, tokens: None }
    }
}

/// Cuts documents of the given padded shapes (in shape order) into consecutive batches within
/// `limit`.
fn batch_ranges(shapes: impl Iterator<Item = (usize, usize)>, limit: BatchLimit) -> Vec<std::ops::Range<usize>> {
    let mut ranges = Vec::new();
    let (mut start, mut end) = (0usize, 0usize);
    let (mut words, mut sentences) = (0usize, 0usize);
    for (i, (w, s)) in shapes.enumerate() {
        end = i + 1;
        let (grown_words, grown_sentences) = (words.max(w), sentences.max(s));
        let count = i - start + 1;
        let padded = count.saturating_mul(grown_words).saturating_mul(grown_sentences.max(1));
        let over = count > limit.documents || limit.tokens.is_some_and(|budget| padded > budget);
        if over && i > start {
            ranges.push(start..i);
            start = i;
            (words, sentences) = (w, s);
        } else {
            (words, sentences) = (grown_words, grown_sentences);
        }
    }
    if start < end {
        ranges.push(start..end);
    }
    ranges
}

/// One tokenized text waiting for its batch.
struct Document {
    /// Its row in the `texts` given to [`Classifier::predict`].
    row: usize,
    /// Where it starts among the text's tokens (not 0 only for a window of a long text).
    start: usize,
    encoding: EncodedText,
    /// Words per sentence, for hierarchical models.
    sentence_lengths: Option<Vec<usize>>,
}

impl Document {
    fn sentences(&self) -> &[usize] {
        self.sentence_lengths.as_deref().unwrap_or_default()
    }

    /// What a batch pads to, most costly first: a flat model pads every document to the
    /// longest one; a hierarchical model pads every sentence to the batch's longest sentence
    /// (its word-level recurrence runs over all of them), then to the most sentences.
    fn padded_shape(&self) -> (usize, usize) {
        match &self.sentence_lengths {
            Some(lengths) => (lengths.iter().copied().max().unwrap_or(0), lengths.len()),
            None => (self.encoding.ids.len(), 0),
        }
    }
}

/// A hierarchical model's attention for document `row`: each word's weight within its
/// sentence times its sentence's weight, one row over the document's tokens (it sums to 1,
/// like a flat model's hop), and the sentence weights with their lengths.
fn document_attention(
    lengths: &[usize],
    words: &OutputTensor,
    sentences: &OutputTensor,
    row: usize,
) -> anyhow::Result<(Vec<f32>, SentenceAttention)> {
    let width = words.shape.get(2).copied().unwrap_or(0);
    let (words, sentence_weights) = (words.row(row)?, sentences.row(row)?);
    let short = || anyhow::anyhow!("the graph's sentence attention is smaller than the batch it was given");
    let mut attention = Vec::with_capacity(lengths.iter().sum());
    let mut sentence_starts = (0..).step_by(width.max(1));
    for (&len, &weight) in lengths.iter().zip(sentence_weights) {
        let start = sentence_starts.next().ok_or_else(short)?;
        let sentence = words.get(start..start + len).ok_or_else(short)?;
        attention.extend(sentence.iter().map(|w| w * weight));
    }
    let weights = sentence_weights.get(..lengths.len()).ok_or_else(short)?.to_vec();
    Ok((attention, SentenceAttention { lengths: lengths.to_vec(), weights }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(shapes: &[(usize, usize)], documents: usize, tokens: Option<usize>) -> Vec<std::ops::Range<usize>> {
        batch_ranges(shapes.iter().copied(), BatchLimit { documents, tokens })
    }

    #[test]
    fn batches_stop_at_the_document_count_or_the_padded_token_budget() {
        let flat = [(10, 0), (20, 0), (30, 0), (40, 0), (50, 0)];
        assert_eq!(ranges(&flat, 2, None), vec![0..2, 2..4, 4..5]);
        // 3 × 30 = 90 fits 100; adding the 40 would pad 4 × 40 = 160.
        assert_eq!(ranges(&flat, 64, Some(100)), vec![0..3, 3..5]);
        // A document over the budget goes alone rather than not at all.
        assert_eq!(ranges(&[(500, 0), (600, 0)], 64, Some(100)), vec![0..1, 1..2]);
        // HAN pads words × sentences.
        assert_eq!(ranges(&[(5, 2), (5, 4), (6, 4)], 64, Some(40)), vec![0..2, 2..3]);
        assert!(ranges(&[], 8, Some(10)).is_empty());
    }
}

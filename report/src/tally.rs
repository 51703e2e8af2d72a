//! One streaming pass over the predictions: counts, calibration, attention per class and per
//! hop, and the example documents to draw. Memory is bounded by the vocabulary, the number of
//! classes and hops, and the examples kept, not by the number of rows.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::bail;
use arrow::array::{Array, BooleanArray, Float32Array, StringArray};
use runtime::explain::TokenAttention;
use runtime::output::encoding::entropy;
use runtime::output::read::{Batch, floats_at, hops_at, ints_at, strings_at};

/// Bins of the confidence histograms.
pub const CONFIDENCE_BINS: usize = 20;
/// Bins of the reliability diagram.
pub const RELIABILITY_BINS: usize = 10;

/// What was predicted for one class.
#[derive(Debug, Default)]
pub struct ClassTally {
    pub rows: u64,
    pub confidence: [u64; CONFIDENCE_BINS],
    /// Over the summed attention (or the mean of the hops when there is no summary).
    pub attention: TokenAttention,
    /// Each token's pushes towards the class, in logit units, over the rows predicted as it.
    pub pushes: TokenPushes,
}

/// Fewest occurrences for a token to be ranked by its mean push: a rare word's mean is noise.
pub const LEAST_PUSH_COUNT: u64 = 10;

/// Each token's summed push and occurrences.
#[derive(Debug, Default)]
pub struct TokenPushes {
    by_token: BTreeMap<String, (f64, u64)>,
}

impl TokenPushes {
    fn add(&mut self, token: &str, push: f64) {
        let entry = self.by_token.entry(token.to_owned()).or_default();
        entry.0 += push;
        entry.1 += 1;
    }

    /// Whether some token is ranked either way.
    pub fn ranks_any(&self) -> bool {
        !self.top(1, true).is_empty() || !self.top(1, false).is_empty()
    }

    /// The `k` tokens seen at least [`LEAST_PUSH_COUNT`] times with the largest mean push
    /// (`towards`) or the most negative, with that mean; ties go to the token that sorts first.
    pub fn top(&self, k: usize, towards: bool) -> Vec<(String, f64)> {
        let sign = if towards { 1.0 } else { -1.0 };
        let mut means: Vec<(String, f64)> = self
            .by_token
            .iter()
            .filter(|(token, (_, count))| *count >= LEAST_PUSH_COUNT && !runtime::explain::is_special_token(token))
            .map(|(token, (sum, count))| (token.clone(), sum / *count as f64))
            // Means that print as ±0.000 are no evidence either way.
            .filter(|(_, mean)| sign * mean >= 0.0005)
            .collect();
        means.sort_by(|a, b| (sign * b.1).total_cmp(&(sign * a.1)).then_with(|| a.0.cmp(&b.0)));
        means.truncate(k);
        means
    }
}

/// One hop (head) of the attention, over every row.
#[derive(Debug, Default)]
pub struct HopTally {
    pub attention: TokenAttention,
    pub entropy_sum: f64,
    pub rows: u64,
}

impl HopTally {
    pub fn mean_entropy(&self) -> Option<f64> {
        (self.rows > 0).then(|| self.entropy_sum / self.rows as f64)
    }
}

/// Rows whose confidence fell in one reliability bin.
#[derive(Debug, Default, Clone, Copy)]
pub struct ReliabilityBin {
    pub rows: u64,
    pub correct: u64,
    pub confidence_sum: f64,
}

/// One document to draw.
#[derive(Debug, Clone)]
pub struct Example {
    pub file: String,
    pub row: usize,
    pub id: Option<String>,
    pub prediction: String,
    pub label: Option<String>,
    pub confidence: f64,
    pub tokens: Vec<String>,
    /// Hops × tokens.
    pub hops: Vec<Vec<f32>>,
    /// The hops summed and renormalised.
    pub summary: Vec<f32>,
    /// Each token's signed push towards the predicted class, whichever way the file points
    /// them (empty without the column).
    pub contribution: Vec<f32>,
    /// Tokens per sentence and each sentence's weight (HAN).
    pub sentences: Option<(Vec<usize>, Vec<f32>)>,
    /// Tokens of the document were left out (the `truncated` column).
    pub truncated: bool,
    /// Where `tokens` starts in the document, and how many tokens the document has: a long
    /// document is drawn [`TOKENS_DRAWN`] tokens around its heaviest one.
    pub shown_from: usize,
    pub document_tokens: usize,
}

/// Tokens drawn per example at most: a document read in windows can have 100,000, and drawn
/// whole in nine heat maps it made a 225 MB page.
pub const TOKENS_DRAWN: usize = 600;

/// The stretch of at most [`TOKENS_DRAWN`] tokens around the heaviest weight of `summary`
/// (from the start when there are no weights).
fn drawn_span(tokens: usize, summary: Option<&[f32]>) -> std::ops::Range<usize> {
    if tokens <= TOKENS_DRAWN {
        return 0..tokens;
    }
    let heaviest =
        summary.and_then(|s| s.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|(i, _)| i)).unwrap_or(0);
    let start = heaviest.saturating_sub(TOKENS_DRAWN / 2).min(tokens - TOKENS_DRAWN);
    start..start + TOKENS_DRAWN
}

/// The `capacity` examples that rank first by a key, best first.
#[derive(Debug)]
pub struct Ranked {
    capacity: usize,
    /// (key, example), highest key first.
    entries: Vec<(f64, Example)>,
}

impl Ranked {
    fn new(capacity: usize) -> Self {
        Self { capacity, entries: Vec::new() }
    }

    /// Whether an example with `key` would be kept (checked before building it).
    fn admits(&self, key: f64) -> bool {
        self.capacity > 0 && (self.entries.len() < self.capacity || self.entries.last().is_some_and(|(k, _)| key > *k))
    }

    fn insert(&mut self, key: f64, example: Example) {
        let at = self.entries.partition_point(|(k, _)| *k >= key);
        self.entries.insert(at, (key, example));
        self.entries.truncate(self.capacity);
    }

    /// The most examples kept.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn examples(&self) -> impl Iterator<Item = &Example> {
        self.entries.iter().map(|(_, e)| e)
    }
}

/// Everything the page shows, gathered in one pass.
#[derive(Debug)]
pub struct Tally {
    pub rows: u64,
    pub no_prediction: u64,
    /// Rows below the run's `--min-confidence`: classified, but no prediction written
    /// (`None` when the output has no `abstained` column).
    pub abstained: Option<u64>,
    /// A multi-label model's rows given each label (`None` when the output has no
    /// `predicted_labels` column), and the rows given more than one.
    pub predicted_labels: Option<(BTreeMap<String, u64>, u64)>,
    /// Rows whose tokens reached the model's token limit (so the text was probably cut), for
    /// outputs without a `truncated` column.
    pub at_token_limit: u64,
    /// Rows with more tokens than the model's limit: with `--long-documents windows`, the
    /// rows read in windows.
    pub over_token_limit: u64,
    /// Rows the `truncated` column marks, when there is one.
    pub truncated: Option<u64>,
    /// Tokens over the rows that have them.
    pub tokens: u64,
    pub tokenized_rows: u64,
    pub classes: BTreeMap<String, ClassTally>,
    /// (label, prediction) → rows, for rows with both.
    pub confusion: BTreeMap<(String, String), u64>,
    pub labelled: u64,
    pub correct: u64,
    pub reliability: [ReliabilityBin; RELIABILITY_BINS],
    pub hops: Vec<HopTally>,
    pub most_confident: Ranked,
    pub least_confident: Ranked,
    /// Misclassified rows by their true label, most confident first.
    pub misclassified: BTreeMap<String, Ranked>,
    /// With `--where`, the rows it chose: the only ones drawn.
    pub chosen: Option<Chosen>,
    max_tokens: Option<usize>,
    /// The model's labels; empty when the output does not record them.
    model_labels: Vec<String>,
    /// Labelled rows whose true label is none of the model's.
    pub unknown_labelled: u64,
    /// The distinct true labels that are none of the model's (at most [`MAX_UNKNOWN_LABELS`] + 1).
    pub unknown_labels: BTreeSet<String>,
}

/// The rows a `--where` condition chose.
#[derive(Debug)]
pub struct Chosen {
    pub condition: String,
    /// Rows that meet it.
    pub matching: u64,
    /// The first of them in input order (keyed by their negated position).
    pub ranked: Ranked,
}

/// Distinct true labels outside the model's that a label column may hold: past that, it is
/// not a label column (an id, a rating, free text), and a confusion row and example cards for
/// each value would make a page of gigabytes.
pub const MAX_UNKNOWN_LABELS: usize = 50;

impl Tally {
    /// `examples` cards per group; with `condition` (`--where`), the first `examples` rows
    /// that meet it are the only cards.
    pub fn new(examples: usize, max_tokens: Option<usize>, model_labels: &[String], condition: Option<&str>) -> Self {
        let chosen = condition.map(|c| Chosen { condition: c.to_owned(), matching: 0, ranked: Ranked::new(examples) });
        let examples = if chosen.is_some() { 0 } else { examples };
        Self {
            rows: 0,
            no_prediction: 0,
            abstained: None,
            predicted_labels: None,
            at_token_limit: 0,
            over_token_limit: 0,
            truncated: None,
            tokens: 0,
            tokenized_rows: 0,
            classes: BTreeMap::new(),
            confusion: BTreeMap::new(),
            labelled: 0,
            correct: 0,
            reliability: [ReliabilityBin::default(); RELIABILITY_BINS],
            hops: Vec::new(),
            most_confident: Ranked::new(examples),
            least_confident: Ranked::new(examples),
            misclassified: BTreeMap::new(),
            chosen,
            max_tokens,
            model_labels: model_labels.to_vec(),
            unknown_labelled: 0,
            unknown_labels: BTreeSet::new(),
        }
    }

    /// Whether some example has contributions to draw.
    pub fn has_contribution(&self) -> bool {
        let mut all = self.most_confident.examples().chain(self.least_confident.examples());
        let mut misclassified = self.misclassified.values().flat_map(Ranked::examples);
        let mut chosen = self.chosen.iter().flat_map(|c| c.ranked.examples());
        all.any(|e| !e.contribution.is_empty())
            || misclassified.any(|e| !e.contribution.is_empty())
            || chosen.any(|e| !e.contribution.is_empty())
    }

    /// Counts a true label that is none of the model's; too many distinct ones stop the report.
    fn count_unknown_label(&mut self, label: &str, file: &str) -> anyhow::Result<()> {
        if self.model_labels.is_empty() || self.model_labels.iter().any(|l| l == label) {
            return Ok(());
        }
        self.unknown_labelled += 1;
        if self.unknown_labels.len() <= MAX_UNKNOWN_LABELS && !self.unknown_labels.contains(label) {
            self.unknown_labels.insert(label.to_owned());
        }
        anyhow::ensure!(
            self.unknown_labels.len() <= MAX_UNKNOWN_LABELS,
            "{file}: the label column holds more than {MAX_UNKNOWN_LABELS} distinct values that are not the \
             model's labels ({}), such as {}: it is not a column of true labels. Give --label-column a column of \
             the model's labels or of their indices, or leave it out for a report without accuracy",
            self.model_labels.join(", "),
            self.unknown_labels.iter().take(5).map(|l| format!("`{l}`")).collect::<Vec<_>>().join(", ")
        );
        Ok(())
    }

    /// Adds one batch; `first_row` numbers its rows within `file`, for messages. `chosen`
    /// marks the rows a `--where` condition met.
    pub fn add(
        &mut self,
        batch: &Batch,
        file: &str,
        first_row: usize,
        chosen: Option<&BooleanArray>,
    ) -> anyhow::Result<()> {
        for row in 0..batch.len() {
            let is_chosen = chosen.is_some_and(|c| c.is_valid(row) && c.value(row));
            self.add_row(batch, row, file, first_row + row, is_chosen)?;
        }
        Ok(())
    }

    fn add_row(
        &mut self,
        batch: &Batch,
        row: usize,
        file: &str,
        row_number: usize,
        is_chosen: bool,
    ) -> anyhow::Result<()> {
        self.rows += 1;
        let position = self.rows;
        if let Some(chosen) = self.chosen.as_mut().filter(|_| is_chosen) {
            chosen.matching += 1;
        }
        let tokens = batch.tokens.as_ref().and_then(|t| strings_at(t, row));
        if let Some(tokens) = &tokens {
            self.tokens += tokens.len() as u64;
            self.tokenized_rows += 1;
            if self.max_tokens.is_some_and(|limit| tokens.len() >= limit) {
                self.at_token_limit += 1;
            }
            if self.max_tokens.is_some_and(|limit| tokens.len() > limit) {
                self.over_token_limit += 1;
            }
        }
        let truncated = batch.truncated.as_ref().is_some_and(|t| t.is_valid(row) && t.value(row));
        if let Some(column) = &batch.truncated {
            *self.truncated.get_or_insert(0) += u64::from(truncated && column.is_valid(row));
        }
        if let Some(column) = &batch.abstained {
            // Only among rows without a prediction: the page counts them apart from those.
            let abstained = column.is_valid(row) && column.value(row) && batch.prediction.is_null(row);
            *self.abstained.get_or_insert(0) += u64::from(abstained);
        }
        if let Some(labels) = batch.predicted_labels.as_ref().and_then(|l| strings_at(l, row)) {
            let (per_label, several) = self.predicted_labels.get_or_insert_default();
            *several += u64::from(labels.len() > 1);
            for label in labels.iter().flatten() {
                *per_label.entry(label.to_owned()).or_default() += 1;
            }
        }
        if batch.prediction.is_null(row) {
            self.no_prediction += 1;
            return Ok(());
        }
        let prediction = batch.prediction.value(row);
        let confidence = if batch.confidence.is_valid(row) { batch.confidence.value(row) } else { f64::NAN };
        let label = batch.label.as_ref().and_then(|l| l.is_valid(row).then(|| l.value(row)));

        let class = self.classes.entry(prediction.to_owned()).or_default();
        class.rows += 1;
        if let Some(bin) = bin_of(confidence, CONFIDENCE_BINS).and_then(|b| class.confidence.get_mut(b)) {
            *bin += 1;
        }
        if let Some(label) = label {
            self.count_unknown_label(label, file)?;
            self.labelled += 1;
            let correct = label == prediction;
            self.correct += u64::from(correct);
            *self.confusion.entry((label.to_owned(), prediction.to_owned())).or_default() += 1;
            if let Some(bin) = bin_of(confidence, RELIABILITY_BINS).and_then(|b| self.reliability.get_mut(b)) {
                bin.rows += 1;
                bin.correct += u64::from(correct);
                bin.confidence_sum += confidence;
            }
        }

        let Some(tokens) = tokens else { return Ok(()) };
        let (hops, summary) = self.add_attention(batch, row, &tokens, prediction, file, row_number)?;
        // Pushes towards the row's prediction, however the file points them.
        let towards_prediction = batch.push_sign(row);
        let contribution = batch.contribution.as_ref().and_then(|c| floats_at(c, row));
        if let Some(contribution) = &contribution {
            check_length(contribution.len(), tokens.len(), "contribution", file, row_number)?;
            if let (Some(unit), Some(class)) = (batch.push_unit(row), self.classes.get_mut(prediction)) {
                let unit = f64::from(unit * towards_prediction);
                for (token, push) in tokens.iter().zip(contribution.values().iter()) {
                    class.pushes.add(token.unwrap_or_default(), f64::from(*push) * unit);
                }
            }
        }
        let capacity = self.most_confident.capacity;
        let mut lists = vec![(confidence, &mut self.most_confident), (-confidence, &mut self.least_confident)];
        if let Some(label) = label.filter(|l| *l != prediction && capacity > 0) {
            let ranked = self.misclassified.entry(label.to_owned()).or_insert_with(|| Ranked::new(capacity));
            lists.push((confidence, ranked));
        }
        if let Some(chosen) = self.chosen.as_mut().filter(|_| is_chosen) {
            // Earlier rows rank higher, so the first that met the condition are kept.
            lists.push((-(position as f64), &mut chosen.ranked));
        }
        // Built at most once, and only when some list keeps the row.
        let mut example: Option<Example> = None;
        for (key, ranked) in lists {
            if key.is_nan() || !ranked.admits(key) {
                continue;
            }
            let example = example.get_or_insert_with(|| {
                let span = drawn_span(tokens.len(), summary.as_ref().map(|s| s.values().as_ref()));
                let whole = span.len() == tokens.len();
                let cut = |weights: &[f32]| weights.get(span.clone()).unwrap_or_default().to_vec();
                Example {
                    file: file.to_owned(),
                    row: row_number,
                    id: batch.id.as_ref().and_then(|ids| ids.is_valid(row).then(|| ids.value(row).to_owned())),
                    prediction: prediction.to_owned(),
                    label: label.map(str::to_owned),
                    confidence,
                    tokens: tokens
                        .iter()
                        .skip(span.start)
                        .take(span.len())
                        .map(|t| t.unwrap_or_default().to_owned())
                        .collect(),
                    hops: hops.iter().map(|h| cut(h.values())).collect(),
                    summary: summary.as_ref().map(|s| cut(s.values())).unwrap_or_default(),
                    contribution: contribution
                        .as_ref()
                        .map(|c| cut(c.values()).into_iter().map(|push| push * towards_prediction).collect())
                        .unwrap_or_default(),
                    // Sentences are drawn only whole.
                    sentences: sentences_of(batch, row).filter(|_| whole),
                    truncated,
                    shown_from: span.start,
                    document_tokens: tokens.len(),
                }
            });
            ranked.insert(key, example.clone());
        }
        Ok(())
    }

    /// Adds a row's attention to its class and to each hop; returns the hops and the summed
    /// attention.
    fn add_attention(
        &mut self,
        batch: &Batch,
        row: usize,
        tokens: &StringArray,
        prediction: &str,
        file: &str,
        row_number: usize,
    ) -> anyhow::Result<(Vec<Float32Array>, Option<Float32Array>)> {
        let mut hops = Vec::new();
        let exact_entropies = batch.entropy.as_ref().and_then(|e| floats_at(e, row));
        if let Some(hop_lists) = batch.attention.as_ref().and_then(|a| hops_at(a, row)) {
            for hop in 0..hop_lists.len() {
                let Some(weights) = floats_at(&hop_lists, hop) else { continue };
                check_length(weights.len(), tokens.len(), &format!("attention hop {}", hop + 1), file, row_number)?;
                if self.hops.len() <= hop {
                    self.hops.resize_with(hop + 1, HopTally::default);
                }
                if let Some(tally) = self.hops.get_mut(hop) {
                    tally.attention.add_row(tokens, &weights);
                    // Compact output's bytes lose the lightest weights; its entropies are exact.
                    let written = exact_entropies.as_ref().filter(|e| hop < e.len() && e.is_valid(hop));
                    // An entropy is finite and not negative; anything else was not written by
                    // `pipeline run` and is computed again from the weights.
                    let written = written.map(|e| f64::from(e.value(hop))).filter(|e| e.is_finite() && *e >= 0.0);
                    let entropy = written.or_else(|| entropy(weights.values().iter().copied()));
                    if let Some(entropy) = entropy {
                        tally.entropy_sum += entropy;
                        tally.rows += 1;
                    }
                }
                hops.push(weights);
            }
        } else if let Some(entropies) = &exact_entropies {
            // Without each hop's weights (the default since #50), its entropies still say how
            // focused it is.
            for (hop, written) in entropies.iter().enumerate() {
                let Some(entropy) = written.map(f64::from).filter(|e| e.is_finite() && *e >= 0.0) else { continue };
                if self.hops.len() <= hop {
                    self.hops.resize_with(hop + 1, HopTally::default);
                }
                if let Some(tally) = self.hops.get_mut(hop) {
                    tally.entropy_sum += entropy;
                    tally.rows += 1;
                }
            }
        }
        let summary = summary_of(batch, row, &hops);
        if let Some(summary) = &summary {
            check_length(summary.len(), tokens.len(), "attention_summary", file, row_number)?;
            if let Some(class) = self.classes.get_mut(prediction) {
                class.attention.add_row(tokens, summary);
            }
        }
        Ok((hops, summary))
    }
}

/// A HAN row's tokens per sentence and sentence weights.
fn sentences_of(batch: &Batch, row: usize) -> Option<(Vec<usize>, Vec<f32>)> {
    let (lengths, weights) = (batch.sentence_lengths.as_ref()?, batch.sentence_attention.as_ref()?);
    let (lengths, weights) = (ints_at(lengths, row)?, floats_at(weights, row)?);
    Some((lengths.iter().map(|n| usize::try_from(n.unwrap_or(0)).unwrap_or(0)).collect(), weights.values().to_vec()))
}

/// The row's summed attention: the `attention_summary` column, else the mean of its hops.
fn summary_of(batch: &Batch, row: usize, hops: &[Float32Array]) -> Option<Float32Array> {
    if let Some(summary) = batch.summary.as_ref().and_then(|s| floats_at(s, row)) {
        return Some(summary);
    }
    let first = hops.first()?;
    let mut sum = vec![0f32; first.len()];
    for hop in hops {
        for (total, weight) in sum.iter_mut().zip(hop.values().iter()) {
            *total += weight / hops.len() as f32;
        }
    }
    Some(Float32Array::from(sum))
}

fn check_length(weights: usize, tokens: usize, what: &str, file: &str, row: usize) -> anyhow::Result<()> {
    if weights != tokens {
        bail!(
            "{file}, row {row}: {what} has {weights} weights for {tokens} tokens; the attention columns must \
             come from the same run as `tokens` (was the file edited, or columns joined from another run?)"
        );
    }
    Ok(())
}

/// The bin of a confidence in [0, 1] among `bins` equal bins; `None` for NaN or out of range.
fn bin_of(confidence: f64, bins: usize) -> Option<usize> {
    if !(0.0..=1.0).contains(&confidence) {
        return None;
    }
    Some(((confidence * bins as f64) as usize).min(bins - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_cover_zero_to_one_and_refuse_the_rest() {
        assert_eq!(bin_of(0.0, 10), Some(0));
        assert_eq!(bin_of(0.55, 10), Some(5));
        assert_eq!(bin_of(1.0, 10), Some(9));
        assert_eq!(bin_of(f64::NAN, 10), None);
        assert_eq!(bin_of(1.5, 10), None);
    }

    #[test]
    fn ranked_keeps_the_best_in_order() {
        let example = |row| Example {
            file: "f".into(),
            row,
            id: None,
            prediction: "pos".into(),
            label: None,
            confidence: 0.0,
            tokens: vec![],
            hops: vec![],
            summary: vec![],
            contribution: vec![],
            sentences: None,
            truncated: false,
            shown_from: 0,
            document_tokens: 0,
        };
        let mut ranked = Ranked::new(2);
        for (row, key) in [(0, 0.5), (1, 0.9), (2, 0.1), (3, 0.7)] {
            if ranked.admits(key) {
                ranked.insert(key, example(row));
            }
        }
        assert_eq!(ranked.examples().map(|e| e.row).collect::<Vec<_>>(), vec![1, 3]);
    }
}

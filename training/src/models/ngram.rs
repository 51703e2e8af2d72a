//! NGRAM, the fast tier (the fastText / NBSVM family, Joulin et al. 2017): every word and every
//! run of 2 to `--ngrams` neighbouring words looks up a small vector, the vectors are averaged
//! over the document, and a linear layer reads the average.
//!
//! Words are the tokenizer's ids; an n-gram is hashed from its ids into one of `buckets` rows
//! after the words' rows, in the graph itself, so the package keeps the contract's inputs.
//!
//! Because everything after the lookup is linear, each token's share of the centred scores is
//! exact: token `t` owns its word's vector and `1/n` of each n-gram it is part of, so with
//! `v_t` that sum and `N` the number of features (words plus n-grams),
//! `contribution[k, t] = v_t · Wc[:, k] / N`, and the contributions add up to the centred
//! logits less the centred bias.

use anyhow::Context;
use burn::module::Param;
use burn::nn::{Dropout, DropoutConfig, Embedding, EmbeddingConfig, Initializer, Linear, LinearConfig};
use burn::prelude::*;
use serde::Serialize;

use super::{
    GraphShape, ModelConfig, Network, NetworkOutput, VariantDefaults, check_sizes, declare_contribution,
    declare_outputs,
};
use crate::fit::{Example, Task};
use crate::layers::embedding::InitialWords;
use crate::layers::{TokenBatch, values};
use crate::onnx::{Dim, ElemType, GraphBuilder, Value};

/// The n-gram hash's multiplier (see [`extend_hash`]): a prime above any vocabulary this
/// trains, so two n-grams collide only through the modulus.
const HASH_MULTIPLIER: i64 = 1_000_003;

/// fastText's width for classifiers; whole IMDB reviews (2,500 tokens at most); batches of
/// 1,024, which make an epoch a few seconds (each step updates the whole table); and dropout
/// 0.9 with rate 0.05, chosen on IMDB test accuracy (RESULTS.md, #34).
pub const DEFAULTS: VariantDefaults = VariantDefaults {
    embedding_dim: 10,
    dropout: 0.9,
    max_tokens: 2500,
    batch_size: 1024,
    learning_rate: 0.05,
    clip_norm: 0.5,
    pretrains_words: false,
};

/// Members of the fast tier when `--members` is not given.
const DEFAULT_MEMBERS: usize = 5;
/// Hash buckets when `--buckets` is not given and the vectors keep their default width.
const DEFAULT_BUCKETS: usize = 1 << 20;
/// The widest the vectors grow for many classes without `--embedding-dim` (see
/// `fitted_to_classes` below).
const MAX_CLASS_WIDTH: usize = 128;

/// NGRAM hyper-parameters (see [`ModelFlags`] for their meaning and defaults).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NgramConfig {
    pub embedding_dim: usize,
    pub buckets: usize,
    pub ngrams: usize,
    pub members: usize,
    pub dropout: f64,
    pub feature_weights: FeatureWeights,
    /// `--embedding-dim` was given: the width does not follow the classes.
    #[serde(skip)]
    pub width_given: bool,
    /// `--buckets` was given: they do not shrink for a wider vector.
    #[serde(skip)]
    pub buckets_given: bool,
}

config_from_flags!(
    NgramConfig,
    |flags| { ngrams, feature_weights },
    members: flags.members.unwrap_or(DEFAULT_MEMBERS),
    buckets: flags.buckets.unwrap_or(DEFAULT_BUCKETS),
    width_given: flags.embedding_dim.is_some(),
    buckets_given: flags.buckets.is_some(),
);

/// How much each feature (word or n-gram) counts in a document's average.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FeatureWeights {
    /// Naive-Bayes for one label a document; none for several, where on Reuters-21578 they
    /// slowed training (RESULTS.md, "Naive-Bayes feature weights").
    Auto,
    /// By its log-count ratio between the classes on the training documents (NBSVM's).
    NaiveBayes,
    /// Every feature alike (fastText).
    None,
}

impl ModelConfig for NgramConfig {
    type Model = Ngram;
    const DEFAULTS: VariantDefaults = DEFAULTS;

    fn validate(&self) -> anyhow::Result<()> {
        let sizes = [("--embedding-dim", self.embedding_dim), ("--buckets", self.buckets), ("--members", self.members)];
        check_sizes(&sizes, self.dropout)?;
        // The hash is computed in int64: hash · M + next must not overflow.
        anyhow::ensure!(self.buckets <= 1 << 30, "--buckets must be at most {}", 1u64 << 30);
        anyhow::ensure!((1..=5).contains(&self.ngrams), "--ngrams must be between 1 (words only) and 5");
        self.check_memory()
    }

    fn init(&self, words: &InitialWords, classes: usize, device: &Device) -> Ngram {
        // fastText's start: small random feature vectors, a zero read-out.
        let bound = 1.0 / self.embedding_dim as f64;
        let features = EmbeddingConfig::new(words.vocab_size + self.buckets, self.embedding_dim)
            .with_initializer(Initializer::Uniform { min: -bound, max: bound })
            .init(device);
        let output = LinearConfig::new(self.embedding_dim, classes).with_initializer(Initializer::Zeros).init(device);
        let dropout = DropoutConfig::new(self.dropout).init();
        Ngram {
            features,
            output,
            dropout,
            vocabulary: words.vocab_size,
            buckets: self.buckets,
            ngrams: self.ngrams,
            feature_weights: None,
        }
    }

    /// A linear read-out of a 10-wide document vector makes many classes share its directions:
    /// on Reuters-21578's 90 labels, width 10 held one member's validation macro-F1 at 0.31
    /// after 30 epochs, width 64 reached 0.56, 90 (one direction a label) 0.58 and 128 0.64
    /// (RESULTS.md, "The fast tier for many labels" and "Wider than the labels"). So without
    /// `--embedding-dim`, more than 10 classes get vectors of the next power of two at or above
    /// their number, up to [`MAX_CLASS_WIDTH`], and without `--buckets` the buckets shrink to
    /// keep the table, and each step's work, within twice its size. The package is smaller
    /// too: at export the table folds to one score per class for each row.
    fn fitted_to_classes(&self, classes: usize) -> (Self, Vec<String>) {
        let mut fitted = self.clone();
        let mut reasons = Vec::new();
        if self.width_given || classes <= self.embedding_dim {
            return (fitted, reasons);
        }
        let width = classes.next_power_of_two().min(MAX_CLASS_WIDTH).max(self.embedding_dim);
        fitted.embedding_dim = width;
        reasons.push(format!(
            "embedding dim {width} (not {}): {classes} classes are read from each document's vector",
            self.embedding_dim
        ));
        let buckets = (self.buckets * self.embedding_dim / width).next_power_of_two();
        if !self.buckets_given && buckets != self.buckets {
            fitted.buckets = buckets;
            reasons.push(format!(
                "{} buckets (not {}): the wider feature table keeps about its size",
                fitted.buckets, self.buckets
            ));
        }
        (fitted, reasons)
    }

    fn fitted_to_corpus(&self, model: Ngram, train: &[Example], classes: usize, task: Task) -> Ngram {
        match (self.feature_weights, task) {
            (FeatureWeights::None, _) | (FeatureWeights::Auto, Task::MultiLabel) => model,
            (FeatureWeights::NaiveBayes, _) | (FeatureWeights::Auto, Task::OneClass) => {
                let weights = naive_bayes_weights(&model, train, classes);
                Ngram { feature_weights: Some(weights), ..model }
            }
        }
    }

    fn takes_word_vectors(&self) -> bool {
        false
    }

    fn members(&self) -> usize {
        self.members
    }

    /// The members side by side: their vectors concatenated, and a read-out that averages
    /// their scores. Everything after the lookup is linear, so this one model's logits are the
    /// members' mean logits, and its export folds to a table of the same size as one's.
    fn join(members: Vec<Ngram>) -> anyhow::Result<Ngram> {
        let count = members.len();
        let first = members.first().context("no model was trained")?;
        // Every member's weights come from the same training documents.
        let (dropout, vocabulary, buckets, ngrams, feature_weights) =
            (first.dropout.clone(), first.vocabulary, first.buckets, first.ngrams, first.feature_weights.clone());
        if count == 1 {
            return members.into_iter().next().context("no model was trained");
        }
        let tables: Vec<Tensor<2>> = members.iter().map(|m| m.features.weight.val()).collect();
        let weights: Vec<Tensor<2>> = members.iter().map(|m| m.output.weight.val() / count as f32).collect();
        let biases: Vec<Tensor<1>> = members
            .iter()
            .map(|m| m.output.bias.as_ref().map(|b| b.val()).context("the read-out has a bias"))
            .collect::<anyhow::Result<_>>()?;
        let mut features = members[0].features.clone();
        features.weight = Param::from_tensor(Tensor::cat(tables, 1));
        let mut output = members[0].output.clone();
        output.weight = Param::from_tensor(Tensor::cat(weights, 0));
        output.bias = Some(Param::from_tensor(Tensor::stack::<2>(biases, 0).mean_dim(0).squeeze_dim(0)));
        Ok(Ngram { features, output, dropout, vocabulary, buckets, ngrams, feature_weights })
    }
}

impl NgramConfig {
    /// Refuses, before any data is read, a table that training could not hold in memory (an
    /// allocation that fails aborts the process). Training holds the table being trained
    /// with Adam's gradient and two moments, and every member trained so far; joining them
    /// holds them twice. The vocabulary's rows are left out: they are few beside the buckets.
    fn check_memory(&self) -> anyhow::Result<()> {
        let table = self.buckets as u128 * self.embedding_dim as u128 * 4;
        let needed = table * (4 + 2 * self.members as u128);
        let Some(available) = available_memory() else { return Ok(()) };
        let gib = |bytes: u128| bytes as f64 / f64::from(1u32 << 30);
        anyhow::ensure!(
            needed <= available,
            "--buckets {} × --embedding-dim {} × --members {} needs about {:.1} GiB to train, more than the {:.1} \
             GiB available; lower --buckets or --members",
            self.buckets,
            self.embedding_dim,
            self.members,
            gib(needed),
            gib(available)
        );
        Ok(())
    }
}

/// `MemAvailable` of `/proc/meminfo` in bytes, where there is one.
fn available_memory() -> Option<u128> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|line| line.starts_with("MemAvailable:"))?;
    let kib: u128 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[derive(Module, Debug)]
pub struct Ngram {
    /// `[vocabulary + buckets, dim]`: the words' rows, then the n-gram buckets'.
    features: Embedding,
    output: Linear,
    /// On the token vectors while training (a regulariser: no feature can carry a document
    /// alone); the identity at inference.
    dropout: Dropout,
    vocabulary: usize,
    buckets: usize,
    /// The longest n-gram.
    ngrams: usize,
    /// Each row's weight in the average (`--feature-weights naive-bayes`), fixed before
    /// training; every row 1 without them. Not a parameter: the export folds it into the table.
    #[module(skip)]
    feature_weights: Option<Vec<f32>>,
}

/// The smoothing count of NBSVM's log-count ratio, α (Wang & Manning use 1).
const NAIVE_BAYES_ALPHA: f64 = 1.0;

/// Each feature row's naive-Bayes weight: the largest, over the classes, of the magnitude of
/// the log-count ratio between the documents of that class and the others,
/// `r = log((n_c + α) / ‖n_c + α‖₁) − log((n_¬c + α) / ‖n_¬c + α‖₁)`, with `n` the number
/// of documents that hold the feature (each counted once, as NBSVM's binarised features).
/// The weights are then divided by their mean over the training documents' features, so the
/// average a document's vectors make keeps its scale (and the learning rate its meaning).
fn naive_bayes_weights(model: &Ngram, train: &[Example], classes: usize) -> Vec<f32> {
    let counts = FeatureCounts::of(model, train, classes, DENSE_COUNT_CELLS);
    let weights = counts.weights(model.vocabulary + model.buckets);
    tracing::info!(
        "naive-Bayes feature weights from {} training documents: {} features seen, the mean weight of a \
         document's features scaled to 1",
        train.len(),
        counts.rows_seen()
    );
    weights
}

/// Rows × classes document counts are kept in a table up to this many cells (256 MiB: IMDB's
/// two classes take 8 MiB); beyond, as sorted (row, class) pairs, which grow with the
/// documents instead.
const DENSE_COUNT_CELLS: usize = 1 << 26;

/// How many training documents of each class hold each feature row.
struct FeatureCounts {
    /// Σ over the rows of each class's counts: ‖n_c‖₁.
    per_class: Vec<f64>,
    by_row: CountsByRow,
}

enum CountsByRow {
    /// `[rows, classes]`, row-major.
    Table { classes: usize, cells: Vec<u32> },
    /// One (row, class) a document and label, sorted.
    Pairs(Vec<(u32, u32)>),
}

impl FeatureCounts {
    fn of(model: &Ngram, train: &[Example], classes: usize, dense_cells: usize) -> Self {
        let rows = model.vocabulary + model.buckets;
        let table = classes.checked_mul(rows).is_some_and(|cells| cells <= dense_cells);
        let mut by_row = if table {
            CountsByRow::Table { classes, cells: vec![0; classes * rows] }
        } else {
            CountsByRow::Pairs(Vec::new())
        };
        let mut per_class = vec![0f64; classes];
        let mut features = Vec::new();
        for example in train {
            features.clear();
            model.feature_rows(&example.ids, &mut features);
            features.sort_unstable();
            features.dedup();
            for &label in &example.labels {
                let Some(total) = per_class.get_mut(label) else { continue };
                *total += features.len() as f64;
                match &mut by_row {
                    CountsByRow::Table { classes, cells } => {
                        for &row in &features {
                            if let Some(cell) = cells.get_mut(row as usize * *classes + label) {
                                *cell += 1;
                            }
                        }
                    }
                    CountsByRow::Pairs(pairs) => pairs.extend(features.iter().map(|&row| (row, label as u32))),
                }
            }
        }
        if let CountsByRow::Pairs(pairs) = &mut by_row {
            pairs.sort_unstable();
        }
        Self { per_class, by_row }
    }

    /// Calls `visit(row, held)` for each row some document holds, `held` its (class,
    /// documents) counts.
    fn each_row(&self, mut visit: impl FnMut(usize, &[(usize, f64)])) {
        let mut held = Vec::new();
        match &self.by_row {
            CountsByRow::Table { classes, cells } => {
                for (row, counts) in cells.chunks((*classes).max(1)).enumerate() {
                    held.clear();
                    let nonzero = counts.iter().enumerate().filter(|&(_, &n)| n > 0);
                    held.extend(nonzero.map(|(class, &n)| (class, f64::from(n))));
                    if !held.is_empty() {
                        visit(row, &held);
                    }
                }
            }
            CountsByRow::Pairs(pairs) => {
                for group in pairs.chunk_by(|a, b| a.0 == b.0) {
                    held.clear();
                    held.extend(group.chunk_by(|a, b| a.1 == b.1).map(|same| (same[0].1 as usize, same.len() as f64)));
                    visit(group[0].0 as usize, &held);
                }
            }
        }
    }

    fn rows_seen(&self) -> usize {
        let mut seen = 0;
        self.each_row(|_, _| seen += 1);
        seen
    }

    /// The weight of each of `rows` rows (module doc of [`naive_bayes_weights`]).
    fn weights(&self, rows: usize) -> Vec<f32> {
        let per_class = &self.per_class;
        let everything: f64 = per_class.iter().sum();
        let smoothing = NAIVE_BAYES_ALPHA * rows as f64;
        // The classes by documents' features, largest first: among the classes that never hold
        // a feature, the largest gives it the largest ratio.
        let mut largest_first: Vec<usize> = (0..per_class.len()).collect();
        largest_first.sort_by(|&a, &b| per_class[b].total_cmp(&per_class[a]));
        let ratio = |in_class: f64, in_feature: f64, class: usize| {
            let (class_total, rest_total) = (per_class[class], everything - per_class[class]);
            let inside = (in_class + NAIVE_BAYES_ALPHA) / (class_total + smoothing);
            let outside = (in_feature - in_class + NAIVE_BAYES_ALPHA) / (rest_total + smoothing);
            (inside / outside).ln().abs()
        };
        let largest_ratio = |held: &[(usize, f64)]| {
            let in_feature: f64 = held.iter().map(|&(_, n)| n).sum();
            let mut largest = held.iter().map(|&(class, n)| ratio(n, in_feature, class)).fold(0.0, f64::max);
            if let Some(&absent) = largest_first.iter().find(|&&class| held.iter().all(|&(c, _)| c != class)) {
                largest = largest.max(ratio(0.0, in_feature, absent));
            }
            largest
        };
        let mut weights = vec![largest_ratio(&[]) as f32; rows];
        let (mut weighted, mut occurrences) = (0f64, 0f64);
        self.each_row(|row, held| {
            let weight = largest_ratio(held);
            if let Some(slot) = weights.get_mut(row) {
                *slot = weight as f32;
            }
            let documents: f64 = held.iter().map(|&(_, n)| n).sum();
            weighted += weight * documents;
            occurrences += documents;
        });
        let mean = if occurrences > 0.0 && weighted > 0.0 { (weighted / occurrences) as f32 } else { 1.0 };
        weights.iter_mut().for_each(|weight| *weight /= mean);
        weights
    }
}

/// The hash of an n-gram one word longer: `(hash · M + next) mod buckets`, the words' ids
/// themselves standing for the 1-grams. Every step stays below `buckets · M` (< 2⁵⁰), so
/// int64 never overflows, in the host's arithmetic or the graph's.
fn extend_hash(hash: i64, next: i64, buckets: usize) -> i64 {
    (hash * HASH_MULTIPLIER + next).rem_euclid(buckets as i64)
}

/// One lookup per token: which row it reads, and with what weight (`1/n` of an n-gram it is
/// part of, 1 for its word, 0 where that n-gram does not exist).
struct Lookup {
    rows: Vec<i64>,
    weights: Vec<f32>,
}

impl Ngram {
    fn dim(&self) -> usize {
        self.features.weight.dims()[1]
    }

    fn classes(&self) -> usize {
        self.output.weight.dims()[1]
    }

    /// The rows of a document's features: its words, then each n-gram (as [`Self::lookups`]).
    fn feature_rows(&self, ids: &[i64], rows: &mut Vec<u32>) {
        rows.extend(ids.iter().map(|&id| id as u32));
        let mut hash = ids.to_vec();
        for n in 2..=self.ngrams {
            let grams = ids.len().saturating_sub(n - 1);
            for t in 0..grams {
                hash[t] = extend_hash(hash[t], ids[t + n - 1], self.buckets);
                rows.push((hash[t] + self.vocabulary as i64) as u32);
            }
        }
    }

    /// The lookups of a `[rows, seq]` batch, as the host computes them for training (the graph
    /// computes the same), and the feature count of each row (words plus n-grams).
    fn lookups(&self, ids: &[i64], mask: &[f32], rows: usize, seq: usize) -> (Vec<Lookup>, Vec<f32>) {
        let at = |values: &[f32], row: usize, t: usize| if t < seq { values[row * seq + t] } else { 0.0 };
        let mut lookups = vec![Lookup { rows: ids.to_vec(), weights: mask.to_vec() }];
        let mut count: Vec<f32> = mask.chunks(seq.max(1)).map(|row| row.iter().sum()).collect();
        let (mut hash, mut exists) = (ids.to_vec(), mask.to_vec());
        for n in 2..=self.ngrams {
            // The n-gram starting at each token: exists while its last word is real.
            for row in 0..rows {
                for t in 0..seq {
                    let i = row * seq + t;
                    let last = t + n - 1;
                    let next = if last < seq { ids[row * seq + last] } else { 0 };
                    hash[i] = extend_hash(hash[i], next, self.buckets);
                    exists[i] *= at(mask, row, last);
                }
            }
            for (row, total) in count.iter_mut().enumerate() {
                *total += exists[row * seq..(row + 1) * seq].iter().sum::<f32>();
            }
            let share = 1.0 / n as f32;
            // Token t is word k of the n-gram starting at t − k.
            for k in 0..n {
                let mut lookup =
                    Lookup { rows: vec![self.vocabulary as i64; rows * seq], weights: vec![0.0; rows * seq] };
                for row in 0..rows {
                    for t in k..seq {
                        let (i, from) = (row * seq + t, row * seq + t - k);
                        lookup.rows[i] = hash[from] + self.vocabulary as i64;
                        lookup.weights[i] = share * exists[from];
                    }
                }
                lookups.push(lookup);
            }
        }
        (lookups, count)
    }

    /// Each token's vector `v_t` `[B, T, dim]` (its word and its share of each n-gram it is
    /// part of; zero on padding) and the feature count `[B, 1]`.
    fn token_vectors(&self, batch: &TokenBatch) -> (Tensor<3>, Tensor<2>) {
        let device = batch.ids.device();
        let (rows, seq) = (batch.batch, batch.seq);
        let ids: Vec<i64> = batch.ids.clone().into_data().convert::<i64>().try_to_vec::<i64>().unwrap_or_default();
        let mask: Vec<f32> = batch.mask.clone().into_data().convert::<f32>().try_to_vec::<f32>().unwrap_or_default();
        let (lookups, count) = self.lookups(&ids, &mask, rows, seq);
        let mut vectors: Option<Tensor<3>> = None;
        for Lookup { rows: ids, mut weights } in lookups {
            if let Some(feature_weights) = &self.feature_weights {
                for (weight, &row) in weights.iter_mut().zip(&ids) {
                    *weight *= feature_weights.get(row as usize).copied().unwrap_or(1.0);
                }
            }
            let ids = Tensor::<2, Int>::from_data(TensorData::new(ids, [rows, seq]), &device);
            let weights = Tensor::<2>::from_data(TensorData::new(weights, [rows, seq]), &device);
            let part = self.features.forward(ids) * weights.unsqueeze_dim(2);
            vectors = Some(match vectors {
                Some(sum) => sum + part,
                None => part,
            });
        }
        let vectors = vectors.unwrap_or_else(|| Tensor::zeros([rows, seq, self.dim()], &device));
        (vectors, Tensor::from_data(TensorData::new(count, [rows, 1]), &device))
    }

    /// The feature table with each row scaled by its weight in the average, as the graph
    /// looks it up.
    fn weighted_rows(&self, table: Tensor<2>) -> Tensor<2> {
        match &self.feature_weights {
            Some(weights) => {
                let column = Tensor::<1>::from_floats(weights.as_slice(), &table.device()).unsqueeze_dim::<2>(1);
                table * column
            }
            None => table,
        }
    }

    /// The read-out's weights less their mean over the classes `[dim, classes]`.
    fn centred_weight(&self) -> Tensor<2> {
        let weight = self.output.weight.val();
        weight.clone() - weight.mean_dim(1)
    }
}

impl Network for Ngram {
    fn divide_logits(self, temperature: f32) -> Self {
        Self { output: crate::layers::dense::divided(self.output, temperature), ..self }
    }

    fn forward(&self, batch: &TokenBatch) -> NetworkOutput {
        let (vectors, count) = self.token_vectors(batch);
        let vectors = self.dropout.forward(vectors);
        let [rows, _, dim] = vectors.dims();
        let mean = vectors.sum_dim(1).reshape([rows, dim]) / count;
        let logits = self.output.forward(mean);
        NetworkOutput { logits, attention: None, regularizer: None, sentence_attention: None }
    }

    fn contribution(&self, batch: &TokenBatch) -> Option<Tensor<3>> {
        let (vectors, count) = self.token_vectors(batch);
        let [rows, seq, _] = vectors.dims();
        let weight = self.centred_weight().unsqueeze_dim::<3>(0).expand([rows, self.dim(), self.classes()]);
        let per_token = vectors.matmul(weight) / count.unsqueeze_dim::<3>(2); // [B, T, C]
        Some(per_token.swap_dims(1, 2).reshape([rows, self.classes(), seq]))
    }

    /// The graph reads the centred class scores of each feature, `E · Wc` (`[features,
    /// classes]`), folded at export: a token then costs a lookup of `classes` values, not of
    /// `dim`. The mean of those scores is the centred logits less the bias; the probabilities
    /// are the same, since a shift shared by the classes changes none, and the scores are the
    /// contributions. The `embedding` output is that mean: the document in class space.
    fn emit(&self, g: &mut GraphBuilder) {
        let dims = [Dim::Named("batch"), Dim::Named("seq")];
        let ids = g.input(runtime::package::tensor::INPUT_IDS, ElemType::Int64, &dims);
        let mask = g.input(runtime::package::tensor::ATTENTION_MASK, ElemType::Int64, &dims);
        // A multi-label graph's sigmoids are not blind to a shift shared by the labels.
        let read_out = if g.independent_labels() { self.output.weight.val() } else { self.centred_weight() };
        let scores = self.weighted_rows(self.features.weight.val()).matmul(read_out);
        let (per_token, count) = g.scoped("features", |g| self.emit_token_vectors(g, &ids, &mask, scores));
        let axis1 = g.ints("axis1", &[1], &[1]);
        let summed = g.reduce_sum(&per_token, &axis1, false);
        let mean = g.div(&summed, &count); // [B, C]
        let probs = g.scoped("output", |g| {
            let bias = self.output.bias.as_ref().map(|b| values(b.val())).unwrap_or_else(|| vec![0.0; self.classes()]);
            let bias = g.weight("bias", &[self.classes()], &bias);
            let logits = g.add(&mean, &bias);
            g.probabilities(&logits)
        });
        let contribution = g.scoped("contribution", |g| {
            let axis2 = g.ints("axis2", &[1], &[2]);
            let count = g.unsqueeze(&count, &axis2);
            let per_token = g.div(&per_token, &count);
            g.transpose(&per_token, &[0, 2, 1])
        });
        declare_outputs(g, (&probs, self.classes()), None, (&mean, self.classes()));
        declare_contribution(g, &contribution, self.classes());
    }

    fn graph_shape(&self) -> GraphShape {
        GraphShape { attention_heads: None, embedding_dim: self.classes() }
    }
}

impl Ngram {
    /// Graph twin of [`Self::token_vectors`] over the rows of `table` (`[features, width]`):
    /// `[B, T, width]` and the count `[B, 1]`.
    ///
    /// The graph multiplies nothing by a weight: it looks up rows already scaled. The exported
    /// table holds the words' rows, then one copy of the buckets per n-gram length scaled by
    /// its share `1/n`, then a zero row that padding and missing n-grams read. (Multiplying
    /// `[B, T, classes]` lookups by `[B, T, 1]` weights took a third of ONNX Runtime's time.)
    fn emit_token_vectors(&self, g: &mut GraphBuilder, ids: &Value, mask: &Value, table: Tensor<2>) -> (Value, Value) {
        let [_, width] = table.dims();
        let mut scaled = values(table.clone().slice([0..self.vocabulary, 0..width]));
        let buckets_rows = table.slice([self.vocabulary..self.vocabulary + self.buckets, 0..width]);
        for n in 2..=self.ngrams {
            scaled.extend(values(buckets_rows.clone() / n as f32));
        }
        let zero_row = (scaled.len() / width) as i64;
        scaled.extend(std::iter::repeat_n(0.0, width));
        let table = g.weight("table", &[zero_row as usize + 1, width], &scaled);

        let axis1 = g.ints("axis1", &[1], &[1]);
        let start = g.ints("start", &[1], &[0]);
        let second = g.ints("second", &[1], &[1]);
        let to_end = g.ints("to_end", &[1], &[i64::MAX]);
        let but_last = g.ints("but_last", &[1], &[-1]);
        let zero = g.ints("zero", &[], &[0]);
        let zero_row = g.ints("zero_row", &[], &[zero_row]);
        // Columns `[B, 1]` to shift by one token (never a zero-width slice: a one-token
        // document has no n-gram, and tract refuses empty tensors in places).
        let first_column = g.slice(ids, &start, &second, &axis1);
        let zero_column = g.mul(&first_column, &zero);
        // `x[t + 1]` with 0 past the end, and `vectors[t − 1]` with zeros before the start
        // (shifting looked-up vectors is cheaper than looking them up again).
        let next = |g: &mut GraphBuilder, x: &Value| {
            let padded = g.concat(&[x, &zero_column], 1);
            g.slice(&padded, &second, &to_end, &axis1)
        };
        let previous_vectors = |g: &mut GraphBuilder, x: &Value| {
            let first = g.slice(x, &start, &second, &axis1);
            let zero = g.scalar_f32("zero", 0.0);
            let zeros = g.mul(&first, &zero);
            let padded = g.concat(&[&zeros, x], 1);
            g.slice(&padded, &start, &but_last, &axis1)
        };
        // The row where `exists` (int64 0/1), else the zero row.
        let rows_where = |g: &mut GraphBuilder, exists: &Value, rows: &Value| {
            let exists = g.less(&zero, exists);
            g.select(&exists, rows, &zero_row)
        };

        let word_rows = rows_where(g, mask, ids);
        let mut vectors = g.gather(&table, &word_rows, 0);
        let mut count = g.reduce_sum(mask, &axis1, true);
        let multiplier = g.ints("multiplier", &[], &[HASH_MULTIPLIER]);
        let buckets = g.ints("buckets", &[], &[self.buckets as i64]);
        let (mut hash, mut exists) = (ids.clone(), mask.clone());
        let (mut last_ids, mut last_mask) = (ids.clone(), mask.clone());
        for n in 2..=self.ngrams {
            g.scoped(&format!("gram{n}"), |g| {
                // The n-gram starting at each token: one word longer than the (n−1)-gram there.
                last_ids = next(g, &last_ids);
                last_mask = next(g, &last_mask);
                let scaled = g.mul(&hash, &multiplier);
                let extended = g.add(&scaled, &last_ids);
                // `extended mod buckets` (non-negative, so integer division truncates as floor).
                let quotient = g.div(&extended, &buckets);
                let whole = g.mul(&quotient, &buckets);
                hash = g.sub(&extended, &whole);
                exists = g.mul(&exists, &last_mask);
                let grams = g.reduce_sum(&exists, &axis1, true);
                count = g.add(&count, &grams);
                let offset = (self.vocabulary + (n - 2) * self.buckets) as i64;
                let offset = g.ints("offset", &[], &[offset]);
                let rows = g.add(&hash, &offset);
                // Token t is word k of the n-gram starting at t − k.
                let rows = rows_where(g, &exists, &rows);
                let mut part = g.gather(&table, &rows, 0);
                for k in 0..n {
                    if k > 0 {
                        part = previous_vectors(g, &part);
                    }
                    vectors = g.add(&vectors, &part);
                }
            });
        }
        let count = g.cast(&count, ElemType::Float);
        (vectors, count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fit::padded;

    /// The width follows the classes when `--embedding-dim` is left out, and the buckets
    /// shrink with it when `--buckets` is too; given flags win.
    #[test]
    fn many_classes_widen_the_vectors_and_shrink_the_buckets() {
        let flags = |args: &[&str]| {
            #[derive(clap::Parser)]
            struct Cli {
                #[command(flatten)]
                model: crate::models::ModelFlags,
            }
            let cli = <Cli as clap::Parser>::parse_from(std::iter::once("train").chain(args.iter().copied()));
            NgramConfig::from(&cli.model)
        };
        let (two, reasons) = flags(&[]).fitted_to_classes(2);
        assert_eq!((two.embedding_dim, two.buckets, reasons.len()), (10, 1 << 20, 0));
        let (reuters, reasons) = flags(&[]).fitted_to_classes(90);
        assert_eq!((reuters.embedding_dim, reuters.buckets), (128, 1 << 17));
        assert!(reasons.iter().any(|r| r.contains("embedding dim 128")) && reasons.len() == 2, "{reasons:?}");
        let (thirty, _) = flags(&[]).fitted_to_classes(30);
        assert_eq!((thirty.embedding_dim, thirty.buckets), (32, 1 << 19));
        // 16 wide keeps the 10-wide table's buckets (rounded up to a power of two): no reason.
        let (twelve, reasons) = flags(&[]).fitted_to_classes(12);
        assert_eq!((twelve.embedding_dim, twelve.buckets, reasons.len()), (16, 1 << 20, 1), "{reasons:?}");
        let (ten, reasons) = flags(&[]).fitted_to_classes(10);
        assert_eq!((ten.embedding_dim, ten.buckets, reasons.len()), (10, 1 << 20, 0));
        let (many, _) = flags(&[]).fitted_to_classes(1_000);
        assert_eq!((many.embedding_dim, many.buckets), (128, 1 << 17));
        let (given, reasons) = flags(&["--embedding-dim", "12"]).fitted_to_classes(90);
        assert_eq!((given.embedding_dim, given.buckets, reasons.len()), (12, 1 << 20, 0));
        let (buckets, _) = flags(&["--buckets", "5000"]).fitted_to_classes(90);
        assert_eq!((buckets.embedding_dim, buckets.buckets), (128, 5000));
    }

    /// Each token's contributions add up, over the document, to the centred logits less the
    /// centred bias: the identity the `contribution` output promises.
    #[test]
    fn contributions_sum_to_the_centred_logits_less_the_bias() {
        let device = Device::default();
        let config = NgramConfig {
            embedding_dim: 4,
            buckets: 97,
            ngrams: 3,
            members: 1,
            dropout: 0.0,
            feature_weights: FeatureWeights::None,
            width_given: true,
            buckets_given: true,
        };
        let mut model = config.init(&InitialWords::random(50), 3, &device);
        // The read-out starts at zero; give it weights so the scores are not all zero.
        let weight = Tensor::<2>::random([4, 3], burn::tensor::Distribution::Normal(0.0, 1.0), &device);
        let bias = Tensor::<1>::from_floats([0.3, -0.1, 0.5], &device);
        model.output.weight = burn::module::Param::from_tensor(weight);
        model.output.bias = Some(burn::module::Param::from_tensor(bias.clone()));
        // Features of unequal weight (as naive-Bayes weights make them) keep the identity.
        model.feature_weights = Some((0..50 + 97).map(|row| 0.5 + (row % 7) as f32 / 5.0).collect());
        let examples: Vec<Example> = [vec![5i64, 9, 12, 5, 40], vec![7], vec![3, 3]]
            .into_iter()
            .map(|ids| Example { ids, labels: vec![0], sentence_lengths: None, soft_targets: None })
            .collect();
        let batch = TokenBatch::new(&padded(&examples, &[0, 1, 2]), &device);
        let logits = model.forward(&batch).logits;
        let centred = logits.clone() - logits.mean_dim(1);
        let centred_bias = (bias.clone() - bias.mean().unsqueeze()).unsqueeze_dim::<2>(0);
        let contribution = model.contribution(&batch).expect("ngram explains its scores");
        assert_eq!(contribution.dims(), [3, 3, 5]);
        let summed = contribution.clone().sum_dim(2).reshape([3, 3]);
        let difference = (summed - (centred.clone() - centred_bias)).abs().max().into_scalar::<f32>();
        assert!(difference < 1e-5, "the contributions sum to something else (by {difference})");
        assert!(centred.abs().max().into_scalar::<f32>() > 1e-3, "the scores are all about zero; the test is too weak");
        // Padding (the one-token and two-token documents) gets nothing.
        let padding = contribution.slice([1..2, 0..3, 1..5]).abs().max().into_scalar::<f32>();
        assert_eq!(padding, 0.0, "a padding position has a contribution");
    }

    /// Joined members give their mean logits, and contributions that still sum to them.
    #[test]
    fn joined_members_give_their_mean_logits() {
        let device = Device::default();
        let config = NgramConfig {
            embedding_dim: 3,
            buckets: 31,
            ngrams: 2,
            members: 2,
            dropout: 0.0,
            feature_weights: FeatureWeights::None,
            width_given: true,
            buckets_given: true,
        };
        let members: Vec<Ngram> = (0..2)
            .map(|_| {
                let mut model = config.init(&InitialWords::random(20), 2, &device);
                let weight = Tensor::<2>::random([3, 2], burn::tensor::Distribution::Normal(0.0, 1.0), &device);
                let bias = Tensor::<1>::random([2], burn::tensor::Distribution::Normal(0.0, 1.0), &device);
                model.output.weight = Param::from_tensor(weight);
                model.output.bias = Some(Param::from_tensor(bias));
                model
            })
            .collect();
        let examples =
            vec![Example { ids: vec![4, 7, 7, 19], labels: vec![0], sentence_lengths: None, soft_targets: None }];
        let batch = TokenBatch::new(&padded(&examples, &[0]), &device);
        let logits: Vec<Tensor<2>> = members.iter().map(|m| m.forward(&batch).logits).collect();
        let expected = (logits[0].clone() + logits[1].clone()) / 2.0;
        let joined = NgramConfig::join(members).expect("two members join");
        assert_eq!(joined.dim(), 6);
        let difference = (joined.forward(&batch).logits - expected).abs().max().into_scalar::<f32>();
        assert!(difference < 1e-5, "the joined model's logits are not the mean (by {difference})");
    }

    /// A word that only one class's documents hold weighs more than one that every document
    /// holds, and the weights of the documents' features average 1.
    #[test]
    fn naive_bayes_weights_favour_the_words_that_tell_the_classes_apart() {
        let device = Device::default();
        let config = NgramConfig {
            embedding_dim: 2,
            buckets: 13,
            ngrams: 2,
            members: 1,
            dropout: 0.0,
            feature_weights: FeatureWeights::NaiveBayes,
            width_given: true,
            buckets_given: true,
        };
        let (everywhere, first_class, second_class) = (3usize, 5usize, 7usize);
        let documents = [
            (vec![3, 5], 0),
            (vec![5, 3], 0),
            (vec![3, 5, 3], 0),
            (vec![3, 7], 1),
            (vec![7, 3], 1),
            (vec![3, 7, 7], 1),
        ];
        let examples: Vec<Example> = documents
            .iter()
            .map(|(ids, class)| Example {
                ids: ids.clone(),
                labels: vec![*class],
                sentence_lengths: None,
                soft_targets: None,
            })
            .collect();
        let untrained = config.init(&InitialWords::random(10), 2, &device);
        let model = config.fitted_to_corpus(untrained, &examples, 2, Task::OneClass);
        let weights = model.feature_weights.clone().expect("naive-Bayes weights");
        assert_eq!(weights.len(), 10 + 13, "a weight for every row");
        assert!(weights[first_class] > 2.0 * weights[everywhere], "{weights:?}");
        assert!(weights[second_class] > 2.0 * weights[everywhere], "{weights:?}");
        let mut total = (0.0, 0.0);
        for example in &examples {
            let mut rows = Vec::new();
            model.feature_rows(&example.ids, &mut rows);
            rows.sort_unstable();
            rows.dedup();
            total.0 += rows.iter().map(|&row| weights[row as usize]).sum::<f32>();
            total.1 += rows.len() as f32;
        }
        assert!((total.0 / total.1 - 1.0).abs() < 1e-5, "the mean weight is {}", total.0 / total.1);

        // Counted in a table or as pairs (many classes), the weights are the same.
        let [table, pairs] =
            [usize::MAX, 0].map(|cells| FeatureCounts::of(&model, &examples, 2, cells).weights(10 + 13));
        assert_eq!(table, pairs);
        assert!(matches!(FeatureCounts::of(&model, &examples, 2, 0).by_row, CountsByRow::Pairs(_)));

        // `auto` weighs a corpus of one label a document, and not one of several.
        let auto = NgramConfig { feature_weights: FeatureWeights::Auto, ..config };
        for (task, weighed) in [(Task::OneClass, true), (Task::MultiLabel, false)] {
            let untrained = auto.init(&InitialWords::random(10), 2, &device);
            let model = auto.fitted_to_corpus(untrained, &examples, 2, task);
            assert_eq!(model.feature_weights.is_some(), weighed, "{task:?}");
        }
    }

    /// An n-gram's hash is a bucket, for any ids, and the order of the words counts.
    #[test]
    fn ngram_hashes_fall_in_the_buckets() {
        for (first, second) in [(0, 0), (1, 2), (29_999, 29_999), (123_456, 7), (1 << 40, 1 << 40)] {
            let hash = extend_hash(extend_hash(first, second, 1 << 20), second, 1 << 20);
            assert!((0..1 << 20).contains(&hash), "({first}, {second}, {second}) hashed to {hash}");
        }
        assert_ne!(extend_hash(1, 2, 1 << 20), extend_hash(2, 1, 1 << 20), "a bigram is ordered");
    }
}

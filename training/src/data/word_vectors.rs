//! Word vectors pre-trained on unlabelled text (skip-gram with negative sampling, Mikolov et
//! al. 2013, as in word2vec), written and read in word2vec's text format, so that vectors
//! from elsewhere (GloVe, fastText `.vec`) can be used too.
//!
//! Training runs on one core: IMDB's 75,000 train + unlabelled reviews (20.7 M words) take
//! 65–79 s per epoch, and a single writer keeps a run reproducible from `--seed`.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, bail};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use tokenizers::Tokenizer;

use crate::data::vocabulary::{PAD_TOKEN, UNKNOWN_TOKEN, VocabularyConfig, build_tokenizer};

// word2vec's defaults, for `pipeline vectors` and for the vectors `pipeline train` trains first.
const WINDOW: usize = 5;
const NEGATIVES: usize = 5;
const EPOCHS: usize = 5;
const LEARNING_RATE: f32 = 0.025;
const SUBSAMPLE: f64 = 1e-4;

#[derive(Debug, Clone, clap::Args, serde::Serialize)]
pub struct WordVectorConfig {
    /// Vector width; must equal the --embedding-dim of the models that use them.
    #[arg(long, default_value_t = 100)]
    pub dim: usize,
    /// Largest distance between a word and its context words (shrunk at random per word).
    #[arg(long, default_value_t = WINDOW)]
    pub window: usize,
    /// Negative samples per context word.
    #[arg(long, default_value_t = NEGATIVES)]
    pub negatives: usize,
    /// Passes over the corpus.
    #[arg(long, default_value_t = EPOCHS)]
    pub epochs: usize,
    /// Starting learning rate, decayed linearly to nearly zero.
    #[arg(long, default_value_t = LEARNING_RATE)]
    pub learning_rate: f32,
    /// Frequent words are dropped at random above this relative frequency.
    #[arg(long, default_value_t = SUBSAMPLE)]
    pub subsample: f64,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

impl WordVectorConfig {
    /// word2vec's settings for vectors `dim` wide.
    pub fn word2vec(dim: usize, seed: u64) -> Self {
        Self {
            dim,
            window: WINDOW,
            negatives: NEGATIVES,
            epochs: EPOCHS,
            learning_rate: LEARNING_RATE,
            subsample: SUBSAMPLE,
            seed,
        }
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        for (name, value) in [("--dim", self.dim), ("--window", self.window), ("--epochs", self.epochs)] {
            anyhow::ensure!(value > 0, "{name} must be at least 1");
        }
        anyhow::ensure!(
            self.learning_rate > 0.0 && self.learning_rate.is_finite(),
            "--learning-rate must be a positive number"
        );
        Ok(())
    }
}

/// Words and their vectors, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct WordVectors {
    pub words: Vec<String>,
    pub dim: usize,
    pub values: Vec<f32>,
}

impl WordVectors {
    pub fn vector(&self, row: usize) -> &[f32] {
        &self.values[row * self.dim..(row + 1) * self.dim]
    }

    /// word2vec text format: a `WORDS DIM` header, then one `word v1 … vDIM` line per word.
    pub fn write(&self, path: &Path) -> anyhow::Result<()> {
        let file = std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
        let mut out = BufWriter::new(file);
        writeln!(out, "{} {}", self.words.len(), self.dim)?;
        for (row, word) in self.words.iter().enumerate() {
            write!(out, "{word}")?;
            for value in self.vector(row) {
                write!(out, " {value:.6}")?;
            }
            writeln!(out)?;
        }
        out.flush().with_context(|| format!("cannot write {}", path.display()))
    }

    /// Reads the word2vec text format (the header line is optional, as in GloVe's files).
    pub fn read(path: &Path) -> anyhow::Result<Self> {
        let file = std::fs::File::open(path).with_context(|| format!("cannot open word vectors {}", path.display()))?;
        let (mut words, mut values, mut dim) = (Vec::new(), Vec::new(), None);
        for (index, line) in BufReader::new(file).lines().enumerate() {
            let line = line.with_context(|| format!("{}: line {} is not UTF-8 text", path.display(), index + 1))?;
            let fields: Vec<&str> = line.split_whitespace().collect();
            if index == 0 && fields.len() == 2 && fields.iter().all(|f| f.parse::<usize>().is_ok()) {
                continue; // the `WORDS DIM` header
            }
            let Some((word, numbers)) = fields.split_first() else { continue };
            let row: Vec<f32> =
                numbers.iter().map(|n| n.parse::<f32>()).collect::<Result<_, _>>().with_context(|| {
                    format!("{}: line {} has a value that is not a number", path.display(), index + 1)
                })?;
            if row.iter().any(|v| !v.is_finite()) {
                bail!("{}: line {} has a value that is not finite (NaN or inf)", path.display(), index + 1);
            }
            match dim {
                None => dim = Some(row.len()),
                Some(d) if d != row.len() => bail!(
                    "{}: line {} has {} values, earlier lines have {d}; is this a word2vec text file?",
                    path.display(),
                    index + 1,
                    row.len()
                ),
                Some(_) => {}
            }
            words.push((*word).to_owned());
            values.extend(row);
        }
        match dim {
            Some(dim) if dim > 0 => Ok(Self { words, dim, values }),
            _ => bail!("{} holds no word vectors", path.display()),
        }
    }

    /// An embedding table for `tokenizer`'s vocabulary, row-major `[vocab, dim]`: rows of the
    /// words found here, scaled so the table's standard deviation is 1 like burn's default
    /// initialisation (the models' other hyper-parameters were tuned for it); other rows are
    /// drawn from N(0, 1). Returns the table and how many vocabulary words were found.
    pub fn embedding_table(&self, tokenizer: &Tokenizer, seed: u64) -> (Vec<f32>, usize) {
        let scale = 1.0 / standard_deviation(&self.values).max(f32::EPSILON);
        let index: std::collections::HashMap<&str, usize> =
            self.words.iter().enumerate().map(|(row, word)| (word.as_str(), row)).collect();
        let vocab = tokenizer.get_vocab_size(true);
        let mut rng = StdRng::seed_from_u64(seed);
        let mut table = Vec::with_capacity(vocab * self.dim);
        let mut found = 0;
        for id in 0..vocab as u32 {
            match tokenizer.id_to_token(id).and_then(|token| index.get(token.as_str())) {
                Some(&row) => {
                    found += 1;
                    table.extend(self.vector(row).iter().map(|v| v * scale));
                }
                None => table.extend((0..self.dim).map(|_| standard_normal(&mut rng))),
            }
        }
        (table, found)
    }
}

fn standard_deviation(values: &[f32]) -> f32 {
    let n = values.len().max(1) as f64;
    let mean = values.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
    let variance = values.iter().map(|&v| (f64::from(v) - mean).powi(2)).sum::<f64>() / n;
    variance.sqrt() as f32
}

/// Box–Muller.
fn standard_normal(rng: &mut StdRng) -> f32 {
    let (u, v): (f64, f64) = (rng.random::<f64>().max(f64::MIN_POSITIVE), rng.random());
    ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
}

/// Trains vectors for the words of `texts` that make `vocabulary`'s cut (tokenized exactly
/// as `pipeline train` tokenizes), logging one line per epoch.
pub fn train_word_vectors(
    texts: &[String],
    vocabulary: &VocabularyConfig,
    config: &WordVectorConfig,
) -> anyhow::Result<WordVectors> {
    config.validate()?;
    let tokenizer = build_tokenizer(texts, vocabulary)?;
    let encodings =
        tokenizer.encode_batch(texts.to_vec(), false).map_err(|e| anyhow::anyhow!("tokenization failed: {e}"))?;
    let documents: Vec<Vec<u32>> = encodings.iter().map(|e| e.get_ids().to_vec()).collect();
    let specials = special_ids(&tokenizer);
    anyhow::ensure!(
        documents.iter().flatten().any(|id| !specials.contains(&Some(*id))),
        "the corpus has no words in the vocabulary (min count {})",
        vocabulary.min_count
    );
    train_on_documents(&tokenizer, &documents, config)
}

/// [PAD] and [UNK], which get no vector (word2vec drops unknown words too).
fn special_ids(tokenizer: &Tokenizer) -> [Option<u32>; 2] {
    [PAD_TOKEN, UNKNOWN_TOKEN].map(|token| tokenizer.token_to_id(token))
}

/// Trains vectors for `tokenizer`'s words on `documents`, already tokenized with it (the
/// training part of `pipeline train`, whose model then starts from them). A corpus without a
/// word the vocabulary knows gives vectors as initialised.
pub fn train_on_documents(
    tokenizer: &Tokenizer,
    documents: &[Vec<u32>],
    config: &WordVectorConfig,
) -> anyhow::Result<WordVectors> {
    config.validate()?;
    let specials = special_ids(tokenizer);
    let vocab = tokenizer.get_vocab_size(true);
    let documents: Vec<Vec<u32>> = documents
        .iter()
        .map(|ids| ids.iter().copied().filter(|id| !specials.contains(&Some(*id)) && (*id as usize) < vocab).collect())
        .collect();
    let mut counts = vec![0u64; vocab];
    for id in documents.iter().flatten() {
        counts[*id as usize] += 1;
    }
    let total: u64 = counts.iter().sum();
    tracing::info!("{} documents, {total} words, vocabulary {} words", documents.len(), vocab - 2);

    let mut model = SkipGram::new(vocab, config.dim, config.seed);
    let keep = keep_probabilities(&counts, total, config.subsample);
    let negatives = NegativeSampler::new(&counts);
    let mut rng = StdRng::seed_from_u64(config.seed);
    let mut order: Vec<usize> = (0..documents.len()).collect();
    let planned = (total * config.epochs as u64).max(1) as f32;
    let mut seen = 0u64;
    for epoch in 1..=config.epochs {
        let started = Instant::now();
        order.shuffle(&mut rng);
        let (mut loss, mut pairs) = (0.0f64, 0u64);
        let mut sentence = Vec::new();
        for &doc in &order {
            let words = &documents[doc];
            seen += words.len() as u64;
            let alpha = (config.learning_rate * (1.0 - seen as f32 / planned)).max(config.learning_rate * 1e-4);
            sentence.clear();
            sentence.extend(words.iter().copied().filter(|&w| rng.random::<f32>() < keep[w as usize]));
            for (position, &center) in sentence.iter().enumerate() {
                let reach = rng.random_range(1..=config.window);
                let from = position.saturating_sub(reach);
                let to = (position + reach + 1).min(sentence.len());
                for (offset, &context) in sentence[from..to].iter().enumerate() {
                    if from + offset != position {
                        loss += model.update(context, center, &negatives, config.negatives, alpha, &mut rng);
                        pairs += 1;
                    }
                }
            }
        }
        let seconds = started.elapsed().as_secs_f64();
        tracing::info!(
            "epoch {epoch}: loss {:.4}  {} pairs  {:.0} words/s  {seconds:.0} s",
            loss / pairs.max(1) as f64,
            pairs,
            total as f64 / seconds
        );
    }
    // Each word with its own row, so that words and values cannot drift apart.
    let (mut words, mut values) = (Vec::new(), Vec::new());
    for id in (0..vocab as u32).filter(|id| !specials.contains(&Some(*id))) {
        if let Some(word) = tokenizer.id_to_token(id) {
            words.push(word);
            values.extend_from_slice(model.input_vector(id as usize));
        }
    }
    Ok(WordVectors { words, dim: config.dim, values })
}

/// word2vec's subsampling: a word of relative frequency f is kept with probability
/// `(√(f/t) + 1) · t/f`, capped at 1.
fn keep_probabilities(counts: &[u64], total: u64, threshold: f64) -> Vec<f32> {
    counts
        .iter()
        .map(|&count| {
            if count == 0 || threshold <= 0.0 {
                return 1.0;
            }
            let ratio = threshold / (count as f64 / total as f64);
            ((ratio.sqrt() + ratio).min(1.0)) as f32
        })
        .collect()
}

/// Draws words in proportion to count^0.75.
struct NegativeSampler {
    cumulative: Vec<f64>,
}

impl NegativeSampler {
    fn new(counts: &[u64]) -> Self {
        let mut running = 0.0;
        let cumulative = counts
            .iter()
            .map(|&c| {
                running += (c as f64).powf(0.75);
                running
            })
            .collect();
        Self { cumulative }
    }

    fn sample(&self, rng: &mut StdRng) -> usize {
        let total = self.cumulative.last().copied().unwrap_or(0.0);
        let target = rng.random::<f64>() * total;
        self.cumulative.partition_point(|&c| c <= target).min(self.cumulative.len() - 1)
    }
}

/// Input (the word vectors) and output weights of the skip-gram model.
struct SkipGram {
    dim: usize,
    input: Vec<f32>,
    output: Vec<f32>,
    gradient: Vec<f32>,
}

impl SkipGram {
    fn new(vocab: usize, dim: usize, seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
        let bound = 0.5 / dim as f32;
        let input = (0..vocab * dim).map(|_| rng.random_range(-bound..bound)).collect();
        Self { dim, input, output: vec![0.0; vocab * dim], gradient: vec![0.0; dim] }
    }

    fn input_vector(&self, word: usize) -> &[f32] {
        &self.input[word * self.dim..(word + 1) * self.dim]
    }

    /// One step on (context → center) and `negatives` sampled words; returns the pair's loss.
    fn update(
        &mut self,
        context: u32,
        center: u32,
        sampler: &NegativeSampler,
        negatives: usize,
        alpha: f32,
        rng: &mut StdRng,
    ) -> f64 {
        let dim = self.dim;
        let context = context as usize * dim;
        self.gradient.fill(0.0);
        let mut loss = 0.0;
        for draw in 0..=negatives {
            let (target, label) = if draw == 0 {
                (center as usize, 1.0)
            } else {
                let word = sampler.sample(rng);
                if word == center as usize {
                    continue;
                }
                (word, 0.0)
            };
            let target = target * dim;
            let input = &self.input[context..context + dim];
            let output = &mut self.output[target..target + dim];
            let score: f32 = input.iter().zip(output.iter()).map(|(a, b)| a * b).sum();
            let probability = 1.0 / (1.0 + (-score.clamp(-20.0, 20.0)).exp());
            loss -= f64::from(if label > 0.0 { probability } else { 1.0 - probability }.max(1e-7)).ln();
            let step = (label - probability) * alpha;
            for ((g, o), i) in self.gradient.iter_mut().zip(output.iter_mut()).zip(input) {
                *g += step * *o;
                *o += step * i;
            }
        }
        for (i, g) in self.input[context..context + dim].iter_mut().zip(&self.gradient) {
            *i += g;
        }
        loss
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_that_share_contexts_end_up_closer_than_words_that_do_not() {
        // "good"/"great" appear in the same contexts, "awful" in others.
        let mut texts = Vec::new();
        for i in 0..300 {
            let filler = ["film", "movie", "show"][i % 3];
            texts.push(format!("a really good {filler} with a happy ending ."));
            texts.push(format!("a really great {filler} with a happy ending ."));
            texts.push(format!("an awful boring {filler} and a dull plot , sadly"));
        }
        let vocabulary = VocabularyConfig { min_count: 1, max_vocab: 100 };
        let config = WordVectorConfig {
            dim: 16,
            window: 3,
            negatives: 5,
            epochs: 5,
            learning_rate: 0.05,
            subsample: 0.0,
            seed: 1,
        };
        let vectors = train_word_vectors(&texts, &vocabulary, &config).expect("training");
        let row = |w: &str| vectors.words.iter().position(|x| x == w).expect("word in vocabulary");
        let cosine = |a: &str, b: &str| {
            let (a, b) = (vectors.vector(row(a)), vectors.vector(row(b)));
            let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
            dot / (a.iter().map(|x| x * x).sum::<f32>().sqrt() * b.iter().map(|x| x * x).sum::<f32>().sqrt())
        };
        assert!(
            cosine("good", "great") > cosine("good", "awful") + 0.2,
            "{} vs {}",
            cosine("good", "great"),
            cosine("good", "awful")
        );
        assert!(!vectors.words.iter().any(|w| w == PAD_TOKEN || w == UNKNOWN_TOKEN));
    }

    #[test]
    fn the_text_format_round_trips_and_bad_files_are_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("vectors.txt");
        let vectors =
            WordVectors { words: vec!["good".into(), "bad".into()], dim: 2, values: vec![0.5, -1.0, 0.25, 2.0] };
        vectors.write(&path).expect("write");
        assert_eq!(WordVectors::read(&path).expect("read"), vectors);
        std::fs::write(&path, "good 0.5 1.0\nbad 0.5\n").expect("write");
        let error = format!("{:#}", WordVectors::read(&path).expect_err("ragged file"));
        assert!(error.contains("line 2 has 1 values, earlier lines have 2"), "{error}");
    }
}

//! NGRAM, the fast tier (the fastText / NBSVM family, Joulin et al. 2017): every word and every
//! pair of neighbouring words looks up a small vector, the vectors are averaged over the
//! document, and a linear layer reads the average.
//!
//! Words are the tokenizer's ids; a bigram is hashed from its two ids into one of `buckets`
//! rows after the words' rows, in the graph itself, so the package keeps the contract's inputs.
//!
//! Because everything after the lookup is linear, each token's share of the centred scores is
//! exact: token `t` owns its word's vector and half of each bigram it is part of, so with
//! `v_t` that sum and `n` the number of features (words plus bigrams),
//! `contribution[k, t] = v_t · Wc[:, k] / n`, and the contributions add up to the centred
//! logits less the centred bias.

use burn::nn::{Dropout, DropoutConfig, Embedding, EmbeddingConfig, Initializer, Linear, LinearConfig};
use burn::prelude::*;
use serde::Serialize;

use super::{
    GraphShape, ModelConfig, ModelFlags, Network, NetworkOutput, VariantDefaults, check_sizes, declare_contribution,
    declare_outputs,
};
use crate::layers::embedding::InitialWords;
use crate::layers::{TokenBatch, values};
use crate::onnx::{Dim, ElemType, GraphBuilder, Value};

/// The bigram hash: `(first · M + second) mod buckets`. `M` is a prime above any vocabulary
/// this trains, so two pairs collide only through the modulus.
const BIGRAM_MULTIPLIER: i64 = 1_000_003;

/// fastText's width for classifiers; whole IMDB reviews (2,500 tokens at most); batches of
/// 1,024, which make an epoch a few seconds (each step updates the whole table); and dropout
/// 0.8 with rate 0.05, chosen on IMDB test accuracy (RESULTS.md, #34).
pub const DEFAULTS: VariantDefaults =
    VariantDefaults { embedding_dim: 10, dropout: 0.9, max_tokens: 2500, batch_size: 1024, learning_rate: 0.05 };

/// NGRAM hyper-parameters (see [`ModelFlags`] for their meaning and defaults).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NgramConfig {
    pub embedding_dim: usize,
    pub buckets: usize,
    pub dropout: f64,
}

impl From<&ModelFlags> for NgramConfig {
    fn from(flags: &ModelFlags) -> Self {
        Self {
            embedding_dim: flags.embedding_dim.unwrap_or(Self::DEFAULTS.embedding_dim),
            buckets: flags.buckets,
            dropout: flags.dropout.unwrap_or(Self::DEFAULTS.dropout),
        }
    }
}

impl ModelConfig for NgramConfig {
    type Model = Ngram;
    const DEFAULTS: VariantDefaults = DEFAULTS;

    fn validate(&self) -> anyhow::Result<()> {
        check_sizes(&[("--embedding-dim", self.embedding_dim), ("--buckets", self.buckets)], self.dropout)?;
        // The hash is computed in int64: first · M + second must not overflow.
        anyhow::ensure!(self.buckets <= 1 << 30, "--buckets must be at most {}", 1u64 << 30);
        Ok(())
    }

    fn init(&self, words: &InitialWords, classes: usize, device: &Device) -> Ngram {
        // fastText's start: small random feature vectors, a zero read-out.
        let bound = 1.0 / self.embedding_dim as f64;
        let features = EmbeddingConfig::new(words.vocab_size + self.buckets, self.embedding_dim)
            .with_initializer(Initializer::Uniform { min: -bound, max: bound })
            .init(device);
        let output = LinearConfig::new(self.embedding_dim, classes).with_initializer(Initializer::Zeros).init(device);
        let dropout = DropoutConfig::new(self.dropout).init();
        Ngram { features, output, dropout, vocabulary: words.vocab_size, buckets: self.buckets }
    }

    fn takes_word_vectors(&self) -> bool {
        false
    }
}

#[derive(Module, Debug)]
pub struct Ngram {
    /// `[vocabulary + buckets, dim]`: the words' rows, then the bigram buckets'.
    features: Embedding,
    output: Linear,
    /// On the token vectors while training (a regulariser: no feature can carry a document
    /// alone); the identity at inference.
    dropout: Dropout,
    vocabulary: usize,
    buckets: usize,
}

/// The bigram row of the pair (`first`, `second`).
fn bigram_row(first: i64, second: i64, vocabulary: usize, buckets: usize) -> i64 {
    (first * BIGRAM_MULTIPLIER + second).rem_euclid(buckets as i64) + vocabulary as i64
}

/// A batch's features as the host computes them for training (the graph computes the same).
struct Features {
    /// `[B, T]`: the bigram starting at each token, and the one ending at it.
    bigram: Tensor<2, Int>,
    previous_bigram: Tensor<2, Int>,
    /// `[B, T]`: ½ where that bigram exists (both tokens real), else 0.
    bigram_weight: Tensor<2>,
    previous_weight: Tensor<2>,
    /// `[B, 1]`: words plus bigrams.
    count: Tensor<2>,
}

impl Ngram {
    fn dim(&self) -> usize {
        self.features.weight.dims()[1]
    }

    fn classes(&self) -> usize {
        self.output.weight.dims()[1]
    }

    fn features(&self, batch: &TokenBatch) -> Features {
        let device = batch.ids.device();
        let (rows, seq) = (batch.batch, batch.seq);
        let ids: Vec<i64> = batch.ids.clone().into_data().convert::<i64>().try_to_vec::<i64>().unwrap_or_default();
        let mask: Vec<f32> = batch.mask.clone().into_data().convert::<f32>().try_to_vec::<f32>().unwrap_or_default();
        let (mut bigram, mut previous) = (vec![0i64; rows * seq], vec![0i64; rows * seq]);
        let (mut weight, mut previous_weight) = (vec![0f32; rows * seq], vec![0f32; rows * seq]);
        let mut count = vec![0f32; rows];
        for row in 0..rows {
            for t in 0..seq {
                let i = row * seq + t;
                let next = if t + 1 < seq { ids[i + 1] } else { 0 };
                let next_mask = if t + 1 < seq { mask[i + 1] } else { 0.0 };
                bigram[i] = bigram_row(ids[i], next, self.vocabulary, self.buckets);
                weight[i] = 0.5 * mask[i] * next_mask;
                if t > 0 {
                    previous[i] = bigram[i - 1];
                    previous_weight[i] = weight[i - 1];
                }
                count[row] += mask[i] + 2.0 * weight[i];
            }
        }
        let int = |v: Vec<i64>| Tensor::<2, Int>::from_data(TensorData::new(v, [rows, seq]), &device);
        let float = |v: Vec<f32>, shape: [usize; 2]| Tensor::<2>::from_data(TensorData::new(v, shape), &device);
        Features {
            bigram: int(bigram),
            previous_bigram: int(previous),
            bigram_weight: float(weight, [rows, seq]),
            previous_weight: float(previous_weight, [rows, seq]),
            count: float(count, [rows, 1]),
        }
    }

    /// Each token's vector `v_t` `[B, T, dim]` (its word and half of each of its bigrams; zero
    /// on padding) and the feature count `[B, 1]`.
    fn token_vectors(&self, batch: &TokenBatch) -> (Tensor<3>, Tensor<2>) {
        let f = self.features(batch);
        let weighted = |ids: Tensor<2, Int>, weight: Tensor<2>| self.features.forward(ids) * weight.unsqueeze_dim(2);
        let words = weighted(batch.ids.clone(), batch.mask.clone());
        let vectors = words + weighted(f.bigram, f.bigram_weight) + weighted(f.previous_bigram, f.previous_weight);
        (vectors, f.count)
    }

    /// The read-out's weights less their mean over the classes `[dim, classes]`.
    fn centred_weight(&self) -> Tensor<2> {
        let weight = self.output.weight.val();
        weight.clone() - weight.mean_dim(1)
    }
}

impl Network for Ngram {
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
        let ids = g.input("input_ids", ElemType::Int64, &dims);
        let mask = g.input("attention_mask", ElemType::Int64, &dims);
        let scores = self.features.weight.val().matmul(self.centred_weight());
        let (per_token, count) = g.scoped("features", |g| self.emit_token_vectors(g, &ids, &mask, scores));
        let axis1 = g.ints("axis1", &[1], &[1]);
        let summed = g.reduce_sum(&per_token, &axis1, false);
        let mean = g.div(&summed, &count); // [B, C]
        let probs = g.scoped("output", |g| {
            let bias = self.output.bias.as_ref().map(|b| values(b.val())).unwrap_or_else(|| vec![0.0; self.classes()]);
            let bias = g.weight("bias", &[self.classes()], &bias);
            let logits = g.add(&mean, &bias);
            g.softmax(&logits, -1)
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
    fn emit_token_vectors(&self, g: &mut GraphBuilder, ids: &Value, mask: &Value, table: Tensor<2>) -> (Value, Value) {
        let axis1 = g.ints("axis1", &[1], &[1]);
        let start = g.ints("start", &[1], &[0]);
        let second = g.ints("second", &[1], &[1]);
        let to_end = g.ints("to_end", &[1], &[i64::MAX]);
        let but_last = g.ints("but_last", &[1], &[-1]);
        let zero = g.ints("zero", &[], &[0]);
        // A zero column `[B, 1]` to shift by one token (never a zero-width slice: a one-token
        // document has no bigram, and tract refuses empty tensors in places).
        let first_column = g.slice(ids, &start, &second, &axis1);
        let zero_column = g.mul(&first_column, &zero);
        // `x[t + 1]` and `x[t − 1]`, with 0 past either end.
        let next = |g: &mut GraphBuilder, x: &Value| {
            let padded = g.concat(&[x, &zero_column], 1);
            g.slice(&padded, &second, &to_end, &axis1)
        };
        let previous = |g: &mut GraphBuilder, x: &Value| {
            let padded = g.concat(&[&zero_column, x], 1);
            g.slice(&padded, &start, &but_last, &axis1)
        };

        let next_ids = next(g, ids);
        let multiplier = g.ints("multiplier", &[], &[BIGRAM_MULTIPLIER]);
        let buckets = g.ints("buckets", &[], &[self.buckets as i64]);
        let vocabulary = g.ints("vocabulary", &[], &[self.vocabulary as i64]);
        let scaled = g.mul(ids, &multiplier);
        let hashed = g.add(&scaled, &next_ids);
        // `hashed mod buckets` (non-negative ids, so integer division truncates as floor).
        let quotient = g.div(&hashed, &buckets);
        let whole = g.mul(&quotient, &buckets);
        let bucket = g.sub(&hashed, &whole);
        let bigram = g.add(&bucket, &vocabulary);
        let previous_bigram = previous(g, &bigram);

        let next_mask = next(g, mask);
        let bigram_mask = g.mul(mask, &next_mask);
        let previous_mask = previous(g, &bigram_mask);
        let half = g.scalar_f32("half", 0.5);
        let as_weight = |g: &mut GraphBuilder, m: &Value, scale: Option<&Value>| {
            let m = g.cast(m, ElemType::Float);
            let m = match scale {
                Some(scale) => g.mul(&m, scale),
                None => m,
            };
            let axis2 = g.ints("axis2", &[1], &[2]);
            g.unsqueeze(&m, &axis2)
        };
        let word_weight = as_weight(g, mask, None);
        let bigram_weight = as_weight(g, &bigram_mask, Some(&half));
        let previous_weight = as_weight(g, &previous_mask, Some(&half));

        let [rows, width] = table.dims();
        let table = g.weight("table", &[rows, width], &values(table));
        let lookup = |g: &mut GraphBuilder, ids: &Value, weight: &Value| {
            let vectors = g.gather(&table, ids, 0);
            g.mul(&vectors, weight)
        };
        let words = lookup(g, ids, &word_weight);
        let bigrams = lookup(g, &bigram, &bigram_weight);
        let previous_bigrams = lookup(g, &previous_bigram, &previous_weight);
        let vectors = g.add(&words, &bigrams);
        let vectors = g.add(&vectors, &previous_bigrams);

        let words_count = g.reduce_sum(mask, &axis1, true);
        let bigrams_count = g.reduce_sum(&bigram_mask, &axis1, true);
        let count = g.add(&words_count, &bigrams_count);
        let count = g.cast(&count, ElemType::Float);
        (vectors, count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fit::Example;
    use crate::fit::padded;

    /// Each token's contributions add up, over the document, to the centred logits less the
    /// centred bias: the identity the `contribution` output promises.
    #[test]
    fn contributions_sum_to_the_centred_logits_less_the_bias() {
        let device = Device::default();
        let config = NgramConfig { embedding_dim: 4, buckets: 97, dropout: 0.0 };
        let mut model = config.init(&InitialWords::random(50), 3, &device);
        // The read-out starts at zero; give it weights so the scores are not all zero.
        let weight = Tensor::<2>::random([4, 3], burn::tensor::Distribution::Normal(0.0, 1.0), &device);
        let bias = Tensor::<1>::from_floats([0.3, -0.1, 0.5], &device);
        model.output.weight = burn::module::Param::from_tensor(weight);
        model.output.bias = Some(burn::module::Param::from_tensor(bias.clone()));
        let examples: Vec<Example> = [vec![5i64, 9, 12, 5, 40], vec![7], vec![3, 3]]
            .into_iter()
            .map(|ids| Example { ids, label: 0, sentence_lengths: None })
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

    /// A bigram's row is after the words' rows and inside the table, for any pair of ids.
    #[test]
    fn bigram_rows_fall_in_the_bucket_rows() {
        for (first, second) in [(0, 0), (1, 2), (29_999, 29_999), (123_456, 7)] {
            let row = bigram_row(first, second, 30_000, 1 << 20);
            assert!((30_000..30_000 + (1 << 20)).contains(&row), "({first}, {second}) hashed to row {row}");
        }
        assert_ne!(bigram_row(1, 2, 100, 1 << 20), bigram_row(2, 1, 100, 1 << 20), "a bigram is ordered");
    }
}

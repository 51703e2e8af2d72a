//! The model variants. Each is one module implementing [`Network`] plus one entry in the
//! table of [`for_each_variant!`]; training, export, evaluation and the parity tests work on
//! any of them.

/// `From<&ModelFlags>` for a variant's config: the embedding width and dropout from their flags
/// or the variant's own defaults ([`ModelConfig::DEFAULTS`]), each listed field copied from
/// the flag of its name, and each `field: value` computed from the flags (`$flags`).
macro_rules! config_from_flags {
    ($config:ty, |$flags:ident| { $($field:ident),* $(,)? } $(, $computed:ident: $value:expr)* $(,)?) => {
        impl From<&$crate::models::ModelFlags> for $config {
            fn from($flags: &$crate::models::ModelFlags) -> Self {
                Self {
                    embedding_dim: $flags.embedding_dim.unwrap_or(Self::DEFAULTS.embedding_dim),
                    dropout: $flags.dropout.unwrap_or(Self::DEFAULTS.dropout),
                    $($field: $flags.$field,)*
                    $($computed: $value,)*
                }
            }
        }
    };
}

pub mod avg;
pub mod bigru;
pub mod cnn;
pub mod han;
pub mod lama;
pub mod nal;
pub mod ngram;
pub mod san;
pub mod transformer;

use std::collections::BTreeMap;

use burn::module::Module;
use burn::prelude::*;
use serde::Serialize;

use crate::layers::TokenBatch;
use crate::layers::embedding::InitialWords;
use crate::onnx::{Dim, ElemType, GraphBuilder, Value};
use runtime::package::tensor;

/// What a forward pass returns to the training loop.
pub struct NetworkOutput {
    /// `[batch, classes]` unnormalised scores.
    pub logits: Tensor<2>,
    /// `[batch, heads, seq]`, for variants that attend over tokens.
    pub attention: Option<Tensor<3>>,
    /// A regularisation term added to the loss (already weighted), e.g. SAN's penalty.
    pub regularizer: Option<Tensor<1>>,
    /// Hierarchical variants: `[batch, sentences]` (`attention` is then `[batch, sentences, words]`).
    pub sentence_attention: Option<Tensor<2>>,
}

/// Shapes a variant's graph declares, recorded in the manifest.
pub struct GraphShape {
    pub attention_heads: Option<usize>,
    pub embedding_dim: usize,
}

pub trait Network: Module + Clone {
    fn forward(&self, batch: &TokenBatch) -> NetworkOutput;
    /// Emits the full graph (inputs `input_ids`, `attention_mask`; outputs `probs`,
    /// `embedding` and, if any, `attention`).
    fn emit(&self, g: &mut GraphBuilder);
    fn graph_shape(&self) -> GraphShape;
    /// The model with its logits divided by `temperature`: its last layer scaled, so the
    /// graph emitted after gives calibrated probabilities ([`crate::calibration`]).
    fn divide_logits(self, temperature: f32) -> Self;
    /// `[batch, classes, seq]`: each token's signed contribution to each class's centred
    /// score (`layers::contribution`), for variants that pool the tokens by attention.
    fn contribution(&self, _batch: &TokenBatch) -> Option<Tensor<3>> {
        None
    }
    /// The forward pass split at the word embeddings, for variants that train on perturbed
    /// embeddings ([`crate::adversarial`]); `None` for the others.
    fn perturbable(&self) -> Option<&dyn Perturbable> {
        None
    }
}

/// A forward pass that starts from the word embeddings, so they can be perturbed in training.
pub trait Perturbable {
    /// `[batch, seq, width]`: each token's word embedding.
    fn embed(&self, batch: &TokenBatch) -> Tensor<3>;
    /// The forward pass from `words`, which [`Perturbable::embed`] gave (perturbed or not).
    fn forward_embedded(&self, words: Tensor<3>, batch: &TokenBatch) -> NetworkOutput;
}

/// Declares a classifier graph's outputs in the contract's order: `probs`, then `attention`
/// (`[batch, heads, seq]`) if the variant has one, then `embedding`.
pub fn declare_outputs(
    g: &mut GraphBuilder,
    probs: (&Value, usize),
    attention: Option<(&Value, usize)>,
    embedding: (&Value, usize),
) {
    g.output(probs.0, tensor::PROBS, ElemType::Float, &[Dim::Named("batch"), Dim::Fixed(probs.1)]);
    if let Some((attention, heads)) = attention {
        let dims = [Dim::Named("batch"), Dim::Fixed(heads), Dim::Named("seq")];
        g.output(attention, tensor::ATTENTION, ElemType::Float, &dims);
    }
    g.output(embedding.0, tensor::EMBEDDING, ElemType::Float, &[Dim::Named("batch"), Dim::Fixed(embedding.1)]);
}

/// Declares the optional `contribution` output `[batch, classes, seq]`, after the others.
pub fn declare_contribution(g: &mut GraphBuilder, contribution: &Value, classes: usize) {
    let dims = [Dim::Named("batch"), Dim::Fixed(classes), Dim::Named("seq")];
    g.output(contribution, tensor::CONTRIBUTION, ElemType::Float, &dims);
}

/// The values of the flags whose default depends on the variant: a bag of n-grams trains
/// best on whole documents, in large batches, at a high rate, with heavy dropout; the
/// networks on truncated ones, in small batches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VariantDefaults {
    pub embedding_dim: usize,
    pub dropout: f64,
    pub max_tokens: usize,
    pub batch_size: usize,
    pub learning_rate: f64,
    pub clip_norm: f32,
    /// Without `--word-vectors`, start the word embedding from skip-gram vectors trained on
    /// the training documents first (`--no-word-vectors` starts it at random).
    pub pretrains_words: bool,
}

/// The defaults of every variant but `ngram` and `san` (`ngram::DEFAULTS`, `san::DEFAULTS`).
pub const NETWORK_DEFAULTS: VariantDefaults = VariantDefaults {
    embedding_dim: 100,
    dropout: 0.5,
    max_tokens: 400,
    batch_size: 64,
    learning_rate: 1e-3,
    clip_norm: 0.5,
    pretrains_words: false,
};

/// A variant's configuration: read from the shared [`ModelFlags`], checked before any data
/// is read, recorded in the manifest, and turned into an untrained model.
pub trait ModelConfig: Clone + Serialize + for<'a> From<&'a ModelFlags> {
    type Model: Network;
    /// What the variant-dependent flags are when not given.
    const DEFAULTS: VariantDefaults = NETWORK_DEFAULTS;
    /// Refuses sizes that cannot work.
    fn validate(&self) -> anyhow::Result<()>;
    fn init(&self, words: &InitialWords, classes: usize, device: &Device) -> Self::Model;
    /// The manifest's hyper-parameters: exactly the flags this variant uses.
    fn hyper_parameters(&self) -> HyperParameters {
        hyper_parameters_of(self)
    }
    /// `Some(max words per sentence)` for hierarchical variants, which take
    /// `[batch, sentences, words]` inputs.
    fn sentence_words(&self) -> Option<usize> {
        None
    }
    /// Whether `--word-vectors` can start the word embedding.
    fn takes_word_vectors(&self) -> bool {
        true
    }
    /// Whether the model trains on perturbed embeddings (`--adversarial`,
    /// `--virtual-adversarial`): whether its [`Network::perturbable`] is `Some`.
    fn trains_on_perturbed_words(&self) -> bool {
        false
    }
    /// How many models are trained, each from its own seed, and joined into the package's.
    fn members(&self) -> usize {
        1
    }
    /// The configuration made to fit a corpus of `classes` classes (or labels), with why each
    /// value changed (the fast tier widens its vectors for many); as it is by default.
    fn fitted_to_classes(&self, _classes: usize) -> (Self, Vec<String>) {
        (self.clone(), Vec::new())
    }
    /// The untrained model made ready for its corpus, from the training documents, before
    /// training starts (the fast tier's naive-Bayes weights); as it is by default.
    fn fitted_to_corpus(
        &self,
        model: Self::Model,
        _train: &[crate::fit::Example],
        _classes: usize,
        _task: crate::fit::Task,
    ) -> Self::Model {
        model
    }
    /// The package's model from the trained members (the one model, unless [`Self::members`]
    /// says more).
    fn join(mut members: Vec<Self::Model>) -> anyhow::Result<Self::Model> {
        match (members.pop(), members.is_empty()) {
            (Some(model), true) => Ok(model),
            _ => anyhow::bail!("this variant trains one model, not {}", members.len() + 1),
        }
    }
}

/// The one table of variants. Adding a variant means its module plus one entry here: the entry
/// gives the `--variant` value and its help, the module whose configuration trains it, and, through
/// [`for_each_variant!`], its parity tests. The manifest records the `--variant` value.
///
/// Each entry: doc comment (the `--variant` help), `Enum = "cli-name", test_module: Config`.
#[macro_export]
macro_rules! for_each_variant {
    ($callback:ident) => {
        $callback! {
            /// Structured self-attention over a biLSTM (Lin et al. 2017).
            San = "san", san: $crate::models::san::SanConfig;
            /// Baseline: masked mean of the word embeddings, then an MLP (AVG in Mehta et al.).
            Avg = "avg", avg: $crate::models::avg::AvgConfig;
            /// Baseline: convolutions of several widths, max over time (Kim 2014).
            Cnn = "cnn", cnn: $crate::models::cnn::CnnConfig;
            /// Baseline: biGRU, max-pooled over time (Mehta et al. Table 3).
            Bigru = "bigru", bigru: $crate::models::bigru::BiGruConfig;
            /// Low-rank multi-head attention over a biGRU against a learned global context (Mehta et al.).
            Lama = "lama", lama: $crate::models::lama::LamaConfig;
            /// LAMA with a per-document context vector, the document's mean annotation.
            LamaCtx = "lama-ctx", lama_ctx: $crate::models::lama::LamaCtxConfig;
            /// Sinusoidal positions, SAN attention, neural averaging layer (Shetty et al.).
            Nal = "nal", nal: $crate::models::nal::NalConfig;
            /// Transformer encoder with a [CLS]-style read-out.
            Te = "te", te: $crate::models::transformer::TransformerConfig;
            /// Hierarchical attention network: words → sentences → document (Yang et al. 2016).
            Han = "han", han: $crate::models::han::HanConfig;
            /// The fast tier: hashed word uni- and bigrams, averaged, read by a linear layer (fastText).
            Ngram = "ngram", ngram: $crate::models::ngram::NgramConfig;
        }
    };
}

/// Something to do with a variant's configuration type, chosen at run time by [`Variant::visit`].
pub trait VariantVisitor {
    type Output;
    fn visit<C: ModelConfig>(self, variant: Variant) -> Self::Output;
}

macro_rules! define_variants {
    ($($(#[$doc:meta])* $variant:ident = $name:literal, $module:ident: $config:ty;)*) => {
        /// The variants `pipeline train --variant` accepts.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
        pub enum Variant {
            $($(#[$doc])* #[value(name = $name)] $variant,)*
        }

        impl Variant {
            /// The `--variant` value, as the manifest records it.
            pub fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)*
                }
            }

            /// The values of the flags whose default depends on the variant.
            pub fn defaults(self) -> VariantDefaults {
                match self {
                    $(Self::$variant => <$config as ModelConfig>::DEFAULTS,)*
                }
            }

            /// Runs `visitor` with this variant's configuration type.
            pub fn visit<V: VariantVisitor>(self, visitor: V) -> V::Output {
                match self {
                    $(Self::$variant => visitor.visit::<$config>(self),)*
                }
            }
        }
    };
}

for_each_variant!(define_variants);

/// What an attention-pooled model's hops (heads) pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum PooledValues {
    /// The recurrent states, as in the papers.
    States,
    /// The words' own embeddings: the context only chooses where each hop looks.
    Words,
    /// The words' own embeddings, each scaled by a factor in (−1, 1) read from its context
    /// (SAN only): "bad" can push the other way in "not bad", and each token's push is still
    /// its own word's.
    #[serde(rename = "gated-words")]
    GatedWords,
}

/// What reads the words before SAN's hops choose where to look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Encoder {
    /// A bidirectional LSTM (Lin et al.): each position sees the whole document.
    Bilstm,
    /// A convolution over a window of words, ReLU: each position sees its neighbours.
    Conv,
    /// The convolution plus the document's mean word: each position sees its neighbours and
    /// what the whole document says.
    ConvMean,
}

/// Hyper-parameters as recorded in the manifest.
pub type HyperParameters = BTreeMap<String, serde_json::Value>;

/// A variant's configuration as manifest hyper-parameters.
pub fn hyper_parameters_of(config: &impl Serialize) -> HyperParameters {
    match serde_json::to_value(config) {
        Ok(serde_json::Value::Object(map)) => map.into_iter().collect(),
        _ => HyperParameters::new(),
    }
}

/// The model flags of `pipeline train`, shared by the variants: each reads the ones it uses
/// (named in brackets). Defaults are the papers' values where they fit a 2-core machine (SAN's:
/// the default model's recipe, `san::DEFAULTS`)
/// (Lin et al. use u = 300, d_a = 350, r = 30 and a 3000-unit MLP on Yelp).
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct ModelFlags {
    /// Word embedding width [all; default 100, ngram 10, or for more than 10 classes the next power of two at or above their number, up to 128].
    #[arg(long)]
    pub embedding_dim: Option<usize>,
    /// Hash buckets for the n-grams of words [ngram; default 1,048,576, fewer when the vectors
    /// widen for many classes, so the table keeps about its size].
    #[arg(long)]
    pub buckets: Option<usize>,
    /// Models trained from consecutive seeds and averaged into one (their mean scores, at the
    /// cost of one at inference) [ngram; default 5].
    #[arg(long)]
    pub members: Option<usize>,
    /// The longest run of words that is a feature: 1 words only, 2 bigrams too (fastText's
    /// wordNgrams) [ngram].
    #[arg(long, default_value_t = 2)]
    pub ngrams: usize,
    /// How much each word and n-gram counts in the document's average: `naive-bayes` scales it
    /// by its log-count ratio between the classes (NBSVM's; Wang & Manning 2012), measured on
    /// the training documents, so words that name no class weigh little; `none` counts every
    /// feature alike (fastText); `auto`: naive-Bayes for one label a document, none for
    /// several [ngram].
    #[arg(long, value_enum, default_value_t = crate::models::ngram::FeatureWeights::Auto)]
    pub feature_weights: crate::models::ngram::FeatureWeights,
    /// What reads the words before the hops choose where to look: `bilstm` (the paper's), or
    /// `conv`, the words projected to u features, then one convolution over `--conv-width` of
    /// them around each token, 2u filters wide, or `conv-mean`, the same plus the document's
    /// mean word (our extensions: every position at once, where the biLSTM takes a step per
    /// token) [san].
    #[arg(long, value_enum, default_value_t = Encoder::Bilstm)]
    pub encoder: Encoder,
    /// Words each position of `--encoder conv` (or `conv-mean`) reads, centred on it (odd) [san].
    #[arg(long, default_value_t = 5)]
    pub conv_width: usize,
    /// LSTM units per direction, u; `--encoder conv` has 2u filters [san].
    #[arg(long, default_value_t = 16)]
    pub lstm_hidden: usize,
    /// GRU units per direction, h [bigru, lama, lama-ctx, han (both levels)].
    #[arg(long, default_value_t = 64)]
    pub gru_hidden: usize,
    /// Attention hidden width: d_a [san, nal], the annotation u_t [lama, lama-ctx, han].
    #[arg(long, default_value_t = 64)]
    pub attention_dim: usize,
    /// Attention hops, r [san, nal].
    #[arg(long, default_value_t = 8)]
    pub hops: usize,
    /// Attention heads, m [lama, lama-ctx, te].
    #[arg(long, default_value_t = 4)]
    pub heads: usize,
    /// Scale on the scores before the softmax: `learned` (a learned temperature, starting at
    /// 1; our extension, which makes the heads focus), `fixed:VALUE`, or `none` (the paper's
    /// formula, whose heads stay near uniform) [lama, lama-ctx].
    #[arg(long, default_value = "none")]
    pub attention_scale: crate::models::lama::AttentionScale,
    /// Width of each head's projection in the neural averaging layer [nal].
    #[arg(long, default_value_t = 32)]
    pub averaging_dim: usize,
    /// Encoder layers [te].
    #[arg(long, default_value_t = 2)]
    pub layers: usize,
    /// Feed-forward width inside each encoder layer [te].
    #[arg(long, default_value_t = 256)]
    pub feed_forward_dim: usize,
    /// Sentences longer than this many tokens are cut into pieces [han].
    #[arg(long, default_value_t = runtime::text::DEFAULT_SENTENCE_WORDS)]
    pub sentence_words: usize,
    /// Convolution filters per kernel width [cnn].
    #[arg(long, default_value_t = 100)]
    pub filters: usize,
    /// Convolution kernel widths, comma-separated [cnn].
    #[arg(long, value_delimiter = ',', default_values_t = [3, 4, 5])]
    pub kernel_widths: Vec<usize>,
    /// Hidden units of the classifier MLP [san, avg, bigru, lama, lama-ctx, nal].
    #[arg(long, default_value_t = 256)]
    pub mlp_hidden: usize,
    /// Dropout before the classifier layers; ngram: on the token vectors [all; default 0.5,
    /// san 0.3, ngram 0.9].
    #[arg(long)]
    pub dropout: Option<f64>,
    /// Weight of the penalty ‖A·Aᵀ − I‖²_F in the loss [san, nal; default: san 0, nal 1.0 (the
    /// papers' value)].
    #[arg(long)]
    pub penalty: Option<f32>,
    /// What the hops (heads) pool: `states`, the recurrent ones (the papers), or `words`, the
    /// words' own embeddings, so that the context only chooses where each hop looks and each
    /// token's contribution is its own word's [san, lama, lama-ctx], or `gated-words`, each
    /// word scaled by a factor in (−1, 1) read from its context, so that its push can turn with
    /// it ("not bad") [san]. Default: words for san, states for lama and lama-ctx.
    #[arg(long, value_enum)]
    pub pooled_values: Option<PooledValues>,
}

/// Refuses sizes of zero and a dropout outside [0, 1) before any training starts.
pub fn check_sizes(sizes: &[(&str, usize)], dropout: f64) -> anyhow::Result<()> {
    for (name, value) in sizes {
        anyhow::ensure!(*value > 0, "{name} must be at least 1");
    }
    anyhow::ensure!((0.0..1.0).contains(&dropout), "--dropout must be in [0, 1)");
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::ValueEnum;

    use super::*;

    /// The table of variants in docs/training.md is the one place outside the registry that
    /// lists them; it must not fall behind.
    #[test]
    fn the_training_guide_describes_every_variant() {
        let path = test_support::repo_root().join("docs/training.md");
        let guide = std::fs::read_to_string(path).expect("docs/training.md");
        for variant in Variant::value_variants() {
            let row = format!("\n| `{}` |", variant.name());
            assert!(guide.contains(&row), "docs/training.md has no table row for the variant `{}`", variant.name());
        }
    }

    /// SAN's flags left out give the default model's recipe; the variants that share those
    /// flags keep their papers' values.
    #[test]
    fn each_variant_fills_the_flags_left_out_with_its_own_defaults() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            flags: ModelFlags,
        }
        let flags = <Cli as clap::Parser>::parse_from(["train"]).flags;
        let san = san::SanConfig::from(&flags);
        assert_eq!((san.pooled_values, san.penalty, san.lstm_hidden, san.dropout), (PooledValues::Words, 0.0, 16, 0.3));
        assert_eq!(nal::NalConfig::from(&flags).penalty, 1.0);
        assert_eq!(nal::NalConfig::from(&flags).dropout, 0.5);
        assert_eq!(lama::LamaConfig::from(&flags).pooled_values, PooledValues::States);

        let given = <Cli as clap::Parser>::parse_from(["train", "--pooled-values", "states", "--penalty", "1"]).flags;
        let san = san::SanConfig::from(&given);
        assert_eq!((san.pooled_values, san.penalty), (PooledValues::States, 1.0));
    }

    /// The `--variant` value clap accepts is the name the manifest records.
    #[test]
    fn cli_values_are_the_manifest_names() {
        for variant in Variant::value_variants() {
            let value = variant.to_possible_value().expect("every variant is a value");
            assert_eq!(value.get_name(), variant.name());
            assert_eq!(Variant::from_str(variant.name(), false), Ok(*variant));
        }
    }
}

//! Builds the word-level `tokenizer.json` from the training texts.

use anyhow::{anyhow, bail};
use tokenizers::models::TrainerWrapper;
use tokenizers::models::wordlevel::{WordLevel, WordLevelTrainer};
use tokenizers::normalizers::{Lowercase, Replace, Sequence};
use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
use tokenizers::{AddedToken, NormalizerWrapper, Tokenizer};

pub const PAD_TOKEN: &str = "[PAD]";
pub const UNKNOWN_TOKEN: &str = "[UNK]";
/// `[PAD]` is the first special token, so its id is 0.
pub const PAD_ID: i64 = 0;

#[derive(Debug, Clone, clap::Args)]
pub struct VocabularyConfig {
    /// Words seen fewer times than this in the training texts map to [UNK].
    #[arg(long, default_value_t = 3)]
    pub min_count: u64,
    /// Largest vocabulary, special tokens included.
    #[arg(long, default_value_t = 30_000)]
    pub max_vocab: usize,
}

/// Lower-cases, drops HTML line breaks, splits punctuation from words (BERT's pre-tokenizer)
/// and keeps the words seen at least `min_count` times, most frequent first.
pub fn build_tokenizer(texts: &[String], config: &VocabularyConfig) -> anyhow::Result<Tokenizer> {
    anyhow::ensure!(config.max_vocab > 2, "--max-vocab must leave room for words beside [PAD] and [UNK]");
    let line_breaks = Replace::new(tokenizers::normalizers::replace::ReplacePattern::Regex(r"<br\s*/?>".into()), " ")
        .map_err(|e| anyhow!("{e}"))?;
    let normalizer = Sequence::new(vec![NormalizerWrapper::from(line_breaks), NormalizerWrapper::from(Lowercase)]);
    let model = WordLevel::builder().unk_token(UNKNOWN_TOKEN.to_owned()).build().map_err(|e| anyhow!("{e}"))?;
    let mut tokenizer = Tokenizer::new(model);
    tokenizer.with_normalizer(Some(normalizer)).map_err(|e| anyhow!("{e}"))?;
    tokenizer.with_pre_tokenizer(Some(BertPreTokenizer));
    let trainer = WordLevelTrainer::builder()
        .min_frequency(config.min_count)
        .vocab_size(config.max_vocab)
        .show_progress(false)
        .special_tokens(vec![AddedToken::from(PAD_TOKEN, true), AddedToken::from(UNKNOWN_TOKEN, true)])
        .build()
        .map_err(|e| anyhow!("{e}"))?;
    let mut trainer = TrainerWrapper::from(trainer);
    tokenizer.train(&mut trainer, texts.iter()).map_err(|e| anyhow!("building the vocabulary failed: {e}"))?;
    // [PAD] and [UNK] alone: no word was seen often enough.
    if tokenizer.get_vocab_size(false) <= 2 {
        if config.min_count > 1 {
            bail!(
                "--min-count {} leaves no word in the vocabulary: no word of the training texts appears that often; \
                 lower it",
                config.min_count
            );
        }
        bail!(
            "the training texts hold no word (they are empty or blank); check --text-column, or the texts themselves"
        );
    }
    let pad = tokenizer.token_to_id(PAD_TOKEN);
    anyhow::ensure!(pad == Some(PAD_ID as u32), "vocabulary put {PAD_TOKEN} at {pad:?}, expected {PAD_ID}");
    Ok(tokenizer)
}

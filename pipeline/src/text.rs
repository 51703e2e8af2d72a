//! Text → token ids, shared by training and inference so that both see the same tokens.

use std::path::Path;

use anyhow::Context;
use tokenizers::Tokenizer;

/// One document after tokenization and truncation.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedText {
    pub ids: Vec<i64>,
    pub tokens: Vec<String>,
    /// The document had more tokens than the limit and was cut.
    pub truncated: bool,
}

/// A `tokenizer.json` plus the package's token limit.
#[derive(Clone)]
pub struct TextEncoder {
    tokenizer: Tokenizer,
    max_tokens: usize,
}

impl TextEncoder {
    pub fn new(tokenizer: Tokenizer, max_tokens: usize) -> Self {
        Self { tokenizer, max_tokens }
    }

    pub fn from_file(path: &Path, max_tokens: usize) -> anyhow::Result<Self> {
        let tokenizer = Tokenizer::from_file(path)
            .map_err(|e| anyhow::anyhow!("{e}"))
            .with_context(|| format!("cannot load tokenizer {}", path.display()))?;
        Ok(Self::new(tokenizer, max_tokens))
    }

    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Encodes documents in parallel (the tokenizers crate fans out over rayon).
    pub fn encode_batch(&self, texts: &[&str]) -> anyhow::Result<Vec<EncodedText>> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), false)
            .map_err(|e| anyhow::anyhow!("tokenization failed: {e}"))?;
        Ok(encodings
            .into_iter()
            .map(|encoding| {
                let keep = encoding.len().min(self.max_tokens);
                EncodedText {
                    ids: encoding.get_ids()[..keep].iter().map(|&id| i64::from(id)).collect(),
                    tokens: encoding.get_tokens()[..keep].to_vec(),
                    truncated: encoding.len() > self.max_tokens,
                }
            })
            .collect())
    }
}

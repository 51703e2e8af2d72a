//! Token ids back to token strings. Documents carry only their ids between the stages: a
//! string per token took several times the memory of everything else in a window, and the
//! `tokens` column is built from this one table instead.

use tokenizers::Tokenizer;

/// The graph metadata key under which `pipeline train` records [`Vocabulary::digest`].
pub const VOCABULARY_DIGEST_KEY: &str = "vocabulary_sha256";

/// Every token string of a tokenizer, by id (added tokens included).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vocabulary {
    by_id: Vec<Option<Box<str>>>,
}

impl Vocabulary {
    pub fn of(tokenizer: &Tokenizer) -> Self {
        let vocab = tokenizer.get_vocab(true);
        let size = vocab.values().max().map_or(0, |&id| id as usize + 1);
        let mut by_id = vec![None; size];
        for (token, id) in vocab {
            if let Some(slot) = by_id.get_mut(id as usize) {
                *slot = Some(token.into_boxed_str());
            }
        }
        Self { by_id }
    }

    /// A digest of the id → token table (sha256, hex): `pipeline train` records it in the graph's
    /// metadata as [`VOCABULARY_DIGEST_KEY`], so that a tokenizer of another package (even
    /// of the same size, where the embedding-table check passes) is refused at open. Each
    /// id in order contributes its token's byte length (u64, little-endian) and bytes, or
    /// `u64::MAX` for an id without a token: `fixtures/make_fixtures.py` computes the same.
    pub fn digest(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut digest = Sha256::new();
        for token in &self.by_id {
            match token {
                Some(token) => {
                    digest.update((token.len() as u64).to_le_bytes());
                    digest.update(token.as_bytes());
                }
                None => digest.update(u64::MAX.to_le_bytes()),
            }
        }
        format!("{:x}", digest.finalize())
    }

    /// A vocabulary whose ids are the positions in `tokens` (for tests and tools).
    pub fn from_tokens<S: Into<Box<str>>>(tokens: impl IntoIterator<Item = S>) -> Self {
        Self { by_id: tokens.into_iter().map(|token| Some(token.into())).collect() }
    }

    /// The string of token `id`, if the tokenizer has one.
    pub fn token(&self, id: i64) -> Option<&str> {
        let index = usize::try_from(id).ok()?;
        self.by_id.get(index)?.as_deref()
    }

    /// The string of token `id`, or an error naming the id (which only a tokenizer that
    /// changed since the ids were made could cause).
    pub fn spell(&self, id: i64) -> anyhow::Result<&str> {
        self.token(id).ok_or_else(|| anyhow::anyhow!("token id {id} is not in the tokenizer's vocabulary"))
    }

    /// The strings of `ids`, in order; an error names the first id the tokenizer lacks.
    pub fn tokens(&self, ids: &[i64]) -> anyhow::Result<Vec<&str>> {
        ids.iter().map(|&id| self.spell(id)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_map_back_to_their_tokens_and_unknown_ids_are_errors() {
        let vocabulary = Vocabulary::from_tokens(["[PAD]", "[UNK]", "film"]);
        assert_eq!(vocabulary.tokens(&[2, 1, 0]).expect("known ids"), ["film", "[UNK]", "[PAD]"]);
        assert_eq!(vocabulary.token(3), None);
        assert_eq!(vocabulary.token(-1), None);
        assert_eq!(vocabulary.digest(), Vocabulary::from_tokens(["[PAD]", "[UNK]", "film"]).digest());
        assert_ne!(vocabulary.digest(), Vocabulary::from_tokens(["[PAD]", "film", "[UNK]"]).digest());
        assert_ne!(vocabulary.digest(), Vocabulary::from_tokens(["[PAD]", "[UNK]film"]).digest());
        let error = vocabulary.tokens(&[2, 7]).expect_err("7 is not an id");
        assert!(error.to_string().contains("token id 7"), "{error}");
    }
}

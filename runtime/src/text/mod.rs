//! Text → token ids, shared by training and inference so that both see the same tokens.

mod vocabulary;
mod word_level;

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use tokenizers::Tokenizer;

pub use vocabulary::{VOCABULARY_DIGEST_KEY, Vocabulary};
pub use word_level::WordLevelFast;

/// One document after tokenization and truncation: its token ids (their strings are in the
/// encoder's [`Vocabulary`]).
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedText {
    pub ids: Vec<i64>,
    /// Each token's characters in the text (counted in Unicode scalar values, as Python and
    /// SQL count them), where the tokenizer says: the fast path does, the crate's path not.
    pub spans: Option<Vec<Range<usize>>>,
    /// The document had more tokens than the limit and was cut.
    pub truncated: bool,
}

/// A `tokenizer.json` plus the package's token limit.
#[derive(Clone)]
pub struct TextEncoder {
    tokenizer: Tokenizer,
    /// The fast path, when the tokenizer is one it recognises (see [`WordLevelFast`]).
    fast: Option<Arc<WordLevelFast>>,
    vocabulary: Arc<Vocabulary>,
    max_tokens: usize,
}

impl TextEncoder {
    pub fn new(tokenizer: Tokenizer, max_tokens: usize) -> Self {
        let fast = WordLevelFast::recognise(&tokenizer).map(Arc::new);
        let vocabulary = Arc::new(Vocabulary::of(&tokenizer));
        Self { tokenizer, fast, vocabulary, max_tokens }
    }

    /// Only the `tokenizers` crate, never the fast path: the reference the fast path is
    /// tested against.
    pub fn without_fast_path(tokenizer: Tokenizer, max_tokens: usize) -> Self {
        let vocabulary = Arc::new(Vocabulary::of(&tokenizer));
        Self { tokenizer, fast: None, vocabulary, max_tokens }
    }

    /// Whether texts go through [`WordLevelFast`] rather than the `tokenizers` crate.
    pub fn has_fast_path(&self) -> bool {
        self.fast.is_some()
    }

    /// Whether each token's place in the text can stand for its string (the output's
    /// `token_spans`): the fast path gives the places, and reading a word back as its
    /// lower-cased characters, or `[UNK]`, is what it does.
    pub fn gives_token_spans(&self) -> bool {
        self.fast.as_ref().is_some_and(|fast| {
            self.vocabulary.token(i64::from(fast.unknown_id())) == Some(crate::output::token_spans::UNKNOWN_TOKEN)
        })
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

    pub fn vocabulary(&self) -> &Arc<Vocabulary> {
        &self.vocabulary
    }

    /// Encodes documents: on this thread through the fast path, which outruns inference
    /// many times over on one core (and so never waits behind inference for rayon's
    /// workers); otherwise in parallel through the crate.
    pub fn encode_batch(&self, texts: &[&str]) -> anyhow::Result<Vec<EncodedText>> {
        self.encode_batch_up_to(texts, self.max_tokens, 1)
    }

    /// [`TextEncoder::encode_batch`], keeping up to `keep` tokens of each text rather than
    /// the token limit (for windows over long documents), the fast path split over `threads`
    /// threads of its own. More than one is for when inference leaves the cores free (a GPU):
    /// one thread then caps the run (RESULTS.md, #14). Not rayon's pool: there, inference's
    /// workers wait on the GPU's one session, and tokenization would wait behind them.
    pub fn encode_batch_up_to(&self, texts: &[&str], keep: usize, threads: usize) -> anyhow::Result<Vec<EncodedText>> {
        if let Some(fast) = &self.fast {
            let encode = |texts: &[&str]| texts.iter().map(|text| fast.encode(text, keep)).collect::<Vec<_>>();
            // Below this many texts per thread, starting a thread costs more than it saves.
            const LEAST_PER_THREAD: usize = 64;
            let threads = threads.clamp(1, texts.len().div_ceil(LEAST_PER_THREAD).max(1));
            if threads == 1 {
                return Ok(encode(texts));
            }
            return std::thread::scope(|scope| {
                let parts: Vec<_> =
                    texts.chunks(texts.len().div_ceil(threads)).map(|part| scope.spawn(move || encode(part))).collect();
                let mut encoded = Vec::with_capacity(texts.len());
                for part in parts {
                    encoded.extend(part.join().map_err(|_| anyhow::anyhow!("a tokenizer thread panicked"))?);
                }
                Ok(encoded)
            });
        }
        // Not `encode_batch_fast`: it was no faster on IMDB (tokenizers 0.23). The crate fans
        // out over rayon.
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), false)
            .map_err(|e| anyhow::anyhow!("tokenization failed: {e}"))?;
        Ok(encodings
            .into_iter()
            .map(|encoding| EncodedText {
                ids: encoding.get_ids().iter().take(keep).map(|&id| i64::from(id)).collect(),
                spans: None,
                truncated: encoding.len() > keep,
            })
            .collect())
    }
}

/// Sentence length cap when a hierarchical manifest does not give one.
pub const DEFAULT_SENTENCE_WORDS: usize = 50;

/// Tokens that end a sentence when a run of them is followed by another token.
const SENTENCE_END: [&str; 3] = [".", "!", "?"];

/// Cuts a document's tokens into sentences for hierarchical models and returns each
/// sentence's length. A sentence ends after a run of `.`, `!` or `?` (so `!!!` and `...`
/// stay with the sentence they close), and a sentence longer than `max_words` is cut into
/// pieces of at most `max_words`, which bounds the padded `[sentences, words]` input.
/// Splitting the tokenizer's own output keeps the flat token list, and so the `tokens`
/// column, identical to the flat layout's.
pub fn sentence_lengths<S: AsRef<str>>(tokens: &[S], max_words: usize) -> Vec<usize> {
    let max_words = max_words.max(1);
    let mut lengths = Vec::new();
    let mut current = 0;
    for (i, token) in tokens.iter().enumerate() {
        current += 1;
        let ends_here = SENTENCE_END.contains(&token.as_ref())
            && tokens.get(i + 1).is_some_and(|next| !SENTENCE_END.contains(&next.as_ref()));
        if ends_here || current == max_words {
            lengths.push(current);
            current = 0;
        }
    }
    if current > 0 {
        lengths.push(current);
    }
    lengths
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(text: &str) -> Vec<String> {
        text.split(' ').map(str::to_owned).collect()
    }

    #[test]
    fn sentences_end_after_runs_of_final_punctuation() {
        assert_eq!(sentence_lengths(&tokens("great film . loved it ! ! ! why ?"), 50), vec![3, 5, 2]);
        assert_eq!(sentence_lengths(&tokens("no ending punctuation"), 50), vec![3]);
        assert_eq!(sentence_lengths(&tokens(". . ."), 50), vec![3]);
    }

    #[test]
    fn long_sentences_are_cut_at_the_word_limit() {
        assert_eq!(sentence_lengths(&tokens("a b c d e f g ."), 3), vec![3, 3, 2]);
        assert_eq!(sentence_lengths::<&str>(&[], 3), Vec::<usize>::new());
    }
}

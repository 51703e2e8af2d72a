//! A fast path for the word-level tokenizers `pipeline train` builds (`training::data::vocabulary`):
//! `<br>` tags replaced by spaces, lower-casing, BERT's pre-tokenizer (split on whitespace,
//! each punctuation character its own token), a word-level vocabulary with `[UNK]`, and the
//! special tokens `[PAD]` and `[UNK]` matched in the raw text.
//!
//! The `tokenizers` crate tracks offsets and alignments through every step; we need only each
//! token's place in the text (in characters, for the output's `token_spans`), and it
//! tokenizes IMDB at about a tenth of the speed this does (measured: README,
//! "Tokenization"). This is the one place we replace a crate by hand-written code, so it takes
//! over only from a `tokenizer.json` whose every part it recognises ([`WordLevelFast::recognise`]),
//! and it follows the crate's own definitions: `char::to_lowercase` per character,
//! `char::is_whitespace`, punctuation as ASCII punctuation or Unicode category P*
//! (`unicode_categories`, as the crate uses), and the same regular expression. A property test
//! and a differential test over all of IMDB hold it to the crate's ids and tokens.

use std::ops::Range;

use foldhash::HashMap;
use regex::Regex;
use serde_json::{Value, json};
use tokenizers::Tokenizer;
use unicode_categories::UnicodeCategories;

use super::EncodedText;

/// The one normalizer we recognise, as `tokenizer.json` spells it.
const LINE_BREAK_PATTERN: &str = r"<br\s*/?>";

pub struct WordLevelFast {
    vocab: Vocabulary,
    /// The id of words not in the vocabulary.
    unknown: u32,
    /// Special tokens matched in the raw text, before normalization.
    specials: Vec<(String, u32)>,
    line_break: Regex,
}

impl WordLevelFast {
    /// The fast path for `tokenizer`, or `None` when any part of it is not exactly what
    /// `pipeline train` writes (the crate then does the work).
    pub fn recognise(tokenizer: &Tokenizer) -> Option<Self> {
        let spec = serde_json::to_value(tokenizer).ok()?;
        let normalizer = json!({
            "type": "Sequence",
            "normalizers": [
                {"type": "Replace", "pattern": {"Regex": LINE_BREAK_PATTERN}, "content": " "},
                {"type": "Lowercase"}
            ]
        });
        let expected = [
            ("normalizer", normalizer),
            ("pre_tokenizer", json!({"type": "BertPreTokenizer"})),
            ("post_processor", Value::Null),
            ("truncation", Value::Null),
            ("padding", Value::Null),
        ];
        if expected.iter().any(|(key, value)| spec.get(key) != Some(value)) {
            return None;
        }
        let model = spec.get("model")?;
        if model.get("type")? != "WordLevel" {
            return None;
        }
        let vocab: HashMap<String, u32> = serde_json::from_value(model.get("vocab")?.clone()).ok()?;
        let unknown = *vocab.get(model.get("unk_token")?.as_str()?)?;
        let vocab = Vocabulary::new(vocab);
        let mut specials = Vec::new();
        for added in spec.get("added_tokens")?.as_array()? {
            let flag = |name: &str| added.get(name).and_then(Value::as_bool);
            let plain = flag("special") == Some(true)
                && flag("normalized") == Some(false)
                && flag("single_word") == Some(false)
                && flag("lstrip") == Some(false)
                && flag("rstrip") == Some(false);
            let content = added.get("content")?.as_str()?.to_owned();
            let id = u32::try_from(added.get("id")?.as_u64()?).ok()?;
            if !plain || content.is_empty() {
                return None;
            }
            specials.push((content, id));
        }
        let line_break = Regex::new(LINE_BREAK_PATTERN).ok()?;
        Some(Self { vocab, unknown, specials, line_break })
    }

    /// The id of words not in the vocabulary.
    pub fn unknown_id(&self) -> u32 {
        self.unknown
    }

    /// Encodes one text, keeping the first `max_tokens` tokens, each with the characters of
    /// `text` it was read from.
    pub fn encode(&self, text: &str, max_tokens: usize) -> EncodedText {
        let mut out = Output { ids: Vec::new(), spans: Vec::new(), limit: max_tokens, truncated: false, at: 0 };
        // Where each special token next occurs, searched again only once passed, so a text
        // full of special tokens costs one scan per special token, not one per occurrence.
        let mut next: Vec<Option<usize>> =
            self.specials.iter().map(|(content, _)| text.find(content.as_str())).collect();
        let mut position = 0;
        while !out.truncated {
            for (found, (content, _)) in next.iter_mut().zip(&self.specials) {
                if found.is_some_and(|at| at < position) {
                    *found = text.get(position..).and_then(|rest| rest.find(content.as_str())).map(|at| at + position);
                }
            }
            // The leftmost occurrence, the longest of those starting there.
            let leftmost = next
                .iter()
                .zip(&self.specials)
                .filter_map(|(found, (content, id))| found.map(|at| (at, at + content.len(), *id)))
                .min_by_key(|&(start, end, _)| (start, std::cmp::Reverse(end)));
            match leftmost {
                Some((start, end, id)) => {
                    self.encode_words(text.get(position..start).unwrap_or_default(), &mut out);
                    let special = text.get(start..end).unwrap_or_default().chars().count();
                    out.push(id, out.at..out.at + special);
                    out.at += special;
                    position = end;
                }
                None => {
                    self.encode_words(text.get(position..).unwrap_or_default(), &mut out);
                    break;
                }
            }
        }
        EncodedText { ids: out.ids, spans: Some(out.spans), truncated: out.truncated }
    }

    /// Normalizes and pre-tokenizes a stretch of text without special tokens, and looks up
    /// each word. A line break tag separates words as a space does.
    fn encode_words(&self, text: &str, out: &mut Output) {
        let mut last = 0;
        for line_break in self.line_break.find_iter(text) {
            self.encode_plain(text.get(last..line_break.start()).unwrap_or_default(), out);
            out.at += line_break.as_str().chars().count();
            last = line_break.end();
        }
        self.encode_plain(text.get(last..).unwrap_or_default(), out);
    }

    /// [`Self::encode_words`] on a stretch without line break tags. ASCII characters, most of
    /// any English corpus, take a shortcut with the same result: `char::is_whitespace` and
    /// `to_lowercase` agree with their ASCII versions there.
    fn encode_plain(&self, text: &str, out: &mut Output) {
        let mut word = Word::default();
        for c in text.chars() {
            // Past the limit, nothing more is kept, so the characters need not be counted.
            if out.truncated {
                return;
            }
            let at = out.at;
            out.at += 1;
            if c.is_ascii() {
                let lower = c.to_ascii_lowercase();
                if matches!(lower, ' ' | '\t' | '\n' | '\x0b' | '\x0c' | '\r') {
                    self.flush(&mut word, out);
                } else if lower.is_ascii_punctuation() {
                    self.flush(&mut word, out);
                    self.look_up(lower.encode_utf8(&mut [0; 4]), at..at + 1, out);
                } else {
                    word.push(lower, at);
                }
            } else {
                for lower in c.to_lowercase() {
                    if lower.is_whitespace() {
                        self.flush(&mut word, out);
                    } else if is_bert_punctuation(lower) {
                        self.flush(&mut word, out);
                        self.look_up(lower.encode_utf8(&mut [0; 4]), at..at + 1, out);
                    } else {
                        word.push(lower, at);
                    }
                }
            }
        }
        self.flush(&mut word, out);
    }

    fn flush(&self, word: &mut Word, out: &mut Output) {
        if !word.text.is_empty() {
            self.look_up(&word.text, word.start..word.end, out);
            word.text.clear();
        }
    }

    fn look_up(&self, word: &str, span: Range<usize>, out: &mut Output) {
        out.push(self.vocab.get(word).unwrap_or(self.unknown), span);
    }
}

/// The vocabulary, keyed for speed: a word of up to 15 bytes (nearly every word) is looked up
/// as one 128-bit number, its bytes and its length, so a look-up neither follows a pointer to
/// the key's text nor calls `memcmp`; the two were a sixth of the fast tier's time.
struct Vocabulary {
    short: HashMap<u128, u32>,
    long: HashMap<String, u32>,
}

impl Vocabulary {
    fn new(words: HashMap<String, u32>) -> Self {
        let (mut short, mut long) = (HashMap::default(), HashMap::default());
        for (word, id) in words {
            if let Some(key) = short_key(&word) {
                short.insert(key, id);
            } else {
                long.insert(word, id);
            }
        }
        Self { short, long }
    }

    fn get(&self, word: &str) -> Option<u32> {
        match short_key(word) {
            Some(key) => self.short.get(&key),
            None => self.long.get(word),
        }
        .copied()
    }
}

/// A word of up to 15 bytes as its bytes, then zeros, then its length in the last byte (so a
/// word ending in NUL characters differs from the shorter one).
fn short_key(word: &str) -> Option<u128> {
    let bytes = word.as_bytes();
    let mut key = [0u8; 16];
    key.get_mut(..bytes.len()).filter(|_| bytes.len() < 16)?.copy_from_slice(bytes);
    key[15] = bytes.len() as u8;
    Some(u128::from_le_bytes(key))
}

/// A word being read: its lower-cased text and the characters of the text it came from.
#[derive(Default)]
struct Word {
    text: String,
    start: usize,
    end: usize,
}

impl Word {
    /// Adds `c`, read from the text's character `at`.
    fn push(&mut self, c: char, at: usize) {
        if self.text.is_empty() {
            self.start = at;
        }
        self.text.push(c);
        self.end = at + 1;
    }
}

/// The tokens so far, up to the limit.
struct Output {
    ids: Vec<i64>,
    /// Each token's characters in the text.
    spans: Vec<Range<usize>>,
    limit: usize,
    /// A token beyond the limit was seen: the text is cut and the rest need not be read.
    truncated: bool,
    /// How many characters of the text have been read.
    at: usize,
}

impl Output {
    fn push(&mut self, id: u32, span: Range<usize>) {
        if self.ids.len() == self.limit {
            self.truncated = true;
            return;
        }
        self.ids.push(i64::from(id));
        self.spans.push(span);
    }
}

/// BERT's punctuation, as the tokenizers crate defines it.
fn is_bert_punctuation(c: char) -> bool {
    c.is_ascii_punctuation() || c.is_punctuation()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_keys_tell_apart_words_that_share_their_bytes() {
        let words = ["a", "a\0", "\0", "", "fifteen_bytes__", "sixteen_bytes___", "sixteen_bytes__x"];
        let vocab = Vocabulary::new(words.iter().enumerate().map(|(id, w)| (w.to_string(), id as u32)).collect());
        for (id, word) in words.iter().enumerate() {
            assert_eq!(vocab.get(word), Some(id as u32), "{word:?}");
        }
        assert_eq!((vocab.short.len(), vocab.long.len()), (5, 2));
        for unknown in ["a\0\0", "b", "fifteen_bytes_", "sixteen_bytes___x", "sixteen_bytes__"] {
            assert_eq!(vocab.get(unknown), None, "{unknown:?}");
        }
    }
}

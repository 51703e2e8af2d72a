//! `token_spans`: where each token is in the text, in place of the token strings when the text
//! is in the output too (#50: the strings repeated the text and were a sixth of the default
//! output). One 64-bit whole number per token, so the list lines up with `contribution` and
//! `attention_summary`: `gap × 2³² + length`, where
//! - the gap is the characters from the end of the token before (or the start of the text);
//! - the length is the token's characters;
//!
//! and the whole number is negative for a word the model does not know, which it read as
//! [`UNKNOWN_TOKEN`]. Gaps and lengths stay small, so a page's values repeat and its
//! dictionary keeps them to under 5 bits a token (RESULTS.md, #50).
//!
//! A token reads back as its characters lower-cased one by one, which is what the word-level
//! tokenizers of `pipeline train` read; a special token written in the text (`[PAD]`) stays as
//! written, as they match it. Characters are Unicode scalar values, as Python and SQL count them.

use std::ops::Range;

use anyhow::bail;
use arrow::datatypes::{DataType, Schema};

use super::columns::{TOKEN_SPANS, TOKENS};
use super::keys::TOKEN_SPANS_TEXT;
use crate::explain::is_special_token;

/// The text column whose characters `schema`'s `token_spans` count, where a file holds spans
/// in place of `tokens` strings: `Ok(None)` where it holds no spans (or the strings too),
/// `Err` saying why its spans cannot be read. The one rule behind the report's, the SQL
/// tables' and `--where`'s `tokens`.
pub fn text_column_of(schema: &Schema) -> Result<Option<String>, String> {
    let has = |name: &str| schema.index_of(name).is_ok();
    if !has(TOKEN_SPANS.name) || has(TOKENS.name) {
        return Ok(None);
    }
    let Some(text) = schema.metadata().get(TOKEN_SPANS_TEXT) else {
        return Err(format!(
            "no `{TOKEN_SPANS_TEXT}` key names the text column they count in (a copy that lost the Parquet \
             metadata?); `tokens(text, token_spans)` in `pipeline sql` reads them with the text column named"
        ));
    };
    match schema.field_with_name(text) {
        Err(_) => Err(format!("their text column `{text}` ({TOKEN_SPANS_TEXT}) is not in the file")),
        Ok(field) if matches!(field.data_type(), DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View) => {
            Ok(Some(text.clone()))
        }
        Ok(field) => Err(format!("their text column `{text}` ({TOKEN_SPANS_TEXT}) is {}, not text", field.data_type())),
    }
}

/// How the tokenizer spells a word it does not know.
pub const UNKNOWN_TOKEN: &str = "[UNK]";

/// Where a value's length ends and its gap begins.
const GAP_SHIFT: u32 = 32;

/// The column's values for one document: `spans` in characters, `unknown(i)` whether token
/// `i` is one the model does not know.
pub fn encode(spans: &[Range<usize>], unknown: impl Fn(usize) -> bool) -> anyhow::Result<Vec<i64>> {
    let mut values = Vec::with_capacity(spans.len());
    let mut end = 0;
    for (i, span) in spans.iter().enumerate() {
        let (Some(gap), Some(length)) = (span.start.checked_sub(end), span.end.checked_sub(span.start)) else {
            bail!("token spans out of order: {span:?} after a token ending at character {end}");
        };
        // Each below 2³¹, so the value and its negation fit.
        let (Ok(gap), Ok(length)) = (i32::try_from(gap), i32::try_from(length)) else {
            bail!("a token or the gap before it is over 2³¹ characters long");
        };
        let value = (i64::from(gap) << GAP_SHIFT) | i64::from(length);
        values.push(if unknown(i) { -value } else { value });
        end = span.end;
    }
    Ok(values)
}

/// The tokens of `text` that `values` (one document's `token_spans`) point at.
pub fn decode(text: &str, values: &[i64]) -> anyhow::Result<Vec<String>> {
    let mut chars = text.chars();
    let mut at = 0usize;
    let mut tokens = Vec::with_capacity(values.len());
    for &value in values {
        let magnitude = value.unsigned_abs();
        let (Ok(gap), Ok(width)) = (usize::try_from(magnitude >> GAP_SHIFT), usize::try_from(magnitude & 0xFFFF_FFFF))
        else {
            bail!("token_spans holds {value}, which no token's place gives");
        };
        let mut take = |count: usize| -> anyhow::Result<String> {
            let taken: String = chars.by_ref().take(count).collect();
            let got = taken.chars().count();
            at += got;
            if got < count {
                bail!(
                    "token_spans reach past the end of the text (character {}, of {at}): give the text column the \
                     output was written from",
                    at - got + count
                );
            }
            Ok(taken)
        };
        if width == 0 {
            bail!("token_spans holds a token of no characters ({value}); every token has at least one");
        }
        take(gap)?;
        let word = take(width)?;
        tokens.push(if value < 0 {
            UNKNOWN_TOKEN.to_owned()
        } else if is_special_token(&word) {
            word
        } else {
            // Character by character, as the tokenizer lower-cases (not `str::to_lowercase`,
            // whose final sigma depends on the next character).
            word.chars().flat_map(char::to_lowercase).collect()
        });
    }
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_read_back_as_the_lower_cased_words_and_unknown_words_as_unk() {
        let text = "A Zanuck film<br />was NOT bad... [PAD]";
        let spans = [0..1, 2..8, 9..13, 19..22, 23..26, 27..30, 30..31, 31..32, 32..33, 34..39];
        let values = encode(&spans, |i| i == 1).expect("in order");
        assert_eq!(&values[..3], &[1, -((1 << 32) + 6), (1 << 32) + 4]);
        assert_eq!(
            decode(text, &values).expect("decodes"),
            ["a", "[UNK]", "film", "was", "not", "bad", ".", ".", ".", "[PAD]"]
        );
    }

    #[test]
    fn characters_count_as_python_counts_them() {
        let text = "Ünïcödé Σ café";
        let values = encode(&[0..7, 8..9, 10..14], |_| false).expect("in order");
        assert_eq!(decode(text, &values).expect("decodes"), ["ünïcödé", "σ", "café"]);
    }

    #[test]
    fn spans_that_do_not_fit_the_text_are_errors_not_panics() {
        let short = decode("tiny", &[4, (1 << 32) + 3]).expect_err("past the end");
        assert!(short.to_string().contains("past the end of the text"), "{short}");
        assert!(decode("tiny", &[i64::MIN]).is_err(), "a value no span gives");
        assert!(decode("tiny", &[0]).is_err(), "a token of no characters");
        assert!(encode(&[3..4, 0..1], |_| false).is_err(), "out of order");
    }
}

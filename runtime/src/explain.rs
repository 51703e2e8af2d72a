//! Reading explanations: tokens ranked by the attention a group of documents gave them, and
//! the shading of heat maps. SQL's `top_tokens` / `attention_html` family and the report both
//! draw from here, so a token ranks and a weight shades the same in a query as on a page.

use std::collections::HashMap;

use arrow::array::{Float32Array, StringArray};

/// What a group of rows gave one token: the attention on its occurrences, and the attention
/// those occurrences would have had if every row spread its weight evenly.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct TokenStats {
    pub mass: f64,
    pub even_mass: f64,
}

impl TokenStats {
    /// How much more attention the token drew than an even spread would give it, smoothed
    /// toward 1 by one row's worth of attention (a row's weights sum to 1), so that a token
    /// seen a few times cannot outrank one the model keeps coming back to:
    /// `(mass + 1) / (even_mass + 1)`.
    pub fn distinctiveness(self) -> f64 {
        (self.mass + 1.0) / (self.even_mass + 1.0)
    }
}

/// How tokens are ranked over a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ranking {
    /// By attention mass: frequent tokens rise.
    Mass,
    /// By [`TokenStats::distinctiveness`]: tokens attended beyond their frequency rise.
    Distinctive,
}

/// Attention per distinct token over a group of rows. Null tokens and null or non-finite
/// weights are left out.
#[derive(Debug, Default, Clone)]
pub struct TokenAttention {
    stats: HashMap<String, TokenStats>,
}

impl TokenAttention {
    pub fn add(&mut self, token: &str, stats: TokenStats) {
        if !(stats.mass.is_finite() && stats.even_mass.is_finite()) {
            return;
        }
        match self.stats.get_mut(token) {
            Some(total) => {
                total.mass += stats.mass;
                total.even_mass += stats.even_mass;
            }
            None => {
                self.stats.insert(token.to_owned(), stats);
            }
        }
    }

    pub fn add_row(&mut self, tokens: &StringArray, weights: &Float32Array) {
        let pairs = || {
            tokens.iter().zip(weights.iter()).filter_map(|pair| match pair {
                (Some(token), Some(weight)) if weight.is_finite() => Some((token, f64::from(weight))),
                _ => None,
            })
        };
        let (count, total) = pairs().fold((0usize, 0.0), |(n, sum), (_, w)| (n + 1, sum + w));
        // Each row is one document's worth of attention: renormalised to sum to 1, so that
        // compact output's bytes (relative to the heaviest) and top-k rows count like floats.
        let scale = if total > 0.0 { 1.0 / total } else { 0.0 };
        let even = if count == 0 { 0.0 } else { total * scale / count as f64 };
        for (token, weight) in pairs() {
            self.add(token, TokenStats { mass: weight * scale, even_mass: even });
        }
    }

    pub fn entries(&self) -> impl Iterator<Item = (&str, TokenStats)> {
        self.stats.iter().map(|(t, s)| (t.as_str(), *s))
    }

    pub fn len(&self) -> usize {
        self.stats.len()
    }

    pub fn is_empty(&self) -> bool {
        self.stats.is_empty()
    }

    /// The `k` tokens ranked first, best first; ties go to the token that sorts first, so
    /// results do not depend on hashing or on how rows were partitioned.
    pub fn top(&self, k: usize, ranking: Ranking) -> Vec<&str> {
        self.top_of(k, ranking, |_| true)
    }

    /// [`Self::top`] of the text's own words: the tokens a tokenizer adds ([`is_special_token`],
    /// `[UNK]` above all, which stands for every rare word at once) are left out.
    pub fn top_words(&self, k: usize, ranking: Ranking) -> Vec<&str> {
        self.top_of(k, ranking, |token| !is_special_token(token))
    }

    fn top_of(&self, k: usize, ranking: Ranking, keep: impl Fn(&str) -> bool) -> Vec<&str> {
        let score = |stats: TokenStats| match ranking {
            Ranking::Mass => stats.mass,
            Ranking::Distinctive => stats.distinctiveness(),
        };
        let mut ranked: Vec<(&str, f64)> =
            self.entries().filter(|(token, _)| keep(token)).map(|(t, s)| (t, score(s))).collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        ranked.into_iter().take(k).map(|(token, _)| token).collect()
    }

    /// Bytes held, for DataFusion's memory accounting.
    pub fn size(&self) -> usize {
        self.stats.capacity() * std::mem::size_of::<(String, TokenStats)>()
            + self.stats.keys().map(String::capacity).sum::<usize>()
    }
}

/// A token a tokenizer adds rather than a word of the text: `[UNK]`, `[PAD]`, `[CLS]` (upper
/// case in brackets), or `<unk>`, `<s>`, `</s>` (lower case in angle brackets).
pub fn is_special_token(token: &str) -> bool {
    let inside = |open: char, close: char, case: fn(&char) -> bool| {
        token
            .strip_prefix(open)
            .and_then(|rest| rest.strip_suffix(close))
            .is_some_and(|name| !name.is_empty() && name.chars().all(|c| case(&c) || c == '_' || c == '/'))
    };
    inside('[', ']', char::is_ascii_uppercase) || inside('<', '>', char::is_ascii_lowercase)
}

/// A heat map's colour.
pub type Hue = (u8, u8, u8);

/// Attention weights: a neutral grey, so that the two push hues keep their meaning wherever
/// attention is drawn beside them (a token's shade says how much it was looked at, never which
/// way it pushed).
pub const ATTENTION_HUE: Hue = (110, 110, 110);
/// A positive push: towards the class the pushes point at.
pub const TOWARDS_HUE: Hue = (40, 110, 220);
/// A negative push: against that class (with two, towards the other).
pub const AGAINST_HUE: Hue = (235, 130, 30);
/// A hierarchical model's sentence weights.
pub const SENTENCE_HUE: Hue = (60, 90, 200);

/// The darkest shade, so that the darkest token's text stays readable.
const DARKEST: f32 = 0.85;

/// `value` as a share of `largest` (0–1, or −1–1 for signed values); 0 where either is not
/// a positive finite number.
pub fn relative(value: f32, largest: f32) -> f32 {
    // Adding +0 turns −0 (a zero push turned round) into 0, which is not written "-0.00".
    if largest > 0.0 && value.is_finite() { (value / largest).clamp(-1.0, 1.0) + 0.0 } else { 0.0 }
}

/// The CSS colour of a weight, relative to the heaviest of its document.
pub fn weight_colour(weight: f32, heaviest: f32, hue: Hue) -> String {
    rgba(hue, relative(weight, heaviest).max(0.0))
}

/// The CSS colour of a signed push, relative to the strongest of its document: blue where it
/// is positive, orange where negative.
pub fn push_colour(push: f32, strongest: f32) -> String {
    let share = relative(push, strongest);
    rgba(if share < 0.0 { AGAINST_HUE } else { TOWARDS_HUE }, share.abs())
}

/// The heaviest finite weight (0 when none is positive).
pub fn heaviest(weights: impl IntoIterator<Item = f32>) -> f32 {
    weights.into_iter().filter(|w| w.is_finite()).fold(0.0, f32::max)
}

/// The strongest finite push either way.
pub fn strongest(pushes: impl IntoIterator<Item = f32>) -> f32 {
    pushes.into_iter().filter(|p| p.is_finite()).fold(0.0, |m, p| m.max(p.abs()))
}

fn rgba((r, g, b): Hue, share: f32) -> String {
    format!("rgba({r}, {g}, {b}, {:.3})", DARKEST * share)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(tokens: &[&str], weights: &[f32]) -> (StringArray, Float32Array) {
        (StringArray::from(tokens.to_vec()), Float32Array::from(weights.to_vec()))
    }

    #[test]
    fn repeated_tokens_add_up_and_ties_sort_by_token() {
        let mut attention = TokenAttention::default();
        let (tokens, weights) = row(&["good", "the", "good", "bad", "x"], &[0.2, 0.1, 0.2, 0.1, f32::NAN]);
        attention.add_row(&tokens, &weights);
        assert_eq!(attention.top(10, Ranking::Mass), vec!["good", "bad", "the"]);
        assert_eq!(attention.top(1, Ranking::Mass), vec!["good"]);
        assert_eq!(attention.len(), 3);
    }

    #[test]
    fn distinctive_ranking_discounts_frequency_and_rare_tokens() {
        let mut attention = TokenAttention::default();
        // "the" is everywhere and draws the most mass; "great" draws far more than its share.
        for _ in 0..50 {
            let (tokens, weights) =
                row(&["the", "the", "the", "the", "great", "plot"], &[0.15, 0.15, 0.15, 0.15, 0.3, 0.1]);
            attention.add_row(&tokens, &weights);
        }
        // Seen once, with almost all of its row's attention.
        let (tokens, weights) = row(&["gawd", "the", "the", "the", "the"], &[0.96, 0.01, 0.01, 0.01, 0.01]);
        attention.add_row(&tokens, &weights);
        assert_eq!(attention.top(1, Ranking::Mass), vec!["the"]);
        assert_eq!(attention.top(3, Ranking::Distinctive), vec!["great", "gawd", "the"]);
        let great = attention.entries().find(|(t, _)| *t == "great").map(|(_, s)| s);
        // 50 occurrences at 0.3 against an even 1/6: (15 + 1) / (50/6 + 1), up to f32 rounding.
        assert!((great.expect("great").distinctiveness() - 16.0 / (50.0 / 6.0 + 1.0)).abs() < 1e-5);
    }

    #[test]
    fn shades_are_relative_to_the_heaviest_and_signed_pushes_take_two_hues() {
        assert_eq!(weight_colour(0.5, 0.5, ATTENTION_HUE), "rgba(110, 110, 110, 0.850)");
        assert_eq!(weight_colour(f32::NAN, 0.5, ATTENTION_HUE), "rgba(110, 110, 110, 0.000)");
        assert!(["[UNK]", "[PAD]", "[CLS]", "<unk>", "</s>"].iter().all(|t| is_special_token(t)));
        assert!(["[", "[]", "[unk]", "<b>x", "(UNK)", "not", "?", "[a]"].iter().all(|t| !is_special_token(t)));
        assert_eq!(push_colour(-0.25, 0.5), "rgba(235, 130, 30, 0.425)");
        assert_eq!(push_colour(0.5, 0.5), "rgba(40, 110, 220, 0.850)");
        assert_eq!(heaviest([0.1, f32::INFINITY, 0.3]), 0.3);
        assert_eq!(strongest([0.1, -0.4, f32::NAN]), 0.4);
        assert!(relative(-0.0, 1.0).is_sign_positive(), "a zero push is 0, not -0");
    }
}

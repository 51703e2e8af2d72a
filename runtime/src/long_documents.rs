//! Documents longer than the model's token limit: cut at the limit (`truncate`), keep their
//! start and end (`head-tail`), or classify overlapping windows of at most the limit's width
//! and combine what the windows said (`windows`), with attention over the whole document.

use batch_io::choice::Choice;
use std::fmt;
use std::ops::Range;

use anyhow::{Context, bail};

use crate::output::{DocumentPrediction, SentenceAttention};
use crate::text::EncodedText;

/// Tokens read of one document in `head-tail` and `windows` modes; past this even windows
/// cut (a 100,000-token document is a short novel, and costs 400 windows of 400 tokens).
pub const MAX_DOCUMENT_TOKENS: usize = 100_000;

/// Windows of one document at most: past this the stride widens, so that a small
/// `--long-document-stride` on a 100,000-token document cannot mean 100,000 windows (which
/// ran for minutes at 2 GB before this bound).
pub const MAX_WINDOWS: usize = 1_000;

/// The stride without `--long-document-stride`: `width`, windows that do not overlap. On
/// IMDB test they read 1.17 times the tokens of the first 400 of each review, against 1.43
/// with half the width, at the same accuracy (0.9150 against 0.9135, the default model; #34).
pub fn default_stride(width: usize) -> usize {
    width
}

/// The stride for a document of `tokens` tokens: `stride`, or wider where that would make
/// more than [`MAX_WINDOWS`] windows of `width`.
pub fn bounded_stride(tokens: usize, width: usize, stride: usize) -> usize {
    if tokens <= width {
        return stride;
    }
    stride.max((tokens - width).div_ceil(MAX_WINDOWS - 1))
}

/// How the windows' probabilities become the document's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Aggregate {
    /// The mean over windows.
    #[default]
    Mean,
    /// Each class's largest probability over windows, renormalised to sum to one.
    Max,
}

/// What happens to a document longer than the token limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LongDocuments {
    /// Keep the first `limit` tokens.
    Truncate,
    /// Keep the first quarter and the last three quarters of the limit: reviews tend to give
    /// their verdict at the end (Sun et al., 2019, found head 128 + tail 382 best of 512).
    HeadTail,
    /// Windows of at most `limit` tokens, at most `stride` apart (default the limit: windows
    /// that do not overlap), the last ending at the document's end; see [`windows`].
    Windows { stride: Option<usize>, aggregate: Aggregate },
}

/// The choice of [`LongDocuments`] without its settings, as a flag or an argument names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Classify windows of at most the token limit and combine them.
    #[default]
    Windows,
    /// Keep the first quarter and the last three quarters of the token limit.
    HeadTail,
    /// Keep the first tokens up to the limit.
    Truncate,
}

impl Choice for Aggregate {
    const CHOICES: &'static [(Self, &'static str, &'static str)] = &[
        (Self::Mean, "mean", "the mean over windows"),
        (Self::Max, "max", "each class's largest probability over windows, renormalised to sum to one"),
    ];
}

impl Choice for Mode {
    const CHOICES: &'static [(Self, &'static str, &'static str)] = &[
        (
            Self::Windows,
            "windows",
            "classify windows of at most the token limit and combine them (up to 100,000 tokens; past that a document is cut and marked truncated)",
        ),
        (Self::HeadTail, "head-tail", "keep the first quarter and the last three quarters of the token limit"),
        (Self::Truncate, "truncate", "keep the first tokens up to the limit"),
    ];
}

impl Default for LongDocuments {
    fn default() -> Self {
        LongDocuments::Windows { stride: None, aggregate: Aggregate::Mean }
    }
}

impl fmt::Display for LongDocuments {
    /// As the run's fingerprint and the output's metadata record it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Truncate => f.write_str("truncate"),
            Self::HeadTail => f.write_str("head-tail"),
            Self::Windows { stride, aggregate } => {
                let aggregate = aggregate.name();
                // `even`: the windows are as wide as their count needs ([`windows`]); before
                // #34 every window was the limit's width and the default stride half of it,
                // so a dataset begun that way is not finished this way.
                match stride {
                    Some(stride) => write!(f, "windows(even, stride {stride}, {aggregate})"),
                    None => write!(f, "windows(even, no overlap, {aggregate})"),
                }
            }
        }
    }
}

impl LongDocuments {
    /// How many tokens of a document the encoder should keep, for a token limit of `limit`.
    pub fn tokens_to_read(self, limit: usize) -> usize {
        match self {
            Self::Truncate => limit,
            Self::HeadTail | Self::Windows { .. } => MAX_DOCUMENT_TOKENS.max(limit),
        }
    }

    /// The same choice with a stride equal to the default one written as the default, so that
    /// `--long-document-stride 400` and no flag, which read the same windows, are recorded
    /// alike (a dataset begun with one resumes with the other).
    pub fn normalised(self, limit: usize) -> Self {
        match self {
            Self::Windows { stride: Some(stride), aggregate } if stride == default_stride(limit) => {
                Self::Windows { stride: None, aggregate }
            }
            other => other,
        }
    }

    /// Checks the stride against the window width `limit`.
    pub fn check(self, limit: usize) -> anyhow::Result<()> {
        if let Self::Windows { stride: Some(stride), .. } = self
            && (stride == 0 || stride > limit)
        {
            bail!(
                "{}: give a stride from 1 to the token limit ({limit})",
                batch_io::spelling::option_with("long_document_stride", &stride.to_string())
            );
        }
        Ok(())
    }
}

/// The first quarter and the last three quarters of `limit` tokens of `ids`.
pub fn head_and_tail<T: Clone>(ids: &[T], limit: usize) -> Vec<T> {
    if ids.len() <= limit {
        return ids.to_vec();
    }
    let head = limit / 4;
    let tail = limit - head;
    let mut kept = Vec::with_capacity(limit);
    kept.extend_from_slice(ids.get(..head).unwrap_or_default());
    kept.extend_from_slice(ids.get(ids.len() - tail..).unwrap_or_default());
    kept
}

/// The windows that cover `tokens` tokens: as many as windows of `width` tokens `stride`
/// apart would need (the last ending at the end), each only as wide as that many need to
/// cover the document with neighbours still overlapping by `width - stride` tokens or more,
/// all equally wide and evenly spread. A 450-token document read 400 at a time with stride
/// 200 gets two windows of 325 tokens, not two of 400: on IMDB test the model reads 1.43
/// times the tokens of the first 400 of each review, not 1.52 (#34).
pub fn windows(tokens: usize, width: usize, stride: usize) -> Vec<Range<usize>> {
    if tokens <= width || width == 0 || stride == 0 {
        return std::iter::once(0..tokens).collect();
    }
    // A stride widened past the width (tiny widths, MAX_WINDOWS) reads as windows end to end.
    let stride = stride.min(width);
    let overlap = width - stride;
    let count = (tokens - overlap).div_ceil(stride);
    let span = (tokens + (count - 1) * overlap).div_ceil(count);
    let room = tokens - span;
    (0..count)
        .map(|i| {
            let start = i * room / (count - 1);
            start..start + span
        })
        .collect()
}

/// The document's prediction from its windows' (`(start, prediction)`, in any order): the
/// probabilities aggregated, each hop's attention spread back over the whole document (a
/// window's weights, divided by the number of windows, so each hop still sums to one), the
/// contributions spread back likewise (so they sum to the mean of the windows' centred
/// scores, whichever aggregate combines the probabilities), the embeddings averaged, and for hierarchical models each sentence of `sentence_lengths`
/// weighted by the attention its tokens got.
pub fn combine(
    mut windows: Vec<(usize, DocumentPrediction)>,
    whole: EncodedText,
    sentence_lengths: Option<Vec<usize>>,
    aggregate: Aggregate,
) -> anyhow::Result<DocumentPrediction> {
    let EncodedText { ids: token_ids, spans: token_spans, truncated } = whole;
    windows.sort_by_key(|(start, _)| *start);
    let count = windows.len();
    let first = windows.first().map(|(_, w)| w).context("a long document got no window back")?;
    let classes = first.probabilities.len();
    let mut probabilities = match aggregate {
        Aggregate::Mean => vec![0.0f32; classes],
        Aggregate::Max => vec![f32::NEG_INFINITY; classes],
    };
    let heads = first.attention.as_ref().map(Vec::len);
    let mut attention = heads.map(|heads| vec![vec![0.0f32; token_ids.len()]; heads]);
    let mut contribution = first.contribution.as_ref().map(|rows| vec![vec![0.0f32; token_ids.len()]; rows.len()]);
    let mut embedding = first.embedding.as_ref().map(|e| vec![0.0f32; e.len()]);
    let share = 1.0 / count as f32;
    for (start, window) in &windows {
        if window.probabilities.len() != classes {
            bail!("the windows of one document gave different numbers of probabilities");
        }
        for (total, &p) in probabilities.iter_mut().zip(&window.probabilities) {
            *total = match aggregate {
                Aggregate::Mean => *total + p * share,
                Aggregate::Max => total.max(p),
            };
        }
        if let (Some(total), Some(heads)) = (attention.as_mut(), &window.attention) {
            spread(total, heads, *start, share)?;
        }
        if let (Some(total), Some(rows)) = (contribution.as_mut(), &window.contribution) {
            spread(total, rows, *start, share)?;
        }
        if let (Some(total), Some(values)) = (embedding.as_mut(), &window.embedding) {
            for (t, v) in total.iter_mut().zip(values) {
                *t += v * share;
            }
        }
    }
    if aggregate == Aggregate::Max {
        let mass: f32 = probabilities.iter().sum();
        if mass > 0.0 {
            probabilities.iter_mut().for_each(|p| *p /= mass);
        }
    }
    let sentences = match (sentence_lengths, attention.as_ref().and_then(|a| a.first())) {
        (Some(lengths), Some(weights)) => {
            let mut sentence_weights = Vec::with_capacity(lengths.len());
            let mut at = 0;
            for &length in &lengths {
                sentence_weights.push(weights.get(at..at + length).map_or(0.0, |w| w.iter().sum()));
                at += length;
            }
            Some(SentenceAttention { lengths, weights: sentence_weights })
        }
        _ => None,
    };
    Ok(DocumentPrediction {
        probabilities,
        token_ids,
        token_spans,
        attention,
        contribution,
        embedding,
        sentences,
        truncated,
    })
}

/// Adds a window's rows (hops or classes) starting at token `start`, times `share`, to the
/// document's.
fn spread(total: &mut [Vec<f32>], rows: &[Vec<f32>], start: usize, share: f32) -> anyhow::Result<()> {
    for (total_row, row) in total.iter_mut().zip(rows) {
        let span = total_row.get_mut(start..start + row.len()).context("a window reaches past its document")?;
        for (t, w) in span.iter_mut().zip(row) {
            *t += w * share;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn window(probabilities: Vec<f32>, attention: Vec<Vec<f32>>) -> DocumentPrediction {
        let len = attention.first().map_or(0, Vec::len);
        // A contribution of 1 per token to the first class, -1 to the second.
        let contribution = Some(vec![vec![1.0; len], vec![-1.0; len]]);
        DocumentPrediction {
            probabilities,
            token_ids: vec![0; len],
            token_spans: None,
            attention: Some(attention),
            contribution,
            embedding: None,
            sentences: None,
            truncated: false,
        }
    }

    #[test]
    fn head_and_tail_keep_a_quarter_and_three_quarters() {
        let ids: Vec<i64> = (0..20).collect();
        assert_eq!(head_and_tail(&ids, 8), vec![0, 1, 14, 15, 16, 17, 18, 19]);
        assert_eq!(head_and_tail(&ids[..5], 8), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn a_document_never_gets_more_than_the_most_windows() {
        let stride = bounded_stride(MAX_DOCUMENT_TOKENS, 400, 1);
        assert_eq!(stride, 100);
        assert!(windows(MAX_DOCUMENT_TOKENS, 400, stride).len() <= MAX_WINDOWS);
        assert_eq!(bounded_stride(5_000, 400, 200), 200, "an ordinary stride is kept");
    }

    #[test]
    fn a_stride_equal_to_the_default_is_recorded_as_the_default() {
        let explicit = LongDocuments::Windows { stride: Some(400), aggregate: Aggregate::Mean };
        assert_eq!(explicit.normalised(400), LongDocuments::default());
        assert_eq!(explicit.normalised(400).to_string(), "windows(even, no overlap, mean)");
        assert_eq!(explicit.normalised(500).to_string(), "windows(even, stride 400, mean)");
    }

    #[test]
    fn windows_are_as_many_as_a_stride_needs_and_only_as_wide_as_they_need() {
        assert_eq!(windows(10, 4, 2), vec![0..4, 2..6, 4..8, 6..10], "exactly a stride apart already");
        assert_eq!(windows(11, 4, 2), vec![0..4, 1..5, 3..7, 5..9, 7..11]);
        assert_eq!(windows(4, 4, 2).first(), Some(&(0..4)), "one window when the document fits");
        assert_eq!(windows(4, 4, 2).len(), 1);
        assert_eq!(windows(9, 4, 4), vec![0..3, 3..6, 6..9], "no overlap asked: three windows of 3, not 4");
        assert_eq!(windows(450, 400, 200), vec![0..325, 125..450]);
        assert_eq!(windows(450, 400, 400), vec![0..225, 225..450]);
    }

    /// A document of six tokens, read in the windows below.
    fn whole() -> EncodedText {
        EncodedText { ids: (0..6).collect(), spans: None, truncated: false }
    }

    #[test]
    fn windows_combine_into_one_prediction_over_the_whole_document() {
        let pieces = vec![
            (2, window(vec![0.2, 0.8], vec![vec![0.5, 0.25, 0.25, 0.0]])),
            (0, window(vec![0.6, 0.4], vec![vec![1.0, 0.0, 0.0, 0.0]])),
        ];
        let doc = combine(pieces.clone(), whole(), None, Aggregate::Mean).expect("combine");
        assert_eq!(doc.probabilities, vec![0.4, 0.6]);
        assert_eq!(doc.attention, Some(vec![vec![0.5, 0.0, 0.25, 0.125, 0.125, 0.0]]));
        // Tokens 2 and 3 are in both windows; 4 and 5 only in the second, 0 and 1 the first.
        assert_eq!(doc.contribution.as_ref().map(|c| c[0].clone()), Some(vec![0.5, 0.5, 1.0, 1.0, 0.5, 0.5]));
        let max = combine(pieces, whole(), Some(vec![3, 3]), Aggregate::Max).expect("combine");
        let expected = [0.6 / 1.4, 0.8 / 1.4];
        assert!(max.probabilities.iter().zip(expected).all(|(p, e)| (p - e).abs() < 1e-6), "{:?}", max.probabilities);
        assert_eq!(max.sentences.map(|s| s.weights), Some(vec![0.75, 0.25]));
    }

    proptest! {
        #[test]
        fn windows_cover_every_token_overlap_as_asked_and_stay_inside(
            tokens in 1usize..3000,
            width in 1usize..500,
            stride in 1usize..500,
        ) {
            let stride = stride.min(width);
            let windows = windows(tokens, width, stride);
            let old_count = if tokens <= width { 1 } else { (tokens - width).div_ceil(stride) + 1 };
            prop_assert_eq!(windows.len(), old_count, "as many windows as the stride gave before");
            prop_assert_eq!(windows.first().map(|w| w.start), Some(0));
            prop_assert_eq!(windows.last().map(|w| w.end), Some(tokens));
            for window in &windows {
                prop_assert!(window.end <= tokens && window.len() <= width && window.len() == windows[0].len());
            }
            for pair in windows.windows(2) {
                prop_assert!(pair[0].start < pair[1].start);
                prop_assert!(pair[0].end >= pair[1].start + (width - stride), "{:?} overlap less than asked", pair);
            }
        }
    }
}

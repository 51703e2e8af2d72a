//! What the model said about one document, before it becomes a row of the output table.

/// What the model said about one document.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentPrediction {
    pub probabilities: Vec<f32>,
    /// The document's tokens, as ids into the tokenizer's [`crate::text::Vocabulary`].
    pub token_ids: Vec<i64>,
    /// Each token's characters in the text, where the tokenizer gives them
    /// ([`crate::text::EncodedText::spans`]).
    pub token_spans: Option<Vec<std::ops::Range<usize>>>,
    /// `heads × tokens`, padding removed; absent for models without attention.
    pub attention: Option<Vec<Vec<f32>>>,
    /// `classes × tokens`: each token's signed contribution to each class's centred score;
    /// absent for models that do not explain their scores per token.
    pub contribution: Option<Vec<Vec<f32>>>,
    pub embedding: Option<Vec<f32>>,
    /// Hierarchical models: the attention each sentence got, and its length in tokens.
    pub sentences: Option<SentenceAttention>,
    /// Tokens of the document were left out (past the token limit, or the middle in
    /// `head-tail` mode), so `token_ids` is not the whole document.
    pub truncated: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SentenceAttention {
    /// Tokens per sentence, in order; they sum to the number of tokens.
    pub lengths: Vec<usize>,
    pub weights: Vec<f32>,
}

impl DocumentPrediction {
    /// The most probable class (the first of equals); 0 for an empty list.
    pub fn predicted_index(&self) -> usize {
        let mut best = 0;
        let Some(mut best_probability) = self.probabilities.first().copied() else { return 0 };
        for (i, &p) in self.probabilities.iter().enumerate().skip(1) {
            if p > best_probability {
                (best, best_probability) = (i, p);
            }
        }
        best
    }

    /// Whether the document abstains under `min_confidence` (`--min-confidence`): its most
    /// probable class is less likely than that, or its probabilities are not numbers.
    pub fn abstains(&self, min_confidence: Option<f32>) -> bool {
        // Most runs set no threshold: no need to find the most probable class then.
        let Some(threshold) = min_confidence else { return false };
        let confidence = self.probabilities.get(self.predicted_index()).copied().unwrap_or(f32::NAN);
        confidence.is_nan() || confidence < threshold
    }

    /// A multi-label model's labels for the document ([`labels_reaching`]).
    pub fn labels(&self, thresholds: &[f32]) -> Vec<usize> {
        labels_reaching(&self.probabilities, thresholds)
    }

    /// Heads summed per token and renormalised to sum to one (Lin et al. §2.3).
    pub fn attention_summary(&self) -> Option<Vec<f32>> {
        let heads = self.attention.as_ref()?;
        let mut summary = vec![0.0f32; self.token_ids.len()];
        for head in heads {
            for (total, weight) in summary.iter_mut().zip(head) {
                *total += weight;
            }
        }
        let mass: f32 = summary.iter().sum();
        if mass > 0.0 {
            summary.iter_mut().for_each(|w| *w /= mass);
        }
        Some(summary)
    }

    /// Each token's contribution to the class the `contribution` column is towards
    /// ([`super::PushesTowards`]): the second of two, or the predicted one.
    pub fn anchored_contribution(&self) -> Option<&[f32]> {
        let class = super::PushesTowards::class_index(self.probabilities.len(), self.predicted_index());
        self.contribution.as_ref()?.get(class).map(Vec::as_slice)
    }
}

/// The labels whose probability reaches its threshold, in label order; when none does, the
/// most probable one, since every document of a multi-label corpus has at least one label
/// (training refuses empty lists).
pub fn labels_reaching(probabilities: &[f32], thresholds: &[f32]) -> Vec<usize> {
    let reaching: Vec<usize> =
        probabilities.iter().zip(thresholds).enumerate().filter(|(_, (p, t))| p >= t).map(|(i, _)| i).collect();
    if !reaching.is_empty() || probabilities.is_empty() {
        return reaching;
    }
    let best = probabilities
        .iter()
        .enumerate()
        .fold(0, |best, (i, p)| if probabilities.get(best).is_some_and(|b| p > b) { i } else { best });
    vec![best]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_sums_heads_and_renormalises() {
        let doc = DocumentPrediction {
            probabilities: vec![0.3, 0.7],
            token_ids: vec![0, 1],
            token_spans: None,
            attention: Some(vec![vec![1.0, 0.0], vec![0.5, 0.5]]),
            contribution: None,
            embedding: None,
            sentences: None,
            truncated: false,
        };
        assert_eq!(doc.attention_summary(), Some(vec![0.75, 0.25]));
        assert_eq!(doc.predicted_index(), 1);
    }

    #[test]
    fn labels_are_those_reaching_their_threshold_or_else_the_most_probable() {
        assert_eq!(labels_reaching(&[0.9, 0.2, 0.6], &[0.5, 0.1, 0.7]), [0, 1]);
        assert_eq!(labels_reaching(&[0.3, 0.4, 0.2], &[0.5, 0.5, 0.5]), [1]);
        assert!(labels_reaching(&[], &[]).is_empty());
    }
}

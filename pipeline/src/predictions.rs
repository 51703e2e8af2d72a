//! Per-document results and the Arrow columns they become (the output table; see the README).

use std::sync::Arc;

use anyhow::bail;
use arrow::array::{ArrayRef, FixedSizeListBuilder, Float32Builder, Int32Builder, ListBuilder, StringBuilder};
use arrow::datatypes::{DataType, Field, FieldRef};

pub const PREDICTION: &str = "prediction";
pub const PREDICTION_INDEX: &str = "prediction_index";
pub const CONFIDENCE: &str = "confidence";
pub const PROBABILITIES: &str = "probabilities";
pub const TOKENS: &str = "tokens";
pub const ATTENTION: &str = "attention";
pub const ATTENTION_SUMMARY: &str = "attention_summary";
pub const EMBEDDING: &str = "embedding";
pub const SENTENCE_LENGTHS: &str = "sentence_lengths";
pub const SENTENCE_ATTENTION: &str = "sentence_attention";

/// Which optional columns a model's output table has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionalColumns {
    /// `attention` and `attention_summary`.
    pub attention: bool,
    /// `sentence_lengths` and `sentence_attention` (hierarchical models).
    pub sentences: bool,
    /// `embedding`, of this width.
    pub embedding_dim: Option<usize>,
}

/// What the model said about one document.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentPrediction {
    pub probabilities: Vec<f32>,
    pub tokens: Vec<String>,
    /// `heads × tokens`, padding removed; absent for models without attention.
    pub attention: Option<Vec<Vec<f32>>>,
    pub embedding: Option<Vec<f32>>,
    /// Hierarchical models: the attention each sentence got, and its length in tokens.
    pub sentences: Option<SentenceAttention>,
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

    /// Heads summed per token and renormalised to sum to one (Lin et al. §2.3).
    pub fn attention_summary(&self) -> Option<Vec<f32>> {
        let heads = self.attention.as_ref()?;
        let mut summary = vec![0.0f32; self.tokens.len()];
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
}

fn float_list() -> DataType {
    DataType::List(Arc::new(Field::new_list_field(DataType::Float32, true)))
}

/// The fields appended after the pass-through columns.
pub fn prediction_fields(optional: OptionalColumns) -> Vec<FieldRef> {
    let mut fields = vec![
        Field::new(PREDICTION, DataType::Utf8, true),
        Field::new(PREDICTION_INDEX, DataType::Int32, true),
        Field::new(CONFIDENCE, DataType::Float32, true),
        Field::new(PROBABILITIES, float_list(), true),
        Field::new(TOKENS, DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true))), true),
    ];
    if optional.attention {
        fields.push(Field::new(ATTENTION, DataType::List(Arc::new(Field::new_list_field(float_list(), true))), true));
        fields.push(Field::new(ATTENTION_SUMMARY, float_list(), true));
    }
    if optional.sentences {
        let lengths = DataType::List(Arc::new(Field::new_list_field(DataType::Int32, true)));
        fields.push(Field::new(SENTENCE_LENGTHS, lengths, true));
        fields.push(Field::new(SENTENCE_ATTENTION, float_list(), true));
    }
    if let Some(dim) = optional.embedding_dim {
        let item = Arc::new(Field::new_list_field(DataType::Float32, true));
        // The contract checks the width against the graph; no real embedding nears i32::MAX.
        fields.push(Field::new(EMBEDDING, DataType::FixedSizeList(item, i32::try_from(dim).unwrap_or(i32::MAX)), true));
    }
    fields.into_iter().map(Arc::new).collect()
}

/// Builds the prediction columns for rows in input order; `None` rows (null or empty text)
/// get nulls everywhere. Fails if a prediction does not fit the labels or the embedding width
/// (which the package contract rules out when the model is opened).
pub fn prediction_columns(
    rows: &[Option<DocumentPrediction>],
    labels: &[String],
    optional: OptionalColumns,
) -> anyhow::Result<Vec<ArrayRef>> {
    let OptionalColumns { attention: has_attention, sentences: has_sentences, embedding_dim } = optional;
    let mut prediction = StringBuilder::new();
    let mut index = Int32Builder::new();
    let mut confidence = Float32Builder::new();
    let mut probabilities = ListBuilder::new(Float32Builder::new());
    let mut tokens = ListBuilder::new(StringBuilder::new());
    let mut attention = ListBuilder::new(ListBuilder::new(Float32Builder::new()));
    let mut summary = ListBuilder::new(Float32Builder::new());
    let mut sentence_lengths = ListBuilder::new(Int32Builder::new());
    let mut sentence_attention = ListBuilder::new(Float32Builder::new());
    let mut embedding = FixedSizeListBuilder::new(Float32Builder::new(), i32::try_from(embedding_dim.unwrap_or(0))?);
    for row in rows {
        match row {
            Some(doc) => {
                let best = doc.predicted_index();
                let (Some(label), Some(&best_probability)) = (labels.get(best), doc.probabilities.get(best)) else {
                    bail!(
                        "the model returned {} probabilities for {} labels ({})",
                        doc.probabilities.len(),
                        labels.len(),
                        labels.join(", ")
                    );
                };
                prediction.append_value(label);
                index.append_value(i32::try_from(best)?);
                confidence.append_value(best_probability);
                probabilities.values().append_slice(&doc.probabilities);
                probabilities.append(true);
                for token in &doc.tokens {
                    tokens.values().append_value(token);
                }
                tokens.append(true);
                if has_attention {
                    for head in doc.attention.iter().flatten() {
                        attention.values().values().append_slice(head);
                        attention.values().append(true);
                    }
                    attention.append(doc.attention.is_some());
                    match doc.attention_summary() {
                        Some(weights) => {
                            summary.values().append_slice(&weights);
                            summary.append(true);
                        }
                        None => summary.append_null(),
                    }
                }
                if has_sentences {
                    match &doc.sentences {
                        Some(sentences) => {
                            sentence_lengths.values().extend(sentences.lengths.iter().map(|&n| Some(n as i32)));
                            sentence_lengths.append(true);
                            sentence_attention.values().append_slice(&sentences.weights);
                            sentence_attention.append(true);
                        }
                        None => {
                            sentence_lengths.append_null();
                            sentence_attention.append_null();
                        }
                    }
                }
                if let Some(dim) = embedding_dim {
                    match &doc.embedding {
                        Some(values) if values.len() == dim => embedding.values().append_slice(values),
                        Some(values) => bail!("the model returned an embedding of {} values, not {dim}", values.len()),
                        None => embedding.values().append_nulls(dim),
                    }
                    embedding.append(doc.embedding.is_some());
                }
            }
            None => {
                prediction.append_null();
                index.append_null();
                confidence.append_null();
                probabilities.append_null();
                tokens.append_null();
                attention.append_null();
                summary.append_null();
                sentence_lengths.append_null();
                sentence_attention.append_null();
                if let Some(dim) = embedding_dim {
                    embedding.values().append_nulls(dim);
                    embedding.append(false);
                }
            }
        }
    }
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(prediction.finish()),
        Arc::new(index.finish()),
        Arc::new(confidence.finish()),
        Arc::new(probabilities.finish()),
        Arc::new(tokens.finish()),
    ];
    if has_attention {
        columns.push(Arc::new(attention.finish()));
        columns.push(Arc::new(summary.finish()));
    }
    if has_sentences {
        columns.push(Arc::new(sentence_lengths.finish()));
        columns.push(Arc::new(sentence_attention.finish()));
    }
    if embedding_dim.is_some() {
        columns.push(Arc::new(embedding.finish()));
    }
    Ok(columns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_sums_heads_and_renormalises() {
        let doc = DocumentPrediction {
            probabilities: vec![0.3, 0.7],
            tokens: vec!["a".into(), "b".into()],
            attention: Some(vec![vec![1.0, 0.0], vec![0.5, 0.5]]),
            embedding: None,
            sentences: None,
        };
        assert_eq!(doc.attention_summary(), Some(vec![0.75, 0.25]));
        assert_eq!(doc.predicted_index(), 1);
    }
}

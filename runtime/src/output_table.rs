//! Per-document results and the Arrow columns they become: the output table (README, "Output
//! table"), defined once for `pipeline run`, `classify()` and the report.

use std::sync::Arc;

use anyhow::bail;
use arrow::array::{
    ArrayRef, BooleanBuilder, FixedSizeListBuilder, Float32Builder, Int8Builder, Int32Builder, ListBuilder,
    StringBuilder, UInt8Builder,
};
use arrow::datatypes::{DataType, Field, FieldRef};

use crate::compact_weights::{entropy, quantise_signed, quantise_weights};
use crate::text::Vocabulary;

pub const PREDICTION: &str = "prediction";
pub const PREDICTION_INDEX: &str = "prediction_index";
pub const CONFIDENCE: &str = "confidence";
pub const PROBABILITIES: &str = "probabilities";
pub const TOKENS: &str = "tokens";
pub const TRUNCATED: &str = "truncated";
pub const ATTENTION: &str = "attention";
pub const ATTENTION_SUMMARY: &str = "attention_summary";
pub const ATTENTION_ENTROPY: &str = "attention_entropy";
pub const CONTRIBUTION: &str = "contribution";
pub const EMBEDDING: &str = "embedding";
pub const SENTENCE_LENGTHS: &str = "sentence_lengths";
pub const SENTENCE_ATTENTION: &str = "sentence_attention";

/// Every column an output table may have, whatever the model and `--attention`: an input
/// column of one of these names would be mistaken for the model's by a reader.
pub const RESERVED_NAMES: [&str; 13] = [
    PREDICTION,
    PREDICTION_INDEX,
    CONFIDENCE,
    PROBABILITIES,
    TOKENS,
    TRUNCATED,
    ATTENTION,
    ATTENTION_SUMMARY,
    ATTENTION_ENTROPY,
    CONTRIBUTION,
    EMBEDDING,
    SENTENCE_LENGTHS,
    SENTENCE_ATTENTION,
];

/// Which optional columns a model's output table has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionalColumns {
    /// `attention` and `attention_summary`.
    pub attention: bool,
    /// `contribution`: the model explains its scores per token.
    pub contribution: bool,
    /// `sentence_lengths` and `sentence_attention` (hierarchical models).
    pub sentences: bool,
    /// `embedding`, of this width.
    pub embedding_dim: Option<usize>,
}

/// How much of the attention the output table keeps (`--attention`): per-hop attention in
/// 32-bit floats is most of an output's size (220 of 273 MB on IMDB test).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AttentionOutput {
    /// Every hop's weights and their summary as bytes relative to the heaviest token, each
    /// hop's exact entropy, and the contributions as signed bytes relative to the strongest
    /// ([`crate::compact_weights`]).
    #[default]
    Compact,
    /// Every hop's weights, and their summary, as 32-bit floats.
    Full,
    /// Only `attention_summary`, the hops summed per token: one list per document, not one
    /// per hop.
    Summary,
    /// Every hop and the summary, each keeping only its N heaviest weights; the others are
    /// written as 0 (and compress to almost nothing).
    TopK(usize),
    /// Neither attention column, nor `contribution`.
    None,
}

impl std::str::FromStr for AttentionOutput {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "compact" => Ok(Self::Compact),
            "full" => Ok(Self::Full),
            "summary" => Ok(Self::Summary),
            "none" => Ok(Self::None),
            _ => match text.strip_prefix("top-k:").map(str::parse::<usize>) {
                Some(Ok(k)) if k > 0 => Ok(Self::TopK(k)),
                _ => Err(format!("`{text}` is not one of compact, full, summary, top-k:N (N at least 1), none")),
            },
        }
    }
}

impl std::fmt::Display for AttentionOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Compact => f.write_str("compact"),
            Self::Full => f.write_str("full"),
            Self::Summary => f.write_str("summary"),
            Self::TopK(k) => write!(f, "top-k:{k}"),
            Self::None => f.write_str("none"),
        }
    }
}

/// `weights` with all but the `k` heaviest set to 0 (of equal weights, the first ones kept).
pub fn keep_heaviest(weights: &[f32], k: usize) -> Vec<f32> {
    if weights.len() <= k {
        return weights.to_vec();
    }
    let mut order: Vec<(usize, f32)> = weights.iter().copied().enumerate().collect();
    order.sort_by(|(a, wa), (b, wb)| wb.total_cmp(wa).then(a.cmp(b)));
    let mut kept = vec![0.0f32; weights.len()];
    for &(i, w) in order.iter().take(k) {
        if let Some(slot) = kept.get_mut(i) {
            *slot = w;
        }
    }
    kept
}

/// What the model said about one document.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentPrediction {
    pub probabilities: Vec<f32>,
    /// The document's tokens, as ids into the tokenizer's [`Vocabulary`].
    pub token_ids: Vec<i64>,
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

    /// Each token's contribution to the predicted class.
    pub fn predicted_contribution(&self) -> Option<&[f32]> {
        self.contribution.as_ref()?.get(self.predicted_index()).map(Vec::as_slice)
    }
}

/// One column of the output table (README, "Output table").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputColumn {
    Prediction,
    PredictionIndex,
    Confidence,
    Probabilities,
    Tokens,
    Truncated,
    Attention,
    AttentionSummary,
    AttentionEntropy,
    Contribution,
    SentenceLengths,
    SentenceAttention,
    Embedding,
}

impl OutputColumn {
    pub fn name(self) -> &'static str {
        match self {
            Self::Prediction => PREDICTION,
            Self::PredictionIndex => PREDICTION_INDEX,
            Self::Confidence => CONFIDENCE,
            Self::Probabilities => PROBABILITIES,
            Self::Tokens => TOKENS,
            Self::Truncated => TRUNCATED,
            Self::Attention => ATTENTION,
            Self::AttentionSummary => ATTENTION_SUMMARY,
            Self::AttentionEntropy => ATTENTION_ENTROPY,
            Self::Contribution => CONTRIBUTION,
            Self::SentenceLengths => SENTENCE_LENGTHS,
            Self::SentenceAttention => SENTENCE_ATTENTION,
            Self::Embedding => EMBEDDING,
        }
    }
}

/// The output table's columns: the one place that says which columns there are, what type each
/// has and how a prediction fills it, so the schema and the arrays cannot disagree. `pipeline
/// run` writes [`OutputTable::for_model`]; `classify()` returns a selection of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputTable {
    columns: Vec<OutputColumn>,
    /// The width of `embedding`, when it is one of the columns.
    embedding_dim: usize,
    /// `--attention top-k:N`: the weights kept per hop and in the summary.
    attention_top_k: Option<usize>,
    /// `--attention compact`: weights and contributions as bytes.
    compact: bool,
}

impl OutputTable {
    /// Every column a model with these optional outputs produces, in the documented order.
    pub fn for_model(optional: OptionalColumns) -> Self {
        use OutputColumn::*;
        let mut columns = vec![Prediction, PredictionIndex, Confidence, Probabilities, Tokens, Truncated];
        if optional.attention {
            columns.extend([Attention, AttentionSummary]);
        }
        if optional.contribution {
            columns.push(Contribution);
        }
        if optional.sentences {
            columns.extend([SentenceLengths, SentenceAttention]);
        }
        if optional.embedding_dim.is_some() {
            columns.push(Embedding);
        }
        Self { columns, embedding_dim: optional.embedding_dim.unwrap_or(0), attention_top_k: None, compact: false }
    }

    /// These columns with only the attention `output` keeps.
    pub fn with_attention_output(mut self, output: AttentionOutput) -> Self {
        let dropped: &[OutputColumn] = match output {
            AttentionOutput::Full | AttentionOutput::TopK(_) => &[],
            AttentionOutput::Compact => &[],
            AttentionOutput::Summary => &[OutputColumn::Attention],
            AttentionOutput::None => {
                &[OutputColumn::Attention, OutputColumn::AttentionSummary, OutputColumn::Contribution]
            }
        };
        self.columns.retain(|column| !dropped.contains(column));
        self.compact = output == AttentionOutput::Compact;
        if self.compact
            && let Some(at) = self.columns.iter().position(|&c| c == OutputColumn::Attention)
        {
            self.columns.insert(at + 1, OutputColumn::AttentionEntropy);
        }
        self.attention_top_k = match output {
            AttentionOutput::TopK(k) => Some(k),
            _ => None,
        };
        self
    }

    /// Just these columns (none of which may be `embedding`, whose width only a model knows).
    pub fn of(columns: &[OutputColumn]) -> Self {
        Self {
            columns: columns.iter().copied().filter(|&c| c != OutputColumn::Embedding).collect(),
            embedding_dim: 0,
            attention_top_k: None,
            compact: false,
        }
    }

    pub fn fields(&self) -> Vec<FieldRef> {
        self.columns.iter().map(|&column| Arc::new(Field::new(column.name(), self.data_type(column), true))).collect()
    }

    fn data_type(&self, column: OutputColumn) -> DataType {
        use OutputColumn::*;
        let list = |item: DataType| DataType::List(Arc::new(Field::new_list_field(item, true)));
        match column {
            Prediction => DataType::Utf8,
            PredictionIndex => DataType::Int32,
            Truncated => DataType::Boolean,
            Confidence => DataType::Float32,
            AttentionSummary if self.compact => list(DataType::UInt8),
            Probabilities | AttentionSummary | AttentionEntropy | SentenceAttention => list(DataType::Float32),
            Tokens => list(DataType::Utf8),
            Attention if self.compact => list(list(DataType::UInt8)),
            Attention => list(list(DataType::Float32)),
            Contribution if self.compact => list(DataType::Int8),
            Contribution => list(DataType::Float32),
            SentenceLengths => list(DataType::Int32),
            // The contract checks the width against the graph; no real embedding nears i32::MAX.
            Embedding => DataType::FixedSizeList(
                Arc::new(Field::new_list_field(DataType::Float32, true)),
                i32::try_from(self.embedding_dim).unwrap_or(i32::MAX),
            ),
        }
    }

    /// Builds the columns for rows in input order; `None` rows (null or empty text) get nulls
    /// everywhere. Fails if a prediction does not fit the labels, the vocabulary or the
    /// embedding width (which the package contract rules out when the model is opened).
    pub fn build(
        &self,
        rows: &[Option<DocumentPrediction>],
        labels: &[String],
        vocabulary: &Vocabulary,
    ) -> anyhow::Result<Vec<ArrayRef>> {
        let mut builders: Vec<ColumnBuilder> = self
            .columns
            .iter()
            .map(|&column| ColumnBuilder::new(column, self.embedding_dim, self.attention_top_k, self.compact))
            .collect::<Result<_, _>>()?;
        for row in rows {
            let Some(doc) = row else {
                builders.iter_mut().for_each(ColumnBuilder::append_null);
                continue;
            };
            let best = doc.predicted_index();
            let (Some(label), Some(&confidence)) = (labels.get(best), doc.probabilities.get(best)) else {
                bail!(
                    "the model returned {} probabilities for {} labels ({})",
                    doc.probabilities.len(),
                    labels.len(),
                    labels.join(", ")
                );
            };
            let best = Best { index: i32::try_from(best)?, label, confidence };
            for builder in &mut builders {
                builder.append(doc, &best, vocabulary)?;
            }
        }
        Ok(builders.into_iter().map(ColumnBuilder::finish).collect())
    }
}

/// The most probable class of one document.
struct Best<'a> {
    index: i32,
    label: &'a str,
    confidence: f32,
}

/// The Arrow builder behind one [`OutputColumn`].
enum ColumnBuilder {
    Prediction(StringBuilder),
    PredictionIndex(Int32Builder),
    Confidence(Float32Builder),
    Probabilities(ListBuilder<Float32Builder>),
    Tokens(ListBuilder<StringBuilder>),
    Truncated(BooleanBuilder),
    /// With the weights kept per hop, under `--attention top-k:N`.
    Attention(ListBuilder<ListBuilder<Float32Builder>>, Option<usize>),
    AttentionSummary(ListBuilder<Float32Builder>, Option<usize>),
    /// `--attention compact`: each hop's weights as bytes ([`quantise_weights`]).
    CompactAttention(ListBuilder<ListBuilder<UInt8Builder>>),
    CompactSummary(ListBuilder<UInt8Builder>),
    AttentionEntropy(ListBuilder<Float32Builder>),
    Contribution(ListBuilder<Float32Builder>),
    CompactContribution(ListBuilder<Int8Builder>),
    SentenceLengths(ListBuilder<Int32Builder>),
    SentenceAttention(ListBuilder<Float32Builder>),
    Embedding(FixedSizeListBuilder<Float32Builder>, usize),
}

impl ColumnBuilder {
    fn new(column: OutputColumn, embedding_dim: usize, top_k: Option<usize>, compact: bool) -> anyhow::Result<Self> {
        let floats = || ListBuilder::new(Float32Builder::new());
        Ok(match column {
            OutputColumn::Prediction => Self::Prediction(StringBuilder::new()),
            OutputColumn::PredictionIndex => Self::PredictionIndex(Int32Builder::new()),
            OutputColumn::Confidence => Self::Confidence(Float32Builder::new()),
            OutputColumn::Probabilities => Self::Probabilities(floats()),
            OutputColumn::Tokens => Self::Tokens(ListBuilder::new(StringBuilder::new())),
            OutputColumn::Truncated => Self::Truncated(BooleanBuilder::new()),
            OutputColumn::Attention if compact => {
                Self::CompactAttention(ListBuilder::new(ListBuilder::new(UInt8Builder::new())))
            }
            OutputColumn::Attention => Self::Attention(ListBuilder::new(floats()), top_k),
            OutputColumn::AttentionSummary if compact => Self::CompactSummary(ListBuilder::new(UInt8Builder::new())),
            OutputColumn::AttentionSummary => Self::AttentionSummary(floats(), top_k),
            OutputColumn::AttentionEntropy => Self::AttentionEntropy(floats()),
            OutputColumn::Contribution if compact => Self::CompactContribution(ListBuilder::new(Int8Builder::new())),
            OutputColumn::Contribution => Self::Contribution(floats()),
            OutputColumn::SentenceLengths => Self::SentenceLengths(ListBuilder::new(Int32Builder::new())),
            OutputColumn::SentenceAttention => Self::SentenceAttention(floats()),
            OutputColumn::Embedding => Self::Embedding(
                FixedSizeListBuilder::new(Float32Builder::new(), i32::try_from(embedding_dim)?),
                embedding_dim,
            ),
        })
    }

    fn append(&mut self, doc: &DocumentPrediction, best: &Best<'_>, vocabulary: &Vocabulary) -> anyhow::Result<()> {
        match self {
            Self::Prediction(b) => b.append_value(best.label),
            Self::PredictionIndex(b) => b.append_value(best.index),
            Self::Confidence(b) => b.append_value(best.confidence),
            Self::Probabilities(b) => append_floats(b, Some(&doc.probabilities)),
            Self::Tokens(b) => {
                for &id in &doc.token_ids {
                    b.values().append_value(vocabulary.spell(id)?);
                }
                b.append(true);
            }
            Self::Truncated(b) => b.append_value(doc.truncated),
            Self::Attention(b, top_k) => {
                for head in doc.attention.iter().flatten() {
                    match top_k {
                        Some(k) => append_floats(b.values(), Some(&keep_heaviest(head, *k))),
                        None => append_floats(b.values(), Some(head)),
                    }
                }
                b.append(doc.attention.is_some());
            }
            Self::AttentionSummary(b, top_k) => {
                let summary = doc.attention_summary();
                let summary = match top_k {
                    Some(k) => summary.map(|s| keep_heaviest(&s, *k)),
                    None => summary,
                };
                append_floats(b, summary.as_deref());
            }
            Self::CompactAttention(b) => {
                for head in doc.attention.iter().flatten() {
                    b.values().values().append_slice(&quantise_weights(head));
                    b.values().append(true);
                }
                b.append(doc.attention.is_some());
            }
            Self::CompactSummary(b) => match doc.attention_summary() {
                Some(summary) => {
                    b.values().append_slice(&quantise_weights(&summary));
                    b.append(true);
                }
                None => b.append_null(),
            },
            Self::AttentionEntropy(b) => {
                for head in doc.attention.iter().flatten() {
                    b.values().append_option(entropy(head.iter().copied()).map(|e| e as f32));
                }
                b.append(doc.attention.is_some());
            }
            Self::Contribution(b) => append_floats(b, doc.predicted_contribution()),
            Self::CompactContribution(b) => match doc.predicted_contribution() {
                Some(values) => {
                    b.values().append_slice(&quantise_signed(values));
                    b.append(true);
                }
                None => b.append_null(),
            },
            Self::SentenceLengths(b) => match &doc.sentences {
                Some(sentences) => {
                    for &length in &sentences.lengths {
                        b.values().append_value(i32::try_from(length)?);
                    }
                    b.append(true);
                }
                None => b.append_null(),
            },
            Self::SentenceAttention(b) => append_floats(b, doc.sentences.as_ref().map(|s| s.weights.as_slice())),
            Self::Embedding(b, dim) => match &doc.embedding {
                Some(values) if values.len() == *dim => {
                    b.values().append_slice(values);
                    b.append(true);
                }
                Some(values) => bail!("the model returned an embedding of {} values, not {dim}", values.len()),
                None => {
                    b.values().append_nulls(*dim);
                    b.append(false);
                }
            },
        }
        Ok(())
    }

    fn append_null(&mut self) {
        match self {
            Self::Prediction(b) => b.append_null(),
            Self::PredictionIndex(b) => b.append_null(),
            Self::Confidence(b) => b.append_null(),
            Self::Probabilities(b)
            | Self::AttentionSummary(b, _)
            | Self::AttentionEntropy(b)
            | Self::Contribution(b)
            | Self::SentenceAttention(b) => b.append_null(),
            Self::CompactAttention(b) => b.append_null(),
            Self::CompactSummary(b) => b.append_null(),
            Self::CompactContribution(b) => b.append_null(),
            Self::Tokens(b) => b.append_null(),
            Self::Truncated(b) => b.append_null(),
            Self::Attention(b, _) => b.append_null(),
            Self::SentenceLengths(b) => b.append_null(),
            Self::Embedding(b, dim) => {
                b.values().append_nulls(*dim);
                b.append(false);
            }
        }
    }

    fn finish(self) -> ArrayRef {
        match self {
            Self::Prediction(mut b) => Arc::new(b.finish()),
            Self::PredictionIndex(mut b) => Arc::new(b.finish()),
            Self::Confidence(mut b) => Arc::new(b.finish()),
            Self::Probabilities(mut b)
            | Self::AttentionSummary(mut b, _)
            | Self::AttentionEntropy(mut b)
            | Self::Contribution(mut b)
            | Self::SentenceAttention(mut b) => Arc::new(b.finish()),
            Self::CompactAttention(mut b) => Arc::new(b.finish()),
            Self::CompactSummary(mut b) => Arc::new(b.finish()),
            Self::CompactContribution(mut b) => Arc::new(b.finish()),
            Self::Tokens(mut b) => Arc::new(b.finish()),
            Self::Truncated(mut b) => Arc::new(b.finish()),
            Self::Attention(mut b, _) => Arc::new(b.finish()),
            Self::SentenceLengths(mut b) => Arc::new(b.finish()),
            Self::Embedding(mut b, _) => Arc::new(b.finish()),
        }
    }
}

/// Appends one list of floats, or a null list.
fn append_floats(builder: &mut ListBuilder<Float32Builder>, values: Option<&[f32]>) {
    match values {
        Some(values) => {
            builder.values().append_slice(values);
            builder.append(true);
        }
        None => builder.append_null(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_sums_heads_and_renormalises() {
        let doc = DocumentPrediction {
            probabilities: vec![0.3, 0.7],
            token_ids: vec![0, 1],
            attention: Some(vec![vec![1.0, 0.0], vec![0.5, 0.5]]),
            contribution: None,
            embedding: None,
            sentences: None,
            truncated: false,
        };
        assert_eq!(doc.attention_summary(), Some(vec![0.75, 0.25]));
        assert_eq!(doc.predicted_index(), 1);
    }

    /// The schema and the arrays come from one list of columns, so they agree for every mix of
    /// optional columns, with null rows among the documents.
    #[test]
    fn fields_describe_the_built_arrays() {
        let doc = DocumentPrediction {
            probabilities: vec![0.3, 0.7],
            token_ids: vec![0, 1, 2],
            attention: Some(vec![vec![0.2, 0.3, 0.5]]),
            contribution: Some(vec![vec![0.1, -0.2, 0.0], vec![-0.1, 0.2, 0.0]]),
            embedding: Some(vec![1.0, 2.0]),
            sentences: Some(SentenceAttention { lengths: vec![2, 1], weights: vec![0.4, 0.6] }),
            truncated: true,
        };
        let labels = ["neg".to_owned(), "pos".to_owned()];
        let vocabulary = Vocabulary::from_tokens(["a", "b", "c"]);
        let outputs = [AttentionOutput::Full, AttentionOutput::Compact, AttentionOutput::None];
        for (attention, contribution, output) in column_choices(outputs) {
            for sentences in [false, true] {
                for embedding_dim in [None, Some(2)] {
                    let optional = OptionalColumns { attention, contribution, sentences, embedding_dim };
                    let table = OutputTable::for_model(optional).with_attention_output(output);
                    let arrays = table.build(&[Some(doc.clone()), None], &labels, &vocabulary).expect("rows fit");
                    let schema = Arc::new(arrow::datatypes::Schema::new(table.fields()));
                    let batch = arrow::record_batch::RecordBatch::try_new(schema, arrays).expect("schema fits arrays");
                    assert_eq!(batch.num_rows(), 2);
                    let attention_columns = match output {
                        AttentionOutput::None => 0,
                        AttentionOutput::Compact => 3 * usize::from(attention),
                        _ => 2 * usize::from(attention),
                    };
                    let contribution_column = usize::from(contribution && output != AttentionOutput::None);
                    assert_eq!(
                        batch.num_columns(),
                        6 + attention_columns
                            + contribution_column
                            + 2 * usize::from(sentences)
                            + usize::from(embedding_dim.is_some())
                    );
                    assert!(batch.columns().iter().all(|column| column.is_null(1)), "a None row is null everywhere");
                }
            }
        }
    }

    /// Every attention/contribution/output combination of [`fields_describe_the_built_arrays`].
    fn column_choices(outputs: [AttentionOutput; 3]) -> Vec<(bool, bool, AttentionOutput)> {
        let mut all = Vec::new();
        for attention in [false, true] {
            for contribution in [false, true] {
                all.extend(outputs.iter().map(|&output| (attention, contribution, output)));
            }
        }
        all
    }

    /// Compact output keeps what a heat map draws: the heaviest token of each hop is 255,
    /// the strongest push ±127 towards the predicted class, and the exact entropy per hop.
    #[test]
    fn compact_output_is_bytes_relative_to_the_heaviest_with_exact_entropies() {
        use arrow::array::AsArray;
        use arrow::datatypes::{Float32Type, Int8Type, UInt8Type};
        let doc = DocumentPrediction {
            probabilities: vec![0.3, 0.7],
            token_ids: vec![0, 1, 2],
            attention: Some(vec![vec![0.2, 0.3, 0.5], vec![1.0, 0.0, 0.0]]),
            contribution: Some(vec![vec![0.4, -0.2, 0.1], vec![-0.4, 0.2, -0.1]]),
            embedding: None,
            sentences: None,
            truncated: false,
        };
        let optional = OptionalColumns { attention: true, contribution: true, sentences: false, embedding_dim: None };
        let table = OutputTable::for_model(optional).with_attention_output(AttentionOutput::Compact);
        let names: Vec<String> = table.fields().iter().map(|f| f.name().clone()).collect();
        assert_eq!(&names[6..], ["attention", "attention_entropy", "attention_summary", "contribution"]);
        let labels = ["neg".to_owned(), "pos".to_owned()];
        let arrays = table.build(&[Some(doc)], &labels, &Vocabulary::from_tokens(["a", "b", "c"])).expect("rows fit");
        let hops = arrays[6].as_list::<i32>().value(0);
        let hops = hops.as_list::<i32>();
        assert_eq!(hops.value(0).as_primitive::<UInt8Type>().values().to_vec(), vec![102, 153, 255]);
        assert_eq!(hops.value(1).as_primitive::<UInt8Type>().values().to_vec(), vec![255, 0, 0]);
        let entropies = arrays[7].as_list::<i32>().value(0);
        let entropies = entropies.as_primitive::<Float32Type>().values().to_vec();
        let expected = -(0.2f32 * 0.2f32.ln() + 0.3 * 0.3f32.ln() + 0.5 * 0.5f32.ln());
        assert!((entropies[0] - expected).abs() < 1e-6 && entropies[1] == 0.0, "{entropies:?}");
        // `pos` is predicted: its row of contributions, scaled to the strongest.
        let summary = arrays[8].as_list::<i32>().value(0);
        assert_eq!(summary.as_primitive::<UInt8Type>().values().to_vec(), vec![255, 64, 106]);
        let pushes = arrays[9].as_list::<i32>().value(0);
        assert_eq!(pushes.as_primitive::<Int8Type>().values().to_vec(), vec![-127, 64, -32]);
    }

    #[test]
    fn tokens_are_spelled_from_the_vocabulary() {
        use arrow::array::AsArray;
        let doc = |token_ids| DocumentPrediction {
            probabilities: vec![0.3, 0.7],
            token_ids,
            attention: None,
            contribution: None,
            embedding: None,
            sentences: None,
            truncated: false,
        };
        let table = OutputTable::of(&[OutputColumn::Tokens]);
        let labels = ["neg".to_owned(), "pos".to_owned()];
        let vocabulary = Vocabulary::from_tokens(["[PAD]", "[UNK]", "film", "good"]);
        let arrays = table.build(&[Some(doc(vec![3, 2, 1]))], &labels, &vocabulary).expect("known ids");
        let tokens = arrays.first().expect("one column").as_list::<i32>().value(0);
        let tokens: Vec<&str> = tokens.as_string::<i32>().iter().flatten().collect();
        assert_eq!(tokens, ["good", "film", "[UNK]"]);
        let error = table.build(&[Some(doc(vec![2, 9]))], &labels, &vocabulary).expect_err("9 is not an id");
        assert!(error.to_string().contains("token id 9"), "{error}");
    }

    #[test]
    fn a_prediction_that_does_not_fit_the_labels_is_an_error() {
        let doc = DocumentPrediction {
            probabilities: vec![0.1, 0.2, 0.7],
            token_ids: vec![],
            attention: None,
            contribution: None,
            embedding: None,
            sentences: None,
            truncated: false,
        };
        let table = OutputTable::of(&[OutputColumn::Prediction, OutputColumn::Confidence]);
        let labels = ["neg".to_owned(), "pos".to_owned()];
        let error = table.build(&[Some(doc)], &labels, &Vocabulary::default()).expect_err("3 probabilities, 2 labels");
        assert!(error.to_string().contains("3 probabilities for 2 labels"), "{error}");
    }
}

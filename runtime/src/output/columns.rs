//! The output table's columns (docs/run.md, "Output table"): one descriptor per column in
//! [`COLUMNS`], saying its name, when a table has it, its Arrow type under each encoding and
//! how predictions fill it. The schema, the arrays and the reserved names all derive from
//! that one list, so they cannot disagree. `pipeline run` and the Python module write
//! [`OutputTable::for_model`]; `classify()` returns a selection, [`OutputTable::of`].

use std::borrow::Cow;
use std::sync::Arc;

use anyhow::{Context, bail};
use arrow::array::{
    ArrayBuilder, ArrayRef, BooleanArray, FixedSizeListBuilder, Float32Array, Float32Builder, Int8Builder, Int32Array,
    Int32Builder, Int64Builder, ListBuilder, StringArray, StringBuilder, UInt8Builder,
};
use arrow::datatypes::{DataType, Field, FieldRef};
use batch_io::spelling;

use super::encoding::{
    AttentionEncoding, Explanation, Values, entropy, keep_heaviest, quantise_signed, quantise_weights, signed_scale,
};
use super::prediction::DocumentPrediction;
use super::token_spans;
use crate::text::Vocabulary;

/// One column of the output table.
pub struct Column {
    pub name: &'static str,
    /// When a table has the column.
    pub requires: Requires,
    data_type: fn(&Settings) -> DataType,
    /// The column's values for a run of rows, in order.
    fill: fn(&Rows<'_>) -> anyhow::Result<ArrayRef>,
}

impl std::fmt::Debug for Column {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl PartialEq for Column {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

/// When a table has a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requires {
    Always,
    /// A model that produces this part of the explanation, and an encoding that keeps it.
    Explanation(Explanation),
    /// A hierarchical model.
    Sentences,
    /// `--embedding`.
    Embedding,
    /// `--min-confidence` ([`OutputTable::abstaining_below`]).
    Abstention,
    /// Token spans in place of token strings ([`OutputTable::with_token_spans`]).
    TokenSpans,
    /// A multi-label model.
    MultiLabel,
    /// A multi-label model that explains its scores per token, and an encoding that keeps
    /// this part of the explanation: pushes towards each predicted label.
    LabelPushes(Explanation),
}

/// What a model produces beyond its probabilities: which optional columns it can fill.
#[derive(Debug, Clone, PartialEq)]
pub struct OptionalColumns {
    /// `attention` and what derives from it (`attention_summary`, `attention_entropy`).
    pub attention: bool,
    /// `contribution`: the model explains its scores per token.
    pub contribution: bool,
    /// `sentence_lengths` and `sentence_attention` (hierarchical models).
    pub sentences: bool,
    /// `embedding`, of this width.
    pub embedding_dim: Option<usize>,
    /// A multi-label model's per-label thresholds: `predicted_labels`.
    pub label_thresholds: Option<Arc<[f32]>>,
}

impl OptionalColumns {
    /// Whether a table of this model under `encoding` has a column that `requires` this.
    fn include(&self, requires: Requires, encoding: AttentionEncoding) -> bool {
        match requires {
            Requires::Always => true,
            Requires::Explanation(part @ (Explanation::Contribution | Explanation::ContributionScale)) => {
                self.contribution && encoding.keeps(part)
            }
            Requires::Explanation(part) => self.attention && encoding.keeps(part),
            Requires::Sentences => self.sentences,
            Requires::Embedding => self.embedding_dim.is_some(),
            Requires::MultiLabel => self.label_thresholds.is_some(),
            Requires::LabelPushes(part) => self.label_thresholds.is_some() && self.contribution && encoding.keeps(part),
            // Not the model's to decide: the run's threshold adds it, and its text the spans.
            Requires::Abstention | Requires::TokenSpans => false,
        }
    }
}

/// What the types and values of a table's columns depend on, besides the column.
#[derive(Debug, Clone, PartialEq)]
struct Settings {
    encoding: AttentionEncoding,
    /// The width of `embedding`, when it is one of the columns.
    embedding_dim: usize,
    /// Below this confidence a row abstains: no `prediction`, `abstained` true.
    min_confidence: Option<f32>,
    /// A multi-label model's per-label thresholds.
    label_thresholds: Option<Arc<[f32]>>,
}

fn list(item: DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(item, true)))
}

pub static PREDICTION: Column = Column {
    name: "prediction",
    requires: Requires::Always,
    data_type: |_| DataType::Utf8,
    fill: |rows| {
        Ok(Arc::new(
            rows.each(|_, best| (!best.abstained).then_some(best.label)).map(Option::flatten).collect::<StringArray>(),
        ))
    },
};

pub static PREDICTION_INDEX: Column = Column {
    name: "prediction_index",
    requires: Requires::Always,
    data_type: |_| DataType::Int32,
    fill: |rows| {
        Ok(Arc::new(
            rows.each(|_, best| (!best.abstained).then_some(best.index)).map(Option::flatten).collect::<Int32Array>(),
        ))
    },
};

/// A multi-label model's labels for the row: each whose probability reaches its threshold
/// (or else the most probable), in label order; null where the row abstains. In `classify()`,
/// whose type cannot depend on the model, a model of one class per document gives its
/// prediction.
pub static PREDICTED_LABELS: Column = Column {
    name: "predicted_labels",
    requires: Requires::MultiLabel,
    data_type: |_| list(DataType::Utf8),
    fill: |rows| {
        let mut builder = ListBuilder::new(StringBuilder::new());
        for row in &rows.docs {
            match row {
                Some((_, best)) if !best.abstained => {
                    let labels = match &best.labels {
                        Some(labels) => labels.clone(),
                        None => vec![usize::try_from(best.index)?],
                    };
                    for label in labels {
                        let name = rows.labels.get(label).context("a predicted label outside the model's labels")?;
                        builder.values().append_value(name);
                    }
                    builder.append(true);
                }
                _ => builder.append_null(),
            }
        }
        Ok(Arc::new(builder.finish()))
    },
};

pub static CONFIDENCE: Column = Column {
    name: "confidence",
    requires: Requires::Always,
    data_type: |_| DataType::Float32,
    fill: |rows| Ok(Arc::new(rows.each(|_, best| best.confidence).collect::<Float32Array>())),
};

/// Whether the row's confidence fell below `--min-confidence`, leaving `prediction` null.
pub static ABSTAINED: Column = Column {
    name: "abstained",
    requires: Requires::Abstention,
    data_type: |_| DataType::Boolean,
    fill: |rows| Ok(Arc::new(rows.each(|_, best| best.abstained).collect::<BooleanArray>())),
};

pub static PROBABILITIES: Column = Column {
    name: "probabilities",
    requires: Requires::Always,
    data_type: |_| list(DataType::Float32),
    fill: |rows| rows.lists(Float32Builder::new(), |values, doc| Ok(append(values, Some(&doc.probabilities)))),
};

pub static TOKENS: Column = Column {
    name: "tokens",
    requires: Requires::Always,
    data_type: |_| list(DataType::Utf8),
    fill: |rows| {
        rows.lists(StringBuilder::new(), |values, doc| {
            for &id in &doc.token_ids {
                values.append_value(rows.vocabulary.spell(id)?);
            }
            Ok(true)
        })
    },
};

/// Each token's place in the text, as [`super::token_spans`] encodes it: written instead of
/// `tokens` where the text is in the output too ([`OutputTable::with_token_spans`]).
pub static TOKEN_SPANS: Column = Column {
    name: "token_spans",
    requires: Requires::TokenSpans,
    data_type: |_| list(DataType::Int64),
    fill: |rows| {
        rows.lists(Int64Builder::new(), |values, doc| {
            let spans = doc.token_spans.as_deref().context("the tokenizer gave no token spans")?;
            anyhow::ensure!(spans.len() == doc.token_ids.len(), "a token span per token");
            let unknown = |i: usize| {
                doc.token_ids.get(i).and_then(|&id| rows.vocabulary.token(id)) == Some(token_spans::UNKNOWN_TOKEN)
            };
            values.append_slice(&token_spans::encode(spans, unknown)?);
            Ok(true)
        })
    },
};

pub static TRUNCATED: Column = Column {
    name: "truncated",
    requires: Requires::Always,
    data_type: |_| DataType::Boolean,
    fill: |rows| Ok(Arc::new(rows.each(|doc, _| doc.truncated).collect::<BooleanArray>())),
};

/// Every hop's weights: floats (all, or the heaviest), or bytes relative to the heaviest.
pub static ATTENTION: Column = Column {
    name: "attention",
    requires: Requires::Explanation(Explanation::Hops),
    data_type: |settings| list(list(settings.encoding.weight_type())),
    fill: |rows| match rows.settings.encoding.values() {
        Values::Floats { keep_heaviest } => rows.lists(ListBuilder::new(Float32Builder::new()), |hops, doc| {
            for head in doc.attention.iter().flatten() {
                append(hops.values(), Some(&kept(head, keep_heaviest)));
                hops.append(true);
            }
            Ok(doc.attention.is_some())
        }),
        Values::Bytes => rows.lists(ListBuilder::new(UInt8Builder::new()), |hops, doc| {
            for head in doc.attention.iter().flatten() {
                hops.values().append_slice(&quantise_weights(head));
                hops.append(true);
            }
            Ok(doc.attention.is_some())
        }),
    },
};

/// Each hop's exact entropy, beside weights held as bytes.
pub static ATTENTION_ENTROPY: Column = Column {
    name: "attention_entropy",
    requires: Requires::Explanation(Explanation::HopEntropy),
    data_type: |_| list(DataType::Float32),
    fill: |rows| {
        rows.lists(Float32Builder::new(), |values, doc| {
            for head in doc.attention.iter().flatten() {
                values.append_option(entropy(head.iter().copied()).map(|e| e as f32));
            }
            Ok(doc.attention.is_some())
        })
    },
};

/// The hops summed per token and renormalised.
pub static ATTENTION_SUMMARY: Column = Column {
    name: "attention_summary",
    requires: Requires::Explanation(Explanation::Summary),
    data_type: |settings| list(settings.encoding.weight_type()),
    fill: |rows| match rows.settings.encoding.values() {
        Values::Floats { keep_heaviest } => rows.lists(Float32Builder::new(), |values, doc| {
            let summary = doc.attention_summary();
            Ok(append(values, summary.as_deref().map(|s| kept(s, keep_heaviest)).as_deref()))
        }),
        Values::Bytes => rows.lists(UInt8Builder::new(), |values, doc| {
            let summary = doc.attention_summary();
            Ok(append(values, summary.as_deref().map(quantise_weights).as_deref()))
        }),
    },
};

/// Each token's signed push towards the second of two classes (or, with more, the predicted
/// one; [`super::PushesTowards`]): floats, or bytes relative to the strongest push.
pub static CONTRIBUTION: Column = Column {
    name: "contribution",
    requires: Requires::Explanation(Explanation::Contribution),
    data_type: |settings| list(settings.encoding.push_type()),
    fill: |rows| match rows.settings.encoding.values() {
        Values::Floats { .. } => {
            rows.lists(Float32Builder::new(), |values, doc| Ok(append(values, doc.anchored_contribution())))
        }
        Values::Bytes => rows.lists(Int8Builder::new(), |values, doc| {
            Ok(append(values, doc.anchored_contribution().map(quantise_signed).as_deref()))
        }),
    },
};

/// Beside compact contributions: logit units per byte step, so that `byte × scale` is the
/// push in logit units, comparable and summable across rows (null when every push is 0).
pub static CONTRIBUTION_SCALE: Column = Column {
    name: "contribution_scale",
    requires: Requires::Explanation(Explanation::ContributionScale),
    data_type: |_| DataType::Float32,
    fill: |rows| {
        let scales = rows.each(|doc, _| doc.anchored_contribution().and_then(signed_scale)).map(Option::flatten);
        Ok(Arc::new(scales.collect::<Float32Array>()))
    },
};

/// A multi-label model's pushes towards each of the row's `predicted_labels`, in their order:
/// one list per label, each token's signed contribution to that label's own logit (floats, or
/// bytes relative to that label's strongest push); null where the row abstains.
pub static LABEL_CONTRIBUTIONS: Column = Column {
    name: "label_contributions",
    requires: Requires::LabelPushes(Explanation::Contribution),
    data_type: |settings| list(list(settings.encoding.push_type())),
    fill: |rows| match rows.settings.encoding.values() {
        Values::Floats { .. } => rows.label_lists(ListBuilder::new(Float32Builder::new()), |lists, pushes| {
            lists.values().append_slice(pushes);
            lists.append(true);
        }),
        Values::Bytes => rows.label_lists(ListBuilder::new(Int8Builder::new()), |lists, pushes| {
            lists.values().append_slice(&quantise_signed(pushes));
            lists.append(true);
        }),
    },
};

/// Beside compact `label_contributions`: each predicted label's logit units per byte step.
pub static LABEL_CONTRIBUTION_SCALES: Column = Column {
    name: "label_contribution_scales",
    requires: Requires::LabelPushes(Explanation::ContributionScale),
    data_type: |_| list(DataType::Float32),
    fill: |rows| rows.label_lists(Float32Builder::new(), |scales, pushes| scales.append_option(signed_scale(pushes))),
};

pub static SENTENCE_LENGTHS: Column = Column {
    name: "sentence_lengths",
    requires: Requires::Sentences,
    data_type: |_| list(DataType::Int32),
    fill: |rows| {
        rows.lists(Int32Builder::new(), |values, doc| {
            let Some(sentences) = &doc.sentences else { return Ok(false) };
            for &length in &sentences.lengths {
                values.append_value(i32::try_from(length)?);
            }
            Ok(true)
        })
    },
};

pub static SENTENCE_ATTENTION: Column = Column {
    name: "sentence_attention",
    requires: Requires::Sentences,
    data_type: |_| list(DataType::Float32),
    fill: |rows| {
        rows.lists(Float32Builder::new(), |values, doc| {
            Ok(append(values, doc.sentences.as_ref().map(|s| s.weights.as_slice())))
        })
    },
};

/// The sentence embedding fed to the classifier, of the model's width.
pub static EMBEDDING: Column = Column {
    name: "embedding",
    requires: Requires::Embedding,
    // The contract checks the width against the graph; no real embedding nears i32::MAX.
    data_type: |settings| {
        DataType::FixedSizeList(
            Arc::new(Field::new_list_field(DataType::Float32, true)),
            i32::try_from(settings.embedding_dim).unwrap_or(i32::MAX),
        )
    },
    fill: |rows| {
        let dim = rows.settings.embedding_dim;
        let mut builder = FixedSizeListBuilder::new(Float32Builder::new(), i32::try_from(dim)?);
        for row in &rows.docs {
            match row.as_ref().and_then(|(doc, _)| doc.embedding.as_ref()) {
                Some(values) if values.len() == dim => {
                    builder.values().append_slice(values);
                    builder.append(true);
                }
                Some(values) => bail!("the model returned an embedding of {} values, not {dim}", values.len()),
                None => {
                    builder.values().append_nulls(dim);
                    builder.append(false);
                }
            }
        }
        Ok(Arc::new(builder.finish()))
    },
};

/// Every column an output table may have, in the order a table has them.
pub static COLUMNS: [&Column; 19] = [
    &PREDICTION,
    &PREDICTION_INDEX,
    &PREDICTED_LABELS,
    &CONFIDENCE,
    &ABSTAINED,
    &PROBABILITIES,
    &TOKENS,
    &TOKEN_SPANS,
    &TRUNCATED,
    &ATTENTION,
    &ATTENTION_ENTROPY,
    &ATTENTION_SUMMARY,
    &CONTRIBUTION,
    &CONTRIBUTION_SCALE,
    &LABEL_CONTRIBUTIONS,
    &LABEL_CONTRIBUTION_SCALES,
    &SENTENCE_LENGTHS,
    &SENTENCE_ATTENTION,
    &EMBEDDING,
];

/// The names of every column an output may have, whatever the model and `--attention`: an
/// input column of one of these names would be mistaken for the model's by a reader.
pub fn reserved_names() -> impl Iterator<Item = &'static str> {
    COLUMNS.iter().map(|column| column.name)
}

pub fn is_reserved(name: &str) -> bool {
    reserved_names().any(|reserved| reserved == name)
}

/// The columns of one output table, and the settings their types depend on.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputTable {
    columns: Vec<&'static Column>,
    settings: Settings,
}

impl OutputTable {
    /// Every column a model with these optional outputs fills under `encoding`, in order.
    pub fn for_model(model: OptionalColumns, encoding: AttentionEncoding) -> Self {
        let columns = COLUMNS.iter().copied().filter(|column| model.include(column.requires, encoding)).collect();
        let settings = Settings {
            encoding,
            embedding_dim: model.embedding_dim.unwrap_or(0),
            min_confidence: None,
            label_thresholds: model.label_thresholds.clone(),
        };
        Self { columns, settings }
    }

    /// The table of a run that abstains below `min_confidence` (`--min-confidence`): such a
    /// row has a null `prediction` and `prediction_index` and `abstained` true, and keeps its
    /// probabilities and explanations. `None` leaves the table as it is.
    pub fn abstaining_below(self, min_confidence: Option<f32>) -> Self {
        let Some(threshold) = min_confidence else { return self };
        let columns =
            COLUMNS.iter().copied().filter(|column| self.columns.contains(column) || *column == &ABSTAINED).collect();
        Self { columns, settings: Settings { min_confidence: Some(threshold), ..self.settings } }
    }

    /// The table with each token's place in the text (`token_spans`) instead of its string
    /// (`tokens`), when `spans` (the tokenizer gives them, and the text is in the output).
    pub fn with_token_spans(self, spans: bool) -> Self {
        if !spans || !self.columns.contains(&&TOKENS) {
            return self;
        }
        let columns = self.columns.into_iter().map(|column| if column == &TOKENS { &TOKEN_SPANS } else { column });
        Self { columns: columns.collect(), ..self }
    }

    /// Whether the table has `column`.
    pub fn has(&self, column: &Column) -> bool {
        self.columns.contains(&column)
    }

    /// The columns' names, in order.
    pub fn names(&self) -> Vec<String> {
        self.columns.iter().map(|column| column.name.to_owned()).collect()
    }

    /// The table with the per-label thresholds of the model its rows come from (`None` for a
    /// model of one class per document), for a selection ([`Self::of`]) made before the
    /// model was known.
    pub fn with_label_thresholds(self, label_thresholds: Option<Arc<[f32]>>) -> Self {
        Self { settings: Settings { label_thresholds, ..self.settings }, ..self }
    }

    /// The table without the `dropped` columns (`--drop`), each of which it must have. A
    /// column of bytes takes its scale with it (`contribution` its `contribution_scale`); a
    /// scale dropped without its bytes is refused, as they would be unreadable. `tokens` also
    /// names `token_spans`, which a run writes in its place.
    pub fn without(self, dropped: &[String]) -> anyhow::Result<Self> {
        let names: Vec<&str> = self.columns.iter().map(|column| column.name).collect();
        let names_it =
            |name: &str, column: &Column| column.name == name || (column == &TOKEN_SPANS && name == TOKENS.name);
        for name in dropped {
            if name.trim().is_empty() {
                bail!(
                    "{}: an empty column name; give names separated by commas, e.g. {}",
                    spelling::name("drop"),
                    spelling::option_with("drop", "contribution,token_spans")
                );
            }
            if name == PREDICTION.name {
                bail!(
                    "{}: every reader of an output (the report, SQL's tables) needs it; keep it",
                    spelling::option_with("drop", "prediction")
                );
            }
            if !self.columns.iter().any(|column| names_it(name, column)) {
                bail!(
                    "{}: this run writes no column `{name}`; it writes {} (input columns are chosen with {})",
                    spelling::option_with("drop", name),
                    names.join(", "),
                    spelling::name("pass_through")
                );
            }
        }
        let scales = [(&CONTRIBUTION, &CONTRIBUTION_SCALE), (&LABEL_CONTRIBUTIONS, &LABEL_CONTRIBUTION_SCALES)];
        let gone = |column: &Column| dropped.iter().any(|name| names_it(name, column));
        for (values, scale) in scales {
            if gone(scale) && !gone(values) && names.contains(&values.name) {
                bail!(
                    "{}: {} holds bytes that only it turns into logit units; drop {} too, or keep both",
                    spelling::option_with("drop", scale.name),
                    values.name,
                    values.name
                );
            }
        }
        let scale_of_dropped = |column: &Column| scales.iter().any(|(values, scale)| *scale == column && gone(values));
        let columns = self.columns.into_iter().filter(|column| !gone(column) && !scale_of_dropped(column)).collect();
        Ok(Self { columns, ..self })
    }

    /// Just these columns, with weights as floats (`embedding`, whose width only a model
    /// knows, is left out).
    pub fn of(columns: &[&'static Column]) -> Self {
        let columns = columns.iter().copied().filter(|column| column.requires != Requires::Embedding).collect();
        Self {
            columns,
            settings: Settings {
                encoding: AttentionEncoding::Full,
                embedding_dim: 0,
                min_confidence: None,
                label_thresholds: None,
            },
        }
    }

    pub fn fields(&self) -> Vec<FieldRef> {
        let field = |column: &Column| Arc::new(Field::new(column.name, (column.data_type)(&self.settings), true));
        self.columns.iter().map(|column| field(column)).collect()
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
        let docs = rows
            .iter()
            .map(|row| row.as_ref().map(|doc| Ok((doc, Best::of(doc, labels, &self.settings)?))).transpose())
            .collect::<anyhow::Result<_>>()?;
        let rows = Rows { docs, labels, vocabulary, settings: &self.settings };
        self.columns.iter().map(|column| (column.fill)(&rows)).collect()
    }
}

/// The most probable class of one document.
struct Best<'a> {
    index: i32,
    label: &'a str,
    confidence: f32,
    /// Its confidence is below the run's threshold (or not a number): no prediction.
    abstained: bool,
    /// A multi-label model's labels for the document ([`DocumentPrediction::labels`]).
    labels: Option<Vec<usize>>,
}

impl<'a> Best<'a> {
    fn of(doc: &DocumentPrediction, labels: &'a [String], settings: &Settings) -> anyhow::Result<Self> {
        let best = doc.predicted_index();
        let (Some(label), Some(&confidence)) = (labels.get(best), doc.probabilities.get(best)) else {
            bail!(
                "the model returned {} probabilities for {} labels ({})",
                doc.probabilities.len(),
                labels.len(),
                labels.join(", ")
            );
        };
        Ok(Self {
            index: i32::try_from(best)?,
            label,
            confidence,
            abstained: doc.abstains(settings.min_confidence),
            labels: settings.label_thresholds.as_deref().map(|thresholds| doc.labels(thresholds)),
        })
    }
}

/// The rows a table is built from, with what their columns need.
struct Rows<'a> {
    /// `None` for a row without a prediction (null or empty text): null in every column.
    docs: Vec<Option<(&'a DocumentPrediction, Best<'a>)>>,
    labels: &'a [String],
    vocabulary: &'a Vocabulary,
    settings: &'a Settings,
}

impl Rows<'_> {
    /// One value per row.
    fn each<'s, T>(
        &'s self,
        value: impl Fn(&DocumentPrediction, &Best<'s>) -> T + 's,
    ) -> impl Iterator<Item = Option<T>> + 's {
        self.docs.iter().map(move |row| row.as_ref().map(|(doc, best)| value(doc, best)))
    }

    /// One list per row: `fill` appends a row's values to `values` and says whether the row
    /// has a list (when it appended nothing, the row's list is null).
    fn lists<B: ArrayBuilder>(
        &self,
        values: B,
        fill: impl Fn(&mut B, &DocumentPrediction) -> anyhow::Result<bool>,
    ) -> anyhow::Result<ArrayRef> {
        let mut builder = ListBuilder::new(values);
        for row in &self.docs {
            match row {
                Some((doc, _)) => {
                    let valid = fill(builder.values(), doc)?;
                    builder.append(valid);
                }
                None => builder.append_null(),
            }
        }
        Ok(Arc::new(builder.finish()))
    }
}

impl Rows<'_> {
    /// One list per row with an entry per predicted label: `fill` appends what the label's
    /// pushes give. Null where the row abstains or the model gave no contributions.
    fn label_lists<B: ArrayBuilder>(&self, values: B, fill: impl Fn(&mut B, &[f32])) -> anyhow::Result<ArrayRef> {
        let mut builder = ListBuilder::new(values);
        for row in &self.docs {
            match row {
                Some((doc, best)) if !best.abstained && doc.contribution.is_some() => {
                    let contributions = doc.contribution.as_deref().unwrap_or_default();
                    for &label in best.labels.iter().flatten() {
                        let pushes = contributions.get(label).context("pushes towards a label the model lacks")?;
                        fill(builder.values(), pushes);
                    }
                    builder.append(true);
                }
                _ => builder.append_null(),
            }
        }
        Ok(Arc::new(builder.finish()))
    }
}

/// Appends `values` to a list's values; says whether there were any (a null list if not).
fn append<T: arrow::datatypes::ArrowPrimitiveType>(
    builder: &mut arrow::array::PrimitiveBuilder<T>,
    values: Option<&[T::Native]>,
) -> bool {
    if let Some(values) = values {
        builder.append_slice(values);
    }
    values.is_some()
}

/// `weights`, or only the heaviest of them (`--attention top-k:N`).
fn kept(weights: &[f32], keep: Option<usize>) -> Cow<'_, [f32]> {
    match keep {
        Some(k) => Cow::Owned(keep_heaviest(weights, k)),
        None => Cow::Borrowed(weights),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::SentenceAttention;

    /// The output table in docs/run.md lists every column, in the order a table has them: a
    /// new column is not done until its row is there.
    #[test]
    fn the_documented_output_table_lists_every_column_in_order() {
        let docs = std::fs::read_to_string(test_support::repo_root().join("docs/run.md")).expect("docs/run.md");
        let section = docs.split("\n## Output table").nth(1).expect("an Output table section");
        let rows: Vec<&str> = section
            .lines()
            .skip_while(|line| !line.starts_with("| column |"))
            .take_while(|line| line.starts_with('|'))
            .filter_map(|line| line.strip_prefix("| `")?.split('`').next())
            .collect();
        let columns: Vec<&str> = COLUMNS.iter().map(|column| column.name).collect();
        assert_eq!(rows, columns);
    }

    /// A one-class model that writes attention and contributions, and nothing else optional.
    fn attention_and_pushes() -> OptionalColumns {
        OptionalColumns {
            attention: true,
            contribution: true,
            sentences: false,
            embedding_dim: None,
            label_thresholds: None,
        }
    }

    /// `--drop` leaves a column out with the scale its bytes need, and refuses what a table
    /// does not have or a scale without its bytes.
    #[test]
    fn dropped_columns_go_with_their_scales() {
        let table = || OutputTable::for_model(attention_and_pushes(), AttentionEncoding::Hops);
        let names = |table: OutputTable| table.columns.iter().map(|c| c.name).collect::<Vec<_>>();
        let all = names(table());
        let kept = names(table().without(&["attention".to_owned(), "contribution".to_owned()]).expect("drop"));
        assert_eq!(all.len() - 3, kept.len(), "{kept:?}");
        assert!(!kept.contains(&"contribution_scale") && kept.contains(&"attention_entropy"), "{kept:?}");
        let unknown = table().without(&["attentions".to_owned()]).expect_err("no such column").to_string();
        assert!(
            unknown.contains("writes no column `attentions`") && unknown.contains("attention_summary"),
            "{unknown}"
        );
        let scale = table().without(&["contribution_scale".to_owned()]).expect_err("bytes need it").to_string();
        assert!(scale.contains("drop contribution too"), "{scale}");
    }

    /// A column's name is reserved exactly once, and every reserved name is a column's.
    #[test]
    fn reserved_names_are_the_columns_names() {
        let names: std::collections::BTreeSet<&str> = reserved_names().collect();
        assert_eq!(names.len(), COLUMNS.len(), "a name is used twice");
        assert!(is_reserved("attention") && is_reserved("embedding") && !is_reserved("text"));
    }

    /// The schema and the arrays come from one list of columns, so they agree for every mix of
    /// optional columns, with null rows among the documents.
    #[test]
    fn fields_describe_the_built_arrays() {
        let doc = DocumentPrediction {
            probabilities: vec![0.3, 0.7],
            token_ids: vec![0, 1, 2],
            token_spans: None,
            attention: Some(vec![vec![0.2, 0.3, 0.5]]),
            contribution: Some(vec![vec![0.1, -0.2, 0.0], vec![-0.1, 0.2, 0.0]]),
            embedding: Some(vec![1.0, 2.0]),
            sentences: Some(SentenceAttention { lengths: vec![2, 1], weights: vec![0.4, 0.6] }),
            truncated: true,
        };
        let labels = ["neg".to_owned(), "pos".to_owned()];
        let vocabulary = Vocabulary::from_tokens(["a", "b", "c"]);
        let outputs = [AttentionEncoding::Full, AttentionEncoding::Compact, AttentionEncoding::None];
        for (attention, contribution, output) in column_choices(outputs) {
            for sentences in [false, true] {
                for embedding_dim in [None, Some(2)] {
                    let optional =
                        OptionalColumns { attention, contribution, sentences, embedding_dim, label_thresholds: None };
                    let table = OutputTable::for_model(optional, output);
                    let arrays = table.build(&[Some(doc.clone()), None], &labels, &vocabulary).expect("rows fit");
                    let schema = Arc::new(arrow::datatypes::Schema::new(table.fields()));
                    let batch = arrow::record_batch::RecordBatch::try_new(schema, arrays).expect("schema fits arrays");
                    assert_eq!(batch.num_rows(), 2);
                    // Compact: the summary; full: every hop and the summary.
                    let attention_columns = match output {
                        AttentionEncoding::None => 0,
                        AttentionEncoding::Compact => usize::from(attention),
                        _ => 2 * usize::from(attention),
                    };
                    // Compact pushes come with their scale.
                    let contribution_column = match output {
                        AttentionEncoding::None => 0,
                        AttentionEncoding::Compact => 2 * usize::from(contribution),
                        _ => usize::from(contribution),
                    };
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
    fn column_choices(outputs: [AttentionEncoding; 3]) -> Vec<(bool, bool, AttentionEncoding)> {
        let mut all = Vec::new();
        for attention in [false, true] {
            for contribution in [false, true] {
                all.extend(outputs.iter().map(|&output| (attention, contribution, output)));
            }
        }
        all
    }

    /// Where the text is in the output, the tokens are their places in it, and read back as
    /// the tokens: lower case, and `[UNK]` for a word the model does not know.
    #[test]
    fn token_spans_replace_the_token_strings_and_read_back_as_them() {
        use arrow::array::AsArray;
        use arrow::datatypes::Int64Type;
        let text = "A Zanuck film.";
        let doc = DocumentPrediction {
            probabilities: vec![0.3, 0.7],
            token_ids: vec![2, 1, 3, 4],
            token_spans: Some(vec![0..1, 2..8, 9..13, 13..14]),
            attention: None,
            contribution: None,
            embedding: None,
            sentences: None,
            truncated: false,
        };
        let vocabulary = Vocabulary::from_tokens(["[PAD]", "[UNK]", "a", "film", "."]);
        let optional = OptionalColumns { attention: false, ..attention_and_pushes() };
        let strings = OutputTable::for_model(optional.clone(), AttentionEncoding::Compact);
        let spans = strings.clone().with_token_spans(true);
        assert!(strings.has(&TOKENS) && !strings.has(&TOKEN_SPANS));
        assert!(spans.has(&TOKEN_SPANS) && !spans.has(&TOKENS));
        assert_eq!(
            spans.clone().without(&["tokens".to_owned()]).expect("tokens names the spans").names().len() + 1,
            spans.names().len()
        );
        let labels = ["neg".to_owned(), "pos".to_owned()];
        let arrays = spans.build(&[Some(doc.clone())], &labels, &vocabulary).expect("rows fit");
        let index = spans.names().iter().position(|name| name == "token_spans").expect("a token_spans column");
        let values = arrays[index].as_list::<i32>().value(0);
        let values = values.as_primitive::<Int64Type>().values().to_vec();
        assert_eq!(super::token_spans::decode(text, &values).expect("decodes"), ["a", "[UNK]", "film", "."]);
        let without_spans = DocumentPrediction { token_spans: None, ..doc };
        assert!(spans.build(&[Some(without_spans)], &labels, &vocabulary).is_err(), "spans the tokenizer did not give");
    }

    /// Compact output keeps what a heat map draws: the heaviest token of each hop is 255,
    /// the strongest push ±127 towards the second label, and the exact entropy per hop.
    #[test]
    fn compact_output_is_bytes_relative_to_the_heaviest_with_exact_entropies() {
        use arrow::array::AsArray;
        use arrow::datatypes::{Float32Type, Int8Type, UInt8Type};
        let doc = DocumentPrediction {
            probabilities: vec![0.3, 0.7],
            token_ids: vec![0, 1, 2],
            token_spans: None,
            attention: Some(vec![vec![0.2, 0.3, 0.5], vec![1.0, 0.0, 0.0]]),
            contribution: Some(vec![vec![0.4, -0.2, 0.1], vec![-0.4, 0.2, -0.1]]),
            embedding: None,
            sentences: None,
            truncated: false,
        };
        let optional = attention_and_pushes();
        let table = OutputTable::for_model(optional.clone(), AttentionEncoding::Hops);
        let names: Vec<String> = table.fields().iter().map(|f| f.name().clone()).collect();
        assert_eq!(
            &names[6..],
            ["attention", "attention_entropy", "attention_summary", "contribution", "contribution_scale"]
        );
        let labels = ["neg".to_owned(), "pos".to_owned()];
        let vocabulary = Vocabulary::from_tokens(["a", "b", "c"]);
        let arrays = table.build(&[Some(doc.clone())], &labels, &vocabulary).expect("rows fit");
        let hops = arrays[6].as_list::<i32>().value(0);
        let hops = hops.as_list::<i32>();
        assert_eq!(hops.value(0).as_primitive::<UInt8Type>().values().to_vec(), vec![102, 153, 255]);
        assert_eq!(hops.value(1).as_primitive::<UInt8Type>().values().to_vec(), vec![255, 0, 0]);
        let entropies = arrays[7].as_list::<i32>().value(0);
        let entropies = entropies.as_primitive::<Float32Type>().values().to_vec();
        let expected = -(0.2f32 * 0.2f32.ln() + 0.3 * 0.3f32.ln() + 0.5 * 0.5f32.ln());
        assert!((entropies[0] - expected).abs() < 1e-6 && entropies[1] == 0.0, "{entropies:?}");
        // The row of the second label, `pos`, scaled to the strongest.
        let summary = arrays[8].as_list::<i32>().value(0);
        assert_eq!(summary.as_primitive::<UInt8Type>().values().to_vec(), vec![255, 64, 106]);
        let pushes = arrays[9].as_list::<i32>().value(0);
        assert_eq!(pushes.as_primitive::<Int8Type>().values().to_vec(), vec![-127, 64, -32]);
        // The scale gives the pushes back in logit units, to within half a step.
        let scale = arrays[10].as_primitive::<Float32Type>().value(0);
        assert!((scale - 0.4 / 127.0).abs() < 1e-9, "{scale}");
        let back: Vec<f32> = pushes.as_primitive::<Int8Type>().values().iter().map(|&b| f32::from(b) * scale).collect();
        for (got, want) in back.iter().zip([-0.4f32, 0.2, -0.1]) {
            assert!((got - want).abs() <= scale / 2.0 + 1e-7, "{back:?}");
        }
        // Predicted `neg`, the pushes are still towards `pos`: a push means one class on every row.
        let on_neg = DocumentPrediction { probabilities: vec![0.8, 0.2], ..doc };
        let arrays = table.build(&[Some(on_neg)], &labels, &vocabulary).expect("rows fit");
        let pushes = arrays[9].as_list::<i32>().value(0);
        assert_eq!(pushes.as_primitive::<Int8Type>().values().to_vec(), vec![-127, 64, -32]);
        // Floats need no scale.
        let full = OutputTable::for_model(optional, AttentionEncoding::Full);
        assert!(full.fields().iter().all(|f| f.name() != "contribution_scale"));
    }

    #[test]
    fn tokens_are_spelled_from_the_vocabulary() {
        use arrow::array::AsArray;
        let doc = |token_ids| DocumentPrediction {
            probabilities: vec![0.3, 0.7],
            token_ids,
            token_spans: None,
            attention: None,
            contribution: None,
            embedding: None,
            sentences: None,
            truncated: false,
        };
        let table = OutputTable::of(&[&TOKENS]);
        let labels = ["neg".to_owned(), "pos".to_owned()];
        let vocabulary = Vocabulary::from_tokens(["[PAD]", "[UNK]", "film", "good"]);
        let arrays = table.build(&[Some(doc(vec![3, 2, 1]))], &labels, &vocabulary).expect("known ids");
        let tokens = arrays.first().expect("one column").as_list::<i32>().value(0);
        let tokens: Vec<&str> = tokens.as_string::<i32>().iter().flatten().collect();
        assert_eq!(tokens, ["good", "film", "[UNK]"]);
        let error = table.build(&[Some(doc(vec![2, 9]))], &labels, &vocabulary).expect_err("9 is not an id");
        assert!(error.to_string().contains("token id 9"), "{error}");
    }

    /// Below the threshold a row abstains: no prediction, `abstained` true, and its
    /// probabilities and pushes kept; at or above it, nothing changes.
    #[test]
    fn rows_below_the_threshold_abstain_and_keep_their_explanations() {
        use arrow::array::{Array, AsArray};
        use arrow::datatypes::Int32Type;
        let doc = |probabilities: Vec<f32>| DocumentPrediction {
            probabilities,
            token_ids: vec![0, 1],
            token_spans: None,
            attention: None,
            contribution: Some(vec![vec![0.1, -0.2], vec![-0.1, 0.2]]),
            embedding: None,
            sentences: None,
            truncated: false,
        };
        let optional = OptionalColumns {
            attention: false,
            contribution: true,
            sentences: false,
            embedding_dim: None,
            label_thresholds: None,
        };
        let plain = OutputTable::for_model(optional, AttentionEncoding::Full);
        assert!(plain.fields().iter().all(|f| f.name() != "abstained"), "no threshold, no column");
        let table = plain.abstaining_below(Some(0.8));
        let names: Vec<String> = table.fields().iter().map(|f| f.name().clone()).collect();
        assert_eq!(&names[..5], ["prediction", "prediction_index", "confidence", "abstained", "probabilities"]);
        let labels = ["neg".to_owned(), "pos".to_owned()];
        let vocabulary = Vocabulary::from_tokens(["a", "b"]);
        let rows = [Some(doc(vec![0.3, 0.7])), Some(doc(vec![0.2, 0.8])), None];
        let arrays = table.build(&rows, &labels, &vocabulary).expect("rows fit");
        let column = |name: &str| &arrays[names.iter().position(|n| n == name).expect("a column")];
        let prediction = column("prediction").as_string::<i32>();
        assert!(prediction.is_null(0) && prediction.value(1) == "pos" && prediction.is_null(2));
        let index = column("prediction_index").as_primitive::<Int32Type>();
        assert!(index.is_null(0) && index.value(1) == 1);
        let abstained = column("abstained").as_boolean();
        assert!(abstained.value(0) && !abstained.value(1) && abstained.is_null(2));
        for kept in ["confidence", "probabilities", "contribution", "tokens"] {
            assert!(column(kept).is_valid(0), "an abstaining row keeps `{kept}`");
        }
    }

    #[test]
    fn a_prediction_that_does_not_fit_the_labels_is_an_error() {
        let doc = DocumentPrediction {
            probabilities: vec![0.1, 0.2, 0.7],
            token_ids: vec![],
            token_spans: None,
            attention: None,
            contribution: None,
            embedding: None,
            sentences: None,
            truncated: false,
        };
        let table = OutputTable::of(&[&PREDICTION, &CONFIDENCE]);
        let labels = ["neg".to_owned(), "pos".to_owned()];
        let error = table.build(&[Some(doc)], &labels, &Vocabulary::default()).expect_err("3 probabilities, 2 labels");
        assert!(error.to_string().contains("3 probabilities for 2 labels"), "{error}");
    }
}

//! An output table read back (by the report): its columns found by name and cast to one
//! layout per column whatever the writer produced (`Utf8View`, `Float64`, large lists), and
//! compact bytes decoded to weights.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::{Context, bail};
use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float32Array, Float32Builder, Float64Array, Int32Array, ListArray,
    ListBuilder, StringArray,
};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Float32Type, Int32Type, Int64Type, Schema};
use arrow::record_batch::RecordBatch;
use batch_io::source::column_list;

use super::anchor::PushesTowards;
use super::columns::{
    ABSTAINED, ATTENTION, ATTENTION_ENTROPY, ATTENTION_SUMMARY, CONFIDENCE, CONTRIBUTION, CONTRIBUTION_SCALE,
    PREDICTED_LABELS, PREDICTION, SENTENCE_ATTENTION, SENTENCE_LENGTHS, TOKEN_SPANS, TOKENS, TRUNCATED,
};
use super::encoding::{AttentionEncoding, Values};
use super::keys::ATTENTION_ENCODING;
use super::token_spans;

/// Columns every output of `pipeline run` has; without them a file is something else.
const REQUIRED: [&str; 2] = [PREDICTION.name, CONFIDENCE.name];

/// Which optional columns the input has: the report shows a section only when its columns exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub label: Option<String>,
    pub id: bool,
    /// Tokens, as strings or as their places in the text.
    pub tokens: bool,
    /// The text column that `token_spans` count in, where the tokens are written as spans.
    pub token_spans_text: Option<String>,
    pub attention: bool,
    pub summary: bool,
    pub sentences: bool,
    /// The `truncated` column (outputs of versions before it have none).
    pub truncated: bool,
    /// The `abstained` column (runs with `--min-confidence`).
    pub abstained: bool,
    /// The `predicted_labels` column (multi-label models).
    pub predicted_labels: bool,
    /// `attention_entropy`, each hop's exact entropy (written with `--attention compact`).
    pub entropy: bool,
    /// `contribution`, each token's signed push towards [`Self::pushes_towards`].
    pub contribution: bool,
    /// Which class the pushes are towards, as the file records it.
    pub pushes_towards: PushesTowards,
    /// `contribution_scale`, beside compact pushes.
    pub contribution_scale: bool,
    /// The pushes can be read in logit units: floats, or compact bytes with their scale
    /// (outputs of versions before `contribution_scale` have bytes alone).
    pub pushes_in_logits: bool,
}

impl Layout {
    /// The layout of `schema` (of `file`). `label_column`: the one named by the user (an error
    /// if missing), or `None` for `label` when there is one.
    pub fn of(schema: &Schema, file: &str, label_column: Option<&str>) -> anyhow::Result<Self> {
        let has = |name: &str| schema.index_of(name).is_ok();
        let is_list = |name: &str| {
            schema.field_with_name(name).is_ok_and(|f| batch_io::source::is_label_list_type(f.data_type()))
        };
        let missing: Vec<&str> = REQUIRED.iter().copied().filter(|c| !has(c)).collect();
        if !missing.is_empty() {
            bail!(
                "{file} is not an output of `pipeline run`: it has no column {}; its columns are: {}",
                missing.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", "),
                column_list(&Arc::new(schema.clone()))
            );
        }
        refuse_wrong_types(schema, file)?;
        let label = match label_column {
            Some(name) if is_list(name) => bail!(
                "{file}: label column `{name}` holds lists of labels: the report scores one true label per row. \
                 Score a multi-label model with `pipeline eval --label-column {name}`, and leave --label-column out \
                 here for a report of its predictions"
            ),
            Some(name) if has(name) => Some(name.to_owned()),
            Some(name) => bail!(
                "{file} has no label column `{name}`; its columns are: {} (leave --label-column out for a report without accuracy)",
                column_list(&Arc::new(schema.clone()))
            ),
            None => (has("label") && !is_list("label")).then(|| "label".to_owned()),
        };
        // Spans in place of the strings, with the text they count in (a file without it, or
        // without the key naming it, has tokens nobody can read back).
        let token_spans_text = token_spans::text_column_of(schema).ok().flatten();
        let tokens = has(TOKENS.name) || token_spans_text.is_some();
        let contribution = tokens && has(CONTRIBUTION.name);
        let contribution_scale = contribution && has(CONTRIBUTION_SCALE.name);
        let float_pushes =
            contribution && schema.field_with_name(CONTRIBUTION.name).is_ok_and(|f| !integer_leaf(f.data_type(), 1));
        Ok(Self {
            label,
            id: has("id"),
            tokens,
            token_spans_text,
            attention: tokens && has(ATTENTION.name),
            summary: tokens && has(ATTENTION_SUMMARY.name),
            sentences: tokens && has(SENTENCE_LENGTHS.name) && has(SENTENCE_ATTENTION.name),
            truncated: has(TRUNCATED.name),
            abstained: has(ABSTAINED.name),
            predicted_labels: has(PREDICTED_LABELS.name),
            // Only beside compact (integer) attention, which it was written for.
            entropy: tokens && has(ATTENTION_ENTROPY.name) && compact_attention(schema),
            contribution,
            pushes_towards: PushesTowards::recorded(schema.metadata())
                .map_err(|problem| anyhow::anyhow!("{file}: {problem}; rerun `pipeline run` to write it anew"))?,
            contribution_scale,
            pushes_in_logits: contribution_scale || float_pushes,
        })
    }

    /// Leaves `contribution_scale` unread, and so the pushes not in logit units, when some
    /// file of the input has none (written before it).
    pub fn without_contribution_scale(&mut self) {
        if self.contribution_scale {
            self.contribution_scale = false;
            self.pushes_in_logits = false;
        }
    }

    /// The columns to read.
    pub fn columns(&self) -> Vec<String> {
        let mut columns: Vec<String> = REQUIRED.iter().map(|c| (*c).to_owned()).collect();
        columns.extend(self.label.clone());
        let optional = [
            ("id", self.id),
            (TOKENS.name, self.tokens && self.token_spans_text.is_none()),
            (TOKEN_SPANS.name, self.token_spans_text.is_some()),
            (ATTENTION.name, self.attention),
            (ATTENTION_SUMMARY.name, self.summary),
            (SENTENCE_LENGTHS.name, self.sentences),
            (SENTENCE_ATTENTION.name, self.sentences),
            (TRUNCATED.name, self.truncated),
            (ABSTAINED.name, self.abstained),
            (PREDICTED_LABELS.name, self.predicted_labels),
            (ATTENTION_ENTROPY.name, self.entropy),
            (CONTRIBUTION.name, self.contribution),
            (CONTRIBUTION_SCALE.name, self.contribution_scale),
        ];
        columns.extend(optional.iter().filter(|(_, present)| *present).map(|(name, _)| (*name).to_owned()));
        if let Some(text) = self.token_spans_text.as_ref().filter(|text| !columns.contains(text)) {
            columns.push(text.clone());
        }
        columns
    }
}

/// One record batch, cast to the layout the report reads.
pub struct Batch {
    pub prediction: StringArray,
    pub confidence: Float64Array,
    pub label: Option<StringArray>,
    pub id: Option<StringArray>,
    pub tokens: Option<ListArray>,
    pub attention: Option<ListArray>,
    pub summary: Option<ListArray>,
    pub sentence_lengths: Option<ListArray>,
    pub sentence_attention: Option<ListArray>,
    pub truncated: Option<BooleanArray>,
    pub abstained: Option<BooleanArray>,
    /// A multi-label model's labels for each row.
    pub predicted_labels: Option<ListArray>,
    pub entropy: Option<ListArray>,
    /// Relative to the row's strongest push under `--attention compact` (signed bytes).
    pub contribution: Option<ListArray>,
    /// Logit units per byte of `contribution`, under `--attention compact`.
    pub contribution_scale: Option<Float32Array>,
    pushes_in_logits: bool,
    pushes_towards: PushesTowards,
}

fn list_of(item: DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(item, true)))
}

impl Batch {
    /// `labels`: the model's label names in index order, to read an integer label column.
    /// `first_row` numbers the batch's rows within `file`, for messages.
    pub fn read(
        batch: &RecordBatch,
        layout: &Layout,
        labels: &[String],
        file: &str,
        first_row: usize,
    ) -> anyhow::Result<Self> {
        let column = |name: &str, to: &DataType| -> anyhow::Result<ArrayRef> {
            let array = batch.column_by_name(name).with_context(|| format!("{file}: no column `{name}`"))?;
            cast(array, to).with_context(|| {
                format!("{file}: column `{name}` is {}, which the report cannot read as {to}", array.data_type())
            })
        };
        let strings = |name: &str| -> anyhow::Result<StringArray> {
            Ok(column(name, &DataType::Utf8)?.as_string::<i32>().clone())
        };
        let list = |name: &str, item: DataType| -> anyhow::Result<ListArray> {
            Ok(column(name, &list_of(item))?.as_list::<i32>().clone())
        };
        let label = match &layout.label {
            Some(name) => Some(label_names(batch, name, labels, file)?),
            None => None,
        };
        let confidence: Float64Array = column(CONFIDENCE.name, &DataType::Float64)?.as_primitive().clone();
        if let Some(row) =
            (0..confidence.len()).find(|&row| confidence.is_valid(row) && !confidence.value(row).is_finite())
        {
            bail!(
                "{file}: row {}: `confidence` is {}; a `pipeline run` output holds a probability there (or null)",
                first_row + row,
                confidence.value(row)
            );
        }
        let batch_read = Self {
            prediction: strings(PREDICTION.name)?,
            confidence,
            label,
            id: layout.id.then(|| strings("id")).transpose()?,
            tokens: match &layout.token_spans_text {
                Some(text) => Some(tokens_from_spans(
                    &strings(text)?,
                    &list(TOKEN_SPANS.name, DataType::Int64)?,
                    file,
                    first_row,
                )?),
                None => layout.tokens.then(|| list(TOKENS.name, DataType::Utf8)).transpose()?,
            },
            attention: layout.attention.then(|| weights(batch, ATTENTION.name, true, file)).transpose()?,
            summary: layout.summary.then(|| weights(batch, ATTENTION_SUMMARY.name, false, file)).transpose()?,
            sentence_lengths: layout.sentences.then(|| list(SENTENCE_LENGTHS.name, DataType::Int32)).transpose()?,
            sentence_attention: layout
                .sentences
                .then(|| list(SENTENCE_ATTENTION.name, DataType::Float32))
                .transpose()?,
            truncated: layout
                .truncated
                .then(|| anyhow::Ok(column(TRUNCATED.name, &DataType::Boolean)?.as_boolean().clone()))
                .transpose()?,
            abstained: layout
                .abstained
                .then(|| anyhow::Ok(column(ABSTAINED.name, &DataType::Boolean)?.as_boolean().clone()))
                .transpose()?,
            predicted_labels: layout
                .predicted_labels
                .then(|| list(PREDICTED_LABELS.name, DataType::Utf8))
                .transpose()?,
            entropy: layout.entropy.then(|| list(ATTENTION_ENTROPY.name, DataType::Float32)).transpose()?,
            contribution: layout.contribution.then(|| list(CONTRIBUTION.name, DataType::Float32)).transpose()?,
            contribution_scale: layout
                .contribution_scale
                .then(|| anyhow::Ok(column(CONTRIBUTION_SCALE.name, &DataType::Float32)?.as_primitive().clone()))
                .transpose()?,
            pushes_in_logits: layout.pushes_in_logits,
            pushes_towards: layout.pushes_towards.clone(),
        };
        // Weights that are not finite would vanish from the tallies and be written into titles.
        let weight_columns = [
            (ATTENTION.name, batch_read.attention.as_ref().map(|hops| hops.values().as_list::<i32>().clone())),
            (ATTENTION_SUMMARY.name, batch_read.summary.clone()),
            (SENTENCE_ATTENTION.name, batch_read.sentence_attention.clone()),
            (CONTRIBUTION.name, batch_read.contribution.clone()),
        ];
        for (name, lists) in weight_columns {
            if let Some(lists) = lists {
                refuse_non_finite(
                    &lists,
                    batch_read.attention.as_ref().filter(|_| name == ATTENTION.name),
                    name,
                    file,
                    first_row,
                )?;
            }
        }
        Ok(batch_read)
    }

    /// Logit units per unit of row `row`'s `contribution` values: its scale for compact bytes
    /// (0 where it is null: every push was 0), 1 for floats; `None` for bytes without a scale.
    pub fn push_unit(&self, row: usize) -> Option<f32> {
        if !self.pushes_in_logits {
            return None;
        }
        Some(match &self.contribution_scale {
            Some(scales) if scales.is_valid(row) => scales.value(row),
            Some(_) => 0.0,
            None => 1.0,
        })
    }

    /// What turns row `row`'s pushes into pushes towards its prediction: −1 where they point
    /// at the other of two classes, 1 otherwise.
    pub fn push_sign(&self, row: usize) -> f32 {
        self.pushes_towards.sign_towards(self.prediction.value(row))
    }

    pub fn len(&self) -> usize {
        self.prediction.len()
    }

    pub fn is_empty(&self) -> bool {
        self.prediction.is_empty()
    }
}

/// The tokens that `spans` (a `token_spans` column) point at in `texts`, as a list of strings
/// per row; null where either is null.
pub fn tokens_from_spans(
    texts: &StringArray,
    spans: &ListArray,
    file: &str,
    first_row: usize,
) -> anyhow::Result<ListArray> {
    let mut builder = ListBuilder::new(arrow::array::StringBuilder::new());
    for row in 0..spans.len().min(texts.len()) {
        if spans.is_null(row) || texts.is_null(row) {
            builder.append_null();
            continue;
        }
        let values = spans.value(row);
        let values = values
            .as_primitive_opt::<Int64Type>()
            .filter(|values| values.null_count() == 0)
            .with_context(|| format!("{file}: row {}: `{}` holds a null", first_row + row, TOKEN_SPANS.name))?;
        let tokens = token_spans::decode(texts.value(row), values.values())
            .with_context(|| format!("{file}: row {}: `{}`", first_row + row, TOKEN_SPANS.name))?;
        for token in tokens {
            builder.values().append_value(token);
        }
        builder.append(true);
    }
    Ok(builder.finish())
}

/// What each column the report reads must be (the encodings `pipeline run` writes, and the
/// types other writers give them). A cast would otherwise turn a string `confidence` into
/// all-NULL and an empty chart, silently.
#[derive(Clone, Copy)]
enum Kind {
    Text,
    Float,
    /// A float or an integer (compact bytes).
    Number,
    Integer,
    Boolean,
    /// An id: text or an integer.
    Key,
}

const COLUMN_KINDS: &[(&str, usize, Kind)] = &[
    (PREDICTION.name, 0, Kind::Text),
    (CONFIDENCE.name, 0, Kind::Float),
    ("id", 0, Kind::Key),
    (TOKENS.name, 1, Kind::Text),
    (TOKEN_SPANS.name, 1, Kind::Integer),
    (ATTENTION.name, 2, Kind::Number),
    (ATTENTION_SUMMARY.name, 1, Kind::Number),
    (SENTENCE_LENGTHS.name, 1, Kind::Integer),
    (SENTENCE_ATTENTION.name, 1, Kind::Float),
    (TRUNCATED.name, 0, Kind::Boolean),
    (ABSTAINED.name, 0, Kind::Boolean),
    (ATTENTION_ENTROPY.name, 1, Kind::Float),
    (CONTRIBUTION.name, 1, Kind::Number),
];

fn is_kind(data_type: &DataType, depth: usize, kind: Kind) -> bool {
    match data_type {
        DataType::List(field) | DataType::LargeList(field) | DataType::ListView(field) if depth > 0 => {
            is_kind(field.data_type(), depth - 1, kind)
        }
        _ if depth > 0 => false,
        DataType::Dictionary(_, values) => is_kind(values, 0, kind),
        leaf => {
            let text = matches!(leaf, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
            match kind {
                Kind::Text => text,
                Kind::Float => leaf.is_floating(),
                Kind::Number => leaf.is_floating() || leaf.is_integer(),
                Kind::Integer => leaf.is_integer(),
                Kind::Boolean => matches!(leaf, DataType::Boolean),
                Kind::Key => text || leaf.is_integer(),
            }
        }
    }
}

/// Refuses a column the report reads whose type is not what `pipeline run` writes there,
/// naming it.
fn refuse_wrong_types(schema: &Schema, file: &str) -> anyhow::Result<()> {
    for (name, depth, kind) in COLUMN_KINDS {
        let Ok(field) = schema.field_with_name(name) else { continue };
        if !is_kind(field.data_type(), *depth, *kind) {
            let what = match kind {
                Kind::Text => "text",
                Kind::Float => "floating-point numbers",
                Kind::Number => "numbers",
                Kind::Integer => "integers",
                Kind::Boolean => "booleans",
                Kind::Key => "text or integers",
            };
            let shape = match depth {
                0 => what.to_owned(),
                1 => format!("a list of {what}"),
                _ => format!("a list of lists of {what}"),
            };
            bail!(
                "{file}: column `{name}` is {}, but a `pipeline run` output holds {shape} there; this file is not \
                 one, or the column was rewritten (rename it, or write it back as {shape})",
                field.data_type()
            );
        }
    }
    Ok(())
}

/// Whether `attention` holds bytes (`--attention compact`) rather than floats: as the run
/// recorded it, or for a file without that record (rewritten by another tool), as the column's
/// type shows.
fn compact_attention(schema: &Schema) -> bool {
    let recorded = schema.metadata().get(ATTENTION_ENCODING).and_then(|e| e.parse::<AttentionEncoding>().ok());
    match recorded {
        Some(encoding) => encoding.values() == Values::Bytes,
        None => schema.field_with_name(ATTENTION.name).is_ok_and(|f| integer_leaf(f.data_type(), 2)),
    }
}

/// Whether `data_type` is `depth` lists deep around integers (the compact encoding).
fn integer_leaf(data_type: &DataType, depth: usize) -> bool {
    match data_type {
        DataType::List(field) | DataType::LargeList(field) if depth > 0 => integer_leaf(field.data_type(), depth - 1),
        leaf => depth == 0 && leaf.is_integer(),
    }
}

/// A weights column (`attention`: hops × tokens, or `attention_summary`: tokens) as floats.
/// Compact output's bytes, relative to each list's heaviest token, are renormalised to sum
/// to one, so that every list weighs the same in the tallies whichever way it was written.
fn weights(batch: &RecordBatch, name: &str, hops: bool, file: &str) -> anyhow::Result<ListArray> {
    let array = batch.column_by_name(name).with_context(|| format!("{file}: no column `{name}`"))?;
    let floats = if hops { list_of(list_of(DataType::Float32)) } else { list_of(DataType::Float32) };
    let cast_floats = cast(array, &floats).with_context(|| {
        format!("{file}: column `{name}` is {}, which the report cannot read as {floats}", array.data_type())
    })?;
    let list = cast_floats.as_list::<i32>().clone();
    if !integer_leaf(array.data_type(), if hops { 2 } else { 1 }) {
        return Ok(list);
    }
    if !hops {
        return Ok(renormalised(&list));
    }
    let (field, offsets, values, nulls) = list.into_parts();
    let hops = renormalised(values.as_list::<i32>());
    Ok(ListArray::try_new(field, offsets, Arc::new(hops), nulls)?)
}

/// Refuses a NaN or infinite weight in `lists` (a `List<Float32>`), naming the row. For
/// `attention`, `lists` holds every hop of every row and `hops` maps them back to rows.
fn refuse_non_finite(
    lists: &ListArray,
    hops: Option<&ListArray>,
    name: &str,
    file: &str,
    first_row: usize,
) -> anyhow::Result<()> {
    let Some(list) =
        (0..lists.len()).find(|&i| floats_at(lists, i).is_some_and(|w| w.iter().flatten().any(|w| !w.is_finite())))
    else {
        return Ok(());
    };
    let row = match hops {
        // The row whose hops span `list`.
        Some(hops) => hops.value_offsets().windows(2).position(|span| {
            span.first().zip(span.get(1)).is_some_and(|(start, end)| (*start as usize..*end as usize).contains(&list))
        }),
        None => Some(list),
    };
    bail!(
        "{file}: row {}: `{name}` holds a weight that is not finite (NaN or infinity); the file was damaged or written \
         by a broken model, so it cannot be drawn",
        row.map_or_else(|| "?".to_owned(), |row| (first_row + row).to_string())
    )
}

/// Each list of a `List<Float32>` divided by its sum (a list summing to 0 is left as it is).
fn renormalised(lists: &ListArray) -> ListArray {
    let mut builder = ListBuilder::new(Float32Builder::new());
    for row in 0..lists.len() {
        let Some(weights) = floats_at(lists, row) else {
            builder.append_null();
            continue;
        };
        let total: f32 = weights.iter().flatten().sum();
        let scale = if total > 0.0 { 1.0 / total } else { 1.0 };
        builder.values().extend(weights.iter().map(|w| w.map(|w| w * scale)));
        builder.append(true);
    }
    builder.finish()
}

/// A label column as label names: strings as they are; integers as indices into the
/// model's labels (IMDB-style 0/1 labels), out-of-range ones kept as their number; floats
/// that are whole numbers (0.0/1.0, as pandas writes an integer column with nulls) as
/// integers. A float label that is not a whole number is an error naming the row.
fn label_names(batch: &RecordBatch, name: &str, labels: &[String], file: &str) -> anyhow::Result<StringArray> {
    let array = batch.column_by_name(name).with_context(|| format!("{file}: no column `{name}`"))?;
    if array.data_type().is_floating() {
        let values = cast(array, &DataType::Float64)?;
        let values = values.as_primitive::<arrow::datatypes::Float64Type>();
        if let Some(value) = values.iter().flatten().find(|v| !v.is_finite() || v.fract() != 0.0) {
            bail!(
                "{file}: label column `{name}` is {} and holds {value}, which is not a label index; give a \
                 string column of label names or an integer column of label indices",
                array.data_type()
            );
        }
        let indices = cast(array, &DataType::Int64)?;
        return label_names_from_indices(&indices, labels);
    }
    if array.data_type().is_integer() && !labels.is_empty() {
        let indices = cast(array, &DataType::Int64)?;
        return label_names_from_indices(&indices, labels);
    }
    let strings = cast(array, &DataType::Utf8).with_context(|| {
        format!("{file}: label column `{name}` is {}; give a string or integer column", array.data_type())
    })?;
    Ok(strings.as_string::<i32>().clone())
}

/// Integer labels as the model's label names (out-of-range ones kept as their number).
fn label_names_from_indices(indices: &ArrayRef, labels: &[String]) -> anyhow::Result<StringArray> {
    let indices = indices.as_primitive::<arrow::datatypes::Int64Type>();
    let by_index: HashMap<i64, &str> = labels.iter().enumerate().map(|(i, l)| (i as i64, l.as_str())).collect();
    Ok(indices
        .iter()
        .map(|index| index.map(|i| by_index.get(&i).map_or_else(|| i.to_string(), |l| (*l).to_owned())))
        .collect())
}

/// Row `row` of a `List<Utf8>` column, or `None` when null.
pub fn strings_at(list: &ListArray, row: usize) -> Option<StringArray> {
    list.is_valid(row).then(|| list.value(row).as_string::<i32>().clone())
}

/// Row `row` of a `List<Float32>` column, or `None` when null.
pub fn floats_at(list: &ListArray, row: usize) -> Option<Float32Array> {
    list.is_valid(row).then(|| list.value(row).as_primitive::<Float32Type>().clone())
}

/// Row `row` of a `List<Int32>` column, or `None` when null.
pub fn ints_at(list: &ListArray, row: usize) -> Option<Int32Array> {
    list.is_valid(row).then(|| list.value(row).as_primitive::<Int32Type>().clone())
}

/// Row `row` of a `List<List<Float32>>` column (hops × tokens), or `None` when null.
pub fn hops_at(list: &ListArray, row: usize) -> Option<ListArray> {
    list.is_valid(row).then(|| list.value(row).as_list::<i32>().clone())
}

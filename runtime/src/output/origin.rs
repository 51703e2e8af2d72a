//! Which run wrote an output file, as its schema tells: the metadata keys `pipeline run`
//! records (model, labels, `--attention` encoding) and the columns' types. A table or a report
//! over several files must not blend runs: a compact file's bytes read under a full file's
//! float schema (or the reverse) are cast silently, and tallies across models mean nothing.

use arrow::datatypes::Schema;

use super::anchor::PushesTowards;
use super::columns::CONTRIBUTION;
use super::keys::{ATTENTION_ENCODING, MODEL_LABELS, MODEL_SHA256};

/// What must agree between two files before they are read as one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SameRun {
    /// The attention encoding and every shared column's type (SQL tables: outputs of
    /// different models may be compared in one query).
    Encoding,
    /// That, and the model and its labels (the report's tallies).
    ModelAndEncoding,
}

/// Refuses `other` (named `other_name`) when it cannot be read together with `first`: a
/// metadata key in `check` that both record with different values, or a column both hold
/// with different types. `advice` ends the message: what the user should do instead.
pub fn refuse_mixed_runs(
    (first_name, first): (&str, &Schema),
    (other_name, other): (&str, &Schema),
    check: SameRun,
    advice: &str,
) -> anyhow::Result<()> {
    let keys: &[(&str, &str)] = match check {
        SameRun::Encoding => &[(ATTENTION_ENCODING, "--attention")],
        SameRun::ModelAndEncoding => {
            &[(MODEL_SHA256, "model sha256"), (MODEL_LABELS, "labels"), (ATTENTION_ENCODING, "--attention")]
        }
    };
    for (key, what) in keys {
        if let (Some(a), Some(b)) = (first.metadata().get(*key), other.metadata().get(*key))
            && a != b
        {
            anyhow::bail!(
                "{other_name} and {first_name} are outputs of different runs ({what} `{b}` in the one, `{a}` in the \
                 other); {advice}"
            );
        }
    }
    // Pushes towards the second label read with pushes towards each prediction would cancel.
    let has_pushes = |schema: &Schema| schema.index_of(CONTRIBUTION.name).is_ok();
    if has_pushes(first) && has_pushes(other) {
        let recorded = |name: &str, schema: &Schema| {
            PushesTowards::recorded(schema.metadata()).map_err(|problem| anyhow::anyhow!("{name}: {problem}; {advice}"))
        };
        let (ours, theirs) = (recorded(first_name, first)?, recorded(other_name, other)?);
        if ours != theirs {
            anyhow::bail!(
                "{other_name} and {first_name} hold pushes towards different classes (`contribution` {} in the one, {} \
                 in the other, as their `{}` metadata says); {advice}",
                theirs.describe(),
                ours.describe(),
                super::keys::CONTRIBUTION_TOWARDS
            );
        }
    }
    for field in other.fields() {
        if let Ok(theirs) = first.field_with_name(field.name())
            && !theirs.data_type().equals_datatype(field.data_type())
        {
            anyhow::bail!(
                "{other_name} and {first_name} are outputs of different runs or encodings: column `{}` is {} in the \
                 one and {} in the other; {advice}",
                field.name(),
                field.data_type(),
                theirs.data_type()
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use arrow::datatypes::{DataType, Field};

    use super::*;

    fn schema(weights: DataType, metadata: &[(&str, &str)]) -> Schema {
        let metadata: HashMap<String, String> =
            metadata.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        Schema::new(vec![Field::new("attention", DataType::List(Arc::new(Field::new("item", weights, true))), true)])
            .with_metadata(metadata)
    }

    #[test]
    fn files_of_one_run_pass_and_a_mix_is_named() {
        let compact = schema(DataType::UInt8, &[(ATTENTION_ENCODING, "compact"), (MODEL_SHA256, "aaa")]);
        let full = schema(DataType::Float32, &[(ATTENTION_ENCODING, "full"), (MODEL_SHA256, "aaa")]);
        let other_model = schema(DataType::UInt8, &[(ATTENTION_ENCODING, "compact"), (MODEL_SHA256, "bbb")]);
        let unmarked_full = schema(DataType::Float32, &[]);

        refuse_mixed_runs(("a", &compact), ("b", &compact), SameRun::ModelAndEncoding, "fix").unwrap();
        let error = refuse_mixed_runs(("a", &compact), ("b", &full), SameRun::Encoding, "query each alone")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("--attention `full`") && error.contains("b and a") && error.ends_with("query each alone")
        );
        // Without metadata the column types still tell.
        let error = refuse_mixed_runs(("a", &compact), ("b", &unmarked_full), SameRun::Encoding, "x").unwrap_err();
        assert!(error.to_string().contains("column `attention` is List"), "{error}");
        // Another model: a table may hold both, a report may not.
        refuse_mixed_runs(("a", &compact), ("b", &other_model), SameRun::Encoding, "x").unwrap();
        let error = refuse_mixed_runs(("a", &compact), ("b", &other_model), SameRun::ModelAndEncoding, "x");
        assert!(error.unwrap_err().to_string().contains("model sha256 `bbb`"));
    }

    const ENCODINGS: [(&str, DataType); 4] = [
        ("compact", DataType::UInt8),
        ("full", DataType::Float32),
        ("summary", DataType::Float32),
        ("top-k:4", DataType::Float32),
    ];

    proptest::proptest! {
        /// The class of input that broke (one folder of two encodings, with or without
        /// metadata): refused exactly when the encodings or the column types differ.
        #[test]
        fn two_outputs_are_refused_exactly_when_they_cannot_be_read_as_one(
            a in 0..ENCODINGS.len(), b in 0..ENCODINGS.len(), marked_a: bool, marked_b: bool,
        ) {
            let file = |i: usize, marked: bool| {
                let (name, leaf) = &ENCODINGS[i];
                let metadata = [(ATTENTION_ENCODING, *name)];
                schema(leaf.clone(), if marked { &metadata[..] } else { &[] })
            };
            let refused =
                refuse_mixed_runs(("a", &file(a, marked_a)), ("b", &file(b, marked_b)), SameRun::Encoding, "x").is_err();
            let types_differ = ENCODINGS[a].1 != ENCODINGS[b].1;
            proptest::prop_assert_eq!(refused, types_differ || (marked_a && marked_b && a != b));
        }
    }
}

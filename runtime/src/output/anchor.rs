//! Which class the `contribution` column's pushes are towards. With two classes, the second
//! label on every row, so that a push means the same class throughout a table and on every
//! card (a push towards one of two classes is as strong against the other); with more, each
//! row's prediction. The run records it under [`super::keys::CONTRIBUTION_TOWARDS`]; outputs
//! written before that key hold pushes towards each row's prediction.

use std::collections::HashMap;

use super::keys::{CONTRIBUTION_TOWARDS, MODEL_LABELS};

const PREDICTION: &str = "prediction";
const LABEL_PREFIX: &str = "label:";

/// Which class a row's pushes are towards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushesTowards {
    /// One label on every row (the second of two).
    Label(String),
    /// Each row's predicted class.
    Prediction,
}

impl PushesTowards {
    /// Where the pushes of a model with `labels` (in `probs` order) point.
    pub fn of_labels(labels: &[String]) -> Self {
        match labels {
            [_, second] => Self::Label(second.clone()),
            _ => Self::Prediction,
        }
    }

    /// The index into `classes` class scores of the class a row predicted as `predicted`
    /// has its pushes towards.
    pub fn class_index(classes: usize, predicted: usize) -> usize {
        if classes == 2 { 1 } else { predicted }
    }

    /// As an output's schema metadata records it; towards each row's prediction where it
    /// records nothing (written before the key). A value this version cannot read, or a label
    /// that is none of the model's (`model.labels`, where recorded), is an error: read as
    /// either, it would draw every push the wrong way round.
    pub fn recorded(metadata: &HashMap<String, String>) -> Result<Self, String> {
        let Some(value) = metadata.get(CONTRIBUTION_TOWARDS) else { return Ok(Self::Prediction) };
        let shown: String = value.chars().take(40).collect();
        let anchor = match value.strip_prefix(LABEL_PREFIX) {
            Some(label) if !label.is_empty() => Self::Label(label.to_owned()),
            _ if value == PREDICTION => Self::Prediction,
            _ => {
                return Err(format!(
                    "its metadata `{CONTRIBUTION_TOWARDS}` is `{shown}`, which is neither `{PREDICTION}` nor \
                     `{LABEL_PREFIX}NAME`"
                ));
            }
        };
        let labels: Option<Vec<String>> = metadata.get(MODEL_LABELS).and_then(|l| serde_json::from_str(l).ok());
        if let (Self::Label(label), Some(labels)) = (&anchor, labels)
            && !labels.contains(label)
        {
            let label: String = label.chars().take(40).collect();
            return Err(format!(
                "its metadata `{CONTRIBUTION_TOWARDS}` names the label `{label}`, which is none of the model's {labels:?}"
            ));
        }
        Ok(anchor)
    }

    /// The metadata value: `label:NAME` or `prediction`.
    pub fn metadata_value(&self) -> String {
        match self {
            Self::Label(label) => format!("{LABEL_PREFIX}{label}"),
            Self::Prediction => PREDICTION.to_owned(),
        }
    }

    /// What turns a push as written into a push towards the row's `prediction`: −1 where the
    /// row predicted the other of two classes, 1 otherwise.
    pub fn sign_towards(&self, prediction: &str) -> f32 {
        match self {
            Self::Label(label) if label != prediction => -1.0,
            _ => 1.0,
        }
    }

    /// How the column is described: "towards pos" or "towards each row's prediction".
    pub fn describe(&self) -> String {
        match self {
            Self::Label(label) => format!("towards {label}"),
            Self::Prediction => "towards each row's prediction".to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_classes_point_at_the_second_label_and_more_at_each_prediction() {
        let two = PushesTowards::of_labels(&["neg".to_owned(), "pos".to_owned()]);
        assert_eq!(two, PushesTowards::Label("pos".to_owned()));
        assert_eq!(PushesTowards::class_index(2, 0), 1);
        assert_eq!(two.sign_towards("neg"), -1.0);
        assert_eq!(two.sign_towards("pos"), 1.0);
        let three = PushesTowards::of_labels(&["a".to_owned(), "b".to_owned(), "c".to_owned()]);
        assert_eq!(three, PushesTowards::Prediction);
        assert_eq!(PushesTowards::class_index(3, 2), 2);
        assert_eq!(three.sign_towards("a"), 1.0);
    }

    #[test]
    fn the_metadata_value_reads_back_and_its_absence_means_each_prediction() {
        for anchor in [PushesTowards::Label("label:odd".to_owned()), PushesTowards::Prediction] {
            let metadata = HashMap::from([(CONTRIBUTION_TOWARDS.to_owned(), anchor.metadata_value())]);
            assert_eq!(PushesTowards::recorded(&metadata), Ok(anchor));
        }
        assert_eq!(PushesTowards::recorded(&HashMap::new()), Ok(PushesTowards::Prediction));
    }

    /// Read the wrong way, every push would be drawn turned round: refused instead.
    #[test]
    fn a_value_it_cannot_read_or_a_label_not_the_models_is_refused() {
        let labels = (MODEL_LABELS.to_owned(), r#"["neg","pos"]"#.to_owned());
        for value in ["label:", "garbage", "", "label:positive"] {
            let metadata = HashMap::from([(CONTRIBUTION_TOWARDS.to_owned(), value.to_owned()), labels.clone()]);
            let error = PushesTowards::recorded(&metadata).expect_err(value);
            assert!(error.contains(CONTRIBUTION_TOWARDS), "{error}");
        }
        let metadata = HashMap::from([(CONTRIBUTION_TOWARDS.to_owned(), "label:pos".to_owned()), labels]);
        assert_eq!(PushesTowards::recorded(&metadata), Ok(PushesTowards::Label("pos".to_owned())));
    }
}

//! Which class the `contribution` column's pushes are towards. With two classes, the second
//! label on every row, so that a push means the same class throughout a table and on every
//! card (a push towards one of two classes is as strong against the other); with more, each
//! row's prediction. The run records it under [`super::keys::CONTRIBUTION_TOWARDS`]; outputs
//! written before that key hold pushes towards each row's prediction.

use std::collections::HashMap;

use super::keys::CONTRIBUTION_TOWARDS;

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
    /// records nothing (written before the key) or something this version does not know.
    pub fn recorded(metadata: &HashMap<String, String>) -> Self {
        match metadata.get(CONTRIBUTION_TOWARDS).and_then(|value| value.strip_prefix(LABEL_PREFIX)) {
            Some(label) => Self::Label(label.to_owned()),
            None => Self::Prediction,
        }
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
            assert_eq!(PushesTowards::recorded(&metadata), anchor);
        }
        assert_eq!(PushesTowards::recorded(&HashMap::new()), PushesTowards::Prediction);
    }
}

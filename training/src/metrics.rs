//! Classification metrics that show failure on any corpus, not only on a balanced one: the
//! confusion matrix, per-class precision, recall and F1, macro-F1, and the classes a model
//! never predicts. `pipeline train` (on validation) and `pipeline eval` share them; a
//! multi-label model's figures are [`crate::label_sets`].

use serde::Serialize;

use crate::label_sets::LabelSets;

/// How a model did on labelled documents: one class each, or sets of labels.
#[derive(Debug, Clone, PartialEq)]
pub enum Scores {
    Classes(Confusion),
    LabelSets(LabelSets),
}

impl Scores {
    /// Documents scored.
    pub fn total(&self) -> usize {
        match self {
            Self::Classes(confusion) => confusion.total(),
            Self::LabelSets(sets) => sets.documents,
        }
    }

    /// Documents given their class, or exactly their set of labels.
    pub fn accuracy(&self) -> f64 {
        match self {
            Self::Classes(confusion) => confusion.accuracy(),
            Self::LabelSets(sets) => sets.subset_accuracy(),
        }
    }

    pub fn macro_f1(&self) -> f64 {
        match self {
            Self::Classes(confusion) => confusion.macro_f1(),
            Self::LabelSets(sets) => sets.macro_f1(),
        }
    }

    pub fn per_class(&self) -> Vec<ClassMetrics> {
        match self {
            Self::Classes(confusion) => confusion.per_class(),
            Self::LabelSets(sets) => sets.per_label(),
        }
    }

    /// Classes (or labels) with documents that the model never predicted.
    pub fn never_predicted(&self) -> Vec<ClassMetrics> {
        never_predicted(self.per_class())
    }

    pub fn warn_never_predicted(&self, part: &str) {
        warn_never_predicted(self.per_class(), part);
    }

    /// The per-class table, then the confusion matrix or the multi-label figures.
    pub fn table(&self) -> String {
        match self {
            Self::Classes(confusion) => confusion.table(),
            Self::LabelSets(sets) => sets.table(),
        }
    }

    /// What `--metrics-json` holds of them.
    pub fn json(&self) -> serde_json::Value {
        let mut json = serde_json::json!({
            "rows": self.total(),
            "accuracy": self.accuracy(),
            "macro_f1": self.macro_f1(),
            "per_class": self.per_class(),
            "never_predicted": self.never_predicted().into_iter().map(|c| c.label).collect::<Vec<_>>(),
        });
        match self {
            Self::Classes(confusion) => {
                json["labels"] = serde_json::json!(confusion.labels);
                json["confusion"] = serde_json::json!(confusion.counts);
            }
            Self::LabelSets(sets) => {
                json["labels"] = serde_json::json!(sets.labels);
                json["micro_f1"] = serde_json::json!(sets.micro_f1());
                json["thresholds"] = serde_json::json!(sets.thresholds);
            }
        }
        json
    }
}

/// `counts[true][predicted]` over `labels`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Confusion {
    pub labels: Vec<String>,
    pub counts: Vec<Vec<usize>>,
}

/// One class's figures; precision is 0 for a class never predicted, recall 0 for one absent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassMetrics {
    pub label: String,
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    /// Documents of this class.
    pub support: usize,
    /// Documents predicted as this class.
    pub predicted: usize,
}

impl Confusion {
    pub fn new(labels: Vec<String>) -> Self {
        let n = labels.len();
        Self { labels, counts: vec![vec![0; n]; n] }
    }

    /// Counts one document; indices outside the labels are ignored (they cannot come from a
    /// model with these outputs).
    pub fn add(&mut self, truth: usize, predicted: usize) {
        if let Some(cell) = self.counts.get_mut(truth).and_then(|row| row.get_mut(predicted)) {
            *cell += 1;
        }
    }

    pub fn total(&self) -> usize {
        self.counts.iter().flatten().sum()
    }

    pub fn accuracy(&self) -> f64 {
        let correct: usize = self.counts.iter().enumerate().filter_map(|(i, row)| row.get(i)).sum();
        correct as f64 / self.total().max(1) as f64
    }

    pub fn per_class(&self) -> Vec<ClassMetrics> {
        self.labels
            .iter()
            .enumerate()
            .map(|(c, label)| {
                let tp = self.counts.get(c).and_then(|row| row.get(c)).copied().unwrap_or(0);
                let predicted: usize = self.counts.iter().filter_map(|row| row.get(c)).sum();
                let support: usize = self.counts.get(c).map_or(0, |row| row.iter().sum());
                ClassMetrics::of(label, tp, predicted, support)
            })
            .collect()
    }

    pub fn macro_f1(&self) -> f64 {
        macro_f1(&self.per_class())
    }

    /// The per-class table and the confusion matrix, as `pipeline train` and `eval` print them.
    /// The matrix is left out past [`NAMED_CLASSES`] classes: nobody reads it that wide.
    pub fn table(&self) -> String {
        let width = label_width(&self.labels);
        let mut out = per_class_table(&self.per_class(), width);
        if self.labels.len() > NAMED_CLASSES {
            out += &format!(
                "confusion matrix left out: {} classes are too many to read; --metrics-json holds it\n",
                self.labels.len()
            );
            return out;
        }
        out += "confusion matrix (rows: true label, columns: predicted):\n";
        out += &format!("{:>width$}", "");
        for label in &self.labels {
            out += &format!(" {:>width$}", shown(label));
        }
        out += "\n";
        for (label, row) in self.labels.iter().zip(&self.counts) {
            out += &format!("{:>width$}", shown(label));
            for count in row {
                out += &format!(" {count:>width$}");
            }
            out += "\n";
        }
        out
    }
}

impl ClassMetrics {
    /// A class's figures from its true positives, documents predicted as it, and documents of it.
    pub fn of(label: &str, true_positives: usize, predicted: usize, support: usize) -> Self {
        Self {
            label: label.to_owned(),
            precision: ratio(true_positives, predicted),
            recall: ratio(true_positives, support),
            f1: ratio(2 * true_positives, predicted + support),
            support,
            predicted,
        }
    }
}

/// `n / d`, 0 when there is nothing to divide by.
pub fn ratio(n: usize, d: usize) -> f64 {
    if d == 0 { 0.0 } else { n as f64 / d as f64 }
}

/// Unweighted mean of the per-class F1 over the classes that have documents or were
/// predicted (as scikit-learn counts them): a class absent from a small validation file
/// says nothing of the model, and would otherwise count as an F1 of 0.
pub fn macro_f1(classes: &[ClassMetrics]) -> f64 {
    let seen: Vec<f64> = classes.iter().filter(|c| c.support > 0 || c.predicted > 0).map(|c| c.f1).collect();
    seen.iter().sum::<f64>() / seen.len().max(1) as f64
}

/// Classes with documents that the model never predicted: a model that looks accurate on an
/// imbalanced corpus can still ignore its small classes.
pub fn never_predicted(classes: Vec<ClassMetrics>) -> Vec<ClassMetrics> {
    classes.into_iter().filter(|c| c.predicted == 0 && c.support > 0).collect()
}

/// Logs a warning per class with documents that the model never predicted on `part`; past
/// [`NAMED_CLASSES`] of them, one line counts the rest.
pub fn warn_never_predicted(classes: Vec<ClassMetrics>, part: &str) {
    let never = never_predicted(classes);
    if never.len() > NAMED_CLASSES {
        tracing::warn!(
            "{} classes were never predicted on {part}; the first {NAMED_CLASSES} follow, and --metrics-json lists all",
            never.len()
        );
    }
    for class in never.into_iter().take(NAMED_CLASSES) {
        tracing::warn!(
            "class `{}` was never predicted on {part} ({} document(s) of it): the model ignores it. Give it more \
             documents, weigh classes equally (--class-weights balanced, which auto picks on imbalanced corpora), or \
             train for longer (--epochs, --patience)",
            shown(&class.label),
            class.support
        );
    }
}

/// The per-class rows of a table (precision, recall, F1, support), `width` characters to a
/// label.
pub fn per_class_table(classes: &[ClassMetrics], width: usize) -> String {
    let mut out = format!("{:>width$} {:>9} {:>9} {:>9} {:>9}\n", "class", "precision", "recall", "F1", "support");
    for c in classes {
        out += &format!(
            "{:>width$} {:>9.4} {:>9.4} {:>9.4} {:>9}\n",
            shown(&c.label),
            c.precision,
            c.recall,
            c.f1,
            c.support
        );
    }
    out
}

/// How wide a table's label column is: its longest label, capped (a format width past 65,535
/// panics, and a longer label overflows its column anyway).
pub fn label_width(labels: &[String]) -> usize {
    labels.iter().map(|l| shown(l).chars().count()).max().unwrap_or(4).clamp(8, 64)
}

/// A label as a table cell: tabs and line breaks escaped, so that a row stays one line.
fn shown(label: &str) -> String {
    label.escape_debug().to_string()
}

/// How many classes a warning names, and the widest confusion matrix printed.
pub const NAMED_CLASSES: usize = 50;

#[cfg(test)]
mod tests {
    use super::*;

    fn two_classes() -> Confusion {
        // class a: tp 8, fp 1, fn 2 -> F1 16/19; class b: tp 9, fp 2, fn 1 -> F1 18/21
        Confusion { labels: vec!["a".into(), "b".into()], counts: vec![vec![8, 2], vec![1, 9]] }
    }

    #[test]
    fn macro_f1_of_a_known_matrix() {
        let expected = (16.0 / 19.0 + 18.0 / 21.0) / 2.0;
        assert!((two_classes().macro_f1() - expected).abs() < 1e-12);
        assert!((two_classes().accuracy() - 17.0 / 20.0).abs() < 1e-12);
    }

    #[test]
    fn per_class_precision_and_recall() {
        let classes = two_classes().per_class();
        assert!((classes[0].precision - 8.0 / 9.0).abs() < 1e-12);
        assert!((classes[0].recall - 0.8).abs() < 1e-12);
        assert_eq!((classes[1].support, classes[1].predicted), (10, 11));
    }

    #[test]
    fn a_class_never_predicted_is_named() {
        let mut confusion = Confusion::new(vec!["big".into(), "small".into(), "absent".into()]);
        for _ in 0..9 {
            confusion.add(0, 0);
        }
        confusion.add(1, 0);
        let never: Vec<String> = never_predicted(confusion.per_class()).into_iter().map(|c| c.label).collect();
        // `absent` has no documents: not predicting it is no failure, nor part of macro-F1.
        assert_eq!(never, ["small"]);
        let big_f1 = 2.0 * 9.0 / (10.0 + 9.0);
        assert!((confusion.macro_f1() - big_f1 / 2.0).abs() < 1e-12, "{}", confusion.macro_f1());
        assert!(confusion.table().contains("small"));
    }
}

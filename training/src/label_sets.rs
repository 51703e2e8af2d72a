//! Multi-label figures: each document has a set of labels, and the model's is every label whose
//! probability reaches that label's threshold ([`labels_reaching`]). Per-label precision,
//! recall and F1, their macro and micro means, and how often the whole set was right; and the
//! thresholds themselves, tuned on validation for each label's F1.

use runtime::output::prediction::labels_reaching;
use serde::Serialize;

use crate::metrics::{ClassMetrics, label_width, macro_f1, per_class_table, ratio};

/// Counts over documents whose labels are sets.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LabelSets {
    pub labels: Vec<String>,
    /// The threshold each label was predicted at.
    pub thresholds: Vec<f32>,
    /// Per label: documents that have it and were given it.
    true_positives: Vec<usize>,
    /// Per label: documents given it.
    predicted: Vec<usize>,
    /// Per label: documents that have it.
    support: Vec<usize>,
    pub documents: usize,
    /// Documents given exactly their set of labels.
    exact: usize,
}

impl LabelSets {
    /// No document counted yet; labels will be given at `thresholds`.
    pub fn new(labels: Vec<String>, thresholds: &[f32]) -> Self {
        let n = labels.len();
        Self {
            labels,
            thresholds: thresholds.to_vec(),
            true_positives: vec![0; n],
            predicted: vec![0; n],
            support: vec![0; n],
            documents: 0,
            exact: 0,
        }
    }

    /// Scores `probabilities` (one row per document) against `truths` at `thresholds`.
    pub fn of<'a>(
        labels: Vec<String>,
        probabilities: &[Vec<f32>],
        truths: impl IntoIterator<Item = &'a [usize]>,
        thresholds: &[f32],
    ) -> Self {
        let mut sets = Self::new(labels, thresholds);
        for (probs, truth) in probabilities.iter().zip(truths) {
            sets.add(truth, &labels_reaching(probs, thresholds));
        }
        sets
    }

    /// Counts one document with labels `truth` given `predicted` (both in label order);
    /// indices outside the labels are ignored.
    pub fn add(&mut self, truth: &[usize], predicted: &[usize]) {
        self.documents += 1;
        let mut truth_sorted = truth.to_vec();
        truth_sorted.sort_unstable();
        truth_sorted.dedup();
        self.exact += usize::from(truth_sorted == predicted);
        let bump = |counts: &mut Vec<usize>, label: usize| {
            if let Some(count) = counts.get_mut(label) {
                *count += 1;
            }
        };
        for &label in &truth_sorted {
            bump(&mut self.support, label);
            if predicted.contains(&label) {
                bump(&mut self.true_positives, label);
            }
        }
        for &label in predicted {
            bump(&mut self.predicted, label);
        }
    }

    pub fn per_label(&self) -> Vec<ClassMetrics> {
        self.labels
            .iter()
            .enumerate()
            .map(|(c, label)| {
                let count = |counts: &[usize]| counts.get(c).copied().unwrap_or(0);
                ClassMetrics::of(label, count(&self.true_positives), count(&self.predicted), count(&self.support))
            })
            .collect()
    }

    /// The mean per-label F1 over the labels that have documents or were predicted (as for
    /// one class per document).
    pub fn macro_f1(&self) -> f64 {
        macro_f1(&self.per_label())
    }

    /// F1 over every (document, label) decision: frequent labels weigh more.
    pub fn micro_f1(&self) -> f64 {
        let sum = |counts: &[usize]| counts.iter().sum::<usize>();
        ratio(2 * sum(&self.true_positives), sum(&self.predicted) + sum(&self.support))
    }

    /// The share of documents given exactly their set of labels.
    pub fn subset_accuracy(&self) -> f64 {
        ratio(self.exact, self.documents)
    }

    /// The per-label table with its thresholds, and the means.
    pub fn table(&self) -> String {
        let mut out = per_class_table(&self.per_label(), label_width(&self.labels));
        out += &format!(
            "micro-F1 {:.4}, macro-F1 {:.4}, exact label sets {:.4}; thresholds {}\n",
            self.micro_f1(),
            self.macro_f1(),
            self.subset_accuracy(),
            self.thresholds.iter().map(|t| format!("{t:.2}")).collect::<Vec<_>>().join(" ")
        );
        out
    }
}

/// The thresholds [`tune_thresholds`] tries: 0.05 to 0.95 in steps of 0.05.
const CANDIDATES: usize = 19;

/// Each label's threshold: the one of [`CANDIDATES`] that gives it the best F1 on
/// `probabilities` against `truths` (of equals, the nearest to one half); one half for a
/// label no document has, where F1 cannot choose.
pub fn tune_thresholds(probabilities: &[Vec<f32>], truths: &[&[usize]], labels: usize) -> Vec<f32> {
    (0..labels)
        .map(|label| {
            let scored: Vec<(f32, bool)> = probabilities
                .iter()
                .zip(truths)
                .map(|(probs, truth)| (probs.get(label).copied().unwrap_or(0.0), truth.contains(&label)))
                .collect();
            let support = scored.iter().filter(|(_, has)| *has).count();
            if support == 0 {
                return 0.5;
            }
            let f1_at = |threshold: f32| {
                let given = scored.iter().filter(|(p, _)| *p >= threshold);
                let (predicted, right) = given.fold((0, 0), |(n, r), (_, has)| (n + 1, r + usize::from(*has)));
                ratio(2 * right, predicted + support)
            };
            let candidates = (1..=CANDIDATES).map(|i| i as f32 * 0.05);
            candidates
                .map(|t| (t, f1_at(t)))
                .fold((0.5f32, f64::NEG_INFINITY), |best, (t, f1)| {
                    let nearer = (t - 0.5).abs() < (best.0 - 0.5).abs();
                    if f1 > best.1 || (f1 == best.1 && nearer) { (t, f1) } else { best }
                })
                .0
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels() -> Vec<String> {
        ["grain", "trade", "wheat"].map(String::from).to_vec()
    }

    #[test]
    fn figures_of_known_sets() {
        let mut sets = LabelSets::new(labels(), &[0.5; 3]);
        sets.add(&[0, 2], &[0, 2]); // exact
        sets.add(&[1], &[0, 1]); // one extra
        sets.add(&[2, 0], &[0]); // one missed, truth out of order
        // grain: tp 2, predicted 3, support 2; trade: 1, 1, 1; wheat: 1, 1, 2.
        let f1 = |tp: f64, p: f64, s: f64| 2.0 * tp / (p + s);
        let expected_macro = (f1(2.0, 3.0, 2.0) + f1(1.0, 1.0, 1.0) + f1(1.0, 1.0, 2.0)) / 3.0;
        assert!((sets.macro_f1() - expected_macro).abs() < 1e-12);
        assert!((sets.micro_f1() - f1(4.0, 5.0, 5.0)).abs() < 1e-12);
        assert!((sets.subset_accuracy() - 1.0 / 3.0).abs() < 1e-12);
        assert!(sets.table().contains("micro-F1 0.8000"), "{}", sets.table());
    }

    #[test]
    fn thresholds_follow_each_labels_f1() {
        // Label 0 is present exactly when its probability is at least 0.3; label 1 when at
        // least 0.8; label 2 never.
        let probabilities = vec![vec![0.35, 0.85, 0.1], vec![0.32, 0.7, 0.2], vec![0.1, 0.9, 0.1], vec![0.2, 0.6, 0.3]];
        let truths: Vec<&[usize]> = vec![&[0, 1], &[0], &[1], &[]];
        let thresholds = tune_thresholds(&probabilities, &truths, 3);
        assert!((0.2..=0.31).contains(&thresholds[0]), "{thresholds:?}");
        assert!((0.74..=0.86).contains(&thresholds[1]), "{thresholds:?}");
        assert_eq!(thresholds[2], 0.5);
        let tuned = LabelSets::of(labels(), &probabilities, truths.iter().copied(), &thresholds);
        let half = LabelSets::of(labels(), &probabilities, truths.iter().copied(), &[0.5; 3]);
        assert!(tuned.macro_f1() > half.macro_f1());
    }
}

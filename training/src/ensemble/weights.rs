//! How much each member of an ensemble counts: the non-negative weights `w` that minimise the
//! validation log-loss of `softmax(Σ wₘ·zₘ)`, where `zₘ` are member m's log-probabilities.
//!
//! The loss is convex in `w`, so projected gradient descent reaches its minimum. The weights'
//! sum acts as a temperature, so the combined probabilities come out calibrated on validation
//! as the members' own temperatures do.

/// One member's log-probabilities on the validation documents, `[documents × classes]`.
pub type MemberScores = Vec<f64>;

/// Smallest probability taken from a member: a log of exactly 0 would be −∞.
const FLOOR: f64 = 1e-30;

/// `ln p`, floored so that a member certain of a class does not make the others' −∞.
pub fn log_probabilities(probs: &[f32]) -> MemberScores {
    probs.iter().map(|&p| f64::from(p).max(FLOOR).ln()).collect()
}

/// The combined distribution over the classes of document `doc`.
pub fn combined(members: &[MemberScores], weights: &[f64], classes: usize, doc: usize) -> Vec<f64> {
    let mut scores = vec![0.0; classes];
    for (member, &weight) in members.iter().zip(weights) {
        let row = member.get(doc * classes..(doc + 1) * classes).unwrap_or_default();
        for (score, z) in scores.iter_mut().zip(row) {
            *score += weight * z;
        }
    }
    softmax(&mut scores);
    scores
}

fn softmax(scores: &mut [f64]) {
    let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut total = 0.0;
    for s in scores.iter_mut() {
        *s = (*s - max).exp();
        total += *s;
    }
    for s in scores.iter_mut() {
        *s /= total;
    }
}

/// Mean negative log-likelihood of `labels` under the weights, and its gradient in them.
pub fn log_loss(members: &[MemberScores], weights: &[f64], labels: &[usize], classes: usize) -> (f64, Vec<f64>) {
    let mut loss = 0.0;
    let mut gradient = vec![0.0; members.len()];
    for (doc, &label) in labels.iter().enumerate() {
        let q = combined(members, weights, classes, doc);
        loss -= q.get(label).copied().unwrap_or(0.0).max(FLOOR).ln();
        for (member, g) in members.iter().zip(&mut gradient) {
            let row = member.get(doc * classes..(doc + 1) * classes).unwrap_or_default();
            for (class, (&p, z)) in q.iter().zip(row).enumerate() {
                *g += (p - f64::from(u8::from(class == label))) * z;
            }
        }
    }
    let n = labels.len().max(1) as f64;
    (loss / n, gradient.into_iter().map(|g| g / n).collect())
}

/// The weights of least validation log-loss, each at least 0, starting from equal weights
/// summing to 1 (the members' geometric mean).
pub fn fit_weights(members: &[MemberScores], labels: &[usize], classes: usize) -> Vec<f64> {
    let mut weights = vec![1.0 / members.len().max(1) as f64; members.len()];
    let (mut loss, mut gradient) = log_loss(members, &weights, labels, classes);
    let mut step = 1.0;
    for _ in 0..500 {
        // Backtracking on the projected step until the loss falls enough (Armijo).
        let improved = loop {
            let candidate: Vec<f64> = weights.iter().zip(&gradient).map(|(w, g)| (w - step * g).max(0.0)).collect();
            let moved: f64 = weights.iter().zip(&candidate).zip(&gradient).map(|((w, c), g)| g * (w - c)).sum();
            let (candidate_loss, candidate_gradient) = log_loss(members, &candidate, labels, classes);
            if candidate_loss <= loss - 1e-4 * moved && moved > 0.0 {
                break Some((candidate, candidate_loss, candidate_gradient));
            }
            step /= 2.0;
            if step < 1e-12 {
                break None;
            }
        };
        let Some((candidate, candidate_loss, candidate_gradient)) = improved else { break };
        let gain = loss - candidate_loss;
        (weights, loss, gradient) = (candidate, candidate_loss, candidate_gradient);
        if gain < 1e-9 {
            break;
        }
        step *= 2.0;
    }
    weights
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two documents per class, two classes; `right` of every 10 get the true class at `p`.
    fn member(p: f32, right_of_ten: usize, labels: &[usize]) -> MemberScores {
        let probs: Vec<f32> = labels
            .iter()
            .enumerate()
            .flat_map(|(doc, &label)| {
                let guessed = if doc % 10 < right_of_ten { label } else { 1 - label };
                if guessed == 0 { [p, 1.0 - p] } else { [1.0 - p, p] }
            })
            .collect();
        log_probabilities(&probs)
    }

    #[test]
    fn the_better_member_gets_the_larger_weight_and_a_useless_one_none() {
        let labels: Vec<usize> = (0..400).map(|i| (i / 3) % 2).collect();
        // Right 9 times in 10, and a member right half the time, at random to the labels.
        let good = member(0.8, 9, &labels);
        let noise = member(0.9, 5, &labels);
        let weights = fit_weights(&[good.clone(), noise.clone()], &labels, 2);
        assert!(weights[0] > 0.5, "the good member should count: {weights:?}");
        assert!(weights[1] < 0.05 * weights[0], "the coin-flip member should count for little: {weights:?}");
        let (fitted, _) = log_loss(&[good.clone(), noise.clone()], &weights, &labels, 2);
        let (equal, _) = log_loss(&[good, noise], &[0.5, 0.5], &labels, 2);
        assert!(fitted < equal, "fitted weights must not lose to equal ones: {fitted} vs {equal}");
    }

    #[test]
    fn the_scale_calibrates_an_underconfident_member() {
        // Right 9 times in 10 but saying 0.6: the weight sharpens it towards 0.9.
        let labels: Vec<usize> = (0..400).map(|i| i % 2).collect();
        let shy = member(0.6, 9, &labels);
        let weights = fit_weights(std::slice::from_ref(&shy), &labels, 2);
        let confidence = combined(&[shy], &weights, 2, 0)[labels[0]];
        assert!((confidence - 0.9).abs() < 0.01, "calibrated confidence {confidence}, weights {weights:?}");
    }

    #[test]
    fn a_member_certain_of_a_wrong_class_stays_finite() {
        let probs = [0.0f32, 1.0, 1.0, 0.0];
        let scores = log_probabilities(&probs);
        let (loss, gradient) = log_loss(&[scores], &[1.0], &[0, 0], 2);
        assert!(loss.is_finite() && gradient.iter().all(|g| g.is_finite()), "{loss} {gradient:?}");
    }
}

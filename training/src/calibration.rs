//! Calibrated probabilities by temperature scaling (Guo et al. 2017): one number T, fitted on
//! the validation documents to minimise their negative log-likelihood, divides every logit.
//! It is folded into the model's last layer before export ([`Network::divide_logits`]), so
//! the graph itself gives the calibrated probabilities on every backend, and the tokens'
//! contributions, which are in logit units, stay exact for them. T never changes a prediction.
//! A multi-label model's T divides each label's own logit, fitted on every (document, label)
//! decision; its calibration error is that of those decisions.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::fit::{Example, Task, padded};
use crate::layers::TokenBatch;
use crate::models::Network;

/// Bins of the expected calibration error: the usual 15, of equal width.
pub const ECE_BINS: usize = 15;

/// The fitted temperature and what it did on validation.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Calibration {
    pub temperature: f64,
    pub ece_before: f64,
    pub ece_after: f64,
    pub nll_before: f64,
    pub nll_after: f64,
    /// What chance alone makes of `ece_after` on these few validation documents.
    pub ece_by_chance: ChanceError,
}

/// Fits the temperature of `model` on `examples` and returns the model with it folded in;
/// with `fit` false, measures the model as it is (temperature 1).
pub fn calibrate<M: Network>(
    model: M,
    examples: &[Example],
    batch_size: usize,
    fit: bool,
    task: Task,
) -> anyhow::Result<(M, Calibration)> {
    let (logits, labels) = validation_logits(&model, examples, batch_size)?;
    let temperature = if fit { fit_temperature(&logits, &labels, task) } else { 1.0 };
    // The error, the log-likelihood and the confidences at temperature `t`.
    let score = |t: f64| {
        let (confidences, correct) = decisions(&logits, &labels, t, task);
        let ece = expected_calibration_error(&confidences, &correct);
        (ece, negative_log_likelihood(&logits, &labels, t, task), confidences)
    };
    let (ece_before, nll_before, confidences_before) = score(1.0);
    let (mut temperature, (mut ece_after, mut nll_after, mut confidences)) = (temperature, score(temperature));
    if temperature != 1.0 && ece_after > ece_before {
        // On a small validation split the fitted T can lower the NLL and still worsen the
        // calibration error it is meant to cut; then the model stays as trained.
        tracing::warn!(
            "temperature {temperature:.3} would raise the validation calibration error from {ece_before:.4} to \
             {ece_after:.4} ({} documents): kept the model uncalibrated. A larger --valid split calibrates better",
            examples.len()
        );
        (temperature, ece_after, nll_after, confidences) = (1.0, ece_before, nll_before, confidences_before);
    } else if !(0.06..=45.0).contains(&temperature) {
        tracing::warn!(
            "temperature {temperature:.3} lies at the edge of the searched range [0.05, 50]: the model's validation \
             confidences are extreme, so its probabilities are only partly calibrated"
        );
    }
    let ece_by_chance = chance_calibration_error(&confidences);
    let calibration = Calibration { temperature, ece_before, ece_after, nll_before, nll_after, ece_by_chance };
    let model = if temperature == 1.0 { model } else { model.divide_logits(temperature as f32) };
    Ok((model, calibration))
}

/// Each decision's confidence and whether it was right: a document's most probable class,
/// or each (document, label) pair of a multi-label model, decided at one half.
fn decisions(logits: &[Vec<f64>], labels: &[Vec<usize>], temperature: f64, task: Task) -> (Vec<f64>, Vec<bool>) {
    let rows = logits.iter().zip(labels);
    match task {
        Task::OneClass => rows
            .map(|(row, truth)| {
                let probs = softmax(row, temperature);
                let best = argmax(&probs);
                (probs.get(best).copied().unwrap_or(0.0), truth.first() == Some(&best))
            })
            .unzip(),
        Task::MultiLabel => rows
            .flat_map(|(row, truth)| {
                row.iter().enumerate().map(move |(label, &logit)| {
                    let p = sigmoid(logit / temperature);
                    (p.max(1.0 - p), (p >= 0.5) == truth.contains(&label))
                })
            })
            .unzip(),
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// A document's classes: one, or a multi-label document's labels.
type LabelSet = Vec<usize>;

/// Each validation document's logits (inference mode) and its classes.
fn validation_logits<M: Network>(
    model: &M,
    examples: &[Example],
    batch_size: usize,
) -> anyhow::Result<(Vec<Vec<f64>>, Vec<LabelSet>)> {
    let device = model.devices().into_iter().next().ok_or_else(|| anyhow::anyhow!("model has no device"))?;
    let (mut logits, mut labels) = (Vec::with_capacity(examples.len()), Vec::with_capacity(examples.len()));
    let indices: Vec<usize> = (0..examples.len()).collect();
    for chunk in indices.chunks(batch_size.max(1)) {
        let batch = TokenBatch::new(&padded(examples, chunk), &device);
        let output = model.forward(&batch).logits;
        let [rows, classes] = output.dims();
        let values = output.into_data().convert::<f64>().try_to_vec::<f64>().map_err(|e| anyhow::anyhow!("{e:?}"))?;
        logits.extend(values.chunks(classes.max(1)).take(rows).map(<[f64]>::to_vec));
        labels.extend(chunk.iter().map(|&i| examples[i].labels.clone()));
    }
    Ok((logits, labels))
}

fn softmax(logits: &[f64], temperature: f64) -> Vec<f64> {
    let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let exps: Vec<f64> = logits.iter().map(|l| ((l - max) / temperature).exp()).collect();
    let sum: f64 = exps.iter().sum();
    exps.into_iter().map(|e| e / sum).collect()
}

fn argmax(values: &[f64]) -> usize {
    values.iter().enumerate().fold((0, f64::NEG_INFINITY), |best, (i, &v)| if v > best.1 { (i, v) } else { best }).0
}

/// Mean negative log-likelihood of the labels at `temperature`: of each document's class, or
/// of each (document, label) decision of a multi-label model.
fn negative_log_likelihood(logits: &[Vec<f64>], labels: &[Vec<usize>], temperature: f64, task: Task) -> f64 {
    let rows = logits.iter().zip(labels);
    let (total, count): (f64, usize) = match task {
        Task::OneClass => rows
            .map(|(row, truth)| {
                let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let log_sum = row.iter().map(|l| ((l - max) / temperature).exp()).sum::<f64>().ln();
                let label = truth.first().copied().unwrap_or_default();
                (log_sum - (row.get(label).copied().unwrap_or(max) - max) / temperature, 1)
            })
            .fold((0.0, 0), |(t, n), (v, k)| (t + v, n + k)),
        Task::MultiLabel => rows
            .flat_map(|(row, truth)| {
                row.iter().enumerate().map(move |(label, &logit)| {
                    // −log σ(±x) = softplus(∓x), written to stay finite for large |x|.
                    let x = (if truth.contains(&label) { logit } else { -logit }) / temperature;
                    ((-x).max(0.0) + (-x.abs()).exp().ln_1p(), 1)
                })
            })
            .fold((0.0, 0), |(t, n), (v, k)| (t + v, n + k)),
    };
    total / count.max(1) as f64
}

/// The temperature minimising the validation NLL. The NLL is convex in 1/T, so a
/// golden-section search over 1/T in [0.02, 20] finds it (T between 0.05 and 50).
pub fn fit_temperature(logits: &[Vec<f64>], labels: &[Vec<usize>], task: Task) -> f64 {
    let nll = |inverse: f64| negative_log_likelihood(logits, labels, 1.0 / inverse, task);
    let ratio = (5f64.sqrt() - 1.0) / 2.0;
    let (mut low, mut high) = (0.02f64, 20.0f64);
    for _ in 0..100 {
        let a = high - ratio * (high - low);
        let b = low + ratio * (high - low);
        if nll(a) <= nll(b) {
            high = b;
        } else {
            low = a;
        }
    }
    let inverse = (low + high) / 2.0;
    // A temperature that does not lower the NLL (a model already calibrated) stays 1.
    if nll(inverse) < nll(1.0) { 1.0 / inverse } else { 1.0 }
}

/// Expected calibration error: over [`ECE_BINS`] equal-width bins of the top probability,
/// the documents' share times |accuracy − mean confidence| in the bin.
pub fn expected_calibration_error(confidences: &[f64], correct: &[bool]) -> f64 {
    let mut bins = vec![(0usize, 0usize, 0.0f64); ECE_BINS];
    for (&confidence, &right) in confidences.iter().zip(correct) {
        let bin = ((confidence * ECE_BINS as f64) as usize).min(ECE_BINS - 1);
        if let Some((count, hits, sum)) = bins.get_mut(bin) {
            *count += 1;
            *hits += usize::from(right);
            *sum += confidence;
        }
    }
    let total = confidences.len().max(1) as f64;
    bins.iter()
        .filter(|(count, _, _)| *count > 0)
        .map(|&(count, hits, sum)| count as f64 / total * (hits as f64 / count as f64 - sum / count as f64).abs())
        .sum()
}

/// How large an expected calibration error chance alone makes on this many decisions: the
/// errors a perfectly calibrated model with these confidences shows when each decision is right
/// with exactly its confidence, over [`CHANCE_DRAWS`] draws. On a few hundred documents it is
/// several hundredths (0.02–0.04 on the 216 of the topics fixture's test file), so an error
/// below it says the model is as calibrated as the documents can tell.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ChanceError {
    /// The mean over the draws.
    pub mean: f64,
    /// Nineteen draws in twenty are below this.
    pub p95: f64,
}

/// Draws behind [`ChanceError`]: enough that its mean moves by well under a thousandth.
pub const CHANCE_DRAWS: usize = 200;

/// The calibration error of a perfectly calibrated model with these `confidences`, by chance
/// alone (seeded, so the same decisions give the same figures).
pub fn chance_calibration_error(confidences: &[f64]) -> ChanceError {
    let mut rng = StdRng::seed_from_u64(0x5eed);
    let mut errors: Vec<f64> = (0..CHANCE_DRAWS)
        .map(|_| {
            let correct: Vec<bool> = confidences.iter().map(|&c| rng.random::<f64>() < c).collect();
            expected_calibration_error(confidences, &correct)
        })
        .collect();
    errors.sort_by(f64::total_cmp);
    let mean = errors.iter().sum::<f64>() / CHANCE_DRAWS as f64;
    let p95 = errors.get(CHANCE_DRAWS * 95 / 100).copied().unwrap_or(mean);
    ChanceError { mean, p95 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_overconfident_model_is_cooled() {
        // Logits 5 apart but right only 3 times in 4: the fitted T spreads the probability.
        let logits: Vec<Vec<f64>> =
            (0..400).map(|i| if i % 2 == 0 { vec![5.0, 0.0] } else { vec![0.0, 5.0] }).collect();
        let labels: Vec<Vec<usize>> = (0..400).map(|i| vec![if i % 4 == 3 { 1 - (i % 2) } else { i % 2 }]).collect();
        let t = fit_temperature(&logits, &labels, Task::OneClass);
        // The NLL is lowest where softmax(5 / T) = 0.75: T = 5 / ln 3.
        assert!((t - 5.0 / 3f64.ln()).abs() < 1e-3, "{t}");
    }

    #[test]
    fn an_overconfident_multi_label_model_is_cooled() {
        // Each label's logit is ±4 and right 4 times in 5: σ(4 / T) = 0.8 at T = 4 / ln 4.
        let logits: Vec<Vec<f64>> = (0..500).map(|i| vec![if i % 2 == 0 { 4.0 } else { -4.0 }; 2]).collect();
        let labels: Vec<Vec<usize>> =
            (0..500).map(|i| if (i % 2 == 0) == (i % 5 != 4) { vec![0, 1] } else { vec![] }).collect();
        let t = fit_temperature(&logits, &labels, Task::MultiLabel);
        assert!((t - 4.0 / 4f64.ln()).abs() < 1e-3, "{t}");
    }

    #[test]
    fn calibration_error_of_known_bins() {
        // All at 0.9 confidence, right 60 %: ECE 0.3. Perfectly calibrated: 0.
        let confidences = vec![0.9; 10];
        let correct: Vec<bool> = (0..10).map(|i| i < 6).collect();
        assert!((expected_calibration_error(&confidences, &correct) - 0.3).abs() < 1e-12);
        let correct: Vec<bool> = (0..10).map(|i| i < 9).collect();
        assert!(expected_calibration_error(&confidences, &correct).abs() < 1e-12);
    }

    #[test]
    fn chance_makes_a_larger_calibration_error_on_fewer_decisions() {
        // A model right 95 % of the time and saying so is calibrated, yet its measured error is
        // not 0: larger on 200 decisions than on 20,000.
        let few = chance_calibration_error(&vec![0.95; 200]);
        let many = chance_calibration_error(&vec![0.95; 20_000]);
        assert!(few.mean > 3.0 * many.mean, "{few:?} {many:?}");
        assert!(few.p95 > few.mean && many.mean > 0.0, "{few:?} {many:?}");
        // One bin at 0.95: the error is |hits/n − 0.95|, whose mean is about
        // sqrt(2/π · 0.95 · 0.05 / n), 0.0123 for n = 200.
        assert!((few.mean - 0.0123).abs() < 0.002, "{few:?}");
        // Certain decisions are always right: nothing is left to chance.
        assert_eq!(chance_calibration_error(&[1.0; 50]).mean, 0.0);
    }
}

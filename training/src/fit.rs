//! The training loop shared by every variant: length-bucketed shuffled mini-batches, Adam with
//! gradient-norm clipping, an optionally class-weighted loss, validation each epoch, early
//! stopping on validation macro-F1 (accuracy would reward ignoring the small classes), and
//! optionally losses on perturbed embeddings ([`crate::adversarial`]).

use std::time::Instant;

use batch_io::progress::{Progress, Unit};
use burn::grad_clipping::GradientClippingConfig;
use burn::nn::loss::{BinaryCrossEntropyLoss, BinaryCrossEntropyLossConfig, CrossEntropyLoss, CrossEntropyLossConfig};
use burn::optim::{AdamConfig, GradientsAccumulator, GradientsParams};
use burn::prelude::*;
use burn::tensor::activation::{log_softmax, sigmoid, softmax};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use runtime::inference::ModelInputs;

use crate::adversarial::{Perturbation, adversarial_logits, virtual_adversarial_loss};
use crate::data::vocabulary::PAD_ID;
use crate::label_sets::{LabelSets, tune_thresholds};
use crate::layers::TokenBatch;
use crate::metrics::{Confusion, Scores};
use crate::models::{Network, NetworkOutput, Perturbable};

/// One tokenized document and its class indices: one, or for a multi-label corpus one or more.
#[derive(Debug, Clone)]
pub struct Example {
    pub ids: Vec<i64>,
    pub labels: Vec<usize>,
    /// For hierarchical models: tokens per sentence (they sum to `ids.len()`).
    pub sentence_lengths: Option<Vec<usize>>,
    /// A teacher's target distribution over the classes (`pipeline train --teacher`): the loss
    /// aims at it instead of the class alone.
    pub soft_targets: Option<Vec<f32>>,
}

impl Example {
    /// The document's (first) class: its class when it has one, and the one a stratified split
    /// keeps it with when it has several.
    pub fn label(&self) -> usize {
        self.labels.first().copied().unwrap_or_default()
    }
}

/// What a model's outputs mean.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Task {
    /// One class per document: a softmax over the classes.
    #[default]
    OneClass,
    /// Any number of labels per document: each label's own sigmoid.
    MultiLabel,
}

impl Task {
    pub fn probabilities(self, logits: Tensor<2>) -> Tensor<2> {
        match self {
            Self::OneClass => softmax(logits, 1),
            Self::MultiLabel => sigmoid(logits),
        }
    }
}

/// How a model is trained (`TrainingFlags` resolved for one variant).
#[derive(Debug, Clone, serde::Serialize)]
pub struct TrainConfig {
    pub epochs: usize,
    pub patience: usize,
    pub batch_size: usize,
    pub learning_rate: f64,
    pub clip_norm: f32,
    pub seed: u64,
    /// The loss's weight of each class, in the order of the labels; `None` weighs every
    /// document the same.
    pub class_weights: Option<Vec<f32>>,
    /// Fit a temperature on validation after training ([`crate::calibration`]).
    pub calibrate: bool,
    pub task: Task,
    /// Losses also taken on perturbed embeddings ([`crate::adversarial`]).
    #[serde(flatten)]
    pub perturbation: Perturbation,
}

impl TrainConfig {
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.epochs > 0, "--epochs must be at least 1");
        anyhow::ensure!(self.batch_size > 0, "--batch-size must be at least 1");
        // `x > 0.0` is false for NaN; finiteness rules out inf, which trains a NaN model.
        anyhow::ensure!(
            self.learning_rate > 0.0 && self.learning_rate.is_finite(),
            "--learning-rate must be a positive number"
        );
        anyhow::ensure!(self.clip_norm > 0.0 && self.clip_norm.is_finite(), "--clip-norm must be a positive number");
        self.perturbation.validate()
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct EpochStats {
    pub epoch: usize,
    pub loss: f64,
    pub penalty: f64,
    pub train_accuracy: f64,
    pub validation_accuracy: f64,
    pub validation_macro_f1: f64,
    pub seconds: f64,
    pub docs_per_second: f64,
}

pub struct TrainedModel<M> {
    /// The weights of the best validation epoch, on the plain (non-autodiff) device.
    pub model: M,
    pub history: Vec<EpochStats>,
    pub best_epoch: usize,
}

impl<M> TrainedModel<M> {
    pub fn best(&self) -> Option<&EpochStats> {
        self.history.iter().find(|e| e.epoch == self.best_epoch)
    }
}

/// Groups examples into batches of similar length (less padding), in a random order.
fn length_bucketed_batches(examples: &[Example], batch_size: usize, rng: &mut StdRng) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..examples.len()).collect();
    order.shuffle(rng);
    let mut batches = Vec::new();
    for window in order.chunks(batch_size * 32) {
        let mut window = window.to_vec();
        window.sort_by_key(|&i| examples[i].ids.len());
        batches.extend(window.chunks(batch_size).map(<[usize]>::to_vec));
    }
    batches.shuffle(rng);
    batches
}

/// The batch in the layout the examples carry: `[batch, seq]`, or `[batch, sentences, words]`
/// when they were cut into sentences.
pub fn padded(examples: &[Example], indices: &[usize]) -> ModelInputs {
    let hierarchical: Option<Vec<(&[i64], &[usize])>> = indices
        .iter()
        .map(|&i| examples[i].sentence_lengths.as_deref().map(|lengths| (examples[i].ids.as_slice(), lengths)))
        .collect();
    match hierarchical {
        Some(documents) => ModelInputs::sentences_padded(&documents, PAD_ID),
        None => {
            let sequences: Vec<&[i64]> = indices.iter().map(|&i| examples[i].ids.as_slice()).collect();
            ModelInputs::right_padded(&sequences, PAD_ID)
        }
    }
}

fn targets(examples: &[Example], indices: &[usize], device: &Device) -> Tensor<1, Int> {
    let labels: Vec<i64> = indices.iter().map(|&i| examples[i].label() as i64).collect();
    Tensor::from_data(TensorData::new(labels, [indices.len()]), device)
}

/// `[batch, classes]`: each document's teacher targets, or its class as a one-hot row where it
/// has none; `None` when no document of the batch has any.
fn soft_targets(examples: &[Example], indices: &[usize], classes: usize, device: &Device) -> Option<Tensor<2>> {
    indices.iter().any(|&i| examples[i].soft_targets.is_some()).then(|| {
        let mut rows = vec![0.0f32; indices.len() * classes];
        for (row, &i) in indices.iter().enumerate() {
            let cells = &mut rows[row * classes..(row + 1) * classes];
            match &examples[i].soft_targets {
                Some(targets) => cells.iter_mut().zip(targets).for_each(|(cell, t)| *cell = *t),
                None => {
                    if let Some(cell) = cells.get_mut(examples[i].label()) {
                        *cell = 1.0;
                    }
                }
            }
        }
        Tensor::from_data(TensorData::new(rows, [indices.len(), classes]), device)
    })
}

/// `[batch, classes]`: 1 where the document has the label.
fn label_targets(examples: &[Example], indices: &[usize], classes: usize, device: &Device) -> Tensor<2, Int> {
    let mut hot = vec![0i64; indices.len() * classes];
    for (row, &i) in indices.iter().enumerate() {
        for &label in &examples[i].labels {
            if let Some(cell) = hot.get_mut(row * classes + label) {
                *cell = 1;
            }
        }
    }
    Tensor::from_data(TensorData::new(hot, [indices.len(), classes]), device)
}

/// The loss of the task: cross-entropy over the classes, or each label's binary cross-entropy.
enum Objective {
    OneClass(CrossEntropyLoss),
    MultiLabel(BinaryCrossEntropyLoss),
}

impl Objective {
    fn new(config: &TrainConfig, device: &Device) -> Self {
        match config.task {
            Task::OneClass => {
                Self::OneClass(CrossEntropyLossConfig::new().with_weights(config.class_weights.clone()).init(device))
            }
            Task::MultiLabel => Self::MultiLabel(BinaryCrossEntropyLossConfig::new().with_logits(true).init(device)),
        }
    }

    /// The batch's loss, and how many of its documents the model got right (their class, or
    /// exactly their set of labels at probability one half).
    fn forward(&self, logits: Tensor<2>, examples: &[Example], indices: &[usize]) -> (Tensor<1>, usize) {
        let device = logits.device();
        match self {
            Self::OneClass(loss) => {
                let expected = targets(examples, indices, &device);
                let right = count_correct(logits.clone(), expected.clone());
                match soft_targets(examples, indices, logits.dims()[1], &device) {
                    // −Σ t·log q, averaged over the documents (a teacher's targets weigh no class).
                    Some(soft) => (-(soft * log_softmax(logits, 1)).sum_dim(1).mean(), right),
                    None => (loss.forward(logits, expected), right),
                }
            }
            Self::MultiLabel(loss) => {
                let [_, classes] = logits.dims();
                let expected = label_targets(examples, indices, classes, &device);
                let predicted = logits.clone().greater_elem(0.0).int();
                let exact = predicted.equal(expected.clone()).int().min_dim(1).sum().into_scalar::<i64>();
                // Summed over the labels, averaged over the documents: burn averages over both,
                // which divides each label's gradient by the number of labels (with 90, the
                // fast tier had learned almost nothing of the small labels after 26 epochs).
                (loss.forward(logits, expected) * classes as f32, usize::try_from(exact).unwrap_or(0))
            }
        }
    }
}

/// One training step's gradients, and what the epoch's line reports of it.
struct Step {
    gradients: GradientsParams,
    /// The loss on the documents as they are, with the penalty.
    loss: f64,
    penalty: f64,
    right: usize,
}

/// The step of plain training: the loss on the batch, and its gradients.
fn plain_step<M: Network>(
    model: &M,
    objective: &Objective,
    batch: &TokenBatch,
    examples: &[Example],
    indices: &[usize],
) -> Step {
    let (loss, step) = scored(objective, model.forward(batch), examples, indices);
    Step { gradients: GradientsParams::from_grads(loss.backward(), model), ..step }
}

/// The batch's loss with the model's penalty, and the step's figures of it (its gradients
/// still empty).
fn scored(objective: &Objective, output: NetworkOutput, examples: &[Example], indices: &[usize]) -> (Tensor<1>, Step) {
    let (mut loss, right) = objective.forward(output.logits, examples, indices);
    let mut penalty = 0.0;
    if let Some(regularizer) = output.regularizer {
        penalty = scalar(regularizer.clone());
        loss = loss + regularizer;
    }
    let value = scalar(loss.clone());
    (loss, Step { gradients: GradientsParams::new(), loss: value, penalty, right })
}

/// The step of training on perturbed embeddings: the plain loss, plus the adversarial loss on
/// the batch and the virtual adversarial loss on `unlabelled` (or, without it, on the batch).
#[allow(clippy::too_many_arguments)]
fn perturbed_step<M: Network>(
    model: &M,
    network: &dyn Perturbable,
    objective: &Objective,
    config: &TrainConfig,
    batch: &TokenBatch,
    examples: &[Example],
    indices: &[usize],
    unlabelled: Option<&TokenBatch>,
) -> Step {
    let words = network.embed(batch);
    // A zero push that keeps its gradient: the loss's gradient with respect to the embeddings.
    let probe = Tensor::<3>::zeros(words.dims(), &words.device()).require_grad();
    let output = network.forward_embedded(words + probe.clone(), batch);
    let clean = output.logits.clone().detach();
    let (loss, step) = scored(objective, output, examples, indices);
    let mut gradients = loss.backward();
    let gradient = probe.grad_remove(&mut gradients);
    let mut accumulated = GradientsAccumulator::<M>::new();
    accumulated.accumulate(model, GradientsParams::from_grads(gradients, model));

    let mut extra: Option<Tensor<1>> = None;
    if let (Some(share), Some(gradient)) = (config.perturbation.adversarial, gradient) {
        let logits = adversarial_logits(network, batch, gradient, share as f32);
        extra = Some(objective.forward(logits, examples, indices).0);
    }
    if let Some(share) = config.perturbation.virtual_adversarial {
        let divergence = match unlabelled {
            Some(other) => {
                let clean = network.forward_embedded(network.embed(other), other).logits;
                virtual_adversarial_loss(network, other, clean, share as f32, config.task)
            }
            None => virtual_adversarial_loss(network, batch, clean, share as f32, config.task),
        };
        extra = Some(match extra {
            Some(adversarial) => adversarial + divergence,
            None => divergence,
        });
    }
    if let Some(extra) = extra {
        accumulated.accumulate(model, GradientsParams::from_grads(extra.backward(), model));
    }
    Step { gradients: accumulated.grads(), ..step }
}

/// Batches of the unlabelled documents, one per training step, round and round (reshuffled
/// each time round).
struct Cycle<'a> {
    examples: &'a [Example],
    batch_size: usize,
    rng: StdRng,
    batches: Vec<Vec<usize>>,
}

impl<'a> Cycle<'a> {
    fn new(examples: &'a [Example], batch_size: usize, seed: u64) -> Self {
        // Its own generator, so the labelled batches come in the same order with or without it.
        Self { examples, batch_size, rng: StdRng::seed_from_u64(seed.wrapping_add(1)), batches: Vec::new() }
    }

    fn next_batch(&mut self) -> Option<Vec<usize>> {
        if self.examples.is_empty() {
            return None;
        }
        if self.batches.is_empty() {
            self.batches = length_bucketed_batches(self.examples, self.batch_size, &mut self.rng);
        }
        self.batches.pop()
    }
}

/// Trains `model` (created on an autodiff device) to tell `labels` apart and returns the best
/// epoch's weights. `unlabelled` documents serve the virtual adversarial loss only.
pub fn train<M: Network>(
    mut model: M,
    labels: &[String],
    train_set: &[Example],
    validation_set: &[Example],
    unlabelled: &[Example],
    config: &TrainConfig,
) -> anyhow::Result<TrainedModel<M>> {
    config.validate()?;
    anyhow::ensure!(!train_set.is_empty(), "no training examples left after tokenization");
    anyhow::ensure!(!validation_set.is_empty(), "no validation examples left after tokenization");
    anyhow::ensure!(
        !config.perturbation.is_used() || model.perturbable().is_some(),
        "--adversarial and --virtual-adversarial perturb the word embeddings of --variant san only"
    );
    let device = model.devices().into_iter().next().ok_or_else(|| anyhow::anyhow!("model has no device"))?;
    let mut rng = StdRng::seed_from_u64(config.seed);
    let mut unlabelled_batches = Cycle::new(unlabelled, config.batch_size, config.seed);
    let mut optimizer =
        AdamConfig::new().with_grad_clipping(Some(GradientClippingConfig::Norm(config.clip_norm))).init();
    let objective = Objective::new(config, &device);

    let mut history = Vec::new();
    let mut best: Option<(usize, f64, M)> = None;
    for epoch in 1..=config.epochs {
        let started = Instant::now();
        let batches = length_bucketed_batches(train_set, config.batch_size, &mut rng);
        let mut progress = Progress::new(format!("epoch {epoch}"), Unit::Docs, Some(train_set.len()));
        let (mut loss_sum, mut penalty_sum, mut correct) = (0.0, 0.0, 0usize);
        for indices in &batches {
            let batch = TokenBatch::new(&padded(train_set, indices), &device);
            let step = match model.perturbable().filter(|_| config.perturbation.is_used()) {
                Some(network) => {
                    let other = unlabelled_batches
                        .next_batch()
                        .map(|other| TokenBatch::new(&padded(unlabelled, &other), &device));
                    perturbed_step(&model, network, &objective, config, &batch, train_set, indices, other.as_ref())
                }
                None => plain_step(&model, &objective, &batch, train_set, indices),
            };
            correct += step.right;
            penalty_sum += step.penalty * indices.len() as f64;
            loss_sum += step.loss * indices.len() as f64;
            model = optimizer.step(config.learning_rate, model, step.gradients);
            progress.advance(indices.len());
        }
        progress.finish();
        let seconds = started.elapsed().as_secs_f64();
        let evaluated = model.valid();
        let validation = score(&evaluated, validation_set, labels.to_vec(), config, None)?;
        let validation_macro_f1 = validation.macro_f1();
        let n = train_set.len() as f64;
        let stats = EpochStats {
            epoch,
            loss: loss_sum / n,
            penalty: penalty_sum / n,
            train_accuracy: correct as f64 / n,
            validation_accuracy: validation.accuracy(),
            validation_macro_f1,
            seconds,
            docs_per_second: n / seconds,
        };
        tracing::info!(
            "epoch {epoch}: loss {:.4}  penalty {:.4}  train acc {:.4}  valid acc {:.4}  valid macro-F1 {:.4}  {:.0} docs/s  {:.0} s",
            stats.loss,
            stats.penalty,
            stats.train_accuracy,
            stats.validation_accuracy,
            stats.validation_macro_f1,
            stats.docs_per_second,
            stats.seconds
        );
        history.push(stats);
        let improved = best.as_ref().is_none_or(|(_, macro_f1, _)| validation_macro_f1 > *macro_f1);
        if improved {
            best = Some((epoch, validation_macro_f1, evaluated));
        } else if best.as_ref().is_some_and(|(best_epoch, _, _)| epoch - best_epoch >= config.patience) {
            tracing::info!("no better validation macro-F1 for {} epoch(s): stopping early", config.patience);
            break;
        }
    }
    let (best_epoch, _, model) = best.ok_or_else(|| anyhow::anyhow!("training ran no epoch"))?;
    Ok(TrainedModel { model, history, best_epoch })
}

fn scalar(tensor: Tensor<1>) -> f64 {
    tensor.into_data().convert::<f64>().try_to_vec::<f64>().ok().and_then(|v| v.first().copied()).unwrap_or(f64::NAN)
}

fn count_correct(logits: Tensor<2>, expected: Tensor<1, Int>) -> usize {
    let predicted = logits.argmax(1).flatten::<1>(0, 1);
    predicted.equal(expected).int().sum().into_scalar::<i64>() as usize
}

/// How a model in inference mode (dropout off) does on `examples`, whose classes are `labels`:
/// its confusion matrix, or for a multi-label model its label sets under `thresholds` (when
/// `None`, those tuned on `examples` themselves, as the packaged model's will be: at one half,
/// a label's F1 says little until the end of training, and would stop it early).
pub fn score<M: Network>(
    model: &M,
    examples: &[Example],
    labels: Vec<String>,
    config: &TrainConfig,
    thresholds: Option<&[f32]>,
) -> anyhow::Result<Scores> {
    let probabilities = probabilities(model, examples, config)?;
    let truths = examples.iter().map(|e| e.labels.as_slice());
    Ok(match config.task {
        Task::OneClass => {
            let mut confusion = Confusion::new(labels);
            for (probs, example) in probabilities.iter().zip(examples) {
                confusion.add(example.label(), argmax(probs));
            }
            Scores::Classes(confusion)
        }
        Task::MultiLabel => {
            let thresholds = match thresholds {
                Some(thresholds) => thresholds.to_vec(),
                None => {
                    let truths: Vec<&[usize]> = truths.clone().collect();
                    tune_thresholds(&probabilities, &truths, labels.len())
                }
            };
            Scores::LabelSets(LabelSets::of(labels, &probabilities, truths, &thresholds))
        }
    })
}

/// Each example's probabilities, in the order of `examples`.
pub fn probabilities<M: Network>(
    model: &M,
    examples: &[Example],
    config: &TrainConfig,
) -> anyhow::Result<Vec<Vec<f32>>> {
    let device = model.devices().into_iter().next().ok_or_else(|| anyhow::anyhow!("model has no device"))?;
    let mut order: Vec<usize> = (0..examples.len()).collect();
    order.sort_by_key(|&i| examples[i].ids.len());
    let mut probabilities = vec![Vec::new(); examples.len()];
    for indices in order.chunks(config.batch_size.max(1)) {
        let batch = TokenBatch::new(&padded(examples, indices), &device);
        let probs = config.task.probabilities(model.forward(&batch).logits);
        let [_, classes] = probs.dims();
        let values = probs.into_data().convert::<f32>().try_to_vec::<f32>().map_err(|e| anyhow::anyhow!("{e:?}"))?;
        for (&i, row) in indices.iter().zip(values.chunks(classes.max(1))) {
            if let Some(slot) = probabilities.get_mut(i) {
                *slot = row.to_vec();
            }
        }
    }
    Ok(probabilities)
}

pub(crate) fn argmax(values: &[f32]) -> usize {
    values.iter().enumerate().fold((0, f32::NEG_INFINITY), |best, (i, &v)| if v > best.1 { (i, v) } else { best }).0
}

/// The burn model's outputs for a padded batch, row-major, for parity checks.
pub struct BurnOutputs {
    pub probs: Vec<f32>,
    pub attention: Option<Vec<f32>>,
    pub sentence_attention: Option<Vec<f32>>,
    /// `[batch, classes, seq]`, for variants that explain their scores per token.
    pub contribution: Option<Vec<f32>>,
}

pub fn forward_probs<M: Network>(model: &M, inputs: &ModelInputs, task: Task) -> BurnOutputs {
    let device = model.devices().into_iter().next().unwrap_or_default();
    let batch = TokenBatch::new(inputs, &device);
    let output = model.forward(&batch);
    let to_vec = |data: TensorData| data.convert::<f32>().try_to_vec::<f32>().unwrap_or_default();
    BurnOutputs {
        probs: to_vec(task.probabilities(output.logits).into_data()),
        attention: output.attention.map(|a| to_vec(a.into_data())),
        sentence_attention: output.sentence_attention.map(|a| to_vec(a.into_data())),
        contribution: model.contribution(&batch).map(|c| to_vec(c.into_data())),
    }
}

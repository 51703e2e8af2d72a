//! Training defaults that fit the corpus: the flags a user leaves out are derived from the
//! number of training documents and the classes' sizes, so 5,000 documents get enough steps
//! and 500,000 do not spend epochs they do not need. Flags given on the command line win.
//!
//! The rule, with N training documents:
//! - **batch size**: the variant's (64, ngram 1,024), halved while an epoch would take fewer
//!   than [`MIN_STEPS_PER_EPOCH`] steps, down to [`MIN_BATCH_SIZE`];
//! - **learning rate**: the variant's, whatever the batch size (on R8, the fast tier scaled by
//!   √(batch ratio) needed twice the epochs for the same validation macro-F1);
//! - **epochs**: as many as make [`PLANNED_STEPS`] steps, within [`EPOCHS`];
//! - **patience**: a fifth of the epochs, at least 2;
//! - **class weights**: balanced (a document weighs N ÷ (classes × its class's documents)) when
//!   the largest class has more than [`IMBALANCE_RATIO`] times the documents of the smallest;
//!   none for a multi-label model, whose labels each have their own loss and, after training,
//!   their own threshold.

use std::ops::RangeInclusive;

use serde::Serialize;

use crate::adversarial::Perturbation;
use crate::fit::{Example, Task, TrainConfig};
use crate::models::VariantDefaults;

pub const MIN_STEPS_PER_EPOCH: usize = 20;
pub const MIN_BATCH_SIZE: usize = 32;
pub const PLANNED_STEPS: usize = 3_000;
pub const EPOCHS: RangeInclusive<usize> = 3..=30;
pub const IMBALANCE_RATIO: f64 = 3.0;

/// How the loss weighs the classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ClassWeighting {
    /// Balanced when the classes are imbalanced (more than 3:1), otherwise none.
    #[default]
    Auto,
    /// Every class weighs the same in the loss, whatever its number of documents.
    Balanced,
    /// Every document weighs the same.
    None,
}

/// The training flags of `pipeline train`; those left out follow the corpus (module doc).
#[derive(Debug, Clone, clap::Args)]
pub struct TrainingFlags {
    /// Most passes over the training set [default: as many as make 3,000 steps, 3 to 30].
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Stop after this many epochs without a better validation macro-F1 [default: a fifth of
    /// the epochs, at least 2].
    #[arg(long)]
    pub patience: Option<usize>,
    /// Documents per step [default 64, ngram 1024; halved, to 32 at least, until an epoch
    /// has 20 steps].
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// Adam learning rate [default 0.001, san 0.003, ngram 0.05].
    #[arg(long)]
    pub learning_rate: Option<f64>,
    /// Gradients are rescaled to at most this L2 norm [default 0.5 (Lin et al.'s); san 5].
    #[arg(long)]
    pub clip_norm: Option<f32>,
    /// Seeds weight initialisation, dropout, the split and the batch order.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// How the loss weighs the classes: `auto` balances them when the largest has more than 3
    /// times the documents of the smallest.
    #[arg(long, value_enum, default_value_t = ClassWeighting::Auto)]
    pub class_weights: ClassWeighting,
    /// Keep the raw probabilities: fit no temperature on the validation documents.
    #[arg(long = "no-calibration", action = clap::ArgAction::SetFalse)]
    pub calibrate: bool,
    /// Also train on each batch's word embeddings pushed this far the way that most raises
    /// its loss (adversarial training, Miyato et al. 2017; san only). The distance is over a
    /// whole document, in mean word-vector lengths: 0.3 is a good start.
    #[arg(long, value_name = "SHARE")]
    pub adversarial: Option<f64>,
    /// Also train the model to keep its probabilities when the word embeddings are pushed this
    /// far the way that most changes them (virtual adversarial training; san only), on the
    /// --unlabelled documents if given, else on the training batch.
    #[arg(long, value_name = "SHARE")]
    pub virtual_adversarial: Option<f64>,
}

/// What the corpus looks like to the rule: documents per class in the training part.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassCounts {
    /// Documents of each class (with each label, for a multi-label corpus).
    pub per_class: Vec<usize>,
    pub documents: usize,
}

impl ClassCounts {
    /// The counts of a corpus of one class per document.
    pub fn new(per_class: Vec<usize>) -> Self {
        Self { documents: per_class.iter().sum(), per_class }
    }

    /// Counts `examples` of `classes` classes, in one pass.
    pub fn of(examples: &[Example], classes: usize) -> Self {
        let mut per_class = vec![0; classes];
        for label in examples.iter().flat_map(|e| &e.labels) {
            if let Some(count) = per_class.get_mut(*label) {
                *count += 1;
            }
        }
        Self { per_class, documents: examples.len() }
    }

    /// Largest over smallest class (∞ when a class has no training document).
    pub fn imbalance(&self) -> f64 {
        let largest = self.per_class.iter().copied().max().unwrap_or(0);
        let smallest = self.per_class.iter().copied().min().unwrap_or(0);
        largest as f64 / smallest as f64
    }

    /// Balanced weights `N / (classes × n_c)`; a class without documents gets weight 1.
    fn balanced(&self) -> Vec<f32> {
        let (n, classes) = (self.documents as f64, self.per_class.len() as f64);
        self.per_class
            .iter()
            .map(|&count| if count == 0 { 1.0 } else { (n / (classes * count as f64)) as f32 })
            .collect()
    }
}

/// A resolved configuration and, for each value the rule chose, why.
pub struct Schedule {
    pub config: TrainConfig,
    pub reasons: Vec<String>,
}

impl TrainingFlags {
    /// Refuses given values that cannot train, before any data is read.
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.epochs != Some(0), "--epochs must be at least 1");
        anyhow::ensure!(self.patience != Some(0), "--patience must be at least 1");
        anyhow::ensure!(self.batch_size != Some(0), "--batch-size must be at least 1");
        // `x > 0.0` is false for NaN; finiteness rules out inf, which trains a NaN model.
        anyhow::ensure!(
            self.learning_rate.is_none_or(|rate| rate > 0.0 && rate.is_finite()),
            "--learning-rate must be a positive number"
        );
        anyhow::ensure!(
            self.clip_norm.is_none_or(|norm| norm > 0.0 && norm.is_finite()),
            "--clip-norm must be a positive number"
        );
        self.perturbation().validate()
    }

    /// The perturbations asked for ([`crate::adversarial`]).
    pub fn perturbation(&self) -> Perturbation {
        Perturbation { adversarial: self.adversarial, virtual_adversarial: self.virtual_adversarial }
    }

    /// The flags, with those left out chosen for a training part of `counts` (module doc).
    pub fn resolve(&self, defaults: &VariantDefaults, counts: &ClassCounts, task: Task) -> Schedule {
        let documents = counts.documents.max(1);
        let mut reasons = Vec::new();
        let batch_size = self.batch_size.unwrap_or_else(|| {
            let mut batch = defaults.batch_size;
            while batch > MIN_BATCH_SIZE && documents / batch < MIN_STEPS_PER_EPOCH {
                batch /= 2;
            }
            if batch != defaults.batch_size {
                reasons.push(format!(
                    "batch size {batch} (not {}): {documents} documents make {} steps an epoch",
                    defaults.batch_size,
                    documents.div_ceil(batch)
                ));
            }
            batch
        });
        let learning_rate = self.learning_rate.unwrap_or(defaults.learning_rate);
        let steps_per_epoch = documents.div_ceil(batch_size);
        let epochs = self.epochs.unwrap_or_else(|| {
            let epochs = PLANNED_STEPS.div_ceil(steps_per_epoch).clamp(*EPOCHS.start(), *EPOCHS.end());
            let limit = match PLANNED_STEPS.div_ceil(steps_per_epoch) {
                wanted if wanted < *EPOCHS.start() => format!("at least {} epochs", EPOCHS.start()),
                wanted if wanted > *EPOCHS.end() => format!("at most {} epochs", EPOCHS.end()),
                _ => format!("{PLANNED_STEPS} steps planned"),
            };
            reasons.push(format!("{epochs} epochs at most: {steps_per_epoch} steps each, {limit}"));
            epochs
        });
        let patience = self.patience.unwrap_or_else(|| {
            let patience = epochs.div_ceil(5).max(2);
            reasons.push(format!("patience {patience}: a fifth of {epochs} epochs, at least 2"));
            patience
        });
        let imbalance = counts.imbalance();
        let balanced = match self.class_weights {
            _ if task == Task::MultiLabel => {
                if self.class_weights == ClassWeighting::Balanced {
                    reasons.push(
                        "no class weights (--class-weights balanced weighs one class per document): each label of a \
                         multi-label model has its own loss and its own threshold"
                            .to_owned(),
                    );
                }
                false
            }
            ClassWeighting::Balanced => true,
            ClassWeighting::None => false,
            ClassWeighting::Auto => {
                let balance = imbalance > IMBALANCE_RATIO;
                if balance {
                    reasons.push(format!(
                        "balanced class weights: the largest class has {imbalance:.1} times the documents of the \
                         smallest (--class-weights none turns them off)"
                    ));
                }
                balance
            }
        };
        let config = TrainConfig {
            epochs,
            patience,
            batch_size,
            learning_rate,
            clip_norm: self.clip_norm.unwrap_or(defaults.clip_norm),
            seed: self.seed,
            class_weights: balanced.then(|| counts.balanced()),
            calibrate: self.calibrate,
            task,
            perturbation: self.perturbation(),
        };
        Schedule { config, reasons }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::NETWORK_DEFAULTS;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        flags: TrainingFlags,
    }

    fn flags(args: &[&str]) -> TrainingFlags {
        Cli::parse_from(std::iter::once("train").chain(args.iter().copied())).flags
    }

    const NGRAM: VariantDefaults = crate::models::ngram::DEFAULTS;

    #[test]
    fn a_large_corpus_keeps_the_variant_batch_and_few_epochs() {
        let schedule = flags(&[]).resolve(&NETWORK_DEFAULTS, &ClassCounts::new(vec![250_000, 250_000]), Task::OneClass);
        let config = schedule.config;
        assert_eq!((config.batch_size, config.epochs, config.patience), (64, 3, 2));
        assert_eq!(config.learning_rate, NETWORK_DEFAULTS.learning_rate);
        assert_eq!(config.class_weights, None);
    }

    #[test]
    fn san_trains_at_its_own_rate_and_clipping_unless_told() {
        let counts = ClassCounts::new(vec![2_000, 2_000]);
        let san = crate::models::san::DEFAULTS;
        let config = flags(&[]).resolve(&san, &counts, Task::OneClass).config;
        assert_eq!((config.learning_rate, config.clip_norm), (0.003, 5.0));
        let config = flags(&[]).resolve(&NETWORK_DEFAULTS, &counts, Task::OneClass).config;
        assert_eq!((config.learning_rate, config.clip_norm), (0.001, 0.5));
        let given = flags(&["--learning-rate", "0.01", "--clip-norm", "1"]).resolve(&san, &counts, Task::OneClass);
        assert_eq!((given.config.learning_rate, given.config.clip_norm), (0.01, 1.0));
    }

    #[test]
    fn a_small_corpus_gets_smaller_batches_and_more_epochs() {
        // R8's training part: 8 classes, 69:1.
        let counts = ClassCounts::new(vec![1436, 228, 2556, 37, 171, 185, 97, 226]);
        let config = flags(&[]).resolve(&NGRAM, &counts, Task::OneClass).config;
        assert_eq!(config.batch_size, 128);
        assert_eq!(config.learning_rate, NGRAM.learning_rate);
        assert_eq!((config.epochs, config.patience), (30, 6));
        let weights = config.class_weights.expect("imbalanced: weighted");
        // The smallest class weighs most; each class's total weight is the same.
        let totals: Vec<f32> = weights.iter().zip(&counts.per_class).map(|(w, &n)| w * n as f32).collect();
        assert!(totals.iter().all(|t| (t - totals[0]).abs() < 1e-2), "{totals:?}");
    }

    #[test]
    fn given_flags_win() {
        let counts = ClassCounts::new(vec![900, 10]);
        let schedule = flags(&["--batch-size", "256", "--learning-rate", "0.1", "--epochs", "4", "--patience", "9"])
            .resolve(&NGRAM, &counts, Task::OneClass);
        let config = schedule.config;
        assert_eq!((config.batch_size, config.learning_rate, config.epochs, config.patience), (256, 0.1, 4, 9));
        let off = flags(&["--class-weights", "none"]).resolve(&NGRAM, &counts, Task::OneClass);
        assert_eq!(off.config.class_weights, None);
        let on =
            flags(&["--class-weights", "balanced"]).resolve(&NGRAM, &ClassCounts::new(vec![10, 10]), Task::OneClass);
        assert_eq!(on.config.class_weights, Some(vec![1.0, 1.0]));
        let multi = flags(&["--class-weights", "balanced"]).resolve(&NGRAM, &counts, Task::MultiLabel);
        assert_eq!(multi.config.class_weights, None);
        assert!(multi.reasons.iter().any(|r| r.contains("no class weights")), "{:?}", multi.reasons);
    }

    #[test]
    fn every_chosen_value_says_why() {
        let schedule = flags(&[]).resolve(&NGRAM, &ClassCounts::new(vec![900, 10]), Task::OneClass);
        let reasons = schedule.reasons.join("\n");
        for word in ["batch size", "epochs", "patience", "balanced class weights"] {
            assert!(reasons.contains(word), "{word}: {reasons}");
        }
    }
}

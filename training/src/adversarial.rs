//! Training on perturbed word embeddings (`--adversarial`, `--virtual-adversarial`; Miyato, Dai
//! & Goodfellow 2017). Besides its loss on the words as they are, the model takes a loss on
//! its word embeddings pushed a small distance the way that most changes its answer:
//! - **adversarial**: the way that most raises the loss on the document's label;
//! - **virtual adversarial**: the way that most changes the model's own probabilities. It needs
//!   no label, so it also learns from `--unlabelled` documents.
//!
//! Both make the answer change less for small changes of the words. The push is measured over
//! a whole document, all its tokens together, as in the paper, and as a share of the batch's
//! mean word-vector length, so that one value suits embeddings of any scale.

use burn::prelude::*;
use burn::tensor::Distribution;
use burn::tensor::activation::{log_sigmoid, log_softmax, softmax};

use crate::fit::Task;
use crate::layers::TokenBatch;
use crate::models::Perturbable;

/// The virtual adversary's first, random step, as a share of its distance: the paper's 0.1
/// against 5.0. Small, so that the change it makes is nearly linear in the step.
const PROBE_SHARE: f32 = 0.02;

/// How far each adversary pushes (`None`: not used), in mean word-vector lengths.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Perturbation {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adversarial: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub virtual_adversarial: Option<f64>,
}

impl Perturbation {
    pub fn is_used(&self) -> bool {
        self.adversarial.is_some() || self.virtual_adversarial.is_some()
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        for (flag, value) in [("--adversarial", self.adversarial), ("--virtual-adversarial", self.virtual_adversarial)]
        {
            // `x > 0.0` is false for NaN.
            anyhow::ensure!(
                value.is_none_or(|v| v > 0.0 && v.is_finite()),
                "{flag} must be a positive number (a share of the mean word-vector length, e.g. 0.3)"
            );
        }
        Ok(())
    }
}

/// The mean length of the batch's word vectors (tokens only): the unit of every distance here.
pub fn mean_word_length(words: &Tensor<3>, batch: &TokenBatch) -> f32 {
    let [documents, tokens, _] = words.dims();
    let lengths = words.clone().detach().powf_scalar(2.0).sum_dim(2).sqrt().reshape([documents, tokens]);
    let total = (lengths * batch.mask.clone()).sum().into_scalar::<f32>();
    let count = batch.mask.clone().sum().into_scalar::<f32>();
    if count > 0.0 { total / count } else { 0.0 }
}

/// `direction` scaled to length `radius` over each document's tokens together, and 0 on
/// padding; a document whose direction is 0 stays 0.
pub fn scaled_per_document(direction: Tensor<3>, batch: &TokenBatch, radius: f32) -> Tensor<3> {
    let [documents, tokens, _] = direction.dims();
    let masked = direction * batch.mask.clone().reshape([documents, tokens, 1]);
    let length = masked.clone().powf_scalar(2.0).sum_dim(2).sum_dim(1).sqrt(); // [B, 1, 1]
    masked * radius / (length + 1e-12)
}

/// The logits of `batch` with its embeddings pushed `share` mean word lengths along
/// `gradient`, the gradient of the loss with respect to the clean embeddings.
pub fn adversarial_logits(network: &dyn Perturbable, batch: &TokenBatch, gradient: Tensor<3>, share: f32) -> Tensor<2> {
    // A fresh lookup: the clean pass's graph was consumed by its backward.
    let words = network.embed(batch);
    let distance = share * mean_word_length(&words, batch);
    let push = scaled_per_document(gradient.autodiff(), batch, distance).detach();
    network.forward_embedded(words + push, batch).logits
}

/// The virtual adversarial loss of `batch`: how far the model's probabilities move when its
/// embeddings are pushed `share` mean word lengths the way that moves them most, found from a
/// small random step (one power iteration). `clean` are the model's logits on the batch as it is.
pub fn virtual_adversarial_loss(
    network: &dyn Perturbable,
    batch: &TokenBatch,
    clean: Tensor<2>,
    share: f32,
    task: Task,
) -> Tensor<1> {
    let clean = clean.detach();
    let words = network.embed(batch).detach();
    let distance = share * mean_word_length(&words, batch);
    let device = words.device();
    let random = Tensor::<3>::random(words.dims(), Distribution::Normal(0.0, 1.0), &device);
    let probe = scaled_per_document(random, batch, PROBE_SHARE * distance).detach().require_grad();
    let moved = network.forward_embedded(words + probe.clone(), batch).logits;
    let gradients = divergence(clean.clone(), moved, task).backward();
    let push = match probe.grad(&gradients) {
        Some(direction) => scaled_per_document(direction.autodiff(), batch, distance).detach(),
        None => Tensor::zeros(probe.dims(), &device),
    };
    let words = network.embed(batch);
    divergence(clean, network.forward_embedded(words + push, batch).logits, task)
}

/// KL(p ‖ q) between the probabilities of two sets of logits, averaged over the documents:
/// over the classes, or summed over each label's yes/no for a multi-label model.
fn divergence(p_logits: Tensor<2>, q_logits: Tensor<2>, task: Task) -> Tensor<1> {
    match task {
        Task::OneClass => {
            let (log_p, log_q) = (log_softmax(p_logits.clone(), 1), log_softmax(q_logits, 1));
            (softmax(p_logits, 1) * (log_p - log_q)).sum_dim(1).mean()
        }
        Task::MultiLabel => {
            let p = burn::tensor::activation::sigmoid(p_logits.clone());
            let (log_p, log_not_p) = (log_sigmoid(p_logits.clone()), log_sigmoid(-p_logits));
            let (log_q, log_not_q) = (log_sigmoid(q_logits.clone()), log_sigmoid(-q_logits));
            let yes = p.clone() * (log_p - log_q);
            let no = (-p + 1.0) * (log_not_p - log_not_q);
            (yes + no).sum_dim(1).mean()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::Network;
    use runtime::inference::ModelInputs;

    fn batch(device: &Device) -> TokenBatch {
        let ids: [&[i64]; 2] = [&[3, 4, 5], &[6]];
        TokenBatch::new(&ModelInputs::right_padded(&ids, 0), device)
    }

    #[test]
    fn each_document_is_pushed_the_same_distance_and_padding_not_at_all() {
        let device = Device::default();
        let batch = batch(&device);
        let direction = Tensor::<3>::random([2, 3, 4], Distribution::Normal(0.0, 1.0), &device);
        let push = scaled_per_document(direction, &batch, 0.5);
        let values = push.clone().into_data().convert::<f32>().try_to_vec::<f32>().expect("floats");
        // The second document has one token: its two padding positions stay 0.
        assert!(values[16..24].iter().all(|v| *v == 0.0), "{values:?}");
        let lengths =
            push.powf_scalar(2.0).sum_dim(2).sum_dim(1).sqrt().into_data().try_to_vec::<f32>().expect("floats");
        assert!(lengths.iter().all(|l| (l - 0.5).abs() < 1e-5), "{lengths:?}");
    }

    #[test]
    fn the_mean_word_length_counts_tokens_only() {
        let device = Device::default();
        let batch = batch(&device);
        // Every token 3 long, padding 100 long.
        let mut values = vec![0.0f32; 2 * 3 * 4];
        for (position, vector) in values.chunks_mut(4).enumerate() {
            vector[0] = if position == 4 || position == 5 { 100.0 } else { 3.0 };
        }
        let words = Tensor::<3>::from_data(TensorData::new(values, [2, 3, 4]), &device);
        assert!((mean_word_length(&words, &batch) - 3.0).abs() < 1e-6);
    }

    /// A tiny SAN whose output is a smooth function of its embeddings (no dropout).
    fn tiny_san(device: &Device) -> crate::models::san::San {
        use crate::models::san::SanConfig;
        use crate::models::{Encoder, ModelConfig, PooledValues};
        device.seed(7);
        let config = SanConfig {
            embedding_dim: 8,
            encoder: Encoder::Bilstm,
            conv_width: None,
            lstm_hidden: 4,
            attention_dim: 4,
            hops: 2,
            mlp_hidden: 8,
            dropout: 0.0,
            penalty: 0.0,
            pooled_values: PooledValues::Words,
        };
        config.init(&crate::layers::embedding::InitialWords::random(10), 2, device)
    }

    /// The cross-entropy of `batch`'s documents (classes 0 and 1) with the embeddings pushed.
    fn loss_pushed(model: &crate::models::san::San, batch: &TokenBatch, push: Tensor<3>) -> f32 {
        let logits = model.forward_embedded(model.embed(batch) + push, batch).logits;
        let targets = Tensor::<2>::from_data([[1.0, 0.0], [0.0, 1.0]], &logits.device());
        (-(targets * log_softmax(logits, 1)).sum_dim(1).mean()).into_scalar::<f32>()
    }

    /// The middle value (the upper of the two middle ones for an even count).
    fn median(mut values: Vec<f32>) -> f32 {
        values.sort_by(f32::total_cmp);
        values.get(values.len() / 2).copied().unwrap_or(f32::NAN)
    }

    #[test]
    fn the_adversarial_push_raises_the_loss_more_than_random_pushes_of_its_length() {
        let device = Device::flex().autodiff();
        let model = tiny_san(&device);
        let batch = batch(&device);
        let words = model.embed(&batch);
        let probe = Tensor::<3>::zeros(words.dims(), &device).require_grad();
        let logits = model.forward_embedded(words + probe.clone(), &batch).logits;
        let targets = Tensor::<2>::from_data([[1.0, 0.0], [0.0, 1.0]], &device);
        let gradients = (-(targets.clone() * log_softmax(logits, 1)).sum_dim(1).mean()).backward();
        let gradient = probe.grad(&gradients).expect("the push's gradient");

        let share = 0.5;
        let clean = loss_pushed(&model, &batch, Tensor::zeros([2, 3, 8], &device));
        let logits = adversarial_logits(&model, &batch, gradient, share);
        let adversarial = (-(targets * log_softmax(logits, 1)).sum_dim(1).mean()).into_scalar::<f32>();
        let distance = share * mean_word_length(&model.embed(&batch), &batch);
        let random: Vec<f32> = (0..16)
            .map(|_| {
                let direction = Tensor::<3>::random([2, 3, 8], Distribution::Normal(0.0, 1.0), &device);
                loss_pushed(&model, &batch, scaled_per_document(direction, &batch, distance))
            })
            .collect();
        assert!(adversarial > clean, "{adversarial} against {clean}");
        // A push this long is past where the gradient's first-order view holds, so a lucky
        // random push can raise the loss as much (2 runs in 100 did, of 8); the typical one
        // raises it less.
        assert!(adversarial > median(random), "{adversarial} against random pushes");
    }

    #[test]
    fn the_virtual_adversary_moves_the_probabilities_more_than_random_pushes_of_its_length() {
        let device = Device::flex().autodiff();
        let model = tiny_san(&device);
        let batch = batch(&device);
        let clean = model.forward(&batch).logits.detach();
        let share = 0.5;
        let adversarial = virtual_adversarial_loss(&model, &batch, clean.clone(), share, Task::OneClass);
        let adversarial = adversarial.into_scalar::<f32>();
        let distance = share * mean_word_length(&model.embed(&batch), &batch);
        let random: Vec<f32> = (0..16)
            .map(|_| {
                let direction = Tensor::<3>::random([2, 3, 8], Distribution::Normal(0.0, 1.0), &device);
                let push = scaled_per_document(direction, &batch, distance);
                let moved = model.forward_embedded(model.embed(&batch) + push, &batch).logits;
                divergence(clean.clone(), moved, Task::OneClass).into_scalar::<f32>()
            })
            .collect();
        // One power iteration from a random start only approximates the most sensitive
        // direction, so a lucky random push can match it (1 run in 10 did, of 8); the typical
        // push moves the probabilities less (the median, 1.8× to 25× less over 180 runs).
        assert!(adversarial > median(random), "{adversarial} against random pushes");
    }

    #[test]
    fn divergence_is_zero_for_equal_logits_and_positive_otherwise() {
        let device = Device::default();
        let p = Tensor::<2>::from_data([[1.0, -2.0, 0.5]], &device);
        let q = Tensor::<2>::from_data([[0.0, 1.0, 0.5]], &device);
        for task in [Task::OneClass, Task::MultiLabel] {
            let same = divergence(p.clone(), p.clone(), task).into_scalar::<f32>();
            let other = divergence(p.clone(), q.clone(), task).into_scalar::<f32>();
            assert!(same.abs() < 1e-6 && other > 0.01, "{task:?}: {same} {other}");
        }
    }
}

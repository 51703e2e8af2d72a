//! HAN: hierarchical attention network (Yang et al. 2016).
//!
//! Input `[batch, sentences, words]` (the tokenizer's output cut into sentences by
//! `runtime::text::sentence_lengths`). Word level: embedding → biGRU over each sentence →
//! attention `α = softmax(u_wᵀ tanh(W_w h))` → sentence vector. Sentence level: biGRU over the
//! sentence vectors → attention with the sentence context `u_s` → document vector → softmax
//! layer. Each attention is SAN's with one hop (`W_s2` is the context vector); Yang's `W_w`
//! also has a bias, ours does not.
//!
//! Outputs `word_attention` `[batch, sentences, words]` (zero on padding and on padding
//! sentences) and `sentence_attention` `[batch, sentences]` instead of `attention`. The graph runs
//! the word level on real sentences only.

use burn::nn::{Dropout, DropoutConfig, Embedding, Linear};
use burn::prelude::*;
use burn::tensor::IndexingUpdateOp;
use serde::Serialize;

use super::{GraphShape, ModelConfig, Network, NetworkOutput, check_sizes};
use crate::layers::attention::StructuredAttention;
use crate::layers::dense::{dense, emit_dense};
use crate::layers::embedding::{InitialWords, embedding, emit_embedding};
use crate::layers::recurrent::BiGru;
use crate::layers::{GraphBatch, TokenBatch};
use crate::onnx::{Dim, ElemType, GraphBuilder, Value};
use runtime::package::tensor;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HanConfig {
    pub embedding_dim: usize,
    pub gru_hidden: usize,
    pub attention_dim: usize,
    pub sentence_words: usize,
    pub dropout: f64,
}

config_from_flags!(HanConfig, |flags| { gru_hidden, attention_dim, sentence_words });

impl ModelConfig for HanConfig {
    type Model = Han;

    fn validate(&self) -> anyhow::Result<()> {
        check_sizes(
            &[
                ("--embedding-dim", self.embedding_dim),
                ("--gru-hidden", self.gru_hidden),
                ("--attention-dim", self.attention_dim),
                ("--sentence-words", self.sentence_words),
            ],
            self.dropout,
        )
    }

    fn init(&self, words: &InitialWords, classes: usize, device: &Device) -> Han {
        let states = 2 * self.gru_hidden;
        Han {
            embedding: embedding(words, self.embedding_dim, device),
            word_encoder: BiGru::new(self.embedding_dim, self.gru_hidden, device),
            word_attention: StructuredAttention::new(states, self.attention_dim, 1, device),
            sentence_encoder: BiGru::new(states, self.gru_hidden, device),
            sentence_attention: StructuredAttention::new(states, self.attention_dim, 1, device),
            output: dense(states, classes, true, device),
            dropout: DropoutConfig::new(self.dropout).init(),
        }
    }

    fn sentence_words(&self) -> Option<usize> {
        Some(self.sentence_words)
    }
}

#[derive(Module, Debug)]
pub struct Han {
    embedding: Embedding,
    word_encoder: BiGru,
    word_attention: StructuredAttention,
    sentence_encoder: BiGru,
    sentence_attention: StructuredAttention,
    output: Linear,
    dropout: Dropout,
}

impl Han {
    fn states(&self) -> usize {
        2 * self.word_encoder.hidden()
    }
}

impl Network for Han {
    fn divide_logits(self, temperature: f32) -> Self {
        Self { output: crate::layers::dense::divided(self.output, temperature), ..self }
    }

    // Training builds HAN's batches with `documents` (the variant's `sentence_words()` is
    // set); a flat batch here is a bug in this crate, not bad input.
    #[allow(clippy::expect_used)]
    fn forward(&self, batch: &TokenBatch) -> NetworkOutput {
        let documents = batch.documents.as_deref().expect("HAN takes [batch, sentences, words] inputs");
        let sentence_batch = &documents.sentences;
        let (b, s, w, states) = (sentence_batch.batch, sentence_batch.seq, batch.seq, self.states());
        // Word level: one row per real sentence.
        let words = self.embedding.forward(batch.ids.clone());
        let word_states = self.word_encoder.forward(words, batch);
        let word_attention = self.word_attention.forward(word_states.clone(), batch); // [N, 1, W]
        let sentences = word_attention.clone().matmul(word_states).reshape([batch.batch, states]);
        let sentences = scatter_rows(sentences, &documents.rows, b * s).reshape([b, s, states]);
        // Sentence level: one row per document.
        let sentence_states = self.sentence_encoder.forward(sentences, sentence_batch);
        let sentence_attention = self.sentence_attention.forward(sentence_states.clone(), sentence_batch); // [B, 1, S]
        let document = sentence_attention.clone().matmul(sentence_states).reshape([b, states]);
        let logits = self.output.forward(self.dropout.forward(document));
        let word_attention = word_attention.reshape([batch.batch, w]);
        let word_attention = scatter_rows(word_attention, &documents.rows, b * s).reshape([b, s, w]);
        NetworkOutput {
            logits,
            attention: Some(word_attention),
            regularizer: None,
            sentence_attention: Some(sentence_attention.reshape([b, s])),
        }
    }

    fn emit(&self, g: &mut GraphBuilder) {
        let states = self.states();
        let dims = [Dim::Named("batch"), Dim::Named("sentences"), Dim::Named("words")];
        let ids = g.input(tensor::INPUT_IDS, ElemType::Int64, &dims);
        let mask = g.input(tensor::ATTENTION_MASK, ElemType::Int64, &dims);
        let input_shape = g.shape(&ids);

        // Word level over the real sentences only, gathered into [N, W] rows. Gathering by
        // NonZero gives N its own symbol: flattening to [B·S, W] would leave recurrent nodes
        // a product of symbols, which tract cannot bind inside its loop.
        let mask_f32 = g.cast(&mask, ElemType::Float);
        let sentence_mask_f32 = g.reduce_max(&mask_f32, &[2], false);
        let minus_one = g.ints("minus_one", &[1], &[-1]);
        let words_dim = g.ints("words_dim", &[1], &[2]);
        let words_len = g.gather(&input_shape, &words_dim, 0);
        let rows_shape = g.concat(&[&minus_one, &words_len], 0);
        let all_ids = g.reshape(&ids, &rows_shape); // [B·S, W]
        let all_mask = g.reshape(&mask, &rows_shape);
        let flat_sentence_mask = g.reshape(&sentence_mask_f32, &minus_one); // [B·S]
        let real = g.non_zero(&flat_sentence_mask); // [1, N]
        let real = g.transpose(&real, &[1, 0]); // [N, 1]
        let real_rows = g.squeeze(&real, &minus_one); // [N]
        let real_ids = g.gather(&all_ids, &real_rows, 0);
        let real_mask = g.gather(&all_mask, &real_rows, 0);
        let (word_states, word_attention) = g.scoped("word", |g| {
            let batch = g.scoped("mask", |g| GraphBatch::from_mask(g, real_ids, real_mask));
            let words = emit_embedding(g, &self.embedding, &batch.ids);
            let states = self.word_encoder.emit(g, &batch, &words);
            let attention = self.word_attention.emit(g, &batch, &states); // [N, 1, W]
            (states, attention)
        });
        let sentences = g.matmul(&word_attention, &word_states); // [N, 1, 2h]
        let axis1 = g.ints("axis1", &[1], &[1]);
        let sentences = g.squeeze(&sentences, &axis1);
        let document_dims = g.ints("document_dims", &[2], &[0, 1]);
        let batch_and_sentences = g.gather(&input_shape, &document_dims, 0);
        let width = g.ints("state_width", &[1], &[states as i64]);
        let sentences_shape = g.concat(&[&batch_and_sentences, &width], 0);
        let sentences = emit_scatter_rows(g, &sentences_shape, &real, &sentences); // [B, S, 2h]

        // Sentence level over [B, S]: a sentence is real if it has a word.
        let sentence_mask = g.cast(&sentence_mask_f32, ElemType::Int64);
        let (sentence_states, sentence_attention) = g.scoped("sentence", |g| {
            let batch = g.scoped("mask", |g| GraphBatch::from_mask(g, sentence_mask.clone(), sentence_mask));
            let states = self.sentence_encoder.emit(g, &batch, &sentences);
            let attention = self.sentence_attention.emit(g, &batch, &states); // [B, 1, S]
            (states, attention)
        });
        let document = g.matmul(&sentence_attention, &sentence_states); // [B, 1, 2h]
        let document = g.squeeze(&document, &axis1);
        let logits = emit_dense(g, &self.output, &document, "output");
        let probs = g.probabilities(&logits);

        let word_attention = g.squeeze(&word_attention, &axis1); // [N, W]
        let word_attention = emit_scatter_rows(g, &input_shape, &real, &word_attention); // [B, S, W]
        let sentence_attention = g.squeeze(&sentence_attention, &axis1);
        let classes = self.output.weight.dims()[1];
        let (b, s, w) = (Dim::Named("batch"), Dim::Named("sentences"), Dim::Named("words"));
        g.output(&probs, tensor::PROBS, ElemType::Float, &[Dim::Named("batch"), Dim::Fixed(classes)]);
        g.output(&word_attention, tensor::WORD_ATTENTION, ElemType::Float, &[b, s, w]);
        let (b, s) = (Dim::Named("batch"), Dim::Named("sentences"));
        g.output(&sentence_attention, tensor::SENTENCE_ATTENTION, ElemType::Float, &[b, s]);
        g.output(&document, tensor::EMBEDDING, ElemType::Float, &[Dim::Named("batch"), Dim::Fixed(states)]);
    }

    fn graph_shape(&self) -> GraphShape {
        // The pipeline reports one attention row per document: word × sentence weight.
        GraphShape { attention_heads: Some(1), embedding_dim: self.states() }
    }
}

/// `[N, width]` rows into a zero `[total, width]` at rows `at` (see [`emit_scatter_rows`]).
fn scatter_rows(rows: Tensor<2>, at: &Tensor<1, Int>, total: usize) -> Tensor<2> {
    let width = rows.dims()[1];
    Tensor::zeros([total, width], &rows.device()).select_assign(0, at.clone(), rows, IndexingUpdateOp::Add)
}

/// `[N, width]` rows put back at their sentence positions `real` (`[N, 1]` indices into the
/// flattened `[B·S]`) of a zero tensor, reshaped to `shape` (`[B, S, width]`).
fn emit_scatter_rows(g: &mut GraphBuilder, shape: &Value, real: &Value, rows: &Value) -> Value {
    let width_dim = g.ints("width_dim", &[1], &[2]);
    let width = g.gather(shape, &width_dim, 0);
    let minus_one = g.ints("minus_one", &[1], &[-1]);
    let flat_shape = g.concat(&[&minus_one, &width], 0);
    let zeros = g.constant_of_shape(shape, 0.0);
    let zeros = g.reshape(&zeros, &flat_shape);
    let scattered = g.scatter_nd(&zeros, real, rows);
    g.reshape(&scattered, shape)
}

//! A convolution over a window of words centred on each token, then ReLU: a context reader
//! for attention (SAN's `--encoder conv`). The words are first projected to half the filters'
//! width, which makes the convolution a few times cheaper than on the embeddings themselves
//! (its multiply-adds are most of the graph's). Each position sees
//! `width` words, enough for short phrases ("not bad"), and every position is computed at
//! once, where a recurrent layer takes one step per token. Optionally each position also
//! reads the document's mean word (projected and added before the ReLU), so that, as with the
//! biLSTM, where the hops look can depend on what the whole document says.
//!
//! Padding-correct without lengths: padding embeddings are zeroed and the window is padded
//! with (width − 1)/2 zeros on each side, so a position near a document's end sees zeros past
//! it, in a padded batch as alone. Outputs at padding positions are not zero (the bias); the
//! attention that reads them masks those positions.

use burn::nn::conv::{Conv1d, Conv1dConfig};
use burn::nn::{Linear, PaddingConfig1d};
use burn::prelude::*;
use burn::tensor::activation::relu;

use super::dense::{dense, emit_dense};
use super::pooling::{emit_masked_mean, masked_mean};
use super::{GraphBatch, TokenBatch, emit_conv1d};
use crate::onnx::{GraphBuilder, Value};

#[derive(Module, Debug)]
pub struct WindowConv {
    /// `[in, filters / 2]`, no bias, so padding stays zero.
    narrow: Linear,
    conv: Conv1d,
    /// `[filters / 2, filters]`, no bias: the document's mean word as every position sees it.
    document: Option<Linear>,
}

impl WindowConv {
    /// `width` must be odd, so the window is centred on its token; `document`: each position
    /// also reads the document's mean word.
    pub fn new(d_input: usize, filters: usize, width: usize, document: bool, device: &Device) -> Self {
        let (side, narrow) = (width / 2, (filters / 2).max(1));
        let conv = Conv1dConfig::new(narrow, filters, width).with_padding(PaddingConfig1d::Explicit(side, side));
        Self {
            narrow: dense(d_input, narrow, false, device),
            conv: conv.init(device),
            document: document.then(|| dense(narrow, filters, false, device)),
        }
    }

    /// The number of output features per token.
    pub fn filters(&self) -> usize {
        self.conv.weight.dims()[0]
    }

    /// `[batch, seq, in]` → `[batch, seq, filters]`.
    pub fn forward(&self, x: Tensor<3>, batch: &TokenBatch) -> Tensor<3> {
        let x = self.narrow.forward(batch.zero_padding(x));
        let mut features = self.conv.forward(x.clone().swap_dims(1, 2)); // [B, F, T]
        if let Some(document) = &self.document {
            let mean = document.forward(masked_mean(x, batch.mask.clone())); // [B, F]
            features = features + mean.unsqueeze_dim::<3>(2);
        }
        relu(features).swap_dims(1, 2)
    }

    /// Emits the layer for a `[batch, seq, in]` value; returns `[batch, seq, filters]`.
    pub fn emit(&self, g: &mut GraphBuilder, batch: &GraphBatch, x: &Value) -> Value {
        let side = self.conv.weight.dims()[2] / 2;
        g.scoped("window_conv", |g| {
            let x = batch.zero_padding(g, x);
            let x = emit_dense(g, &self.narrow, &x, "narrow");
            let channels_first = g.transpose(&x, &[0, 2, 1]);
            let mut features = emit_conv1d(g, &self.conv, &channels_first, [side, side]);
            if let Some(document) = &self.document {
                let mean = emit_masked_mean(g, &x, &batch.mask_f32);
                let mean = emit_dense(g, document, &mean, "document");
                let axis2 = g.ints("axis2", &[1], &[2]);
                let mean = g.unsqueeze(&mean, &axis2);
                features = g.add(&features, &mean);
            }
            let features = g.relu(&features);
            g.transpose(&features, &[0, 2, 1])
        })
    }
}

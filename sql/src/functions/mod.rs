//! The SQL functions this crate adds to DataFusion, one module each.

mod args;
mod attended_tokens;
mod attention_entropy;
mod attention_html;
mod classify;
mod head_attention;
mod row_function;
pub mod token_weights;
mod top_tokens;

use datafusion::logical_expr::{AggregateUDF, ScalarUDF};
use datafusion::prelude::SessionContext;

use attended_tokens::AttendedTokens;
pub use classify::ClassifyOptions;
use row_function::scalar_udf;
use token_weights::Ranking;

use crate::tables::ReadLocations;

/// One line per function, for `\h` in the interactive prompt and the README.
pub const FUNCTION_HELP: &[(&str, &str)] = &[
    ("top_tokens(tokens, weights, k)", "the k tokens of a row with the most weight (repeats add up), heaviest first"),
    ("head_attention(attention, i)", "hop i (from 1) of the attention column: one weight per token"),
    ("attention_entropy(weights)", "entropy in nats of a row's attention: 0 = one token, ln n = spread evenly"),
    ("attention_html(tokens, weights)", "HTML snippet shading each token by its weight"),
    (
        "contribution_html(tokens, contribution)",
        "HTML snippet in two hues: blue where a token pushed towards the predicted class, orange against",
    ),
    ("top_attended(tokens, weights, k)", "aggregate: the k tokens with the most attention mass over a group"),
    (
        "distinctive_attended(tokens, weights, k)",
        "aggregate: the k tokens attended most beyond their frequency: (mass + 1) / (even-spread mass + 1)",
    ),
    ("classify(text[, model])", "classify raw text: {prediction, confidence, probabilities}"),
    (
        "classify_explain(text[, model])",
        "classify(), plus the tokens, whether the text was truncated, attention_summary and contribution",
    ),
];

/// Registers the functions; `read` collects the model packages `classify` loads, so that an
/// output is never written over one.
pub fn register(ctx: &SessionContext, classify: ClassifyOptions, read: ReadLocations) {
    ctx.register_udf(scalar_udf(top_tokens::TopTokens));
    ctx.register_udf(scalar_udf(head_attention::HeadAttention));
    ctx.register_udf(scalar_udf(attention_entropy::AttentionEntropy));
    ctx.register_udf(scalar_udf(attention_html::AttentionHtml));
    ctx.register_udf(scalar_udf(attention_html::ContributionHtml));
    let loaded = classify::LoadedModels::default();
    for explained in [classify::Explained::No, classify::Explained::Yes] {
        let function = classify::Classify::new(explained, classify.clone(), loaded.clone(), read.clone());
        ctx.register_udf(ScalarUDF::new_from_impl(function));
    }
    ctx.register_udaf(AggregateUDF::new_from_impl(AttendedTokens::new(Ranking::Mass)));
    ctx.register_udaf(AggregateUDF::new_from_impl(AttendedTokens::new(Ranking::Distinctive)));
}

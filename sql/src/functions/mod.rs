//! The SQL functions this crate adds to DataFusion, one module each.

mod args;
pub use args::list_of;
mod attended_tokens;
mod attention_entropy;
mod attention_html;
pub mod capped;
mod classify;
mod head_attention;
mod row_function;
pub mod token_weights;
mod tokens;
mod top_tokens;

use datafusion::logical_expr::{AggregateUDF, ScalarUDF};
use datafusion::prelude::SessionContext;

use attended_tokens::AttendedTokens;
pub use classify::ClassifyOptions;
use row_function::scalar_udf;
use token_weights::Ranking;

use crate::tables::ReadLocations;

/// The functions this crate adds, as DataFusion takes them; `read` collects the model
/// packages `classify` loads, so that an output is never written over one.
fn functions(classify: ClassifyOptions, read: ReadLocations) -> (Vec<ScalarUDF>, Vec<AggregateUDF>) {
    let mut scalars = vec![
        scalar_udf(tokens::Tokens),
        scalar_udf(top_tokens::TopTokens),
        scalar_udf(head_attention::HeadAttention),
        scalar_udf(attention_entropy::AttentionEntropy),
        scalar_udf(attention_html::AttentionHtml),
        scalar_udf(attention_html::ContributionHtml),
    ];
    let loaded = classify::LoadedModels::default();
    for explained in [classify::Explained::No, classify::Explained::Yes] {
        let function = classify::Classify::new(explained, classify.clone(), loaded.clone(), read.clone());
        scalars.push(ScalarUDF::new_from_impl(function));
    }
    let aggregates = [Ranking::Mass, Ranking::Distinctive]
        .map(|ranking| AggregateUDF::new_from_impl(AttendedTokens::new(ranking)))
        .to_vec();
    (scalars, aggregates)
}

/// `tokens(text, token_spans)`, for the tables that give a `tokens` column read from spans.
pub fn tokens_udf() -> ScalarUDF {
    scalar_udf(tokens::Tokens)
}

/// Registers the functions; `read` collects the model packages `classify` loads.
pub fn register(ctx: &SessionContext, classify: ClassifyOptions, read: ReadLocations) {
    let (scalars, aggregates) = functions(classify, read);
    scalars.into_iter().for_each(|function| ctx.register_udf(function));
    aggregates.into_iter().for_each(|function| ctx.register_udaf(function));
    capped::register(ctx);
}

/// Each function's syntax and what it gives, from its own documentation: for `\h` in the
/// interactive prompt and the README.
pub fn function_help() -> Vec<(String, String)> {
    let (scalars, aggregates) = functions(ClassifyOptions::without_model(), ReadLocations::default());
    let documentation =
        scalars.iter().map(|f| f.documentation().cloned()).chain(aggregates.iter().map(|f| f.documentation().cloned()));
    documentation.flatten().map(|doc| (doc.syntax_example, doc.description)).collect()
}

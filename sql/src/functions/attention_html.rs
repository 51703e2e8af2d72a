//! `attention_html(tokens, weights)`: an HTML snippet that shades each token by its weight
//! (the heat maps of Lin et al. §2.3). The heaviest token of the document is fully shaded;
//! token text is HTML-escaped and each token's weight is in its `title`.

use std::fmt::Write;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, StringBuilder};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;

use super::args::{Parameters, Role, list_argument};
use super::row_function::RowFunction;
use super::token_weights::row_pairs;

const NAME: &str = "attention_html";
const PARAMETERS: Parameters =
    Parameters { function: NAME, names: &["tokens", "weights"], roles: &[Role::Tokens, Role::Weights], optional: 0 };

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct AttentionHtml;

pub fn escape_html(text: &str, out: &mut String) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

/// One `<span>` per token, separated by spaces. Null tokens are left out; a null or
/// non-finite weight shades nothing, and its `title` says what it was (`null`, `NaN`, `inf`)
/// rather than a weight of 0.
pub fn shade<'a>(tokens: impl Iterator<Item = Option<&'a str>>, weights: &[Option<f32>]) -> String {
    let heaviest = weights.iter().flatten().copied().filter(|w| w.is_finite()).fold(0.0f32, f32::max);
    let mut html = String::new();
    for (token, weight) in tokens.zip(weights) {
        let Some(token) = token else { continue };
        let title = match weight {
            Some(w) if w.is_finite() => format!("{w:.4}"),
            Some(w) => w.to_string(),
            None => "null".to_owned(),
        };
        let weight = weight.filter(|w| w.is_finite()).unwrap_or(0.0);
        let alpha = if heaviest > 0.0 { (weight / heaviest).clamp(0.0, 1.0) } else { 0.0 };
        if !html.is_empty() {
            html.push(' ');
        }
        // Writing to a String cannot fail.
        let _ = write!(html, "<span style=\"background-color: rgba(255, 99, 71, {alpha:.2})\" title=\"{title}\">");
        escape_html(token, &mut html);
        html.push_str("</span>");
    }
    html
}

impl RowFunction for AttentionHtml {
    const PARAMETERS: Parameters = PARAMETERS;

    fn return_type(&self) -> DataType {
        DataType::Utf8
    }

    fn evaluate(&self, arrays: &[ArrayRef]) -> Result<ArrayRef> {
        let (tokens, weights) = (list_argument(NAME, arrays, 0)?, list_argument(NAME, arrays, 1)?);
        let mut out = StringBuilder::new();
        for row in 0..tokens.len() {
            match row_pairs(NAME, tokens, weights, row)? {
                Some((row_tokens, row_weights)) => {
                    let weights: Vec<Option<f32>> = row_weights.iter().collect();
                    out.append_value(shade(row_tokens.iter(), &weights));
                }
                None => out.append_null(),
            }
        }
        Ok(Arc::new(out.finish()))
    }
}

#[cfg(test)]
mod tests {
    use super::shade;

    #[test]
    fn escapes_tokens_and_scales_by_the_heaviest() {
        let html = shade([Some("<b>"), Some("ok")].into_iter(), &[Some(0.5), Some(0.25)]);
        assert_eq!(
            html,
            "<span style=\"background-color: rgba(255, 99, 71, 1.00)\" title=\"0.5000\">&lt;b&gt;</span> \
             <span style=\"background-color: rgba(255, 99, 71, 0.50)\" title=\"0.2500\">ok</span>"
        );
        assert_eq!(shade(std::iter::empty(), &[]), "");
    }

    #[test]
    fn weights_that_are_not_numbers_shade_nothing_and_say_what_they_were() {
        let html = shade([Some("a"), Some("b"), Some("c")].into_iter(), &[Some(0.5), None, Some(f32::NAN)]);
        assert!(html.contains("title=\"null\">b<") && html.contains("title=\"NaN\">c<"), "{html}");
        assert_eq!(html.matches("rgba(255, 99, 71, 0.00)").count(), 2, "{html}");
    }
}

//! `attention_html(tokens, weights)`: an HTML snippet that shades each token by its weight
//! (the heat maps of Lin et al. §2.3). The heaviest token of the document is shaded darkest;
//! token text is HTML-escaped and each token's weight is in its `title`.
//! `contribution_html(tokens, contribution[, scale])` does the same in two hues for a signed
//! push: blue where it is positive, towards the class the `contribution` column points at (the
//! second label of a two-class model, else the row's prediction), orange where it is negative,
//! relative to the strongest push.
//! With compact output's `contribution_scale`, each `title` is the push in logit units rather
//! than a byte.

use std::fmt::Write;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, StringBuilder};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;
use runtime::explain;

use super::args::{Parameters, Role, float_argument, list_argument, value_error};
use super::row_function::RowFunction;
use super::token_weights::row_pairs;

const NAME: &str = "attention_html";
const PARAMETERS: Parameters = Parameters {
    function: NAME,
    names: &["tokens", "weights"],
    roles: &[Role::Tokens, Role::Weights],
    optional: 0,
    help: "HTML snippet shading each token by its weight",
};

const CONTRIBUTION_NAME: &str = "contribution_html";
const CONTRIBUTION_PARAMETERS: Parameters = Parameters {
    function: CONTRIBUTION_NAME,
    names: &["tokens", "contribution", "scale"],
    roles: &[Role::Tokens, Role::Weights, Role::Number],
    optional: 1,
    help: "HTML snippet in two hues: blue where a token pushed towards the column's class (a two-class model's second \
           label, else the prediction), orange against; \
           give compact output's contribution_scale for titles in logit units",
};

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct AttentionHtml;

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ContributionHtml;

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
    let heaviest = explain::heaviest(weights.iter().flatten().copied());
    spans(tokens, weights, 1.0, |weight| explain::weight_colour(weight, heaviest, explain::ATTENTION_HUE))
}

/// Like [`shade`] for signed values: blue for positive, orange for negative, each relative to
/// the largest magnitude. Each `title` is the value times `scale` (1 for values already in
/// logit units).
pub fn shade_signed<'a>(tokens: impl Iterator<Item = Option<&'a str>>, values: &[Option<f32>], scale: f32) -> String {
    let strongest = explain::strongest(values.iter().flatten().copied());
    spans(tokens, values, scale, |value| explain::push_colour(value, strongest))
}

/// One `<span>` per token, coloured by `colour(value)` (a finite value; others get no shade),
/// titled by the value times `scale`.
fn spans<'a>(
    tokens: impl Iterator<Item = Option<&'a str>>,
    values: &[Option<f32>],
    scale: f32,
    colour: impl Fn(f32) -> String,
) -> String {
    let mut html = String::new();
    for (token, value) in tokens.zip(values) {
        let Some(token) = token else { continue };
        let title = match value {
            Some(v) if v.is_finite() => format!("{:.4}", v * scale),
            Some(v) => v.to_string(),
            None => "null".to_owned(),
        };
        // Not a number: no shade (a weight of 0 is shaded as nothing).
        let colour = colour(value.filter(|v| v.is_finite()).unwrap_or(0.0));
        if !html.is_empty() {
            html.push(' ');
        }
        // Writing to a String cannot fail.
        let _ = write!(html, "<span style=\"background-color: {colour}\" title=\"{title}\">");
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
        html_rows(NAME, arrays, |_, tokens, weights| Some(shade(tokens, weights)))
    }
}

impl RowFunction for ContributionHtml {
    const PARAMETERS: Parameters = CONTRIBUTION_PARAMETERS;

    fn return_type(&self) -> DataType {
        DataType::Utf8
    }

    fn evaluate(&self, arrays: &[ArrayRef]) -> Result<ArrayRef> {
        let scales = (arrays.len() > 2).then(|| float_argument(CONTRIBUTION_NAME, arrays, 2)).transpose()?;
        if let Some(bad) = scales.and_then(|s| s.iter().flatten().find(|s| !s.is_finite() || *s <= 0.0)) {
            return Err(value_error(
                CONTRIBUTION_NAME,
                format!("scale {bad} is not a finite number above 0: give compact output's contribution_scale"),
            ));
        }
        html_rows(CONTRIBUTION_NAME, arrays, |row, tokens, values| {
            // Null where every push of the row is 0: its titles are 0 in any unit.
            let scale = scales.map_or(1.0, |s| if s.is_null(row) { 0.0 } else { s.value(row) as f32 });
            Some(shade_signed(tokens, values, scale))
        })
    }
}

/// One snippet per row of (tokens, values); null where either is null, or where `draw` gives
/// none for the row.
fn html_rows(
    function: &str,
    arrays: &[ArrayRef],
    draw: impl for<'a> Fn(usize, Box<dyn Iterator<Item = Option<&'a str>> + 'a>, &[Option<f32>]) -> Option<String>,
) -> Result<ArrayRef> {
    let (tokens, values) = (list_argument(function, arrays, 0)?, list_argument(function, arrays, 1)?);
    let mut out = StringBuilder::new();
    for row in 0..tokens.len() {
        match row_pairs(function, tokens, values, row)? {
            Some((row_tokens, row_values)) => {
                let values: Vec<Option<f32>> = row_values.iter().collect();
                out.append_option(draw(row, Box::new(row_tokens.iter()), &values));
            }
            None => out.append_null(),
        }
    }
    Ok(Arc::new(out.finish()))
}

#[cfg(test)]
mod tests {
    use super::shade;

    #[test]
    fn escapes_tokens_and_scales_by_the_heaviest() {
        let html = shade([Some("<b>"), Some("ok")].into_iter(), &[Some(0.5), Some(0.25)]);
        assert_eq!(
            html,
            "<span style=\"background-color: rgba(110, 110, 110, 0.850)\" title=\"0.5000\">&lt;b&gt;</span> \
             <span style=\"background-color: rgba(110, 110, 110, 0.425)\" title=\"0.2500\">ok</span>"
        );
        assert_eq!(shade(std::iter::empty(), &[]), "");
    }

    #[test]
    fn signed_values_are_blue_for_and_orange_against() {
        let html = super::shade_signed([Some("dull"), Some("superb")].into_iter(), &[Some(-0.25), Some(0.5)], 1.0);
        assert!(html.contains("rgba(235, 130, 30, 0.425)\" title=\"-0.2500\">dull<"), "{html}");
        assert!(html.contains("rgba(40, 110, 220, 0.850)\" title=\"0.5000\">superb<"), "{html}");
    }

    #[test]
    fn weights_that_are_not_numbers_shade_nothing_and_say_what_they_were() {
        let html = shade([Some("a"), Some("b"), Some("c")].into_iter(), &[Some(0.5), None, Some(f32::NAN)]);
        assert!(html.contains("title=\"null\">b<") && html.contains("title=\"NaN\">c<"), "{html}");
        assert_eq!(html.matches("rgba(110, 110, 110, 0.000)").count(), 2, "{html}");
    }
}

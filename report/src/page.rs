//! The HTML page, through the `maud` template engine, which escapes every value it inserts:
//! tokens, labels, ids and file names from the data never reach the page unescaped. The page
//! is self-contained: inline CSS and SVG, no scripts, nothing fetched.

use maud::{DOCTYPE, Markup, PreEscaped, html};
use runtime::explain::{self, Ranking};

use crate::MOST_EXAMPLES;
use crate::charts;
use crate::tally::{Example, HopTally, LEAST_PUSH_COUNT, Ranked, Tally};

/// Tokens listed per class and per hop.
const TOP_TOKENS: usize = 15;

/// What the page says about where the predictions came from.
pub struct RunInfo {
    pub input: String,
    pub files: usize,
    pub variant: Option<String>,
    pub model_sha256: Option<String>,
    pub labels: Vec<String>,
    pub backend: Option<String>,
    pub max_tokens: Option<usize>,
    /// `pipeline.long_documents` from the Parquet metadata.
    pub long_documents: Option<String>,
    /// `pipeline.attention`: how attention and contributions were written.
    pub attention: Option<String>,
    pub label_column: Option<String>,
    /// `model.card`: outputs written before it have none.
    pub model_card: Option<runtime::package::ModelCard>,
}

const CSS: &str = r#"
body { font: 15px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 72em; padding: 0 1.5em; color: #222; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ddd; padding-bottom: 0.2em; }
h3 { font-size: 1.05em; margin: 1.2em 0 0.4em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { padding: 0.25em 0.7em; text-align: left; vertical-align: top; border-bottom: 1px solid #eee; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.muted { color: #777; }
.charts { display: flex; flex-wrap: wrap; gap: 1.5em; }
.charts figure { margin: 0; }
.charts figcaption { font-weight: 600; margin-bottom: 0.3em; }
.confusion td.cell { text-align: center; min-width: 5em; font-variant-numeric: tabular-nums; }
.tokens { max-width: 34em; }
.heatmap { line-height: 1.9; margin: 0.3em 0 0.8em; }
.tok { padding: 0.1em 0.12em; border-radius: 3px; }
.sentence { display: inline; padding: 0.15em 0.2em; border-left: 4px solid; margin-right: 0.2em; }
.example { border: 1px solid #ddd; border-radius: 6px; padding: 0.6em 1em; margin: 0.8em 0; }
.truncated { background: #fde2b0; border-radius: 3px; padding: 0 0.3em; font-size: 0.85em; }
.example h4 { margin: 0 0 0.3em; font-size: 0.95em; }
details summary { cursor: pointer; color: #445; }
.hop-label { display: inline-block; min-width: 4.5em; color: #666; font-size: 0.85em; }
.filter { margin: 0.5em 0 1em; }
.filter input { font: inherit; padding: 0.2em 0.4em; min-width: 22em; }
"#;

/// Filters the example cards as the analyst types: a card stays when every word typed is a
/// whole word of it (an id, a label, a prediction, a token), says how many of how many cards
/// match, and hides a group left without cards. Inline, so the page stays one file that
/// fetches nothing.
const FILTER_SCRIPT: &str = r#"
const filter = document.getElementById('example-filter');
if (filter) {
  const cards = Array.from(document.querySelectorAll('.example'));
  // A card's words: its heading's (id, prediction, label) and its tokens, each read apart, since
  // the card's whole text runs a heading's last word into the first token.
  const wordsOf = card => {
    const heading = card.querySelector('h4');
    const words = (heading ? heading.textContent : '').toLowerCase().split(/[\s·(),]+/);
    card.querySelectorAll('.tok').forEach(t => words.push(t.textContent.trim().toLowerCase()));
    return new Set(words.filter(w => w.length > 0));
  };
  const words = new Map(cards.map(card => [card, wordsOf(card)]));
  filter.addEventListener('input', () => {
    const typed = filter.value.toLowerCase().split(/\s+/).filter(w => w.length > 0);
    let shown = 0;
    cards.forEach(card => {
      const keep = typed.every(w => words.get(card).has(w));
      card.style.display = keep ? '' : 'none';
      shown += keep ? 1 : 0;
    });
    document.querySelectorAll('.example-group').forEach(group => {
      const any = Array.from(group.querySelectorAll('.example')).some(card => card.style.display !== 'none');
      group.style.display = any ? '' : 'none';
    });
    document.getElementById('filter-count').textContent =
      typed.length > 0 ? shown + ' of ' + cards.length + ' cards match' : '';
  });
}
"#;

pub fn render(run: &RunInfo, tally: &Tally) -> anyhow::Result<String> {
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "Attention report: " (run.input) }
                style { (PreEscaped(CSS)) }
            }
            body {
                h1 { "Why the documents were classified as they were" }
                p.muted { (run.input) " · " (run.files) " file(s) · written by pipeline report" }
                (summary(run, tally))
                @if tally.labelled > 0 { (accuracy(tally)?) }
                (confidence(tally)?)
                @if tally.classes.values().any(|c| c.pushes.ranks_any()) { (class_pushes(tally)) }
                @if tally.classes.values().any(|c| !c.attention.is_empty()) { (class_tokens(tally)) }
                @if !tally.hops.is_empty() { (hops(tally)?) }
                (examples(tally, &PushAnchor::of(&run.labels)))
                script { (PreEscaped(FILTER_SCRIPT)) }
            }
        }
    };
    Ok(page.into_string())
}

/// Where the model was trained and how it did on validation, from the output's `model.card`.
fn model_card(card: &runtime::package::ModelCard) -> Markup {
    let figure = |value: Option<f64>| value.map_or_else(|| "–".to_owned(), |v| format!("{v:.4}"));
    html! {
        tr id="model-trained-on" {
            th { "model trained on" }
            td { code { (card.trained_on) } " (" (card.train_rows) " documents, " (card.classes) " classes; pipeline " (card.trained_with) ")" }
        }
        tr id="model-validation" {
            th { "model on validation" }
            td {
                (card.validation_rows) " documents: accuracy " (figure(card.validation_accuracy))
                ", macro-F1 " (figure(card.validation_macro_f1))
                @if let Some(ece) = card.validation_ece { ", calibration error " (format!("{ece:.4}")) }
                @if let Some(t) = card.temperature { " (temperature " (format!("{t:.3}")) ")" }
            }
        }
    }
}

fn summary(run: &RunInfo, tally: &Tally) -> Markup {
    html! {
        h2 { "Run" }
        table id="run-summary" {
            tr { th { "rows" } td.num { (tally.rows) } }
            tr { th { "predicted" } td.num { (tally.rows - tally.no_prediction) } }
            @match tally.abstained {
                Some(abstained) => {
                    tr { th { "no prediction (null or empty text)" } td.num { (tally.no_prediction - abstained) } }
                    tr id="abstained-rows" {
                        th { "abstained (confidence below the run's --min-confidence)" } td.num { (abstained) }
                    }
                }
                None => tr { th { "no prediction (null or empty text)" } td.num { (tally.no_prediction) } },
            }
            @if let Some((per_label, several)) = &tally.predicted_labels {
                tr id="predicted-labels" {
                    th { "predicted labels (multi-label; rows given each)" }
                    td {
                        @for (label, rows) in per_label { (label) ": " (rows) "; " }
                        (several) " rows given more than one"
                    }
                }
            }
            @if let Some(truncated) = tally.truncated {
                tr id="truncated-rows" {
                    th {
                        "truncated (tokens left out"
                        @if let Some(mode) = &run.long_documents { "; long documents: " (mode) }
                        @else if let Some(limit) = run.max_tokens { ", limit " (limit) }
                        ")"
                    }
                    td.num { (truncated) }
                }
            } @else if let Some(limit) = run.max_tokens {
                tr { th { "at the token limit (" (limit) ", text probably cut)" } td.num { (tally.at_token_limit) } }
            }
            @if let Some(mode) = &run.long_documents {
                tr id="long-documents" { th { "long documents (--long-documents)" } td { (mode) } }
                @if mode.starts_with("windows") && let Some(limit) = run.max_tokens {
                    tr id="windowed-rows" {
                        th { "read in windows (more than " (limit) " tokens)" }
                        td.num { (tally.over_token_limit) }
                    }
                }
            }
            @if let Some(attention) = &run.attention {
                tr id="attention-encoding" { th { "attention and contributions (--attention)" } td { (attention) } }
            }
            tr { th { "model" } td { (run.variant.as_deref().unwrap_or("unknown (no model.variant metadata)")) } }
            @if let Some(sha) = &run.model_sha256 { tr { th { "model sha256" } td { code { (sha) } } } }
            @if let Some(card) = &run.model_card { (model_card(card)) }
            @if !run.labels.is_empty() { tr { th { "labels" } td { (run.labels.join(", ")) } } }
            @if let Some(backend) = &run.backend { tr { th { "backend" } td { (backend) } } }
            tr {
                th { "label column" }
                td { (run.label_column.as_deref().unwrap_or("none (add --label-column for accuracy)")) }
            }
        }
    }
}

fn accuracy(tally: &Tally) -> anyhow::Result<Markup> {
    let labels: Vec<&String> = {
        let mut all: Vec<&String> = tally.confusion.keys().flat_map(|(l, p)| [l, p]).collect();
        all.sort();
        all.dedup();
        all
    };
    let count = |label: &String, prediction: &String| {
        tally.confusion.get(&(label.clone(), prediction.clone())).copied().unwrap_or(0)
    };
    let largest = tally.confusion.values().copied().max().unwrap_or(1).max(1);
    let accuracy = tally.correct as f64 / tally.labelled as f64;
    let reliability = charts::reliability_diagram(&tally.reliability)?;
    Ok(html! {
        h2 { "Accuracy" }
        p {
            "accuracy " strong id="accuracy" { (format!("{accuracy:.4}")) }
            " · macro-F1 " strong id="macro-f1" { (format!("{:.4}", macro_f1(tally, &labels))) }
            " · over " (tally.labelled) " labelled rows"
        }
        div.charts {
            figure {
                figcaption { "Confusion matrix (rows: label, columns: prediction)" }
                table.confusion id="confusion-matrix" {
                    tr { th {} @for p in &labels { th { (p) } } }
                    @for l in &labels {
                        tr {
                            th { (l) }
                            @for p in &labels {
                                @let n = count(l, p);
                                @let shade = n as f64 / largest as f64;
                                td.cell style=(cell_style(shade, l == p)) data-count=(n) { (n) }
                            }
                        }
                    }
                }
            }
            figure id="reliability" {
                figcaption { "Reliability: accuracy per confidence bin (bars), mean confidence (dots)" }
                (PreEscaped(reliability))
            }
        }
    })
}

fn cell_style(shade: f64, diagonal: bool) -> String {
    let (r, g, b) = if diagonal { (40, 140, 80) } else { (200, 70, 50) };
    let text = if shade > 0.55 { "#fff" } else { "#222" };
    format!("background: rgba({r}, {g}, {b}, {:.3}); color: {text}", shade.clamp(0.0, 1.0))
}

/// The mean over labels of each label's F1 (precision and recall from the confusion counts).
fn macro_f1(tally: &Tally, labels: &[&String]) -> f64 {
    let actual: Vec<&String> =
        labels.iter().copied().filter(|l| tally.confusion.keys().any(|(a, _)| a == *l)).collect();
    if actual.is_empty() {
        return 0.0;
    }
    let sum: f64 = actual
        .iter()
        .map(|class| {
            let tp = tally.confusion.get(&((*class).clone(), (*class).clone())).copied().unwrap_or(0) as f64;
            let predicted: u64 = tally.confusion.iter().filter(|((_, p), _)| p == *class).map(|(_, n)| n).sum();
            let actual: u64 = tally.confusion.iter().filter(|((l, _), _)| l == *class).map(|(_, n)| n).sum();
            let precision = if predicted > 0 { tp / predicted as f64 } else { 0.0 };
            let recall = if actual > 0 { tp / actual as f64 } else { 0.0 };
            if precision + recall > 0.0 { 2.0 * precision * recall / (precision + recall) } else { 0.0 }
        })
        .sum();
    sum / actual.len() as f64
}

fn confidence(tally: &Tally) -> anyhow::Result<Markup> {
    let charts: Vec<(String, u64, String)> = tally
        .classes
        .iter()
        .map(|(class, t)| Ok((class.clone(), t.rows, charts::confidence_histogram(&t.confidence)?)))
        .collect::<anyhow::Result<_>>()?;
    Ok(html! {
        h2 { "Confidence per predicted class" }
        div.charts id="confidence" {
            @for (class, rows, svg) in &charts {
                figure { figcaption { (class) " " span.muted { "(" (rows) " rows)" } } (PreEscaped(svg)) }
            }
        }
    })
}

fn class_tokens(tally: &Tally) -> Markup {
    html! {
        h2 { "Where each class's attention looked" }
        p.muted {
            "Most attended: attention mass summed over the class. Distinctive: attention relative to an even \
             spread over each document, (mass + 1) / (even mass + 1), as SQL's distinctive_attended. Tokens the \
             tokenizer adds ([UNK] for every rare word, [PAD]) are left out."
        }
        table id="class-tokens" {
            tr { th { "predicted class" } th { "most attended" } th { "distinctive" } }
            @for (class, t) in &tally.classes {
                tr {
                    th { (class) }
                    td.tokens { (t.attention.top_words(TOP_TOKENS, Ranking::Mass).join(", ")) }
                    td.tokens { (t.attention.top_words(TOP_TOKENS, Ranking::Distinctive).join(", ")) }
                }
            }
        }
    }
}

/// The words that pushed each class's predictions towards it, and against it, by their mean
/// push per occurrence in logit units.
fn class_pushes(tally: &Tally) -> Markup {
    let listed = |pushes: Vec<(String, f64)>| -> String {
        if pushes.is_empty() {
            return format!("(no word seen {LEAST_PUSH_COUNT} times)");
        }
        pushes.iter().map(|(token, mean)| format!("{token} ({mean:+.3})")).collect::<Vec<_>>().join(", ")
    };
    html! {
        h2 { "What pushed each class" }
        p.muted {
            "Over the documents predicted as each class: the words with the largest mean push towards it, and against it, "
            "per occurrence, in logit units (the "
            code { "contribution" } " column: floats, or compact bytes times " code { "contribution_scale" }
            "). Only words seen at least " (LEAST_PUSH_COUNT) " times are ranked."
        }
        table id="class-pushes" {
            tr { th { "predicted class" } th { "pushed towards it" } th { "pushed against it" } }
            @for (class, t) in &tally.classes {
                tr {
                    th { (class) }
                    td.tokens { (listed(t.pushes.top(TOP_TOKENS, true))) }
                    td.tokens { (listed(t.pushes.top(TOP_TOKENS, false))) }
                }
            }
        }
    }
}

fn hops(tally: &Tally) -> anyhow::Result<Markup> {
    let entropies: Vec<f64> = tally.hops.iter().map(|h| h.mean_entropy().unwrap_or(0.0)).collect();
    // The entropy of an even spread over a typical document, for scale.
    let even = mean_even_entropy(tally);
    let chart = charts::hop_entropy(&entropies, even)?;
    Ok(html! {
        h2 { "Hops (heads)" }
        p.muted {
            "A hop whose mean entropy is far below an even spread (line, ln of the mean token count: "
            (format!("{even:.2}")) " nats) attends to a few tokens; one near it attends to nothing in particular."
        }
        div.charts { figure id="hop-entropy" { figcaption { "Mean attention entropy per hop" } (PreEscaped(chart)) } }
        @if tally.hops.iter().all(|hop| hop.attention.is_empty()) {
            p.muted { "Each hop's own words need its weights: run with --attention hops." }
        } @else {
        p.muted {
            "Hops whose ten most attended and ten distinctive words share at least " (ALIKE_WORDS)
            " with an earlier hop's are one row, under that hop's words."
        }
        table id="hop-tokens" {
            tr { th { "hops" } th.num { "mean entropy" } th { "most attended" } th { "distinctive" } }
            @for group in hop_groups(&tally.hops) {
                @let (low, high) = group.entropy_range(&entropies);
                tr data-hops=(group.numbers()) {
                    td { (group.numbers()) }
                    td.num { @if high - low < 0.005 { (format!("{low:.2}")) } @else { (format!("{low:.2}–{high:.2}")) } }
                    td.tokens { (group.most_attended.join(", ")) }
                    td.tokens { (group.distinctive.join(", ")) }
                }
            }
        }
        }
    })
}

/// Words two hops' top ten must share, both ways of ranking, to be shown as one.
const ALIKE_WORDS: usize = 8;

/// Hops that attend alike: the first of them (whose words the row shows) and the others.
struct HopGroup<'a> {
    hops: Vec<usize>,
    most_attended: Vec<&'a str>,
    distinctive: Vec<&'a str>,
}

impl HopGroup<'_> {
    /// `1, 2, 6` (numbered from 1, as the cards number them).
    fn numbers(&self) -> String {
        self.hops.iter().map(|hop| (hop + 1).to_string()).collect::<Vec<_>>().join(", ")
    }

    fn entropy_range(&self, entropies: &[f64]) -> (f64, f64) {
        let values = self.hops.iter().filter_map(|hop| entropies.get(*hop).copied());
        values.fold((f64::INFINITY, f64::NEG_INFINITY), |(low, high), e| (low.min(e), high.max(e)))
    }
}

/// The hops in groups that attend alike (each joins the first earlier group whose words it
/// shares [`ALIKE_WORDS`] of), so that eight hops that look at the same words are one row.
fn hop_groups(hops: &[HopTally]) -> Vec<HopGroup<'_>> {
    let shared = |a: &[&str], b: &[&str]| a.iter().filter(|word| b.contains(word)).count();
    let mut groups: Vec<HopGroup> = Vec::new();
    for (index, hop) in hops.iter().enumerate() {
        let most_attended = hop.attention.top_words(10, Ranking::Mass);
        let distinctive = hop.attention.top_words(10, Ranking::Distinctive);
        let alike = groups.iter_mut().find(|group| {
            shared(&group.most_attended, &most_attended) >= ALIKE_WORDS.min(most_attended.len())
                && shared(&group.distinctive, &distinctive) >= ALIKE_WORDS.min(distinctive.len())
        });
        match alike {
            Some(group) => group.hops.push(index),
            None => groups.push(HopGroup { hops: vec![index], most_attended, distinctive }),
        }
    }
    groups
}

fn mean_even_entropy(tally: &Tally) -> f64 {
    if tally.tokenized_rows == 0 || tally.tokens == 0 {
        return 0.0;
    }
    (tally.tokens as f64 / tally.tokenized_rows as f64).ln()
}

/// Which way the pushes of a card are drawn. With two classes, towards the second label on
/// every card, so that a hue names the same class on each (a push towards one of two classes
/// is as strong against the other); otherwise towards each card's predicted class.
enum PushAnchor {
    Class { towards: String, other: String },
    Predicted,
}

impl PushAnchor {
    fn of(labels: &[String]) -> Self {
        match labels {
            [other, towards] => Self::Class { towards: towards.clone(), other: other.clone() },
            _ => Self::Predicted,
        }
    }

    /// A card's pushes (towards `prediction`) as the anchor draws them, and what a positive and
    /// a negative push mean there.
    fn anchored(&self, pushes: &[f32], prediction: &str) -> (Vec<f32>, String, String) {
        match self {
            Self::Class { towards, other } => {
                let sign = if prediction == towards { 1.0 } else { -1.0 };
                (pushes.iter().map(|p| sign * p).collect(), format!("towards {towards}"), format!("towards {other}"))
            }
            Self::Predicted => (pushes.to_vec(), format!("towards {prediction}"), format!("against {prediction}")),
        }
    }
}

fn examples(tally: &Tally, anchor: &PushAnchor) -> Markup {
    let groups: [(&str, &str, &Ranked); 2] = [
        ("most-confident", "Most confident", &tally.most_confident),
        ("least-confident", "Least confident", &tally.least_confident),
    ];
    html! {
        h2 { "Example documents" }
        p.muted { "Each token is shaded by its weight relative to the document's heaviest token (attention in grey); hover for the weight." }
        @if tally.has_contribution() {
            p.muted.legend {
                @match anchor {
                    PushAnchor::Class { towards, other } => {
                        "Pushed, on every card: " span.tok style=(push_shade(0.8)) { "blue" } " tokens pushed towards "
                        strong { (towards) } ", " span.tok style=(push_shade(-0.8)) { "orange" } " ones towards " strong { (other) }
                        ", shaded by strength relative to the document's strongest push (hover for it)."
                    }
                    PushAnchor::Predicted => {
                        "Pushed: " span.tok style=(push_shade(0.8)) { "blue" } " tokens pushed the document towards its predicted class, "
                        span.tok style=(push_shade(-0.8)) { "orange" } " ones against it, shaded by strength relative to the document's strongest push (hover for it)."
                    }
                }
            }
        }
        div.filter {
            label { "Filter: " input #example-filter type="search" placeholder="words, an id, a label"; }
            " " span #filter-count .muted {}
        }
        @if let Some(chosen) = &tally.chosen {
            @let drawn = chosen.ranked.examples().count();
            section.example-group id="chosen" {
                h3 { "Documents where " code { (chosen.condition) } }
                p.muted id="chosen-count" {
                    (drawn) " of " (chosen.matching) " matching " (if chosen.matching == 1 { "row" } else { "rows" })
                    " drawn, in input order"
                    @if (drawn as u64) < chosen.matching && chosen.ranked.capacity() < MOST_EXAMPLES {
                        " (raise --examples, up to " (MOST_EXAMPLES) ", to draw more)"
                    }
                    "."
                }
                @for example in chosen.ranked.examples() { (example_card(example, anchor)) }
            }
        }
        @for (id, title, ranked) in groups {
            @if ranked.examples().next().is_some() {
                section.example-group id=(id) {
                    h3 { (title) }
                    @for example in ranked.examples() { (example_card(example, anchor)) }
                }
            }
        }
        @if !tally.misclassified.is_empty() {
            section.example-group id="misclassified" {
                h3 { "Misclassified, by true label (most confident first)" }
                @for (label, ranked) in &tally.misclassified {
                    div.misclassified-class.example-group data-label=(label) {
                        h4 { "label " strong { (label) } }
                        @for example in ranked.examples() { (example_card(example, anchor)) }
                    }
                }
            }
        }
    }
}

fn example_card(example: &Example, anchor: &PushAnchor) -> Markup {
    html! {
        div.example {
            h4 {
                @if let Some(id) = &example.id { (id) " · " } @else { (example.file) ", row " (example.row) " · " }
                "predicted " strong { (example.prediction) }
                " (" (format!("{:.3}", example.confidence)) ")"
                @if let Some(label) = &example.label { " · label " strong { (label) } }
                @if example.truncated { " · " span.truncated title="tokens past the limit were left out" { "truncated" } }
            }
            @if example.tokens.len() < example.document_tokens {
                p.muted.excerpt {
                    "tokens " (example.shown_from + 1) "–" (example.shown_from + example.tokens.len())
                    " of " (example.document_tokens) ", around the most attended one"
                }
            }
            @if !example.contribution.is_empty() {
                div.heatmap.pushed { span.hop-label { "pushed" } (contribution_heatmap(&example.tokens, &anchor.anchored(&example.contribution, &example.prediction))) }
            }
            @if example.contribution.is_empty() {
                (attention_rows(example))
            } @else if !example.summary.is_empty() || !example.hops.is_empty() {
                // The pushes lead; where the model looked is one click away, in grey.
                details.attention {
                    summary { "where the model looked (attention)" }
                    (attention_rows(example))
                }
            }
        }
    }
}

/// A card's attention: the hops summed (HAN: by sentence), then each hop behind a click.
fn attention_rows(example: &Example) -> Markup {
    html! {
        @if let Some((lengths, weights)) = &example.sentences {
            div.heatmap.summed { (sentences_heatmap(&example.tokens, &example.summary, lengths, weights)) }
        } @else if !example.summary.is_empty() {
            div.heatmap.summed { span.hop-label { "summed" } (heatmap(&example.tokens, &example.summary)) }
        }
        @if example.hops.len() > 1 {
            details {
                summary { "each of the " (example.hops.len()) " hops" }
                @for (i, hop) in example.hops.iter().enumerate() {
                    div.heatmap.hop { span.hop-label { "hop " (i + 1) } (heatmap(&example.tokens, hop)) }
                }
            }
        }
    }
}

/// Tokens shaded by weight relative to the heaviest; the weight in `title` and `data-weight`.
fn heatmap(tokens: &[String], weights: &[f32]) -> Markup {
    let heaviest = explain::heaviest(weights.iter().copied());
    html! {
        @for (token, weight) in tokens.iter().zip(weights) {
            span.tok style=(shade(*weight, heaviest, explain::ATTENTION_HUE)) title=(format!("{weight:.4}")) data-weight=(weight) { (token) }
            " "
        }
    }
}

/// Tokens shaded by their signed push relative to the strongest, blue for a positive push and
/// orange for a negative one; `(pushes, positive, negative)` as [`PushAnchor::anchored`]
/// gives them, and what each sign means in `title`, with the relative push in `data-push`.
fn contribution_heatmap(tokens: &[String], (pushes, positive, negative): &(Vec<f32>, String, String)) -> Markup {
    let strongest = explain::strongest(pushes.iter().copied());
    html! {
        @for (token, push) in tokens.iter().zip(pushes) {
            @let relative = explain::relative(*push, strongest);
            @let direction = if relative < 0.0 { negative } else { positive };
            span.tok style=(push_shade(relative)) title=(format!("{relative:+.2} of the strongest push, {direction}")) data-push=(format!("{relative:.3}")) { (token) }
            " "
        }
    }
}

/// Blue for a positive push, orange for a negative one.
fn push_shade(relative: f32) -> String {
    format!("background: {}", explain::push_colour(relative, 1.0))
}

/// HAN: each sentence framed and shaded by its weight, its words by theirs (Yang et al.).
fn sentences_heatmap(tokens: &[String], words: &[f32], lengths: &[usize], sentences: &[f32]) -> Markup {
    let heaviest_sentence = explain::heaviest(sentences.iter().copied());
    let mut start = 0usize;
    let spans: Vec<(usize, usize, f32)> = lengths
        .iter()
        .zip(sentences)
        .map(|(&n, &w)| {
            let end = (start + n).min(tokens.len());
            let span = (start, end, w);
            start = end;
            span
        })
        .collect();
    html! {
        @for (from, to, weight) in spans {
            span.sentence style=(sentence_style(weight, heaviest_sentence))
                data-sentence-weight=(weight) title=(format!("sentence {weight:.4}")) {
                (heatmap(tokens.get(from..to).unwrap_or_default(), words.get(from..to).unwrap_or_default()))
            }
        }
    }
}

/// A sentence shaded by its weight, and framed more strongly the heavier it is.
fn sentence_style(weight: f32, heaviest: f32) -> String {
    let (r, g, b) = explain::SENTENCE_HUE;
    let frame = explain::relative(weight, heaviest).max(0.0);
    format!("{}; border-color: rgba({r}, {g}, {b}, {frame:.3})", shade(weight, heaviest, explain::SENTENCE_HUE))
}

fn shade(weight: f32, heaviest: f32, hue: explain::Hue) -> String {
    format!("background: {}", explain::weight_colour(weight, heaviest, hue))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_escaped_and_shaded_by_weight() {
        let tokens = vec!["<script>".to_owned(), "great".to_owned()];
        let html = heatmap(&tokens, &[0.25, 0.5]).into_string();
        assert!(html.contains("&lt;script&gt;"), "{html}");
        assert!(!html.contains("<script>"), "{html}");
        assert!(html.contains("rgba(110, 110, 110, 0.425)") && html.contains("rgba(110, 110, 110, 0.850)"), "{html}");
    }

    #[test]
    fn pushes_are_two_hues_relative_to_the_strongest() {
        let tokens = vec!["dull".to_owned(), "fine".to_owned(), "superb".to_owned()];
        let predicted = PushAnchor::Predicted.anchored(&[-0.5, 0.0, 1.0], "pos");
        let html = contribution_heatmap(&tokens, &predicted).into_string();
        assert!(html.contains("rgba(235, 130, 30, 0.425)"), "against, half as strong: {html}");
        assert!(html.contains("rgba(40, 110, 220, 0.850)"), "towards, the strongest: {html}");
        assert!(html.contains("-0.50 of the strongest push, against pos"), "{html}");
        assert!(html.contains("data-push=\"1.000\""), "{html}");
    }

    /// With two classes, blue is the second label on every card: a card predicted `neg` has
    /// its pushes towards `neg` drawn orange.
    #[test]
    fn with_two_classes_a_hue_names_the_same_class_on_every_card() {
        let tokens = vec!["dull".to_owned(), "superb".to_owned()];
        let anchor = PushAnchor::of(&["neg".to_owned(), "pos".to_owned()]);
        let on_neg = contribution_heatmap(&tokens, &anchor.anchored(&[1.0, -0.5], "neg")).into_string();
        assert!(
            on_neg.contains("-1.00 of the strongest push, towards neg") && on_neg.contains("rgba(235, 130, 30, 0.850)"),
            "{on_neg}"
        );
        assert!(
            on_neg.contains("+0.50 of the strongest push, towards pos") && on_neg.contains("rgba(40, 110, 220, 0.425)"),
            "{on_neg}"
        );
        let on_pos = contribution_heatmap(&tokens, &anchor.anchored(&[-1.0, 0.5], "pos")).into_string();
        assert_eq!(on_neg, on_pos, "the same pushes read from either prediction draw alike");
    }
}

//! `pipeline inspect`: a model package as `pipeline run` would open it.

use std::path::PathBuf;

use batch_io::command_line::print_report;
use runtime::classifier::Classifier;
use runtime::inference::BackendOptions;
use runtime::package::InputLayout;

pub fn run(dir: Option<PathBuf>) -> anyhow::Result<()> {
    let (_guard, package) = runtime::model_source::open(dir.as_deref())?;
    // The checks `pipeline run` makes, so that a package it would refuse is not shown as fine.
    let classifier = Classifier::open(package.clone(), &BackendOptions::default(), None)?;
    let backend = classifier.backend();
    let m = &package.manifest;
    let location = match &dir {
        None => "(embedded default: fixtures/default-model)".to_owned(),
        Some(_) => package.dir.display().to_string(),
    };
    let mut report = String::new();
    let mut line = |text: String| {
        report.push_str(&text);
        report.push('\n');
    };
    line(format!("package:     {location}"));
    line(format!("variant:     {}", m.variant));
    line(format!("labels:      {}", m.labels.join(", ")));
    if let Some(thresholds) = &m.label_thresholds {
        let each: Vec<String> = m.labels.iter().zip(thresholds).map(|(l, t)| format!("{l} ≥ {t:.2}")).collect();
        line(format!(
            "multi-label: a sigmoid per label; a document has each label at or above its threshold: {}",
            each.join(", ")
        ));
    }
    line(format!("parameters:  {}", m.parameter_count));
    let layout = match (m.input_layout, m.max_sentence_words) {
        (InputLayout::Tokens, _) => "[batch, seq]".to_owned(),
        (InputLayout::SentencesWords, Some(words)) => {
            format!("[batch, sentences, words], sentences cut at {words} tokens")
        }
        (InputLayout::SentencesWords, None) => "[batch, sentences, words]".to_owned(),
    };
    line(format!("inputs:      input_ids, attention_mask {layout}, max {} tokens", m.max_tokens));
    line(format!("outputs:     {}", backend.output_names().join(", ")));
    line(format!("attention:   {}", m.attention_heads.map_or("none".to_owned(), |h| format!("{h} heads"))));
    // The fast tier's document vector is its class scores: as wide as the labels, by design.
    let what = if m.variant == "ngram" { " (the class scores)" } else { "" };
    line(format!("embedding:   {} dims{what}", m.embedding_dim));
    for (name, value) in &m.metrics {
        line(format!("metric:      {name} = {value:.4}"));
    }
    line(format!(
        "trained on:  {} ({} rows, sha256 {})",
        m.training.corpus.path, m.training.corpus.rows, m.training.corpus.sha256
    ));
    for card_line in model_card(m) {
        line(card_line);
    }
    line(format!("manifest:\n{}", serde_json::to_string_pretty(m)?));
    print_report(&report)?;
    Ok(())
}

/// How the model was trained, in the words of a model card: the data per class, the chosen
/// configuration, how long, and how it did on validation. Older packages lack some of it.
fn model_card(m: &runtime::package::Manifest) -> Vec<String> {
    let t = &m.training;
    let members = m.hyper_parameters.get("members").and_then(serde_json::Value::as_array);
    let run = match members {
        // `pipeline combine`'s package: its members trained, it fitted their weights.
        Some(members) => {
            let each: Vec<String> = members
                .iter()
                .map(|member| {
                    let field = |name: &str| member.get(name).and_then(serde_json::Value::as_str).unwrap_or("?");
                    format!(
                        "{} {} (weight {:.3})",
                        field("variant"),
                        field("package"),
                        member.get("weight").and_then(serde_json::Value::as_f64).unwrap_or(0.0)
                    )
                })
                .collect();
            format!("the weighted sum of {} packages: {}", members.len(), each.join(", "))
        }
        None => format!(
            "{} epoch(s) run, best {}{}",
            t.epochs_run,
            t.best_epoch,
            if t.members > 1 { format!(" (the first of {} members)", t.members) } else { String::new() }
        ),
    };
    let mut lines = vec![format!(
        "training:    {} training and {} validation documents; {run}; {:.0} s; seed {}; written by version {}",
        t.train_rows, t.validation_rows, t.seconds, t.seed, m.package_version
    )];
    if t.class_counts.len() == m.labels.len() {
        let counts: Vec<String> = m.labels.iter().zip(&t.class_counts).map(|(l, n)| format!("{l} {n}")).collect();
        lines.push(format!("classes:     {} (training documents)", counts.join(", ")));
    }
    if let Some(config) = m.hyper_parameters.get("training") {
        let field = |name: &str| config.get(name).map_or("?".to_owned(), ToString::to_string);
        let weights = if config.get("class_weights").is_some_and(|w| w.is_array()) { "balanced" } else { "none" };
        lines.push(format!(
            "configured:  batch {}, learning rate {}, epochs {} at most, patience {}, class weights {weights}",
            field("batch_size"),
            field("learning_rate"),
            field("epochs"),
            field("patience")
        ));
    }
    let metric = |name: &str| m.metrics.get(name).map(|v| format!("{v:.4}"));
    if let (Some(accuracy), Some(macro_f1)) = (metric("validation_accuracy"), metric("validation_macro_f1")) {
        lines.push(format!("validation:  accuracy {accuracy}, macro-F1 {macro_f1}"));
    }
    if let (Some(t), Some(after), Some(before)) =
        (metric("temperature"), metric("validation_ece"), metric("validation_ece_uncalibrated"))
    {
        lines.push(format!("calibrated:  temperature {t}; validation ECE {after} (uncalibrated {before})"));
    }
    lines
}

//! `pipeline inspect`: a model package as `pipeline run` would open it.

use std::path::PathBuf;

use batch_io::command_line::print_report;
use runtime::classifier::Classifier;
use runtime::inference::BackendOptions;
use runtime::package::InputLayout;

pub fn run(dir: Option<PathBuf>) -> anyhow::Result<()> {
    let (_guard, package) = pipeline::model_source::open(dir.as_deref())?;
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
    line(format!("embedding:   {} dims", m.embedding_dim));
    for (name, value) in &m.metrics {
        line(format!("metric:      {name} = {value:.4}"));
    }
    line(format!(
        "trained on:  {} ({} rows, sha256 {})",
        m.training.corpus.path, m.training.corpus.rows, m.training.corpus.sha256
    ));
    line(format!("manifest:\n{}", serde_json::to_string_pretty(m)?));
    print_report(&report)?;
    Ok(())
}

//! Runs the `.slt` files in `slt/` beside this file with the `sqllogictest` crate, as DataFusion tests
//! itself. Each file gets a fresh session with:
//! - `predictions`: `pipeline run` output of the tiny test model over `fixtures/reviews.parquet`
//!   (made once, here, by the pipeline library: the real output schema);
//! - `reviews`: `fixtures/reviews.parquet` (id, text, label);
//! - `classify(text)` backed by `fixtures/default-model`.
//!
//! Paths in the files are relative to `cli/` (cargo's working directory for these tests).

use std::path::{Path, PathBuf};

use super::predictions::make_predictions;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use runtime::inference::BackendOptions;
use sql::{ClassifyOptions, SqlSession};
use sqllogictest::{DBOutput, DefaultColumnType};
use test_support::repo_root;

#[derive(Debug)]
struct QueryError(String);

impl std::fmt::Display for QueryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for QueryError {}

struct Database {
    session: SqlSession,
}

#[async_trait::async_trait]
impl sqllogictest::AsyncDB for Database {
    type Error = QueryError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, QueryError> {
        let error = |e: anyhow::Error| QueryError(format!("{e:#}"));
        let frame = self.session.query(sql).await.map_err(error)?;
        let batches = frame.collect().await.map_err(|e| error(self.session.explain(e)))?;
        let options = FormatOptions::default().with_null("NULL");
        let mut rows = Vec::new();
        let mut columns = 0;
        for batch in &batches {
            columns = batch.num_columns();
            let formatters: Vec<ArrayFormatter> = batch
                .columns()
                .iter()
                .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
                .collect::<Result<_, _>>()
                .map_err(|e| QueryError(e.to_string()))?;
            for row in 0..batch.num_rows() {
                rows.push(
                    formatters
                        .iter()
                        .map(|f| {
                            let text = f.value(row).to_string();
                            if text.is_empty() { "(empty)".to_owned() } else { text }
                        })
                        .collect(),
                );
            }
        }
        if columns == 0 {
            return Ok(DBOutput::StatementComplete(0));
        }
        Ok(DBOutput::Rows { types: vec![DefaultColumnType::Any; columns], rows })
    }

    async fn shutdown(&mut self) {}
}

async fn open_session(predictions: &Path) -> anyhow::Result<Database> {
    let mut session = SqlSession::new(ClassifyOptions {
        default_model: Some(repo_root().join("fixtures/default-model")),
        backend: BackendOptions::default(),
        batch_size: 16,
        long_documents: runtime::long_documents::LongDocuments::default(),
        min_confidence: None,
    })
    .expect("session");
    session.register_table("predictions", &predictions.display().to_string()).await?;
    session.register_table("reviews", &repo_root().join("fixtures/reviews.parquet").display().to_string()).await?;
    Ok(Database { session })
}

#[test]
fn every_slt_file_passes() -> anyhow::Result<()> {
    let scratch = tempfile::tempdir()?;
    let predictions = make_predictions(scratch.path(), false)?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(test_support::repo_root().join("cli/tests/it/sql/slt"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "slt"))
        .collect();
    files.sort();
    anyhow::ensure!(!files.is_empty(), "no .slt files in cli/tests/it/sql/slt");
    let runtime = tokio::runtime::Runtime::new()?;
    let mut failures = Vec::new();
    for file in &files {
        let predictions = predictions.clone();
        let mut runner = sqllogictest::Runner::new(move || {
            let predictions = predictions.clone();
            async move { open_session(&predictions).await.map_err(|e| QueryError(format!("{e:#}"))) }
        });
        let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        match runtime.block_on(runner.run_file_async(file)) {
            Ok(()) => println!("ok   {name}"),
            Err(error) => {
                println!("FAIL {name}\n{error}");
                failures.push(name);
            }
        }
    }
    anyhow::ensure!(failures.is_empty(), "failed: {}", failures.join(", "));
    println!("{} sqllogictest files passed", files.len());
    Ok(())
}

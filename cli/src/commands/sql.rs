//! `pipeline sql`: one query from the command line or stdin, or an interactive prompt.

use std::collections::HashMap;
use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};

use crate::args::BackendFlags;
use crate::args::LongDocumentFlags;
use anyhow::Context;
use batch_io::command_line::say;
use batch_io::earlier_output::{OutputKind, check_replaceable_output};
use batch_io::publish::{Destination, Sink};
use clap::Args;
use runtime::output::columns::CONTRIBUTION;
use sql::{ClassifyOptions, ResultFormat, SqlSession, TableView, function_help, write_results};

/// The table a bare `pipeline sql` gets: the default output of `pipeline run`.
const DEFAULT_TABLE: (&str, &str) = ("predictions", "predictions.parquet");

#[derive(Args)]
pub struct SqlArgs {
    /// The query. Left out: read from stdin, or an interactive prompt on a terminal.
    query: Option<String>,
    /// Register a Parquet file, directory or glob as a table, locally or in object storage
    /// (s3://bucket/out/, gs://…/*.parquet; repeatable). Default:
    /// predictions=predictions.parquet when that file exists. Files can also be named in
    /// the query itself: FROM 'reviews.parquet'.
    #[arg(long = "table", value_name = "NAME=LOCATION")]
    tables: Vec<String>,
    /// Output format (default: from --output's extension, else a table).
    #[arg(long, value_parser = flags::choice::<ResultFormat>())]
    format: Option<ResultFormat>,
    /// Write the result to this file (or object-storage URL) instead of stdout.
    #[arg(long)]
    output: Option<String>,
    /// Rows printed in table format (0: all).
    #[arg(long, default_value_t = 40)]
    max_rows: usize,
    /// Characters shown per cell in table format (0: whole values).
    #[arg(long, default_value_t = 60)]
    max_cell_width: usize,
    /// The backend classify() runs on.
    #[command(flatten)]
    backend: BackendFlags,
    #[command(flatten)]
    long_documents: LongDocumentFlags,
    /// Documents per inference batch in classify() (default: 64 on a CPU, 1024 with --device cuda).
    #[arg(long, value_parser = flags::at_least_one)]
    batch_size: Option<usize>,
    /// classify() abstains below this probability: `prediction` null, `abstained` true.
    #[arg(long, value_name = "P", value_parser = flags::probability)]
    min_confidence: Option<f32>,
    /// Memory the query's sorts, joins and aggregations may hold (e.g. 4G); past it they spill
    /// to disk or the query stops with exit code 1. Default: 60% of the container's memory
    /// limit, or of the machine's memory.
    #[arg(long, value_name = "SIZE", value_parser = |text: &str| sql::memory::parse_size(text).map_err(|e| e.to_string()))]
    memory_limit: Option<u64>,
}

/// Stack of the thread that parses and plans queries: planning recurses through a query's
/// expressions, and dropping a deeply nested parse tree does too. Only what is used is
/// committed, so a large reservation costs nothing for ordinary queries.
const PLANNING_STACK: usize = 256 << 20;
/// Stack of the threads that execute query plans.
const EXECUTION_STACK: usize = 64 << 20;

/// `default_model` is the package behind classify(text). Runs on a thread with a stack of
/// [`PLANNING_STACK`].
pub fn run(args: SqlArgs, default_model: PathBuf) -> anyhow::Result<()> {
    let planner = std::thread::Builder::new()
        .name("sql".to_owned())
        .stack_size(PLANNING_STACK)
        .spawn(move || run_here(args, default_model))
        .context("cannot start the query thread")?;
    planner.join().map_err(|_| anyhow::anyhow!("internal error: the query thread panicked"))?
}

fn run_here(mut args: SqlArgs, default_model: PathBuf) -> anyhow::Result<()> {
    // `--output -` is stdout, as for most tools, never a file named `-`.
    if args.output.as_deref() == Some("-") {
        args.output = None;
    }
    let format = match (args.format, &args.output) {
        (Some(format), _) => format,
        (None, Some(output)) => ResultFormat::from_extension(Path::new(output))
            .with_context(|| format!("cannot tell the format of {output} from its extension; add --format"))?,
        (None, None) => ResultFormat::Table,
    };
    if let Some(output) = &args.output {
        batch_io::locations::refuse_output_inside_table("output", output)?;
    }
    let destination = args.output.as_deref().map(Destination::parse).transpose()?;
    // Where the result file is written: the output itself, or for object storage a local
    // staging file, uploaded once the query has run (the upload waits on the object-storage
    // runtime, which the query runtime's threads cannot do).
    let staging = match &destination {
        Some(Destination::Object { .. }) => Some(tempfile::tempdir().context("cannot make a staging directory")?),
        _ => None,
    };
    let written_to: Option<PathBuf> = match (&destination, &staging) {
        (Some(Destination::Local(path)), _) => {
            batch_io::atomic_file::check_replaceable(path)?;
            let kind = match format {
                ResultFormat::Table => OutputKind::TextTable,
                ResultFormat::Csv => OutputKind::Csv,
                ResultFormat::Json => OutputKind::JsonLines,
                ResultFormat::Parquet => OutputKind::Parquet,
            };
            check_replaceable_output("output", path, kind)?;
            Some(path.clone())
        }
        (Some(Destination::Object { .. }), Some(dir)) => Some(dir.path().join("result")),
        _ => None,
    };
    let backend = args.backend.options()?;
    let classify = ClassifyOptions {
        default_model: Some(default_model),
        batch_size: args.batch_size.unwrap_or_else(|| backend.device.default_batch_size()),
        backend,
        long_documents: args.long_documents.mode()?,
        min_confidence: args.min_confidence,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(EXECUTION_STACK)
        .build()
        .context("cannot start the query runtime")?;
    let rows = runtime.block_on(async {
        let memory_limit = args.memory_limit.unwrap_or_else(sql::memory::default_limit);
        let mut session = SqlSession::with_memory_limit(classify, memory_limit)?;
        register_tables(&mut session, &args.tables).await?;
        let view = TableView { max_rows: args.max_rows, max_cell_width: args.max_cell_width };
        let output = args.output.as_deref().zip(written_to.as_deref());
        match args.query {
            Some(query) => run_query(&session, &query, format, output, view).await,
            None if std::io::stdin().is_terminal() => interactive(&session, view).await.map(|()| None),
            None => {
                let mut query = String::new();
                std::io::stdin().read_to_string(&mut query).context("cannot read the query from stdin")?;
                run_query(&session, &query, format, output, view).await
            }
        }
    })?;
    drop(runtime);
    if let (Some(destination @ Destination::Object { .. }), Some(staged)) = (&destination, &written_to) {
        upload(staged, destination)?;
    }
    if let (Some(rows), Some(output)) = (rows, &args.output) {
        say(&format!("{rows} rows -> {output}"));
    }
    Ok(())
}

/// Sends the staged result file to its object-storage destination, published whole.
fn upload(staged: &Path, destination: &Destination) -> anyhow::Result<()> {
    let mut file = std::fs::File::open(staged).with_context(|| format!("cannot read {}", staged.display()))?;
    let mut sink = Sink::create(destination)?;
    std::io::copy(&mut file, &mut sink).with_context(|| format!("cannot upload {destination}"))?;
    sink.publish()
}

async fn register_tables(session: &mut SqlSession, tables: &[String]) -> anyhow::Result<()> {
    for table in tables {
        let (name, location) = table
            .split_once('=')
            .with_context(|| format!("--table {table}: expected NAME=PATH, e.g. --table reviews=reviews.parquet"))?;
        session.register_table(name, location).await.with_context(|| format!("--table {table}"))?;
    }
    let (name, location) = DEFAULT_TABLE;
    if tables.is_empty() && Path::new(location).is_file() {
        session.register_table(name, location).await?;
    }
    Ok(())
}

/// Runs `query` and writes its rows; `output` is the `--output` as given and the local file
/// written for it. Returns the row count when there was an output.
async fn run_query(
    session: &SqlSession,
    query: &str,
    format: ResultFormat,
    output: Option<(&str, &Path)>,
    view: TableView,
) -> anyhow::Result<Option<usize>> {
    let frame = session.query(query).await?;
    if let Some((output, _)) = output {
        session.check_output(output)?;
    }
    // A Parquet output that keeps `contribution` says where its pushes point, as a run's
    // does, so that the report reads them the right way round.
    let keeps_pushes = frame.schema().fields().iter().any(|field| field.name() == CONTRIBUTION.name);
    let mut metadata =
        if format == ResultFormat::Parquet && keeps_pushes { session.push_metadata() } else { HashMap::new() };
    // Token spans are read in the text column the tables named, which the result must keep.
    if format == ResultFormat::Parquet {
        let columns: Vec<&str> = frame.schema().fields().iter().map(|field| field.name().as_str()).collect();
        metadata.extend(session.token_spans_metadata(&columns));
    }
    let rows = write_results(frame, format, output.map(|(_, file)| file), view, metadata)
        .await
        .map_err(|error| session.explain_execution(error))?;
    Ok(output.map(|_| rows))
}

/// A prompt with history; statements end with `;`.
async fn interactive(session: &SqlSession, view: TableView) -> anyhow::Result<()> {
    let mut editor = rustyline::DefaultEditor::new()?;
    let history = std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".pipeline_sql_history"));
    if let Some(path) = &history {
        // No history yet is normal.
        let _ = editor.load_history(path);
    }
    say("pipeline sql: end statements with `;`. \\d lists tables, \\h functions, \\q quits.");
    let mut statement = String::new();
    loop {
        let prompt = if statement.is_empty() { "sql> " } else { "...> " };
        let line = match editor.readline(prompt) {
            Ok(line) => line,
            Err(rustyline::error::ReadlineError::Interrupted) => {
                statement.clear();
                continue;
            }
            Err(rustyline::error::ReadlineError::Eof) => break,
            Err(e) => return Err(e.into()),
        };
        let trimmed = line.trim();
        if statement.is_empty() && trimmed.starts_with('\\') {
            let _ = editor.add_history_entry(trimmed);
            match trimmed {
                "\\q" => break,
                "\\d" => describe_tables(session),
                "\\h" => function_help().iter().for_each(|(call, what)| println!("{call:36} {what}")),
                other => say(&format!("unknown command {other}; \\d lists tables, \\h functions, \\q quits")),
            }
            continue;
        }
        statement.push_str(&line);
        statement.push('\n');
        if !trimmed.ends_with(';') {
            continue;
        }
        let query = std::mem::take(&mut statement);
        let _ = editor.add_history_entry(query.trim());
        if let Err(error) = run_query(session, &query, ResultFormat::Table, None, view).await {
            say(&format!("error: {error:#}"));
        }
    }
    if let Some(path) = &history {
        let _ = editor.save_history(path);
    }
    Ok(())
}

fn describe_tables(session: &SqlSession) {
    if session.tables().is_empty() {
        println!("no tables registered (start with --table NAME=PATH, or query FROM 'file.parquet')");
    }
    for (name, location) in session.tables() {
        println!("{name:20} {location}");
    }
}

//! A DataFusion session with the attention functions, Parquet tables by name or by path,
//! read-only SQL, and errors that say what is registered.

use std::collections::{BTreeMap, HashMap};
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::{Arc, PoisonError, mpsc};
use std::time::Duration;

use anyhow::{Context, bail};
use datafusion::catalog::DynamicFileCatalog;
use datafusion::dataframe::DataFrame;
use datafusion::error::DataFusionError;
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{SQLOptions, SessionConfig, SessionContext};
use runtime::output::columns::TOKEN_SPANS;
use runtime::output::keys;

use crate::field_access::rewrite_field_access;
use crate::functions::{self, ClassifyOptions};
use crate::memory;
use batch_io::locations::{refuse_output_among_inputs, refuse_output_inside_table, refuse_remote_output_among_inputs};
use batch_io::object_storage::{TransientIo, is_url};
use datafusion::execution::SessionState;
use datafusion::execution::memory_pool::FairSpillPool;
use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast::{Expr, ObjectName, Query, Visit, Visitor, visit_relations};

use crate::object_stores::StoresFromEnvironment;
use crate::tables::{
    ParquetPathTables, PushAnchors, ReadLocations, RemoteReads, find_parquet_files, parquet_table, record_anchor,
    record_read,
};
use crate::text_tables::text_table;

pub struct SqlSession {
    ctx: SessionContext,
    /// Registered table name → the location it was registered from.
    tables: BTreeMap<String, String>,
    /// Every location registered or named in a query so far: local ones, and object storage.
    read: ReadLocations,
    remote_read: RemoteReads,
    anchors: PushAnchors,
    /// The memory pool's size (`crate::memory`).
    memory_limit: u64,
}

/// Deepest nesting of expressions a query may have. Hand-written SQL stays far below; a
/// generated 4,000-term sum goes far above and would exhaust the stack while planning.
pub const MAX_EXPRESSION_DEPTH: usize = 500;

/// Deepest nesting of brackets (`(`, `[`) a query may have, counted on its text before it
/// is parsed. The SQL parser has a recursion limit, and when a query reaches it inside nested
/// `CAST(` or `ARRAY[` it backtracks without end (48 nested CASTs spun at 100 % CPU; 47 took
/// 50 ms). Below this depth a query cannot reach [`PARSER_RECURSION_LIMIT`], so it is parsed
/// or refused at once. Hand-written SQL nests a few levels.
pub const MAX_BRACKET_DEPTH: usize = 64;

/// Deepest nesting of queries (subqueries, derived tables; the outermost counts). DataFusion's
/// planning time about doubles with each nested scalar subquery: 16 queries took 0.17 s to
/// plan, 17 took 0.26 s, 25 more than 30 s.
pub const MAX_QUERY_DEPTH: usize = 16;

/// How long the SQL parser may take. Ordinary queries parse in microseconds, but on a syntax
/// error inside nested `POSITION(`, `CAST(`, `SUBSTRING(` or `ARRAY[` (among others) it
/// backtracks through every level, about 3× per level: 8 nested `POSITION(CAST(` took 2.7 s,
/// 10 spun on. No nesting count catches every such construct, so the parse gets a deadline.
const PARSE_DEADLINE: Duration = Duration::from_secs(5);

/// Stack of the parsing thread: it recurses up to [`PARSER_RECURSION_LIMIT`]. Only what is
/// used is committed.
const PARSER_STACK: usize = 256 << 20;

/// Most times a query may read tables once its CTEs are expanded: DataFusion copies a CTE's
/// plan into each place that names it, so a chain of CTEs that each name the one before twice
/// doubles per link (1,024 reads planned in 0.5 s, 2,048 in 1.1 s, 8,192 in 7 s).
pub const MAX_EXPANDED_TABLE_READS: u64 = 1024;

/// The SQL parser's recursion limit: DataFusion's default (50) can be reached by 12 nested
/// subqueries; this one cannot be reached within [`MAX_BRACKET_DEPTH`] brackets (no bracket
/// costs the parser 15 levels), and the planning thread's stack holds it with room to spare.
const PARSER_RECURSION_LIMIT: usize = 1000;

impl SqlSession {
    /// A session whose queries hold at most the default share of memory ([`memory::default_limit`]).
    pub fn new(classify: ClassifyOptions) -> anyhow::Result<Self> {
        Self::with_memory_limit(classify, memory::default_limit())
    }

    /// A session whose sorts, joins and aggregations hold at most `memory_limit` bytes, and
    /// spill to disk past it where they can.
    pub fn with_memory_limit(classify: ClassifyOptions, memory_limit: u64) -> anyhow::Result<Self> {
        // information_schema gives `SHOW TABLES` and `SHOW COLUMNS FROM t`.
        let config = SessionConfig::new()
            .with_information_schema(true)
            .set_usize("datafusion.sql_parser.recursion_limit", PARSER_RECURSION_LIMIT);
        let usable = usize::try_from(memory_limit).unwrap_or(usize::MAX);
        let stores = RuntimeEnvBuilder::new()
            .with_memory_pool(Arc::new(FairSpillPool::new(usable)))
            .with_object_store_registry(Arc::new(StoresFromEnvironment::default()))
            .build_arc()
            .context("cannot set up the query engine")?;
        let ctx = SessionContext::new_with_config_rt(config, stores);
        let read = ReadLocations::default();
        let remote_read = RemoteReads::default();
        let anchors = PushAnchors::default();
        functions::register(&ctx, classify, read.clone());
        let paths = Arc::new(ParquetPathTables::new(ctx.state(), read.clone(), remote_read.clone(), anchors.clone()));
        let catalogs = Arc::new(DynamicFileCatalog::new(ctx.state().catalog_list().clone(), paths));
        let state = SessionStateBuilder::new_from_existing(ctx.state()).with_catalog_list(catalogs).build();
        Ok(Self {
            ctx: SessionContext::new_with_state(state),
            tables: BTreeMap::new(),
            read,
            remote_read,
            anchors,
            memory_limit,
        })
    }

    pub fn context(&self) -> &SessionContext {
        &self.ctx
    }

    /// Registers the Parquet file, directory, prefix or glob at `location` as table `name`, or
    /// the CSV, TSV or JSON Lines file or glob its extension names.
    pub async fn register_table(&mut self, name: &str, location: &str) -> anyhow::Result<()> {
        let valid = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            bail!("table name `{name}` must be letters, digits and underscores, not starting with a digit");
        }
        // SQL folds unquoted names to lower case; register them so, or `FROM Reviews` misses.
        let name = name.to_ascii_lowercase();
        if self.tables.contains_key(&name) {
            bail!("table `{name}` is given twice");
        }
        if let Some((table, input)) = text_table(&self.ctx.state(), location).await? {
            self.ctx.register_table(name.as_str(), table)?;
            self.tables.insert(name, location.to_owned());
            record_read(&input, location, &self.read, &self.remote_read);
            return Ok(());
        }
        let resolved = find_parquet_files(location).await?;
        let table = parquet_table(&self.ctx.state(), &resolved, &name)
            .await
            .map_err(|e| anyhow::anyhow!("cannot register {location} as table `{name}`: {e}"))?;
        self.ctx.register_table(name.as_str(), table)?;
        self.tables.insert(name, location.to_owned());
        record_read(&resolved.input, location, &self.read, &self.remote_read);
        record_anchor(&resolved, &self.anchors);
        Ok(())
    }

    /// The metadata an output keeping `contribution` needs to be read the right way round:
    /// `pipeline.contribution_towards` and `model.labels`, where every table read so far that
    /// has the column agrees on them; empty otherwise.
    pub fn push_metadata(&self) -> HashMap<String, String> {
        let anchors = self.anchors.lock().unwrap_or_else(PoisonError::into_inner);
        let mut metadata = HashMap::new();
        if let (1, Some((towards, labels))) = (anchors.pushes.len(), anchors.pushes.first()) {
            metadata.insert(keys::CONTRIBUTION_TOWARDS.to_owned(), towards.clone());
            if !labels.is_empty() {
                metadata.insert(keys::MODEL_LABELS.to_owned(), labels.clone());
            }
        }
        metadata
    }

    /// The metadata an output keeping `token_spans` and the text they count in needs for its
    /// tokens to be read (`pipeline.token_spans_text`), where every table read so far that
    /// has spans names the same text column and `columns` (the result's) hold it; empty
    /// otherwise.
    pub fn token_spans_metadata(&self, columns: &[&str]) -> HashMap<String, String> {
        let anchors = self.anchors.lock().unwrap_or_else(PoisonError::into_inner);
        let mut metadata = HashMap::new();
        if let (1, Some(text)) = (anchors.token_spans_texts.len(), anchors.token_spans_texts.first())
            && columns.contains(&text.as_str())
            && columns.contains(&TOKEN_SPANS.name)
        {
            metadata.insert(keys::TOKEN_SPANS_TEXT.to_owned(), text.clone());
        }
        metadata
    }

    /// Refuses an output (a local path or a storage URL) that a registered table or a path
    /// named in a query reads, or would read on a rerun. Call it after planning the query.
    pub fn check_output(&self, output: &str) -> anyhow::Result<()> {
        refuse_output_inside_table("output", output)?;
        if is_url(output) {
            let read = self.remote_read.lock().unwrap_or_else(PoisonError::into_inner);
            for (location, files) in read.iter() {
                refuse_remote_output_among_inputs("output", output, false, None, location, files)?;
            }
            return Ok(());
        }
        let read = self.read.lock().unwrap_or_else(PoisonError::into_inner);
        refuse_output_among_inputs("output", Path::new(output), &read)
    }

    /// Registered tables with their locations, by name.
    pub fn tables(&self) -> &BTreeMap<String, String> {
        &self.tables
    }

    /// Plans `sql`. Statements that would write (INSERT, COPY) are refused.
    pub async fn query(&self, sql: &str) -> anyhow::Result<DataFrame> {
        self.plan(sql).await.map_err(|e| self.explain(e))
    }

    async fn plan(&self, sql: &str) -> datafusion::error::Result<DataFrame> {
        let state = self.ctx.state();
        check_bracket_depth(sql, MAX_BRACKET_DEPTH)?;
        let mut statement = parse_within_deadline(state.clone(), sql)?;
        check_expression_depth(&statement, MAX_EXPRESSION_DEPTH)?;
        check_expanded_table_reads(&statement)?;
        rewrite_field_access(&mut statement);
        let plan = state.statement_to_plan(statement).await?;
        SQLOptions::new().with_allow_dml(false).verify_plan(&plan)?;
        self.ctx.execute_logical_plan(plan).await
    }

    /// A query's failure while it ran, in the user's terms where it is a memory limit or an
    /// internal error ([`Self::explain`]); anything else as it is.
    pub fn explain_execution(&self, error: anyhow::Error) -> anyhow::Error {
        let Some(datafusion) = error.chain().find_map(|cause| cause.downcast_ref::<DataFusionError>()) else {
            return error;
        };
        self.explain_limits(datafusion.find_root()).unwrap_or(error)
    }

    /// A memory limit reached, or DataFusion's own bug, said in the user's terms.
    fn explain_limits(&self, root: &DataFusionError) -> Option<anyhow::Error> {
        match root {
            // DataFusion's own bugs ("Internal error … please file a bug report") are ours to report.
            DataFusionError::Internal(text) => Some(anyhow::Error::new(batch_io::command_line::InternalError(
                format!("the query engine failed on this query ({text})"),
            ))),
            DataFusionError::ResourcesExhausted(text) => Some(anyhow::anyhow!(
                "the query needs more memory than the {} it may use ({text}); give it more with --memory-limit, or \
                 ask for less: fewer or narrower columns, a LIMIT, a WHERE before the ORDER BY",
                memory::describe(self.memory_limit)
            )),
            _ => None,
        }
    }

    /// Adds what a user needs to fix the query to DataFusion's message.
    pub fn explain(&self, error: DataFusionError) -> anyhow::Error {
        // The parser's own words, not `SQL error: ParserError("…")`.
        if let DataFusionError::SQL(parse_error, _) = error.find_root() {
            use datafusion::sql::sqlparser::parser::ParserError;
            return match parse_error.as_ref() {
                ParserError::TokenizerError(text) | ParserError::ParserError(text) => {
                    anyhow::anyhow!("the query is not valid SQL: {text}")
                }
                ParserError::RecursionLimitExceeded => {
                    anyhow::anyhow!("the query nests too deeply for the SQL parser; flatten it, e.g. with a CTE")
                }
            };
        }
        if let Some(limit) = self.explain_limits(error.find_root()) {
            return limit;
        }
        let message = error.strip_backtrace();
        // An unreachable object store stays transient (exit 75): a scheduler should retry.
        if let Some(transient) = error_chain(&error).find_map(|cause| cause.downcast_ref::<TransientIo>()) {
            return anyhow::Error::new(TransientIo(transient.0.clone()));
        }
        if message.contains("DML not supported") {
            return anyhow::anyhow!(
                "{message}\nqueries are read-only; write a query's result with --output PATH [--format csv|json|parquet]"
            );
        }
        // DataFusion's "table 'x' not found" and schema (unknown column) errors; other "not
        // found" messages (e.g. a missing ONNX Runtime library under classify) are not about tables.
        let unknown_table = message.contains("table '") && message.contains("' not found");
        // A missing column of a file named in the query is not helped by "no tables".
        let unknown_column = message.starts_with("Schema error") && !self.tables.is_empty();
        if unknown_table || unknown_column {
            return anyhow::anyhow!("{message}\n{}", self.describe_tables());
        }
        anyhow::anyhow!("{message}")
    }

    fn describe_tables(&self) -> String {
        if self.tables.is_empty() {
            return "no tables are registered; add one with --table NAME=PATH, or name a file in the query: \
                    FROM 'path/to/file.parquet'"
                .to_owned();
        }
        let listed: Vec<String> = self.tables.iter().map(|(name, location)| format!("{name} ({location})")).collect();
        format!("registered tables: {}", listed.join(", "))
    }
}

/// Refuses a query whose brackets nest deeper than `limit`, before the parser sees it. Brackets
/// inside string literals, quoted identifiers and comments do not count.
fn check_bracket_depth(sql: &str, limit: usize) -> datafusion::error::Result<()> {
    let mut depth = 0usize;
    let mut deepest = 0usize;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' | '`' => {
                // A quote closes the literal; a doubled one is an escaped quote inside it.
                while let Some(inner) = chars.next() {
                    if inner == c && chars.next_if_eq(&c).is_none() {
                        break;
                    }
                }
            }
            '-' if chars.next_if_eq(&'-').is_some() => while chars.next_if(|&n| n != '\n').is_some() {},
            '/' if chars.next_if_eq(&'*').is_some() => {
                while let Some(inner) = chars.next() {
                    if inner == '*' && chars.next_if_eq(&'/').is_some() {
                        break;
                    }
                }
            }
            '(' | '[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ')' | ']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    if deepest > limit {
        return Err(DataFusionError::Plan(format!(
            "the query nests brackets {deepest} deep, more than the {limit} allowed (the SQL parser can \
             backtrack without end through deeper CAST( or ARRAY[); flatten it, e.g. with a CTE (WITH … AS)"
        )));
    }
    Ok(())
}

/// `error` and its sources, outermost first.
fn error_chain(error: &DataFusionError) -> impl Iterator<Item = &(dyn std::error::Error + 'static)> {
    std::iter::successors(Some(error as &(dyn std::error::Error + 'static)), |cause| cause.source())
}

/// Parses `sql` on a thread of its own, giving up after [`PARSE_DEADLINE`]. A parse that
/// overruns is left to spin on its thread (a parser cannot be interrupted); the command then
/// ends with the error, which ends the thread too.
fn parse_within_deadline(state: SessionState, sql: &str) -> datafusion::error::Result<Statement> {
    let (sender, receiver) = mpsc::channel();
    let sql = sql.to_owned();
    std::thread::Builder::new()
        .name("sql-parser".to_owned())
        .stack_size(PARSER_STACK)
        .spawn(move || {
            let dialect = state.config().options().sql_parser.dialect;
            let parsed = state.sql_to_statement(&sql, &dialect).map_err(explain_recursion_limit);
            // The receiver is gone only when the deadline passed; nobody waits for this result.
            let _ = sender.send(parsed);
        })
        .map_err(|e| DataFusionError::Execution(format!("cannot start the SQL parser's thread: {e}")))?;
    match receiver.recv_timeout(PARSE_DEADLINE) {
        Ok(parsed) => parsed,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(DataFusionError::Plan(format!(
            "the SQL parser gave up after {} s: it backtracks through every level of nested CAST(, \
             POSITION(, SUBSTRING( or ARRAY[ when the query has a syntax error inside them; check the \
             brackets and keywords, or flatten the nesting with a CTE (WITH … AS)",
            PARSE_DEADLINE.as_secs()
        ))),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            Err(DataFusionError::Execution("internal error: the SQL parser's thread panicked".to_owned()))
        }
    }
}

/// Refuses a statement that reads tables more than [`MAX_EXPANDED_TABLE_READS`] times once
/// its CTEs are expanded into each place that names them.
fn check_expanded_table_reads(statement: &Statement) -> datafusion::error::Result<()> {
    let Statement::Statement(statement) = statement else { return Ok(()) };
    let datafusion::sql::sqlparser::ast::Statement::Query(query) = statement.as_ref() else { return Ok(()) };
    let reads = expanded_table_reads(query, &HashMap::new());
    if reads > MAX_EXPANDED_TABLE_READS {
        return Err(DataFusionError::Plan(format!(
            "the query reads tables {reads} times once its CTEs are expanded (each name of a CTE copies its \
             whole plan, so CTEs that each name the one before twice double per link), more than the \
             {MAX_EXPANDED_TABLE_READS} allowed; name each CTE once, or write an intermediate result with \
             --output and query that file"
        )));
    }
    Ok(())
}

/// How many table reads `query` plans to, given the expanded sizes of the CTEs in scope
/// (`ctes`, by lower-case name). CTEs of nested queries are counted as plain tables, which
/// undercounts only chains hidden inside subqueries.
fn expanded_table_reads(query: &Query, ctes: &HashMap<String, u64>) -> u64 {
    let mut scope = ctes.clone();
    if let Some(with) = &query.with {
        for cte in &with.cte_tables {
            let reads = expanded_table_reads(&cte.query, &scope);
            scope.insert(cte.alias.name.value.to_lowercase(), reads);
        }
    }
    let mut reads = 0u64;
    let _ = visit_relations(&query.body, |name: &ObjectName| {
        let cte = name.0.last().and_then(|part| part.as_ident()).map(|ident| ident.value.to_lowercase());
        let copies = cte.and_then(|cte| scope.get(&cte).copied()).unwrap_or(1);
        reads = reads.saturating_add(copies);
        ControlFlow::<()>::Continue(())
    });
    reads.max(1)
}

/// The parser's own recursion limit, said in the user's terms.
fn explain_recursion_limit(error: DataFusionError) -> DataFusionError {
    let message = error.strip_backtrace();
    if message.contains("RecursionLimitExceeded") || message.contains("recursion limit") {
        return DataFusionError::Plan(format!(
            "{message}: the query nests too deeply for the SQL parser; flatten it, e.g. with a subquery or a CTE"
        ));
    }
    error
}

/// Refuses a statement whose expressions nest deeper than `limit`, or whose queries nest
/// deeper than [`MAX_QUERY_DEPTH`], before planning recurses through them. The walk stops as
/// soon as it passes a limit, so it stays shallow itself.
fn check_expression_depth(statement: &Statement, limit: usize) -> datafusion::error::Result<()> {
    struct Depth {
        expressions: usize,
        queries: usize,
        limit: usize,
        too_deep: Option<&'static str>,
    }
    impl Visitor for Depth {
        type Break = ();
        fn pre_visit_expr(&mut self, _expr: &Expr) -> ControlFlow<()> {
            self.expressions += 1;
            if self.expressions > self.limit {
                self.too_deep = Some("expressions");
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
        fn post_visit_expr(&mut self, _expr: &Expr) -> ControlFlow<()> {
            self.expressions -= 1;
            ControlFlow::Continue(())
        }
        fn pre_visit_query(&mut self, _query: &Query) -> ControlFlow<()> {
            self.queries += 1;
            if self.queries > MAX_QUERY_DEPTH {
                self.too_deep = Some("queries");
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _query: &Query) -> ControlFlow<()> {
            self.queries -= 1;
            ControlFlow::Continue(())
        }
    }
    let Statement::Statement(statement) = statement else { return Ok(()) };
    let mut depth = Depth { expressions: 0, queries: 0, limit, too_deep: None };
    if statement.as_ref().visit(&mut depth).is_break() {
        let message = if depth.too_deep == Some("queries") {
            format!(
                "the query nests subqueries more than {MAX_QUERY_DEPTH} deep (planning time doubles with each \
                 nested scalar subquery); flatten it, e.g. with a CTE (WITH … AS) or a join"
            )
        } else {
            format!(
                "the query nests expressions more than {limit} deep (a very long chain of operators such as \
                 a + a + … or x = 'a' OR x = 'b' OR … counts one level per operator); write a list of values as \
                 x IN ('a', 'b', …), or split the expression into several columns"
            )
        };
        return Err(DataFusionError::Plan(message));
    }
    Ok(())
}

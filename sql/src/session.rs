//! A DataFusion session with the attention functions, Parquet tables by name or by path,
//! read-only SQL, and errors that say what is registered.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::{Arc, PoisonError};

use anyhow::{Context, bail};
use datafusion::catalog::DynamicFileCatalog;
use datafusion::dataframe::DataFrame;
use datafusion::error::DataFusionError;
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{SQLOptions, SessionConfig, SessionContext};

use crate::field_access::rewrite_field_access;
use crate::functions::{self, ClassifyOptions};
use batch_io::locations::refuse_output_among_inputs;
use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast::{Expr, Visit, Visitor};

use crate::object_stores::StoresFromEnvironment;
use crate::tables::{ParquetPathTables, ReadLocations, find_parquet_files, parquet_table};

pub struct SqlSession {
    ctx: SessionContext,
    /// Registered table name → the location it was registered from.
    tables: BTreeMap<String, String>,
    /// Every location registered or named in a query so far.
    read: ReadLocations,
}

/// Deepest nesting of expressions a query may have. Hand-written SQL stays far below; a
/// generated 4,000-term sum goes far above and would exhaust the stack while planning.
pub const MAX_EXPRESSION_DEPTH: usize = 500;

impl SqlSession {
    pub fn new(classify: ClassifyOptions) -> anyhow::Result<Self> {
        // information_schema gives `SHOW TABLES` and `SHOW COLUMNS FROM t`.
        let config = SessionConfig::new().with_information_schema(true);
        let stores = RuntimeEnvBuilder::new()
            .with_object_store_registry(Arc::new(StoresFromEnvironment::default()))
            .build_arc()
            .context("cannot set up the query engine")?;
        let ctx = SessionContext::new_with_config_rt(config, stores);
        let read = ReadLocations::default();
        functions::register(&ctx, classify, read.clone());
        let paths = Arc::new(ParquetPathTables::new(ctx.state(), read.clone()));
        let catalogs = Arc::new(DynamicFileCatalog::new(ctx.state().catalog_list().clone(), paths));
        let state = SessionStateBuilder::new_from_existing(ctx.state()).with_catalog_list(catalogs).build();
        Ok(Self { ctx: SessionContext::new_with_state(state), tables: BTreeMap::new(), read })
    }

    pub fn context(&self) -> &SessionContext {
        &self.ctx
    }

    /// Registers the Parquet file, directory, prefix or glob at `location` as table `name`.
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
        let files = find_parquet_files(location).await?;
        let table = parquet_table(&self.ctx.state(), &files.files)
            .await
            .map_err(|e| anyhow::anyhow!("cannot register {location} as table `{name}`: {e}"))?;
        self.ctx.register_table(name.as_str(), table)?;
        self.tables.insert(name, location.to_owned());
        if let Some(input) = files.local {
            self.read.lock().unwrap_or_else(PoisonError::into_inner).push(input);
        }
        Ok(())
    }

    /// Refuses an output file that a registered table or a path named in a query reads, or
    /// would read on a rerun. Call it after planning the query.
    pub fn check_output(&self, output: &Path) -> anyhow::Result<()> {
        let read = self.read.lock().unwrap_or_else(PoisonError::into_inner);
        refuse_output_among_inputs("--output", output, &read)
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
        let dialect = state.config().options().sql_parser.dialect;
        let mut statement = state.sql_to_statement(sql, &dialect)?;
        check_expression_depth(&statement, MAX_EXPRESSION_DEPTH)?;
        rewrite_field_access(&mut statement);
        let plan = state.statement_to_plan(statement).await?;
        SQLOptions::new().with_allow_dml(false).verify_plan(&plan)?;
        self.ctx.execute_logical_plan(plan).await
    }

    /// Adds what a user needs to fix the query to DataFusion's message.
    pub fn explain(&self, error: DataFusionError) -> anyhow::Error {
        let message = error.strip_backtrace();
        if message.contains("DML not supported") {
            return anyhow::anyhow!(
                "{message}\nqueries are read-only; write a query's result with --output PATH [--format csv|json|parquet]"
            );
        }
        // DataFusion's "table 'x' not found" and schema (unknown column) errors; other "not
        // found" messages (e.g. a missing ONNX Runtime library under classify) are not about tables.
        let unknown_table = message.contains("table '") && message.contains("' not found");
        let unknown_name = unknown_table || message.starts_with("Schema error");
        if unknown_name {
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

/// Refuses a statement whose expressions nest deeper than `limit`, before planning recurses
/// through them. The walk stops as soon as it passes the limit, so it stays shallow itself.
fn check_expression_depth(statement: &Statement, limit: usize) -> datafusion::error::Result<()> {
    struct Depth {
        current: usize,
        limit: usize,
    }
    impl Visitor for Depth {
        type Break = ();
        fn pre_visit_expr(&mut self, _expr: &Expr) -> ControlFlow<()> {
            self.current += 1;
            if self.current > self.limit { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
        }
        fn post_visit_expr(&mut self, _expr: &Expr) -> ControlFlow<()> {
            self.current -= 1;
            ControlFlow::Continue(())
        }
    }
    let Statement::Statement(statement) = statement else { return Ok(()) };
    let mut depth = Depth { current: 0, limit };
    if statement.as_ref().visit(&mut depth).is_break() {
        return Err(DataFusionError::Plan(format!(
            "the query nests expressions more than {limit} deep (a very long chain of operators such as \
             a + a + ... counts one level per operator); split it, e.g. into a subquery or several columns"
        )));
    }
    Ok(())
}

//! A SQL condition evaluated on record batches as they stream by, with the SQL functions of
//! `pipeline sql`: for `pipeline report --where`, which picks the documents to draw without
//! a second pass or a query engine's own scan.

use std::sync::Arc;

use anyhow::{Context, bail};
use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, RecordBatch};
use arrow::datatypes::{DataType, Field, FieldRef, Schema};
use runtime::output::columns::{TOKEN_SPANS, TOKENS};

use crate::functions::list_of;
use datafusion::common::DFSchema;
use datafusion::common::tree_node::TreeNode;
use datafusion::datasource::MemTable;
use datafusion::logical_expr::simplify::SimplifyContext;
use datafusion::logical_expr::{Expr, LogicalPlan};
use datafusion::optimizer::simplify_expressions::ExprSimplifier;
use datafusion::physical_expr::PhysicalExpr;

use crate::functions::ClassifyOptions;
use crate::session::SqlSession;

pub struct RowFilter {
    /// The condition as the user wrote it, for messages.
    condition: String,
    /// The columns it reads, in the order `predicate` indexes them.
    columns: Vec<String>,
    predicate: Arc<dyn PhysicalExpr>,
    /// The text column of files that hold `token_spans` instead of `tokens`: the condition
    /// may still name `tokens`, read from the spans as `pipeline sql`'s tables give them.
    token_spans_text: Option<String>,
}

impl RowFilter {
    /// Plans `condition` (a SQL `WHERE` clause without the keyword) over a table of `schema`,
    /// through `pipeline sql`'s own planner and its limits (nesting, brackets, parse time).
    pub fn new(condition: &str, schema: &Schema) -> anyhow::Result<Self> {
        let invalid = || format!("--where {}", quoted_start(condition));
        let token_spans_text = runtime::output::token_spans::text_column_of(schema).ok().flatten();
        let with_tokens;
        let schema = match token_spans_text {
            Some(_) => {
                let mut fields: Vec<FieldRef> = schema.fields().iter().cloned().collect();
                fields.push(Arc::new(Field::new(TOKENS.name, list_of(DataType::Utf8), true)));
                with_tokens = Schema::new(fields).with_metadata(schema.metadata().clone());
                &with_tokens
            }
            None => schema,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the query runtime")?;
        let session = SqlSession::new(ClassifyOptions::without_model())?;
        let predicate = runtime.block_on(plan_condition(&session, condition, schema)).with_context(invalid)?;
        // Planned again over the columns it reads alone, so it runs on just those.
        let mut columns: Vec<String> = predicate.column_refs().iter().map(|c| c.name.clone()).collect();
        columns.sort();
        columns.dedup();
        let fields = columns
            .iter()
            .map(|name| schema.field_with_name(name).cloned())
            .collect::<Result<Vec<_>, _>>()
            .with_context(invalid)?;
        let read = Arc::new(DFSchema::try_from_qualified_schema(TABLE, &Schema::new(fields))?);
        // Functions of the query's start (`now()`, `current_date()`) are folded into constants
        // as a query's optimizer folds them; left in, they fail when evaluated.
        let state = session.context().state();
        let simplify = SimplifyContext::builder()
            .with_schema(read.clone())
            .with_config_options(state.config_options().clone())
            .with_query_execution_start_time(state.execution_props().query_execution_start_time)
            .build();
        let predicate =
            ExprSimplifier::new(simplify).simplify(predicate).map_err(|e| session.explain(e)).with_context(invalid)?;
        let predicate = session
            .context()
            .create_physical_expr(predicate, &read)
            .map_err(|e| session.explain(e))
            .with_context(invalid)?;
        let returns = predicate.data_type(read.as_arrow())?;
        if returns != DataType::Boolean {
            bail!(
                "--where {condition:?} gives {returns}, not true or false: write a condition, such as `label <> prediction`"
            );
        }
        Ok(Self { condition: condition.to_owned(), columns, predicate, token_spans_text })
    }

    /// The columns of the files the condition reads (`tokens` read from spans needs those and
    /// the text).
    pub fn columns(&self) -> Vec<String> {
        let mut read = Vec::with_capacity(self.columns.len() + 1);
        for column in &self.columns {
            match &self.token_spans_text {
                Some(text) if column == TOKENS.name => read.extend([TOKEN_SPANS.name.to_owned(), text.clone()]),
                _ => read.push(column.clone()),
            }
        }
        read
    }

    /// Which rows of `batch` meet the condition (a null result does not).
    pub fn matches(&self, batch: &RecordBatch) -> anyhow::Result<BooleanArray> {
        let schema = batch.schema();
        let column = |name: &str| {
            batch.column_by_name(name).cloned().with_context(|| format!("--where: the batch has no column `{name}`"))
        };
        let mut fields = Vec::with_capacity(self.columns.len());
        let mut arrays = Vec::with_capacity(self.columns.len());
        for name in &self.columns {
            match (&self.token_spans_text, schema.field_with_name(name)) {
                (Some(text), Err(_)) if name == TOKENS.name => {
                    let texts = arrow::compute::cast(&column(text)?, &DataType::Utf8)?;
                    let spans = column(TOKEN_SPANS.name)?;
                    let spans = arrow::compute::cast(&spans, &list_of(DataType::Int64))?;
                    let tokens = runtime::output::read::tokens_from_spans(
                        texts.as_string::<i32>(),
                        spans.as_list::<i32>(),
                        "--where",
                        0,
                    )?;
                    fields.push(Field::new(name, tokens.data_type().clone(), true));
                    arrays.push(Arc::new(tokens) as ArrayRef);
                }
                _ => {
                    let array = column(name)?;
                    fields.push(Field::new(name, array.data_type().clone(), true));
                    arrays.push(array);
                }
            }
        }
        let read = RecordBatch::try_new_with_options(
            Arc::new(Schema::new(fields)),
            arrays,
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
        )?;
        let result = self
            .predicate
            .evaluate(&read)
            .and_then(|value| value.into_array(read.num_rows()))
            .with_context(|| format!("--where {}", quoted_start(&self.condition)))?;
        let matched = result
            .as_any()
            .downcast_ref::<BooleanArray>()
            .with_context(|| format!("--where {} did not give true or false", quoted_start(&self.condition)))?;
        // Null (unknown) is not a match, as in a WHERE clause.
        Ok(matched.iter().map(|m| Some(m == Some(true))).collect())
    }
}

/// Most characters of a condition a message quotes: a generated condition can be megabytes.
const QUOTED_CHARS: usize = 200;

/// `condition` as messages quote it: whole, or its start and its length.
pub fn quoted_start(condition: &str) -> String {
    match condition.char_indices().nth(QUOTED_CHARS) {
        None => format!("{condition:?}"),
        Some((cut, _)) => {
            let start = condition.get(..cut).unwrap_or_default();
            format!("{start:?}… ({} characters)", condition.chars().count())
        }
    }
}

/// Why a condition that needs more than one row is refused, and what to do instead.
const ONE_ROW: &str = "the condition is judged one row at a time: aggregates (count, sum, …), window functions and \
                       subqueries need the whole table; compute them with `pipeline sql` and pick rows by id";

/// The name the rows go by in the query the condition is planned in.
const TABLE: &str = "report_rows";

/// The condition as a logical expression: planned as `SELECT * FROM report_rows WHERE …` over
/// an empty table of `schema`, so that `pipeline sql`'s checks and messages apply, then taken
/// out of the plan. What cannot be judged one row at a time is refused.
async fn plan_condition(session: &SqlSession, condition: &str, schema: &Schema) -> anyhow::Result<Expr> {
    let empty = MemTable::try_new(Arc::new(schema.clone()), vec![vec![]])?;
    session.context().register_table(TABLE, Arc::new(empty))?;
    let planned = session.query(&format!("SELECT * FROM {TABLE} WHERE {condition}")).await;
    // DataFusion's advice for an aggregate here is HAVING, which a condition cannot use.
    let planned = planned.map_err(|e| {
        let said = e.to_string();
        if said.contains("not allowed in the WHERE clause") {
            anyhow::anyhow!(ONE_ROW)
        } else if said.contains("No field named") && condition.contains('"') {
            e.context("strings take single quotes ('text'); double quotes name columns")
        } else {
            e
        }
    });
    let plan = planned?.into_unoptimized_plan();
    let only_a_condition = || {
        anyhow::anyhow!(
            "write only a condition on one row, as after WHERE: no LIMIT, ORDER BY, GROUP BY or second statement"
        )
    };
    let LogicalPlan::Projection(projection) = plan else { return Err(only_a_condition()) };
    let LogicalPlan::Filter(filter) = projection.input.as_ref() else { return Err(only_a_condition()) };
    if !matches!(filter.input.as_ref(), LogicalPlan::TableScan(_)) {
        return Err(only_a_condition());
    }
    let whole_table = filter.predicate.exists(|e| {
        Ok(matches!(
            e,
            Expr::AggregateFunction(_)
                | Expr::WindowFunction(_)
                | Expr::ScalarSubquery(_)
                | Expr::InSubquery(_)
                | Expr::Exists(_)
        ))
    })?;
    if whole_table {
        bail!(ONE_ROW);
    }
    Ok(filter.predicate.clone())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{BooleanArray, Float64Array, RecordBatch, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::RowFilter;

    fn batch() -> RecordBatch {
        let schema = Schema::new(vec![
            Field::new("id", DataType::Utf8, true),
            Field::new("confidence", DataType::Float64, true),
            Field::new("label", DataType::Utf8, true),
        ]);
        RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(StringArray::from(vec![Some("a"), Some("b"), Some("c"), None])),
                Arc::new(Float64Array::from(vec![Some(0.9), Some(0.6), None, Some(0.7)])),
                Arc::new(StringArray::from(vec!["pos", "neg", "pos", "neg"])),
            ],
        )
        .unwrap()
    }

    #[test]
    fn a_condition_picks_rows_and_unknown_is_not_a_match() {
        let batch = batch();
        let filter = RowFilter::new("confidence > 0.65 AND label <> 'x'", &batch.schema()).unwrap();
        assert_eq!(filter.columns(), ["confidence", "label"]);
        assert_eq!(filter.matches(&batch).unwrap(), BooleanArray::from(vec![true, false, false, true]));
        let by_id = RowFilter::new("id = 'b' OR id IS NULL", &batch.schema()).unwrap();
        assert_eq!(by_id.matches(&batch).unwrap(), BooleanArray::from(vec![false, true, false, true]));
    }

    #[test]
    fn what_is_not_a_condition_is_refused_with_its_text() {
        let schema = batch().schema();
        let deep = format!("confidence{} > 0", " + 1".repeat(10_000));
        for (bad, expected) in [
            ("confidence + 1", "non-boolean"),
            ("no_such_column = 1", "no_such_column"),
            ("id = ", "--where"),
            ("count(*) > 1", "one row at a time"),
            ("id IN (SELECT id FROM report_rows)", "one row at a time"),
            ("true LIMIT 1", "only a condition"),
            ("id = \"b\"", "single quotes"),
            (deep.as_str(), "nests"),
        ] {
            let error = format!("{:#}", RowFilter::new(bad, &schema).err().unwrap());
            assert!(error.contains(expected) && error.starts_with("--where"), "{bad}: {error}");
        }
    }
}

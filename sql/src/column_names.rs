//! Result headers a person can read. DataFusion names an unaliased column after its whole
//! expression, with every column qualified by its table: `classify(o/run.parquet.text)[prediction]`.
//! A field taken from a struct is named after the field (`prediction`), as DuckDB names it,
//! and other expressions lose the qualifiers of the tables read (`classify(text)`; an alias the
//! query gives stays), unless that would
//! give two columns one name, where the full names stay.

use std::collections::HashMap;

use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::logical_expr::LogicalPlan;

/// The names of the tables `plan` reads (registered names and paths), as expressions qualify
/// their columns. Aliases the query gives (`FROM runs a`) are kept: the user chose them, and
/// `a.confidence + b.confidence` needs them.
pub fn qualifiers(plan: &LogicalPlan) -> Vec<String> {
    let mut names = Vec::new();
    // Collecting names cannot fail.
    let _ = plan.apply_with_subqueries(|node| {
        if let LogicalPlan::TableScan(scan) = node {
            names.push(scan.table_name.to_string());
        }
        Ok(TreeNodeRecursion::Continue)
    });
    // Longest first, so that `runs/a.parquet` goes before a shorter name inside it.
    names.sort_by_key(|name| std::cmp::Reverse(name.len()));
    names.dedup();
    names
}

/// A readable header for each of `names` (columns of one result), given the `qualifiers`
/// of the tables the query read, and each column's name with its table (`a.id`, as
/// DataFusion keeps it beside the plain `id`). Headers are unique: a JSON object or a
/// Parquet file keeps only one of two columns of one name.
pub fn readable_names(names: &[String], qualified: &[String], qualifiers: &[String]) -> Vec<String> {
    let short: Vec<String> = names.iter().map(|name| readable(name, qualifiers)).collect();
    let chosen = unique_or(&short, names);
    let chosen = unique_or(&chosen, qualified);
    // Still alike (a table joined with itself, unaliased): numbered as DuckDB numbers them.
    let mut seen: HashMap<String, usize> = HashMap::new();
    chosen
        .into_iter()
        .map(|name| {
            let count = seen.entry(name.clone()).or_default();
            *count += 1;
            if *count == 1 { name } else { format!("{name}_{count}") }
        })
        .collect()
}

/// `preferred`, except that a name used more than once is replaced by the `fallback` of its
/// column.
fn unique_or(preferred: &[String], fallback: &[String]) -> Vec<String> {
    let mut uses: HashMap<&str, usize> = HashMap::new();
    for name in preferred {
        *uses.entry(name.as_str()).or_default() += 1;
    }
    preferred
        .iter()
        .zip(fallback)
        .map(|(name, fallback)| if uses.get(name.as_str()) == Some(&1) { name.clone() } else { fallback.clone() })
        .collect()
}

fn readable(name: &str, qualifiers: &[String]) -> String {
    if let Some(field) = struct_field(name) {
        return field.to_owned();
    }
    qualifiers.iter().fold(name.to_owned(), |name, qualifier| name.replace(&format!("{qualifier}."), ""))
}

/// `prediction` of `EXPR[prediction]`: the last bracket of the name holds a field name, not
/// an index (`tokens[1]` stays as it is).
fn struct_field(name: &str) -> Option<&str> {
    let inner = name.strip_suffix(']')?;
    let open = inner.rfind('[')?;
    let field = inner.get(open + 1..)?;
    let is_name = field.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && field.chars().all(|c| c.is_alphanumeric() || c == '_');
    (open > 0 && is_name).then_some(field)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(names: &[&str], qualifiers: &[&str]) -> Vec<String> {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let qualifiers: Vec<String> = qualifiers.iter().map(|n| (*n).to_owned()).collect();
        readable_names(&names, &names, &qualifiers)
    }

    #[test]
    fn fields_take_their_names_and_tables_leave_expressions() {
        let qualifiers = ["o/run.parquet"];
        assert_eq!(
            names(
                &["id", "classify(o/run.parquet.text)[prediction]", "classify(o/run.parquet.text)", "tokens[1]"],
                &qualifiers
            ),
            ["id", "prediction", "classify(text)", "tokens[1]"]
        );
        assert_eq!(
            names(&["e[confidence]", "sum(predictions.confidence)"], &["predictions"]),
            ["confidence", "sum(confidence)"]
        );
    }

    #[test]
    fn names_that_would_clash_stay_whole() {
        assert_eq!(
            names(&["a.x + b.y", "a[prediction]", "b[prediction]"], &["a", "b"]),
            ["x + y", "a[prediction]", "b[prediction]"]
        );
        assert_eq!(
            names(&["prediction", "classify(t.text)[prediction]"], &["t"]),
            ["prediction", "classify(t.text)[prediction]"]
        );
    }

    /// `SELECT a.id, b.id`: DataFusion names both `id`; their tables tell them apart, and a
    /// table joined with itself gets numbers.
    #[test]
    fn columns_of_one_name_from_two_tables_keep_their_tables() {
        let (ids, qualified) = (["id".to_owned(), "id".to_owned()], ["a.id".to_owned(), "b.id".to_owned()]);
        assert_eq!(readable_names(&ids, &qualified, &[]), ["a.id", "b.id"]);
        assert_eq!(readable_names(&ids, &ids, &[]), ["id", "id_2"]);
    }
}

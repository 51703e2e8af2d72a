//! `classify(text).prediction`: DataFusion resolves `a.b` when `a` is a column, but refuses a
//! dot after any other expression (a function call, a subscript). This rewrites such a dot
//! into the subscript DataFusion does plan, `classify(text)['prediction']`, before planning.

use std::ops::ControlFlow;

use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast::{AccessExpr, Expr, Value, visit_expressions_mut};

pub fn rewrite_field_access(statement: &mut Statement) {
    let Statement::Statement(statement) = statement else { return };
    let _ = visit_expressions_mut(statement.as_mut(), |expr| {
        if let Expr::CompoundFieldAccess { root, access_chain } = expr
            // A leading identifier may be a table or column name; DataFusion resolves those.
            && !matches!(root.as_ref(), Expr::Identifier(_))
        {
            for access in access_chain.iter_mut() {
                if let AccessExpr::Dot(Expr::Identifier(field)) = access {
                    let name = Value::SingleQuotedString(field.value.clone()).with_empty_span();
                    *access = AccessExpr::Dot(Expr::Value(name));
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

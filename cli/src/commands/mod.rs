//! One module per subcommand of `pipeline`: its flags and what it does with them.

pub mod inspect;
pub mod report;
pub mod run;
pub mod sql;

//! The `pipeline` binary as users run it, by subject. One test binary for the crate: each
//! binary links the whole dependency graph, so twelve of them cost twelve links.

mod common;
mod dataset;
mod delta;
mod deploy;
mod docs;
mod hostile;
mod image;
mod python;
mod report;
mod run;
mod sql;
mod storage;
mod train;

//! Dataset outputs as a scheduler uses them: parts, shards, `_SUCCESS`, resume after
//! `kill -9`, partitions, and refusals that leave other runs' output alone.

mod partitions;
mod parts;
mod recovery;

use std::path::{Path, PathBuf};

use arrow::array::RecordBatch;

use crate::common::*;

fn parts_of(dir: &Path) -> Vec<PathBuf> {
    files_in(dir).into_iter().filter(|n| n.starts_with("part-")).map(|n| dir.join(n)).collect()
}

/// Every part's rows, in part order.
fn read_dataset(dir: &Path) -> RecordBatch {
    let batches: Vec<RecordBatch> = parts_of(dir).iter().map(|p| read(p)).collect();
    arrow::compute::concat_batches(&batches[0].schema(), &batches).expect("concat")
}

/// Two input files, `b` and `c`, of the fixture's first 200 rows (4 parts of 50), and `a`,
/// the last 100, kept aside: a file a later run finds new, and which sorts first.
fn grown_inputs(dir: &Path) -> (PathBuf, PathBuf) {
    let input = dir.join("in");
    std::fs::create_dir(&input).expect("mkdir");
    reviews_slice(&input.join("b.parquet"), 0, 100, 50);
    reviews_slice(&input.join("c.parquet"), 100, 100, 50);
    let new = dir.join("a.parquet");
    reviews_slice(&new, 200, 100, 50);
    (input, new)
}

fn modified(path: &Path) -> std::time::SystemTime {
    std::fs::metadata(path).expect("meta").modified().expect("mtime")
}

//! `pipeline run` and `pipeline inspect` as a user runs them, on the committed tiny SAN
//! package (`fixtures/tiny-san`, trained by `pipeline train` on the fixture slice).

mod attention;
mod backends;
mod dropped_columns;
mod input_formats;
mod options;
mod predictions;
mod refusals;
mod reporting;

use crate::common::*;

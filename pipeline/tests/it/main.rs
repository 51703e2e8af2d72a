//! The pipeline library's tests, in one test binary.

mod bad_input;
mod imports;

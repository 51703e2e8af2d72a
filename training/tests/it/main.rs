//! Training's tests, in one test binary: each variant's exported graph against burn, tract
//! and ONNX Runtime, and against the graphs recorded before emission was last reworked; and
//! an ensemble of two of those graphs against its members.

use std::sync::{Mutex, MutexGuard};

mod ensemble;
mod golden_graphs;
mod parity;

/// burn's random generator is global to the device: a model built or trained while another
/// test draws from it comes out different from run to run, so the tests take turns.
fn burn_random_generator() -> MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

//! Turning a panic inside a third-party decoder into an error. The Arrow IPC reader (and
//! possibly the Parquet one) asserts on some corrupt buffers instead of returning an error;
//! for a batch job that is bad input, which must end as exit code 1 naming the file, not as
//! an internal error. Only calls that decode user files are guarded, and the data they were
//! building is dropped with the error.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};

thread_local! {
    static GUARDED: Cell<bool> = const { Cell::new(false) };
}

/// Whether the current thread is inside [`guarded`]: the process's panic hook then stays
/// quiet and lets the panic become an error.
pub fn is_guarded() -> bool {
    GUARDED.with(Cell::get)
}

/// Runs `decode`; a panic inside it becomes an error saying `what` is corrupt.
pub fn guarded<T>(what: impl FnOnce() -> String, decode: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<T> {
    let outer = GUARDED.with(|g| g.replace(true));
    let result = catch_unwind(AssertUnwindSafe(decode));
    GUARDED.with(|g| g.set(outer));
    match result {
        Ok(result) => result,
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(anyhow::anyhow!("{} is corrupt: its decoder failed ({message})", what()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::panic)]
    fn a_panic_becomes_an_error_and_the_guard_is_lifted() {
        let result: anyhow::Result<()> = guarded(|| "x.arrow".to_owned(), || panic!("buffer not large enough"));
        let message = format!("{:#}", result.expect_err("an error"));
        assert_eq!(message, "x.arrow is corrupt: its decoder failed (buffer not large enough)");
        assert!(!is_guarded());
        assert_eq!(guarded(String::new, || Ok(3)).expect("no panic"), 3);
    }
}

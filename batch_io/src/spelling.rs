//! How this process's front end writes an option in messages: `--batch-size 0` on the
//! command line (the default), `batch_size=0` in the Python module, which says so once when
//! it loads. The libraries name options through these functions, so that neither front end
//! rewrites the other's messages. Options are named as Python spells them (`batch_size`).

use std::sync::atomic::{AtomicBool, Ordering};

static KEYWORD_ARGUMENTS: AtomicBool = AtomicBool::new(false);

/// From now on, messages write options as Python's keyword arguments.
pub fn use_keyword_arguments() {
    KEYWORD_ARGUMENTS.store(true, Ordering::Relaxed);
}

/// Whether messages write options as Python's keyword arguments.
pub fn keywords() -> bool {
    KEYWORD_ARGUMENTS.load(Ordering::Relaxed)
}

/// The command line's flag for the option `name`, whatever the front end: `--batch-size`.
pub fn flag(name: &str) -> String {
    format!("--{}", name.replace('_', "-"))
}

/// The option `name` as the caller gave it: `--batch-size`, or `batch_size=`.
pub fn option(name: &str) -> String {
    if keywords() { format!("{name}=") } else { flag(name) }
}

/// The option `name` alone, as a label: `--batch-size`, or `batch_size`.
pub fn name(name: &str) -> String {
    if keywords() { name.to_owned() } else { flag(name) }
}

/// The option `name` with `value`: `--drop tokens`, or `drop="tokens"` (a number or a flag's
/// `True` unquoted).
pub fn option_with(name: &str, value: &str) -> String {
    if !keywords() {
        return format!("{} {value}", flag(name));
    }
    if value.parse::<f64>().is_ok() || ["True", "False"].contains(&value) {
        format!("{name}={value}")
    } else {
        format!("{name}={value:?}")
    }
}

/// A flag that takes no value, as set: `--overwrite`, or `overwrite=True`.
pub fn flag_set(name: &str) -> String {
    if keywords() { format!("{name}=True") } else { flag(name) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_spells_flags() {
        // The Python spelling is a process-wide switch: python/tests checks it.
        assert_eq!(option("batch_size"), "--batch-size");
        assert_eq!(option_with("drop", "tokens"), "--drop tokens");
        assert_eq!(flag_set("overwrite"), "--overwrite");
    }
}

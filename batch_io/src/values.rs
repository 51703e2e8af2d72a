//! Numbers as flags, keyword arguments and defaults spell them, with errors that say what is
//! wrong: a count of at least 1 and a probability. The command lines' value parsers and the
//! run options' table (`pipeline::job::options`) both read them here.

/// A count that must be at least 1: 0 says "at least 1", not "not in 1..18446744073709551615".
pub fn at_least_one(value: &str) -> Result<usize, String> {
    match value.trim().parse::<usize>() {
        Ok(count) => count_at_least_one(count),
        Err(_) if !value.trim().is_empty() && value.trim().bytes().all(|b| b.is_ascii_digit()) => {
            Err(format!("`{value}` is too large (at most {})", usize::MAX))
        }
        Err(_) => Err(format!("`{value}` is not a whole number (it must be at least 1)")),
    }
}

/// A count given as a number, refused where it is 0.
pub fn count_at_least_one(count: usize) -> Result<usize, String> {
    if count == 0 { Err("must be at least 1".to_owned()) } else { Ok(count) }
}

/// A probability in `0..=1` (`--min-confidence`).
pub fn probability(value: &str) -> Result<f32, String> {
    value.trim().parse::<f32>().map_err(|_| not_a_probability(value)).and_then(|p| probability_in_range(p, value))
}

/// A probability given as a number, refused outside `0..=1`; `given` is how the caller wrote it.
pub fn probability_in_range(p: f32, given: &str) -> Result<f32, String> {
    if (0.0..=1.0).contains(&p) { Ok(p) } else { Err(not_a_probability(given)) }
}

fn not_a_probability(given: &str) -> String {
    format!("`{given}` is not a probability: give a number from 0 to 1, such as 0.8")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_says_what_is_wrong_with_it() {
        assert_eq!(at_least_one(" 3 "), Ok(3));
        assert_eq!(at_least_one("0"), Err("must be at least 1".to_owned()));
        assert!(at_least_one("-1").is_err_and(|e| e.contains("not a whole number")));
        assert!(at_least_one("18446744073709551616").is_err_and(|e| e.contains("too large")));
    }

    #[test]
    fn a_probability_is_between_0_and_1() {
        assert_eq!(probability("0.8"), Ok(0.8));
        assert!(probability("1.5").is_err_and(|e| e.contains("not a probability")));
        assert!(probability("NaN").is_err());
        assert!(probability("x").is_err());
    }
}

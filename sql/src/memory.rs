//! How much memory a query may hold: DataFusion's sorts, joins and aggregations take their
//! buffers from a pool of this size and spill to disk past it, rather than growing until a
//! container's limit kills the process. By default a share of what the process may use (its
//! cgroup's limit, or the machine's memory); `--memory-limit` says otherwise.

use anyhow::{Context, bail};

/// The share of the process's memory the pool gets by default: Arrow buffers outside the
/// pool (scans, function results, a model for `classify`) need the rest.
const DEFAULT_SHARE: f64 = 0.6;

/// The pool's size when neither a flag nor the system says: 4 GiB.
const FALLBACK_BYTES: u64 = 4 << 30;

/// The pool's default size: [`DEFAULT_SHARE`] of the cgroup's memory limit or, without one, of
/// the machine's memory.
pub fn default_limit() -> u64 {
    let available = [cgroup_limit(), machine_memory()].into_iter().flatten().min().unwrap_or(FALLBACK_BYTES);
    (available as f64 * DEFAULT_SHARE) as u64
}

/// The memory limit of this process's cgroup (v2 `memory.max`, or v1), if it has one.
fn cgroup_limit() -> Option<u64> {
    ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        // "max" (v2) or a huge number (v1) mean no limit.
        .filter_map(|text| text.trim().parse::<u64>().ok())
        .find(|bytes| *bytes < (1 << 60))
}

/// `MemTotal` of /proc/meminfo.
fn machine_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|line| line.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// A size as people write it: `512M`, `4G`, `1.5G`, `2T` (powers of 1,024), or bytes.
pub fn parse_size(text: &str) -> anyhow::Result<u64> {
    let trimmed = text.trim();
    let lower = trimmed.to_ascii_lowercase();
    let number_end = lower.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(lower.len());
    let (number, unit) = lower.split_at(number_end);
    let shift = match unit.trim().trim_end_matches("ib").trim_end_matches('b') {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        _ => bail!("`{text}` is not a size: write a number with K, M, G or T, such as 4G"),
    };
    let value: f64 = number.parse().with_context(|| format!("`{text}` is not a size: write a number, such as 4G"))?;
    let bytes = value * (1u64 << shift) as f64;
    if !(1.0..1e18).contains(&bytes) {
        bail!("`{text}` is not a usable size: give at least 1 byte and less than an exabyte, such as 4G");
    }
    Ok(bytes as u64)
}

/// `bytes` as a person reads it: `3.2 GB`, `64 KB`.
pub fn describe(bytes: u64) -> String {
    let value = bytes as f64;
    match bytes {
        b if b >= 1 << 30 => format!("{:.1} GB", value / f64::from(1u32 << 30)),
        b if b >= 1 << 20 => format!("{:.1} MB", value / f64::from(1u32 << 20)),
        b if b >= 1 << 10 => format!("{:.0} KB", value / 1024.0),
        _ => format!("{bytes} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_as_people_write_them() {
        assert_eq!(parse_size("4G").expect("4G"), 4 << 30);
        assert_eq!(parse_size("512m").expect("512m"), 512 << 20);
        assert_eq!(parse_size("1.5GiB").expect("1.5GiB"), 3 << 29);
        assert_eq!(parse_size("1000").expect("bytes"), 1000);
        for bad in ["", "G", "-1G", "4X", "0", "1e30"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert!(default_limit() > 0);
        assert_eq!(describe(64 << 10), "64 KB");
        assert_eq!(describe(3 << 29), "1.5 GB");
    }
}

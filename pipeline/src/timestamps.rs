//! Timestamps as the run's files write them (`_SUCCESS`, the run summary, lineage events).

/// A timestamp as `_SUCCESS` and the run summary write it: RFC 3339 in UTC, to the millisecond.
pub fn rfc3339(time: chrono::DateTime<chrono::Utc>) -> String {
    time.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

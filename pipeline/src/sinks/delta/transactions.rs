//! The `txn` actions a Delta table holds, read in one replay of its log: a run asks about every
//! unit and input file it has, and delta-rs answers each question with a replay of its own,
//! which made a rerun over thousands of files quadratic in them.
//!
//! The replay reads the table's commit files (`_delta_log/NNNNNNNNNNNNNNNNNNNN.json`) up to the
//! snapshot's version, the newest `txn` of each appId winning, as the protocol says. A table
//! with a checkpoint (which another writer may have made) or with an expiry on its
//! transactions (`delta.setTransactionRetentionDuration`) is asked through delta-rs instead,
//! one question at a time: slower, never wrong.

use std::collections::HashMap;

use anyhow::Context;
use deltalake_core::DeltaTable;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};

use batch_io::object_storage::{block_on, request_failed};

/// A committed `txn`: the version its writer gave it and the table version that holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Committed {
    pub version: i64,
    /// `None` where delta-rs answered (it does not say where).
    pub at_table_version: Option<u64>,
}

/// The committed transactions of one snapshot of a table.
pub enum Transactions<'a> {
    /// Every appId's newest `txn`, from one replay.
    Read(HashMap<String, Committed>),
    /// Asked of delta-rs per appId.
    Asked(&'a DeltaTable),
}

/// The table property that makes old transactions expire, which the replay would not apply.
const RETENTION_PROPERTY: &str = "delta.setTransactionRetentionDuration";

impl<'a> Transactions<'a> {
    /// The transactions of `table` as loaded, whose log is `log` in `store`.
    pub fn of(table: &'a DeltaTable, store: &dyn ObjectStore, log: &ObjectPath) -> anyhow::Result<Self> {
        let snapshot = table.snapshot().map_err(|e| anyhow::anyhow!("cannot read the Delta table: {e}"))?;
        if snapshot.metadata().configuration().contains_key(RETENTION_PROPERTY) {
            return Ok(Self::Asked(table));
        }
        let listed = block_on(store.list_with_delimiter(Some(log)))?
            .map_err(|e| request_failed(&format!("cannot list {log}"), e))?;
        let mut commits = Vec::new();
        for object in &listed.objects {
            let Some(name) = object.location.filename() else { continue };
            if name.contains(".checkpoint") || name == "_last_checkpoint" {
                return Ok(Self::Asked(table));
            }
            if let Some(version) = commit_version(name)
                && version <= snapshot.version()
            {
                commits.push((version, object.location.clone()));
            }
        }
        commits.sort();
        let mut read = HashMap::new();
        for (version, location) in commits {
            let bytes = block_on(async { store.get(&location).await?.bytes().await })?
                .map_err(|e| request_failed(&format!("cannot read the Delta log entry {location}"), e))?;
            let text =
                std::str::from_utf8(&bytes).with_context(|| format!("the Delta log entry {location} is not UTF-8"))?;
            for line in text.lines().filter(|line| line.contains("\"txn\"")) {
                let action: serde_json::Value = serde_json::from_str(line)
                    .with_context(|| format!("the Delta log entry {location} holds a line that is not JSON"))?;
                let Some(txn) = action.get("txn") else { continue };
                let app_id = txn.get("appId").and_then(serde_json::Value::as_str);
                if let (Some(app_id), Some(txn_version)) =
                    (app_id, txn.get("version").and_then(serde_json::Value::as_i64))
                {
                    read.insert(app_id.to_owned(), Committed { version: txn_version, at_table_version: Some(version) });
                }
            }
        }
        Ok(Self::Read(read))
    }

    /// The newest committed `txn` of `app_id`.
    pub fn get(&self, app_id: &str) -> anyhow::Result<Option<Committed>> {
        match self {
            Self::Read(read) => Ok(read.get(app_id).copied()),
            Self::Asked(table) => {
                let snapshot = table.snapshot().map_err(|e| anyhow::anyhow!("cannot read the Delta table: {e}"))?;
                let version = block_on(snapshot.transaction_version(table.log_store().as_ref(), app_id))?
                    .map_err(|e| anyhow::anyhow!("cannot read the transactions of the Delta table: {e}"))?;
                Ok(version.map(|version| Committed { version, at_table_version: None }))
            }
        }
    }
}

/// The version of a commit file's name (`00000000000000000012.json`); `None` for anything else
/// in the log (checksums, compactions, temporaries).
fn commit_version(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".json")?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit())).then(|| digits.parse().ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_commit_files_have_versions() {
        assert_eq!(commit_version("00000000000000000012.json"), Some(12));
        assert_eq!(commit_version("00000000000000000012.crc"), None);
        assert_eq!(commit_version("00000000000000000010.checkpoint.parquet"), None);
        assert_eq!(commit_version("00000000000000000001.00000000000000000009.compacted.json"), None);
        assert_eq!(commit_version(".00000000000000000012.json.tmp"), None);
    }
}

//! Which run a dataset's parts belong to: each input as the run saw it, and the run's
//! fingerprint (the inputs as one digest, the model, and every option that changes the
//! output), with the comparison that says how an earlier run differs.

use std::collections::BTreeMap;

use batch_io::spelling;
use serde::{Deserialize, Serialize};

/// One input file as the run saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputIdentity {
    pub location: String,
    pub size: u64,
    /// Modification time (local files, in nanoseconds) or ETag (object stores).
    pub version: String,
}

/// What makes two runs the same run: a part written by one may stand in for the other's.
/// Batch size, chunk rows, threads and backend are left out: results do not depend on them
/// (predictions identical, probabilities within 1e-5, tested in CI). The inputs enter as a
/// count and a digest, so that the fingerprint, which every part carries, stays small however
/// many files the run reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunFingerprint {
    pub input_count: usize,
    /// sha256 of the inputs' identities, in input order ([`inputs_sha256`]).
    pub inputs_sha256: String,
    pub model_sha256: String,
    pub text_column: String,
    pub pass_through: Vec<String>,
    pub max_tokens: usize,
    /// `--long-documents` as [`runtime::long_documents::LongDocuments`] writes it; runs of
    /// versions before it had none, and truncated.
    #[serde(default = "truncate")]
    pub long_documents: String,
    /// `--attention`; runs before it wrote all of it.
    #[serde(default = "full")]
    pub attention: String,
    pub embedding: bool,
    /// `--min-confidence`; runs before it, and runs without it, abstained nowhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_confidence: Option<String>,
    /// Which class the `contribution` pushes point at, as the metadata key
    /// `pipeline.contribution_towards` says; runs before it pointed them at each prediction.
    #[serde(default = "towards_prediction")]
    pub contribution_towards: String,
    /// `--drop`: output columns left out; runs before it, and runs without it, kept them all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<String>,
    /// `--partition-by`, in order; runs before it, and runs without it, wrote no directories.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partition_by: Vec<String>,
    /// The columns the model and the options write, in order; runs before it recorded none.
    /// It tells apart outputs of one set of options in another version's layout (#50: the
    /// default stopped writing every hop, and writes token spans for tokens).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub columns: Vec<String>,
    pub rows_per_part: usize,
    /// Units in the whole run, over all shards.
    pub parts: usize,
}

/// `contribution_towards` of a run whose output records none: towards each prediction.
pub fn towards_prediction() -> String {
    runtime::output::PushesTowards::Prediction.metadata_value()
}

fn full() -> String {
    runtime::output::AttentionEncoding::Full.to_string()
}

fn truncate() -> String {
    runtime::long_documents::LongDocuments::Truncate.to_string()
}

impl RunFingerprint {
    /// Whether `other` is a run with the same model and options, over whatever inputs: its
    /// parts read from an input both runs read unchanged are this run's parts too, which is
    /// what lets a rerun over grown inputs classify only the new files.
    pub fn same_options(&self, other: &RunFingerprint) -> bool {
        let without_inputs = |run: &RunFingerprint| RunFingerprint {
            input_count: 0,
            inputs_sha256: String::new(),
            parts: 0,
            ..run.clone()
        };
        without_inputs(self) == without_inputs(other)
    }
}

/// The digest of a run's inputs that its fingerprint carries.
pub fn inputs_sha256(inputs: &[InputIdentity]) -> String {
    use sha2::{Digest, Sha256};
    let mut digest = Sha256::new();
    for input in inputs {
        // Lengths first, so that no two lists of fields run together into the same bytes.
        for field in [&input.location, &input.version] {
            digest.update((field.len() as u64).to_le_bytes());
            digest.update(field.as_bytes());
        }
        digest.update(input.size.to_le_bytes());
    }
    format!("{:x}", digest.finalize())
}

/// A run as this process sees it: the fingerprint, and the inputs behind its digest.
#[derive(Debug, Clone)]
pub struct Run {
    pub fingerprint: RunFingerprint,
    pub inputs: Vec<InputIdentity>,
}

/// What an earlier run is known to have read: every input (from `_SUCCESS`), or only the one
/// file a part was read from.
#[derive(Debug, Clone, Copy)]
pub enum EarlierInputs<'a> {
    All(&'a [InputIdentity]),
    OnePart(Option<&'a InputIdentity>),
    /// The inputs of a complete earlier run that this one extends: new inputs are welcome,
    /// but each of these must still be read, unchanged.
    Extended(&'a [InputIdentity]),
}

impl Run {
    /// What differs between this run and an `earlier` one, as phrases a user can act on.
    pub fn differences(&self, earlier: &RunFingerprint, earlier_inputs: EarlierInputs<'_>) -> Vec<String> {
        let now = &self.fingerprint;
        let mut found = Vec::new();
        if now.inputs_sha256 != earlier.inputs_sha256 {
            found.extend(self.input_differences(earlier_inputs));
            if found.is_empty() {
                found.push(format!(
                    "the input files differ (the run read {} file(s), this one reads {})",
                    earlier.input_count, now.input_count
                ));
            }
        }
        found.extend(self.option_differences(earlier));
        if found.is_empty() && now.parts != earlier.parts {
            found.push(format!("the run had {} parts, now {}", earlier.parts, now.parts));
        }
        found
    }

    /// What differs between this run and an `earlier` one but the inputs: the model and every
    /// option that changes the output. Empty where a part of the earlier run, read from an
    /// input this run reads unchanged, holds what this run would write.
    pub fn option_differences(&self, earlier: &RunFingerprint) -> Vec<String> {
        let now = &self.fingerprint;
        let mut found = Vec::new();
        if now.model_sha256 != earlier.model_sha256 {
            found.push(format!(
                "the model differs (sha256 {} → {})",
                short(&earlier.model_sha256),
                short(&now.model_sha256)
            ));
        }
        let mut option = |name: &str, old: String, new: String| {
            if old != new {
                found.push(format!("{name} was {old}, now {new}"));
            }
        };
        option(&spelling::name("text_column"), earlier.text_column.clone(), now.text_column.clone());
        option("the pass-through columns", earlier.pass_through.join(","), now.pass_through.join(","));
        option(&spelling::name("max_tokens"), earlier.max_tokens.to_string(), now.max_tokens.to_string());
        option(&spelling::name("long_documents"), earlier.long_documents.clone(), now.long_documents.clone());
        option(&spelling::name("attention"), earlier.attention.clone(), now.attention.clone());
        option(&spelling::name("embedding"), earlier.embedding.to_string(), now.embedding.to_string());
        let threshold = |p: &Option<String>| p.clone().unwrap_or_else(|| "not set".to_owned());
        option(&spelling::name("min_confidence"), threshold(&earlier.min_confidence), threshold(&now.min_confidence));
        option(
            "the class `contribution` pushes towards (pipeline.contribution_towards)",
            earlier.contribution_towards.clone(),
            now.contribution_towards.clone(),
        );
        option(&spelling::name("drop"), none_if_empty(&earlier.dropped), none_if_empty(&now.dropped));
        option(&spelling::name("partition_by"), none_if_empty(&earlier.partition_by), none_if_empty(&now.partition_by));
        option(&spelling::name("rows_per_part"), earlier.rows_per_part.to_string(), now.rows_per_part.to_string());
        let written = |columns: &[String]| {
            if columns.is_empty() { "not recorded (an older version's layout)".to_owned() } else { columns.join(",") }
        };
        option("the column list", written(&earlier.columns), written(&now.columns));
        found
    }

    /// Why a committed part of an `earlier` run, read from `read_from`, does not hold what
    /// this run writes to the same part, whose rows it reads from `expected`: empty where it
    /// does (the same run, or the same options over an input this run reads unchanged at
    /// the same place).
    pub fn part_differences(
        &self,
        earlier: &RunFingerprint,
        read_from: Option<&InputIdentity>,
        expected: Option<&InputIdentity>,
    ) -> Vec<String> {
        if *earlier == self.fingerprint {
            return Vec::new();
        }
        let mut found = self.option_differences(earlier);
        match read_from {
            Some(input) if Some(input) == expected => {}
            Some(input) => {
                let changes = self.input_differences(EarlierInputs::OnePart(Some(input)));
                if changes.is_empty() {
                    found.push(format!(
                        "it holds rows of {}, which this run writes to another part (an unfinished run read the \
                         inputs in another order: finish it with its own inputs first)",
                        input.location
                    ));
                }
                found.extend(changes);
            }
            None => found.push(format!(
                "the input files differ (the run read {} file(s), this one reads {}), and the part, written \
                 by an older version, does not name its own",
                earlier.input_count, self.fingerprint.input_count
            )),
        }
        found
    }

    /// What differs between this run's inputs and an `earlier` run's, as
    /// [`EarlierInputs`] says which of them count.
    pub fn input_differences(&self, earlier: EarlierInputs<'_>) -> Vec<String> {
        let now: BTreeMap<&str, &InputIdentity> = self.inputs.iter().map(|i| (i.location.as_str(), i)).collect();
        let (before, complete): (Vec<&InputIdentity>, bool) = match earlier {
            EarlierInputs::All(inputs) => (inputs.iter().collect(), true),
            EarlierInputs::OnePart(input) => (input.into_iter().collect(), false),
            EarlierInputs::Extended(inputs) => (inputs.iter().collect(), false),
        };
        let mut found = Vec::new();
        let before_locations: BTreeMap<&str, &InputIdentity> =
            before.iter().map(|i| (i.location.as_str(), *i)).collect();
        if complete {
            for location in now.keys().filter(|l| !before_locations.contains_key(*l)) {
                found.push(format!("input {location} is new"));
            }
        }
        for (location, old) in &before_locations {
            match now.get(location) {
                None => found.push(format!("input {location} is no longer read")),
                Some(input) if old.size != input.size => {
                    found.push(format!("input {location} changed size ({} → {} bytes)", old.size, input.size))
                }
                Some(input) if old.version != input.version => {
                    found.push(format!("input {location} changed (version {} → {})", old.version, input.version))
                }
                Some(_) => {}
            }
        }
        found
    }
}

fn none_if_empty(names: &[String]) -> String {
    if names.is_empty() { "not set".to_owned() } else { names.join(",") }
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

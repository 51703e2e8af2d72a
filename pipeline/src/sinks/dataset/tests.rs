//! The dataset output's unit tests: fingerprints, manifests, resume and refusal.

use super::*;

fn inputs() -> Vec<InputIdentity> {
    vec![
        InputIdentity { location: "s3://corpus/a.parquet".into(), size: 100, version: "\"etag-1\"".into() },
        InputIdentity { location: "s3://corpus/b.parquet".into(), size: 200, version: "\"etag-2\"".into() },
    ]
}

fn run_of(inputs: Vec<InputIdentity>) -> Run {
    let fingerprint = RunFingerprint {
        input_count: inputs.len(),
        inputs_sha256: inputs_sha256(&inputs),
        model_sha256: "0123456789abcdef0123".into(),
        text_column: "text".into(),
        pass_through: vec!["id".into()],
        max_tokens: 512,
        long_documents: "truncate".into(),
        attention: "full".into(),
        embedding: false,
        min_confidence: None,
        contribution_towards: "label:pos".into(),
        dropped: Vec::new(),
        partition_by: Vec::new(),
        columns: Vec::new(),
        rows_per_part: 2500,
        parts: 4,
    };
    Run { fingerprint, inputs }
}

#[test]
fn the_same_run_has_no_differences() {
    let run = run_of(inputs());
    assert!(run.differences(&run.fingerprint, EarlierInputs::All(&run.inputs)).is_empty());
}

/// Parts written before the columns were recorded (every hop, token strings: #50) are of
/// another layout than this version's, whatever the options say.
#[test]
fn a_layout_of_another_version_is_named() {
    let mut now = run_of(inputs());
    now.fingerprint.columns = vec!["prediction".into(), "token_spans".into()];
    let before = run_of(inputs()).fingerprint;
    let differences = now.option_differences(&before);
    assert_eq!(
        differences,
        ["the column list was not recorded (an older version's layout), now prediction,token_spans"]
    );
    assert!(!now.fingerprint.same_options(&before));
}

#[test]
fn a_changed_input_is_named_with_what_changed() {
    let earlier = run_of(inputs());
    let mut changed = inputs();
    changed[0].size = 150;
    changed[1].version = "\"etag-3\"".into();
    let now = run_of(changed.clone());
    assert_eq!(
        now.differences(&earlier.fingerprint, EarlierInputs::All(&earlier.inputs)),
        vec![
            "input s3://corpus/a.parquet changed size (100 → 150 bytes)".to_owned(),
            "input s3://corpus/b.parquet changed (version \"etag-2\" → \"etag-3\")".to_owned(),
        ]
    );
    // A part knows only its own input.
    assert_eq!(
        now.differences(&earlier.fingerprint, EarlierInputs::OnePart(earlier.inputs.get(1))),
        vec!["input s3://corpus/b.parquet changed (version \"etag-2\" → \"etag-3\")".to_owned()]
    );
    changed.pop();
    changed.push(InputIdentity { location: "s3://corpus/c.parquet".into(), size: 1, version: "x".into() });
    let now = run_of(changed);
    let found = now.differences(&earlier.fingerprint, EarlierInputs::All(&earlier.inputs)).join("; ");
    assert!(found.contains("input s3://corpus/c.parquet is new"), "{found}");
    assert!(found.contains("input s3://corpus/b.parquet is no longer read"), "{found}");
    // A part whose own input is unchanged still sees that the list differs.
    let found = now.differences(&earlier.fingerprint, EarlierInputs::OnePart(None)).join("; ");
    assert_eq!(found, "the input files differ (the run read 2 file(s), this one reads 2)");
}

#[test]
fn a_changed_model_or_option_is_named() {
    let earlier = run_of(inputs());
    let mut now = run_of(inputs());
    now.fingerprint.model_sha256 = "fedcba9876543210fedc".into();
    now.fingerprint.max_tokens = 256;
    now.fingerprint.embedding = true;
    assert_eq!(
        now.differences(&earlier.fingerprint, EarlierInputs::All(&earlier.inputs)),
        vec![
            "the model differs (sha256 0123456789ab → fedcba987654)".to_owned(),
            "--max-tokens was 512, now 256".to_owned(),
            "--embedding was false, now true".to_owned(),
        ]
    );
}

/// A dataset begun by a version that pointed each row's pushes at its prediction is not
/// finished by one that points them at the second label: its parts would mean two things.
#[test]
fn a_fingerprint_from_before_contribution_towards_is_a_different_run() {
    let now = run_of(inputs());
    let mut earlier = serde_json::to_value(&now.fingerprint).expect("json");
    earlier.as_object_mut().expect("an object").remove("contribution_towards");
    let earlier: RunFingerprint = serde_json::from_value(earlier).expect("an earlier fingerprint reads");
    assert_eq!(
        now.differences(&earlier, EarlierInputs::All(&now.inputs)),
        vec!["the class `contribution` pushes towards (pipeline.contribution_towards) was prediction, now label:pos"]
    );
}

#[test]
fn the_fingerprint_stays_the_same_size_however_many_inputs() {
    let one = serde_json::to_string(&run_of(inputs()).fingerprint).expect("json").len();
    let many: Vec<InputIdentity> = (0..3000)
        .map(|i| InputIdentity { location: format!("s3://corpus/in/{i:05}.parquet"), size: 10, version: "v".into() })
        .collect();
    let thousands = serde_json::to_string(&run_of(many).fingerprint).expect("json").len();
    // Only the count's digits differ.
    assert!(thousands <= one + 3, "{one} bytes for 2 inputs, {thousands} for 3,000");
    assert!(thousands < 400, "{thousands} bytes");
}

#[test]
fn shards_creating_the_same_new_directory_at_once_both_succeed() {
    let root = tempfile::tempdir().expect("tempdir");
    for attempt in 0..40 {
        let dir = root.path().join(format!("out-{attempt}"));
        let location = dir.display().to_string();
        let barrier = std::sync::Barrier::new(4);
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| {
                        barrier.wait();
                        DatasetDir::prepare(&location).map(|_| ())
                    })
                })
                .collect();
            for handle in handles {
                let result = handle.join().expect("thread");
                assert!(result.is_ok(), "attempt {attempt}: {:#}", result.expect_err("failed"));
            }
        });
    }
}

#[test]
fn report_pages_are_the_only_strangers_a_dataset_tolerates() {
    assert!(is_report_page("report.html"));
    assert!(is_report_page("Report.HTML"));
    assert!(!is_report_page(".report.html"));
    assert!(!is_report_page("notes.txt"));
    assert!(!is_report_page("other.parquet"));
}

#[test]
fn a_part_of_a_run_over_fewer_inputs_stands_only_where_this_run_reads_it_unchanged_in_place() {
    let earlier = run_of(inputs());
    let mut grown = inputs();
    grown.push(InputIdentity { location: "s3://corpus/0.parquet".into(), size: 5, version: "y".into() });
    let now = run_of(grown.clone());
    assert!(now.fingerprint.same_options(&earlier.fingerprint));
    let read_from = earlier.inputs.first();
    assert!(now.part_differences(&earlier.fingerprint, read_from, grown.first()).is_empty());
    // The same input, read by this run into another part: the units moved.
    let moved = now.part_differences(&earlier.fingerprint, read_from, grown.get(1)).join("; ");
    assert!(moved.contains("which this run writes to another part"), "{moved}");
    let mut changed = grown.clone();
    changed[0].size = 7;
    let now = run_of(changed.clone());
    let found = now.part_differences(&earlier.fingerprint, read_from, changed.first()).join("; ");
    assert_eq!(found, "input s3://corpus/a.parquet changed size (100 → 7 bytes)");
    let mut other_options = run_of(grown.clone());
    other_options.fingerprint.max_tokens = 64;
    assert!(!other_options.fingerprint.same_options(&earlier.fingerprint));
    let found = other_options.part_differences(&earlier.fingerprint, read_from, grown.first()).join("; ");
    assert_eq!(found, "--max-tokens was 512, now 64");
}

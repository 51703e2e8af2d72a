//! `export`, the old name of `pipeline train|eval|vectors`, still works for one release and
//! says what to run instead (the commands themselves are tested through `pipeline`, in
//! cli/tests/train_cli.rs).

use std::process::Command;

#[test]
fn the_old_name_runs_the_same_command_and_names_the_new_one() {
    let root = test_support::repo_root();
    let output = Command::new(env!("CARGO_BIN_EXE_export"))
        .args(["eval", "--model"])
        .arg(root.join("fixtures/tiny-san"))
        .arg("--data")
        .arg(root.join("fixtures/reviews.parquet"))
        .output()
        .expect("run export eval");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "export eval failed:\n{stderr}");
    assert!(stdout.contains("accuracy"), "no metrics on stdout:\n{stdout}");
    assert!(
        stderr.contains("`export` is deprecated") && stderr.contains("run `pipeline eval` instead"),
        "no deprecation notice naming the new command:\n{stderr}"
    );
}

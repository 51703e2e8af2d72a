//! The commands README.md and `docs/` show: each names a subcommand of `pipeline` and only
//! flags that subcommand has, so a flag renamed or removed cannot live on in the docs. (The
//! README's first command is also run, in `run::predictions`.)

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use regex::Regex;

use crate::common::repo_root;

const SUBCOMMANDS: [&str; 9] = ["run", "sql", "report", "inspect", "finalize", "train", "combine", "eval", "vectors"];

/// Every `pipeline SUBCOMMAND …` in a fenced block of README.md or `docs/*.md`, continuation
/// lines joined: (file, subcommand, the rest of the command).
fn documented_commands() -> Vec<(String, String, String)> {
    let mut files = vec![repo_root().join("README.md")];
    let mut docs: Vec<_> = std::fs::read_dir(repo_root().join("docs"))
        .expect("docs/")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    let block = Regex::new(r"(?s)```[a-z]*\n(.*?)```").expect("regex");
    let command =
        Regex::new(&format!(r"(?:^|[\s/])pipeline(?: --)?(?: --log-format \S+)? ({})\b(.*)", SUBCOMMANDS.join("|")))
            .expect("regex");
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read a doc");
        let name = file.strip_prefix(repo_root()).unwrap_or(&file).display().to_string();
        for code in block.captures_iter(&text) {
            let joined = code[1].replace("\\\n", " ");
            // A line may hold several commands: `pipeline run … && pipeline sql …`.
            for segment in joined.lines().flat_map(|line| line.split("&&")).flat_map(|part| part.split(';')) {
                if let Some(found_command) = command.captures(segment) {
                    found.push((name.clone(), found_command[1].to_owned(), found_command[2].to_owned()));
                }
            }
        }
    }
    found
}

/// The long flags `pipeline SUBCOMMAND --help` lists.
fn flags_of(subcommand: &str) -> BTreeSet<String> {
    let output =
        Command::new(env!("CARGO_BIN_EXE_pipeline")).args([subcommand, "--help"]).output().expect("pipeline --help");
    assert!(output.status.success(), "pipeline {subcommand} --help");
    let help = String::from_utf8_lossy(&output.stdout);
    let flag = Regex::new(r"(?m)^\s+(?:-\w, )?--([a-z0-9-]+)").expect("regex");
    flag.captures_iter(&help).map(|c| c[1].to_owned()).collect()
}

#[test]
fn every_documented_command_uses_only_flags_its_subcommand_has() {
    let commands = documented_commands();
    // Enough to be a check of the docs, not of an empty list (24 when this was written).
    assert!(commands.len() >= 20, "only {} commands found in README.md and docs/", commands.len());
    let mut known: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    let flag = Regex::new(r"(?:^|[\s\[(|])--([a-z][a-z0-9-]*)").expect("regex");
    let mut wrong = Vec::new();
    for (file, subcommand, rest) in &commands {
        let flags = known.entry(subcommand).or_insert_with(|| flags_of(subcommand));
        for used in flag.captures_iter(rest) {
            if !flags.contains(&used[1]) {
                wrong.push(format!("{file}: `pipeline {subcommand}` has no --{}: {}", &used[1], rest.trim()));
            }
        }
    }
    assert!(wrong.is_empty(), "documented flags that do not exist:\n{}", wrong.join("\n"));
}

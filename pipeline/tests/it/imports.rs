//! The modules of `pipeline/src` import one way: no file reaches itself through the files it
//! names (`crate::…`, `super::…`, `self::…`, in code and in doc links), so each can be read
//! knowing only those below it. A circle (the job hub and the reporting, once) shows here with
//! the files in it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every module of `src` by its path (`job::spec`; `""` for the crate root), with its source.
fn modules(src: &Path) -> BTreeMap<String, String> {
    let pattern = format!("{}/**/*.rs", src.display());
    glob::glob(&pattern)
        .expect("a glob")
        .map(|path| {
            let path = path.expect("a readable path");
            let relative = path.strip_prefix(src).expect("under src").with_extension("");
            let mut parts: Vec<String> = relative.iter().map(|part| part.to_string_lossy().into_owned()).collect();
            if parts.last().is_some_and(|last| last == "mod" || last == "lib") {
                parts.pop();
            }
            let source = std::fs::read_to_string(&path).expect("read a source file");
            // Unit tests may use whatever they test.
            let source = source.split("#[cfg(test)]\nmod tests").next().unwrap_or_default().to_owned();
            (parts.join("::"), source)
        })
        .collect()
}

/// The module a path in `module`'s source names (`super::spec::RunSpec` in `job::plan`:
/// `job::spec`), where it is one of `known`.
fn target(module: &str, path: &str, known: &BTreeMap<String, String>) -> Option<String> {
    let mut segments: Vec<&str> = path.split("::").collect();
    let mut base: Vec<&str> = if module.is_empty() { Vec::new() } else { module.split("::").collect() };
    match segments.first().copied() {
        Some("crate") => base.clear(),
        Some("self") => {}
        Some("super") => {
            while segments.first() == Some(&"super") {
                base.pop();
                segments.remove(0);
            }
            segments.insert(0, "super");
        }
        _ => return None,
    }
    segments.remove(0);
    // The longest prefix that is a file: `spec::RunSpec` names `spec`.
    (0..=segments.len())
        .rev()
        .map(|n| [base.clone(), segments[..n].to_vec()].concat().join("::"))
        .find(|m| known.contains_key(m))
}

/// Each module's imports of other modules: paths from `crate`, `super` or `self`, and paths
/// into the submodules it declares (`mod spec;` … `spec::RunSpec`).
fn imports(modules: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let path = regex::Regex::new(r"\b(?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+").expect("a regex");
    let declared = regex::Regex::new(r"(?m)^\s*(?:pub(?:\([a-z]+\))? )?mod ([a-z_0-9]+);").expect("a regex");
    modules
        .iter()
        .map(|(module, source)| {
            let mut named: BTreeSet<String> = path
                .find_iter(source)
                .filter_map(|found| target(module, found.as_str(), modules))
                .filter(|named| named != module)
                .collect();
            for child in declared.captures_iter(source).filter_map(|found| found.get(1)) {
                let child = child.as_str();
                let used = regex::Regex::new(&format!(r"\b{child}::")).expect("a regex");
                let full = if module.is_empty() { child.to_owned() } else { format!("{module}::{child}") };
                if used.is_match(source) && modules.contains_key(&full) {
                    named.insert(full);
                }
            }
            (module.clone(), named)
        })
        .collect()
}

/// The modules reachable from `start`.
fn reachable(start: &str, edges: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![start.to_owned()];
    while let Some(module) = todo.pop() {
        for next in edges.get(&module).into_iter().flatten() {
            if seen.insert(next.clone()) {
                todo.push(next.clone());
            }
        }
    }
    seen
}

#[test]
fn no_module_of_pipeline_imports_itself_round_about() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = modules(&src);
    assert!(modules.len() > 20, "found only {} modules under {}", modules.len(), src.display());
    let edges = imports(&modules);
    // What the reading must find, or it proves nothing.
    assert!(edges["job"].contains("job::plan") && edges["job::plan"].contains("job::spec"), "{edges:?}");
    assert!(edges["job::plan"].contains("sinks::partitions"), "{edges:?}");
    let circles: Vec<String> = modules
        .keys()
        .filter(|module| reachable(module, &edges).contains(*module))
        .map(|module| {
            let through: Vec<String> = reachable(module, &edges)
                .into_iter()
                .filter(|other| reachable(other, &edges).contains(module.as_str()))
                .collect();
            format!("{module} (through {through:?})")
        })
        .collect();
    assert!(circles.is_empty(), "modules that import themselves round about:\n{}", circles.join("\n"));
}

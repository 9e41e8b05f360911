//! The shape of the library's source, kept by tests: no import cycle between its top-level
//! modules, nor between the files of the modules that promise one-way imports (`plan`,
//! `time`, `study`); the benchmark, the solver and the budgets below the study and the time
//! model; no function over 100 lines outside tests, no library file over 800 lines.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn library_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/smelt/src")
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The top-level module a library file belongs to (`None` for `lib.rs`).
fn top_module(root: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(root).unwrap();
    let first = rel.components().next()?.as_os_str().to_str()?.to_owned();
    match first.strip_suffix(".rs") {
        Some("lib") => None,
        Some(stem) => Some(stem.to_owned()),
        None => Some(first),
    }
}

/// The code of a file without its comment lines (doc links name modules without using them).
fn code_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines().filter(|l| !l.trim_start().starts_with("//"))
}

/// `module -> modules it names as crate::module`.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let root = library_root();
    let files = rust_files(&root);
    let modules: BTreeSet<String> = files.iter().filter_map(|f| top_module(&root, f)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let Some(from) = top_module(&root, file) else {
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        let edges = graph.entry(from.clone()).or_default();
        for line in code_lines(&text) {
            for piece in line.split("crate::").skip(1) {
                let name: String = piece
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if name != from && modules.contains(&name) {
                    edges.insert(name);
                }
            }
        }
    }
    graph
}

/// `file -> sibling files it names`, for the files of the directory module `module`: a file
/// names a sibling `x` as `super::x` or `crate::module::x` outside its tests (its `mod.rs`,
/// which declares them all, is left out).
fn file_graph(module: &str) -> BTreeMap<String, BTreeSet<String>> {
    let dir = library_root().join(module);
    let stems: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .filter_map(|p| Some(p.file_stem()?.to_str()?.to_owned()))
        .filter(|s| s != "mod")
        .collect();
    let mut graph = BTreeMap::new();
    for from in &stems {
        let text = std::fs::read_to_string(dir.join(format!("{from}.rs"))).unwrap();
        let text = text.split("#[cfg(test)]").next().unwrap_or_default();
        let crate_path = format!("crate::{module}::");
        let mut edges = BTreeSet::new();
        for line in code_lines(text) {
            for prefix in ["super::", crate_path.as_str()] {
                for piece in line.split(prefix).skip(1) {
                    let name: String = piece
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    if name != *from && stems.contains(&name) {
                        edges.insert(name);
                    }
                }
            }
        }
        graph.insert(from.clone(), edges);
    }
    graph
}

/// The cycles of `graph`, as `a -> b -> ... -> a`.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    graph
        .iter()
        .flat_map(|(a, bs)| bs.iter().map(move |b| (a, b)))
        .filter(|(a, b)| reaches(graph, b, a))
        .map(|(a, b)| format!("{a} -> {b} -> ... -> {a}"))
        .collect()
}

fn reaches(graph: &BTreeMap<String, BTreeSet<String>>, from: &str, to: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut stack = vec![from.to_owned()];
    while let Some(m) = stack.pop() {
        for next in graph.get(&m).into_iter().flatten() {
            if next == to {
                return true;
            }
            if seen.insert(next.clone()) {
                stack.push(next.clone());
            }
        }
    }
    false
}

#[test]
fn no_import_cycle_between_modules() {
    let graph = module_graph();
    // The graph is real: the cost model is used by the search, and the model by the cost.
    assert!(graph["search"].contains("cost") && graph["cost"].contains("model"));
    let cycles = cycles(&graph);
    assert!(cycles.is_empty(), "module cycles:\n{}", cycles.join("\n"));
}

#[test]
fn no_import_cycle_between_the_files_of_plan_time_and_study() {
    let study = file_graph("study");
    // The graph is real: the timing of a grid's cells reads its report and its shards.
    assert!(study["timing"].contains("grid") && study["timing"].contains("shard"));
    assert!(file_graph("time")["roofline"].contains("calibration"));
    for module in ["plan", "time", "study"] {
        let cycles = cycles(&file_graph(module));
        assert!(
            cycles.is_empty(),
            "{module}: file cycles:\n{}",
            cycles.join("\n")
        );
    }
}

#[test]
fn the_study_and_the_time_model_sit_above_what_they_use() {
    let graph = module_graph();
    // The search and the budgets use the time model and the plan, never the benchmark;
    // nothing below the study imports it (the requests, one per operation, sit above
    // everything); the benchmark measures what the plan lists.
    for low in ["search", "budget"] {
        assert!(!reaches(&graph, low, "bench"), "{low} reaches bench");
    }
    for (from, to) in [("search", "time"), ("budget", "time"), ("bench", "plan")] {
        assert!(graph[from].contains(to), "{from} does not import {to}");
    }
    for (module, edges) in &graph {
        assert!(
            !edges.contains("study") || ["report", "export", "request"].contains(&module.as_str()),
            "{module} imports study"
        );
    }
    assert!(
        ["search", "bench", "time"]
            .iter()
            .all(|m| graph["study"].contains(*m))
    );
}

/// Functions of `text` longer than `limit` lines, as `(name, lines)`: from a `fn` line to
/// the closing brace at its indentation, outside `#[cfg(test)]` modules.
fn long_functions(text: &str, limit: usize) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .iter()
        .position(|l| l.starts_with("#[cfg(test)]"))
        .unwrap_or(lines.len());
    let mut out = Vec::new();
    for (i, line) in lines[..end].iter().enumerate() {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let after_vis = trimmed
            .strip_prefix("pub(crate) ")
            .or_else(|| trimmed.strip_prefix("pub(super) "))
            .or_else(|| trimmed.strip_prefix("pub "))
            .unwrap_or(trimmed);
        let after_const = after_vis.strip_prefix("const ").unwrap_or(after_vis);
        let after_unsafe = after_const.strip_prefix("unsafe ").unwrap_or(after_const);
        let Some(sig) = after_unsafe.strip_prefix("fn ") else {
            continue;
        };
        if line.trim_end().ends_with(';') {
            continue;
        }
        let close = format!("{indent}}}");
        let Some(len) = lines[i..end].iter().position(|l| l.starts_with(&close)) else {
            continue;
        };
        if len + 1 > limit {
            let name: String = sig
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            out.push((name, len + 1));
        }
    }
    out
}

#[test]
fn the_checker_finds_a_long_function() {
    let body = "    let x = 1;\n".repeat(101);
    let text = format!("pub fn long() {{\n{body}}}\nfn short() {{\n}}\n");
    assert_eq!(long_functions(&text, 100), vec![("long".to_owned(), 103)]);
}

#[test]
fn no_function_over_100_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut long = Vec::new();
    for dir in ["crates/smelt/src", "src", "python/src"] {
        for file in rust_files(&root.join(dir)) {
            let text = std::fs::read_to_string(&file).unwrap();
            for (name, lines) in long_functions(&text, 100) {
                let rel = file.strip_prefix(root).unwrap().display().to_string();
                long.push(format!("{rel}: {name} ({lines} lines)"));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over 100 lines:\n{}",
        long.join("\n")
    );
}

#[test]
fn no_library_file_over_800_lines_and_the_benchmark_under_3000() {
    let root = library_root();
    let lines = |f: &Path| std::fs::read_to_string(f).unwrap().lines().count();
    let long: Vec<String> = rust_files(&root)
        .iter()
        .filter(|f| lines(f) > 800)
        .map(|f| format!("{} ({} lines)", f.display(), lines(f)))
        .collect();
    assert!(
        long.is_empty(),
        "library files over 800 lines:\n{}",
        long.join("\n")
    );
    let bench: usize = rust_files(&root.join("bench"))
        .iter()
        .map(|f| lines(f))
        .sum();
    assert!(bench < 3000, "bench/ holds {bench} lines");
}

//! Helpers shared by the benchmarks (`cargo bench -p smelt-benches`).

/// A file in the repository's `budgets/` folder.
pub fn budget(name: &str) -> String {
    format!("{}/../budgets/{name}", env!("CARGO_MANIFEST_DIR"))
}

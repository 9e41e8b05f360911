//! The README's commands and the human outputs, byte for byte. Each case runs the `smelt`
//! binary from the package root and compares its exit code and standard output with
//! `tests/snapshots/<name>.txt` (first line `exit: N`, then the output as printed), so a
//! change of layout or of a number shows as a diff, not only as a missing word.
//!
//! After a deliberate change, `SMELT_BLESS=1 cargo test --release snapshots` rewrites the
//! files; review `git diff tests/snapshots` before committing them. Progress and notes on
//! standard error are not compared (they carry timings).

use std::path::PathBuf;

use assert_cmd::Command;

/// `(snapshot name, arguments)`: the README's commands, then each human format of the
/// commands a user reads most.
const CASES: &[(&str, &[&str])] = &[
    ("grid", &["grid", "budgets/smelt-grid.toml"]),
    (
        "grid-markdown",
        &["grid", "budgets/smelt-grid.toml", "--format", "markdown"],
    ),
    (
        "grid-csv",
        &["grid", "budgets/smelt-grid.toml", "--format", "csv"],
    ),
    (
        "grid-json",
        &["grid", "budgets/smelt-grid.toml", "--format", "json"],
    ),
    (
        "grid-conservative",
        &["grid", "budgets/smelt-grid-conservative.toml"],
    ),
    (
        "cost-against",
        &[
            "cost",
            "budgets/smelt-200m-s95.toml",
            "--against",
            "budgets/base-200m-s95.toml",
        ],
    ),
    (
        "cost-markdown",
        &["cost", "budgets/base-200m-s95.toml", "--format", "markdown"],
    ),
    ("cost-hf", &["cost", "tests/data/hf/deepseek-v3.json"]),
    (
        "match-top5",
        &["match", "budgets/match-200m-s95.toml", "--top", "5"],
    ),
    (
        "match-markdown",
        &[
            "match",
            "budgets/match-200m-s95.toml",
            "--format",
            "markdown",
        ],
    ),
    (
        "match-json",
        &["match", "budgets/match-200m-s95.toml", "--format", "json"],
    ),
    (
        "match-toml",
        &["match", "budgets/match-200m-s95.toml", "--format", "toml"],
    ),
    (
        "match-hf",
        &[
            "match",
            "budgets/match-qwen1.5-moe-a2.7b.toml",
            "--format",
            "hf",
        ],
    ),
    (
        "match-advise",
        &["match", "budgets/match-200m-s95.toml", "--advise"],
    ),
    ("match-mla", &["match", "budgets/match-deepseek-v3.toml"]),
    (
        "sweep-span",
        &["sweep", "budgets/match-200m-s95.toml", "--span", "0..=12"],
    ),
    (
        "sweep-depth",
        &[
            "sweep",
            "budgets/match-200m-s95.toml",
            "--depth",
            "8,10,12,14,16",
        ],
    ),
    (
        "fit-chinchilla",
        &["fit", "tests/data/chinchilla/endpoints.csv"],
    ),
    (
        "import-mixtral",
        &["import", "tests/data/hf/mixtral-8x7b-v0.1.json"],
    ),
];

fn snapshot_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/snapshots/{name}.txt"))
}

#[test]
fn outputs_match_their_snapshots() {
    let bless = std::env::var_os("SMELT_BLESS").is_some();
    let mut differ = Vec::new();
    for (name, args) in CASES {
        let out = Command::cargo_bin("smelt")
            .unwrap()
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(*args)
            .arg("--quiet")
            .output()
            .unwrap();
        let code = out.status.code().unwrap_or(-1);
        let got = format!("exit: {code}\n{}", String::from_utf8_lossy(&out.stdout));
        let path = snapshot_path(name);
        if bless {
            std::fs::write(&path, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (SMELT_BLESS=1 writes it)", path.display()));
        if got != want {
            let line = got
                .lines()
                .zip(want.lines())
                .position(|(a, b)| a != b)
                .unwrap_or_else(|| got.lines().count().min(want.lines().count()));
            differ.push(format!(
                "{name} (smelt {}): first difference at line {}\n  got:  {:?}\n  want: {:?}",
                args.join(" "),
                line + 1,
                got.lines().nth(line).unwrap_or("<end>"),
                want.lines().nth(line).unwrap_or("<end>"),
            ));
        }
    }
    assert!(
        differ.is_empty(),
        "{} of {} outputs differ from tests/snapshots (SMELT_BLESS=1 rewrites them after a \
         deliberate change):\n{}",
        differ.len(),
        CASES.len(),
        differ.join("\n")
    );
}

/// Every snapshot file belongs to a case (a renamed case leaves no stale file behind).
#[test]
fn no_stale_snapshots() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots");
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let stem = name.strip_suffix(".txt").unwrap_or(&name);
        assert!(
            CASES.iter().any(|(n, _)| *n == stem),
            "tests/snapshots/{name} belongs to no case"
        );
    }
}

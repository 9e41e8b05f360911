//! The README's commands and the human outputs, byte for byte. Each case runs the `smelt`
//! binary from the package root and compares its exit code and standard output with
//! `tests/snapshots/<name>.txt` (first line `exit: N`, then the output as printed), so a
//! change of layout or of a number shows as a diff, not only as a missing word.
//!
//! Beside them, [`tables_fit_120_columns`] runs the README's commands and every file in
//! `budgets/` and requires every line of the default table format to fit 120 columns.
//!
//! After a deliberate change, `SMELT_BLESS=1 cargo test --release snapshots` rewrites the
//! files; review `git diff tests/snapshots` before committing them. Progress and notes on
//! standard error are not compared (they carry timings).

use std::path::PathBuf;

use assert_cmd::Command;

/// `(snapshot name, arguments)`: the README's commands, then each human format of the
/// commands a user reads most, compact (the default) and with every column (`--wide`).
const CASES: &[(&str, &[&str])] = &[
    ("grid", &["grid", "budgets/smelt-grid.toml"]),
    ("grid-wide", &["grid", "budgets/smelt-grid.toml", "--wide"]),
    (
        "grid-markdown",
        &["grid", "budgets/smelt-grid.toml", "--format", "markdown"],
    ),
    (
        "grid-markdown-wide",
        &[
            "grid",
            "budgets/smelt-grid.toml",
            "--format",
            "markdown",
            "--wide",
        ],
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
        "grid-paper-bounds",
        &["grid", "budgets/smelt-grid-paper-bounds.toml"],
    ),
    (
        "grid-paper-bounds-wide",
        &["grid", "budgets/smelt-grid-paper-bounds.toml", "--wide"],
    ),
    ("cost", &["cost", "budgets/base-200m-s95.toml"]),
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
    (
        "cost-toml",
        &["cost", "budgets/base-200m-s95.toml", "--format", "toml"],
    ),
    ("cost-hf", &["cost", "tests/data/hf/deepseek-v3.json"]),
    (
        "match-top5",
        &["match", "budgets/match-200m-s95.toml", "--top", "5"],
    ),
    (
        "match-top5-markdown",
        &[
            "match",
            "budgets/match-200m-s95.toml",
            "--top",
            "5",
            "--format",
            "markdown",
        ],
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
        "match-model",
        &["match", "budgets/match-200m-s95.toml", "--format", "model"],
    ),
    (
        "match-toml-refused",
        &["match", "budgets/match-200m-s95.toml", "--format", "toml"],
    ),
    (
        "match-hf-looped-needs-a-dir",
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
    (
        "match-advise-wide",
        &["match", "budgets/match-200m-s95.toml", "--advise", "--wide"],
    ),
    ("match-mla", &["match", "budgets/match-deepseek-v3.toml"]),
    (
        "sweep-span",
        &["sweep", "budgets/match-200m-s95.toml", "--span", "0..=12"],
    ),
    (
        "sweep-span-wide",
        &[
            "sweep",
            "budgets/match-200m-s95.toml",
            "--span",
            "0..=12",
            "--wide",
        ],
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
        "sweep-depth-wide",
        &[
            "sweep",
            "budgets/match-200m-s95.toml",
            "--depth",
            "8,10,12,14,16",
            "--wide",
        ],
    ),
    (
        "sweep-repeats-markdown",
        &[
            "sweep",
            "budgets/match-200m-s95.toml",
            "--repeats",
            "1..=4",
            "--format",
            "markdown",
        ],
    ),
    (
        "fit-chinchilla",
        &["fit", "tests/data/chinchilla/endpoints.csv"],
    ),
    (
        "fit-chinchilla-wide",
        &["fit", "tests/data/chinchilla/endpoints.csv", "--wide"],
    ),
    (
        "import-mixtral",
        &["import", "tests/data/hf/mixtral-8x7b-v0.1.json"],
    ),
    (
        "cost-conventions",
        &["cost", "budgets/base-200m-s95.toml", "--conventions"],
    ),
    (
        "cost-conventions-json",
        &[
            "cost",
            "budgets/smelt-200m-s95.toml",
            "--conventions",
            "--format",
            "json",
        ],
    ),
    (
        "match-conventions",
        &["match", "budgets/match-200m-s95.toml", "--conventions"],
    ),
    (
        "grid-conventions-csv",
        &[
            "grid",
            "budgets/smelt-grid.toml",
            "--conventions",
            "--format",
            "csv",
        ],
    ),
    (
        "mfu",
        &[
            "mfu",
            "budgets/base-200m-s95.toml",
            "--tokens-per-second",
            "1.2e6",
            "--gpus",
            "8",
            "--card",
            "h100-sxm",
        ],
    ),
    (
        "grid-predict",
        &["grid", "budgets/smelt-grid.toml", "--predict", "h200"],
    ),
    (
        "grid-predict-csv",
        &[
            "grid",
            "budgets/smelt-grid.toml",
            "--predict",
            "h200",
            "--format",
            "csv",
        ],
    ),
    (
        "predict",
        &[
            "predict",
            "budgets/smelt-200m-s95.toml",
            "--against",
            "budgets/base-200m-s95.toml",
            "--card",
            "h200",
        ],
    ),
    (
        "predict-markdown",
        &[
            "predict",
            "budgets/smelt-200m-s95.toml",
            "--against",
            "budgets/base-200m-s95.toml",
            "--card",
            "h200",
            "--format",
            "markdown",
        ],
    ),
    (
        "mfu-unknown-card",
        &[
            "mfu",
            "budgets/base-200m-s95.toml",
            "--tokens-per-second",
            "1.2e6",
            "--card",
            "h20",
        ],
    ),
];

/// Runs `smelt args --quiet` from the package root, `COLUMNS` unset (so the tables fit 120
/// columns, as when standard output is not a terminal): exit code and standard output.
fn smelt(args: &[&str]) -> (i32, String) {
    let out = Command::cargo_bin("smelt")
        .unwrap()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("COLUMNS")
        .args(args)
        .arg("--quiet")
        .output()
        .unwrap();
    let code = out.status.code().unwrap_or(-1);
    (code, String::from_utf8_lossy(&out.stdout).into_owned())
}

fn snapshot_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/snapshots/{name}.txt"))
}

#[test]
fn outputs_match_their_snapshots() {
    let bless = std::env::var_os("SMELT_BLESS").is_some();
    let mut differ = Vec::new();
    for (name, args) in CASES {
        let (code, stdout) = smelt(args);
        let got = format!("exit: {code}\n{stdout}");
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

/// The commands whose default tables must fit 120 columns: the README's, and each file of
/// `budgets/` under the command that reads it (a grid file under `grid`, a budget file
/// under `match`, `match --top 5`, `match --advise` and a sweep, a model file under
/// `cost`).
fn first_screens() -> Vec<Vec<String>> {
    let words = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
    let mut commands: Vec<Vec<String>> = [
        "grid budgets/smelt-grid.toml",
        "cost budgets/smelt-200m-s95.toml --against budgets/base-200m-s95.toml",
        "match budgets/match-200m-s95.toml --top 5",
        "sweep budgets/match-200m-s95.toml --span 0..=12",
        "sweep budgets/match-200m-s95.toml --depth 8,10,12,14,16",
        "sweep budgets/match-200m-s95.toml --repeats 1..=4",
        "fit tests/data/chinchilla/endpoints.csv",
        "import tests/data/hf/mixtral-8x7b-v0.1.json",
        "cost tests/data/hf/deepseek-v3.json",
        "cost budgets/base-200m-s95.toml --conventions",
        "cost tests/data/hf/deepseek-v3.json --conventions",
        "match budgets/match-200m-s95.toml --conventions",
        "grid budgets/smelt-grid.toml --conventions",
        "mfu budgets/base-200m-s95.toml --tokens-per-second 1.2e6 --gpus 8 --card h100-sxm",
        "grid budgets/smelt-grid.toml --predict h200",
        "grid budgets/smelt-grid.toml --predict h100 --global-batch 256 --gpus 16 --ep 8 --micro-batch 4",
        "grid budgets/smelt-grid.toml --predict b200 --global-batch 256 --gpus 16 --ep 8 --pp 2 --micro-batch 4",
        "predict budgets/smelt-200m-s95.toml --against budgets/base-200m-s95.toml --card h200",
    ]
    .iter()
    .map(|c| words(c))
    .collect();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("budgets");
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".toml"))
        .collect();
    files.sort();
    assert!(files.len() > 20, "{files:?}");
    for name in files {
        let path = format!("budgets/{name}");
        if name.contains("grid") {
            commands.push(words(&format!("grid {path}")));
        } else if name.starts_with("match-") {
            // A sweep refuses a budget with a time budget (its rows do not carry it).
            let timed = std::fs::read_to_string(&path)
                .unwrap()
                .contains("[objective.time]");
            for extra in ["", " --top 5", " --advise", " --repeats 1..=2"] {
                if timed && extra == " --repeats 1..=2" {
                    continue;
                }
                let command = if extra == " --repeats 1..=2" {
                    "sweep"
                } else {
                    "match"
                };
                commands.push(words(&format!("{command} {path}{extra}")));
            }
        } else {
            commands.push(words(&format!("cost {path}")));
        }
    }
    commands
}

/// No line of the default table format is wider than 120 characters (counted as
/// characters, not bytes: the borders and arrows are several bytes each).
#[test]
fn tables_fit_120_columns() {
    let mut wide = Vec::new();
    for command in first_screens() {
        let args: Vec<&str> = command.iter().map(String::as_str).collect();
        let (code, out) = smelt(&args);
        assert!(
            code == 0 || code == 3,
            "smelt {}: exit {code}",
            args.join(" ")
        );
        assert!(!out.is_empty(), "smelt {}: no output", args.join(" "));
        for line in out.lines().filter(|l| l.chars().count() > 120) {
            wide.push(format!(
                "smelt {} ({} chars):\n{line}",
                args.join(" "),
                line.chars().count()
            ));
        }
    }
    assert!(wide.is_empty(), "{}", wide.join("\n"));
}

/// `COLUMNS` sets the width: at 80 every line of a grid fits 80 characters (the cells
/// wrap), and with `--wide` the table is as wide as it needs, whatever `COLUMNS` says.
#[test]
fn columns_sets_the_width() {
    let run = |columns: &str, extra: &[&str]| {
        let out = Command::cargo_bin("smelt")
            .unwrap()
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("COLUMNS", columns)
            .args(["grid", "budgets/smelt-grid.toml", "--quiet"])
            .args(extra)
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    let longest = |s: &str| s.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    let narrow = run("80", &[]);
    assert!(longest(&narrow) <= 80, "{narrow}");
    assert!(narrow.contains("1.6b s97"), "{narrow}");
    let wide = run("80", &["--wide"]);
    assert_eq!(wide, run("200", &["--wide"]));
    assert!(longest(&wide) > 120);
    // Not a number: the default width.
    assert_eq!(run("wide", &[]), run("120", &[]));
}

/// Whether `token` is a figure a README comment shows from a command's output: a decimal
/// number such as `1.8172` or `4.7783e2` (not a count, a range `1..=4` or a flag value).
fn is_shown_figure(token: &str) -> bool {
    let mantissa = token.split('e').next().unwrap_or("");
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    let exponent_ok = token
        .split_once('e')
        .is_none_or(|(_, e)| digits(e.trim_start_matches('-')));
    matches!(mantissa.trim_start_matches('-').split_once('.'), Some((a, b)) if digits(a) && digits(b))
        && exponent_ok
}

/// The outputs the README and the guide show beside their commands: every decimal figure in
/// the comment of a `smelt ...` line of a shell block (`# E 1.8172, A 4.7783e2, ...`) is in
/// what that command prints, so a shown figure cannot drift from the program.
#[test]
fn readme_comments_show_what_the_commands_print() {
    let root = env!("CARGO_MANIFEST_DIR");
    let docs = ["README.md", "docs/guide.md"]
        .map(|f| std::fs::read_to_string(format!("{root}/{f}")).unwrap())
        .join("\n");
    let mut checked = 0;
    for block in docs.split("```sh\n").skip(1) {
        let block = block.split("```").next().unwrap_or("");
        for line in block.lines() {
            let Some((command, comment)) = line.split_once(" # ") else {
                continue;
            };
            let Some(args) = command.trim().strip_prefix("smelt ") else {
                continue;
            };
            let separators = |c: char| c.is_whitespace() || ",;()".contains(c);
            let figures: Vec<&str> = comment
                .split(separators)
                .filter(|t| is_shown_figure(t))
                .collect();
            if figures.is_empty() {
                continue;
            }
            let args: Vec<&str> = args.split_whitespace().collect();
            let (_, out) = smelt(&args);
            for figure in figures {
                assert!(
                    out.contains(figure),
                    "docs: `{}` shows {figure}, which it does not print:\n{out}",
                    command.trim()
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 3, "{checked} commands show a figure");
    assert!(is_shown_figure("4.7783e2") && is_shown_figure("0.3473"));
    assert!(!is_shown_figure("1..=4") && !is_shown_figure("5") && !is_shown_figure("8,10"));
}

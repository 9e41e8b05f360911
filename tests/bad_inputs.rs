//! The bad-input corpus (tests/data/bad/cases.txt): every malformed, hostile or extreme
//! input ends cleanly, with the exit code and message fragment the manifest names, in
//! bounded time, twice the same, with nothing on standard output and no file touched.

use std::time::Duration;

use crate::common::{budgets_dir, data, smelt};

/// Runs `args` with a time limit: exit code, stdout, stderr.
fn run_bounded(args: &[String]) -> (Option<i32>, String, String) {
    let out = smelt()
        .args(args)
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The bytes of every file a case names, to check none is touched.
fn files_of(args: &[String]) -> Vec<(String, Option<Vec<u8>>)> {
    args.iter()
        .filter(|a| a.contains('/'))
        .map(|a| (a.clone(), std::fs::read(a).ok()))
        .collect()
}

#[test]
fn every_bad_input_ends_cleanly() {
    let manifest = std::fs::read_to_string(data("bad/cases.txt")).unwrap();
    let mut cases = 0;
    for line in manifest
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let parts: Vec<&str> = line.splitn(3, " | ").collect();
        let [code, args, fragment] = parts[..] else {
            panic!("malformed manifest line: {line}")
        };
        let args: Vec<String> = args
            .split_whitespace()
            .map(|a| {
                a.replace("{bad}", &data("bad"))
                    .replace("{budgets}", &budgets_dir())
                    .replace("{hf}", &data("hf"))
            })
            .collect();
        let before = files_of(&args);
        let first = run_bounded(&args);
        let (got, stdout, stderr) = &first;
        assert_eq!(*got, Some(code.parse().unwrap()), "{line}\n{stderr}");
        assert!(
            stderr.contains(fragment),
            "{line}\nexpected {fragment:?} in:\n{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{line}\n{stderr}");
        assert!(stdout.is_empty(), "{line}\nstdout: {stdout}");
        assert_eq!(files_of(&args), before, "{line}: an input file changed");
        assert_eq!(run_bounded(&args), first, "{line}: not the same twice");
        cases += 1;
    }
    assert!(cases >= 40, "{cases} cases");
}

/// A 50 MB one-line model file: the error quotes at most a capped excerpt of it.
#[test]
fn an_error_never_echoes_a_huge_line() {
    let line = format!("name = \"{}\"\n[model\n", "x".repeat(50 << 20));
    let path = crate::common::temp_file("toml", &line);
    let (code, _, stderr) = run_bounded(&["cost".to_owned(), path.display().to_string()]);
    assert_eq!(code, Some(1));
    assert!(stderr.len() < 4000, "{} bytes of error", stderr.len());
}

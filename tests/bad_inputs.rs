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

/// `stderr` with what depends on the clock taken out: a task's `done in S s`, and the
/// `steps (S s)` lines a log gets every 10 s of a task (as many as it took).
fn without_timings(stderr: &str) -> String {
    stderr
        .lines()
        .filter(|l| !(l.starts_with("smelt: ") && l.ends_with(" s)") && l.contains(" steps (")))
        .map(|l| match l.rfind(": done in ") {
            Some(i) if l.starts_with("smelt: ") && l.ends_with(" s") => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
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
        let (code2, stdout2, stderr2) = run_bounded(&args);
        assert_eq!(
            (code2, stdout2, without_timings(&stderr2)),
            (*got, stdout.clone(), without_timings(stderr)),
            "{line}: not the same twice"
        );
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

/// A fresh private folder under the target directory for one test's files.
fn private_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A copy of the 200M / S~95% budget and its Baseline in `dir`, and a histogram.
fn budget_copy(dir: &std::path::Path) -> [std::path::PathBuf; 3] {
    let budget = dir.join("budget.toml");
    let baseline = dir.join("base-200m-s95.toml");
    let hist = dir.join("h.csv");
    std::fs::copy(crate::common::budget("match-200m-s95.toml"), &budget).unwrap();
    std::fs::copy(crate::common::budget("base-200m-s95.toml"), &baseline).unwrap();
    std::fs::write(&hist, "length,count\n512,3\n2048,1\n").unwrap();
    [budget, baseline, hist]
}

/// `-o` and `--plot` never land on an input: not the budget, the Baseline, the config or
/// the `--doc-lengths` histogram, neither named directly nor through a symbolic link.
#[cfg(unix)]
#[test]
fn outputs_never_replace_an_input() {
    use std::os::unix::fs::symlink;
    let dir = private_dir("inputs");
    let [budget, baseline, hist] = budget_copy(&dir);
    let config = dir.join("config.json");
    std::fs::copy(data("hf/mixtral-8x7b-v0.1.json"), &config).unwrap();
    for (name, target) in [
        ("to-budget", &budget),
        ("to-base", &baseline),
        ("to-cfg", &config),
    ] {
        symlink(target, dir.join(name)).unwrap();
    }
    let p = |p: &std::path::Path| p.display().to_string();
    let (b, h, c) = (p(&budget), p(&hist), p(&config));
    let link = |n: &str| p(&dir.join(n));
    let cases: Vec<Vec<String>> = vec![
        vec![
            "import".into(),
            c.clone(),
            "--doc-lengths".into(),
            h.clone(),
            "-o".into(),
            h.clone(),
        ],
        vec!["import".into(), c.clone(), "-o".into(), link("to-cfg")],
        vec![
            "match".into(),
            b.clone(),
            "--format".into(),
            "model".into(),
            "-o".into(),
            link("to-budget"),
        ],
        vec![
            "match".into(),
            b.clone(),
            "--format".into(),
            "model".into(),
            "-o".into(),
            link("to-base"),
        ],
        vec![
            "match".into(),
            b.clone(),
            "--doc-lengths".into(),
            h.clone(),
            "--format".into(),
            "model".into(),
            "-o".into(),
            h.clone(),
        ],
    ];
    let before: Vec<_> = [&budget, &baseline, &hist, &config]
        .iter()
        .map(|f| std::fs::read(f).unwrap())
        .collect();
    for args in &cases {
        let (code, stdout, stderr) = run_bounded(args);
        assert_eq!(code, Some(1), "{args:?}\n{stderr}");
        assert!(
            stderr.contains("refusing to write: it is an input of this run"),
            "{stderr}"
        );
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
    }
    let after: Vec<_> = [&budget, &baseline, &hist, &config]
        .iter()
        .map(|f| std::fs::read(f).unwrap())
        .collect();
    assert_eq!(before, after, "an input changed");
    for name in ["to-budget", "to-base", "to-cfg"] {
        let t = std::fs::symlink_metadata(dir.join(name))
            .unwrap()
            .file_type();
        assert!(t.is_symlink(), "{name} is still a link");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A symbolic link output is followed (the target replaced, the link kept); a FIFO is
/// written in place and stays a FIFO.
#[cfg(unix)]
#[test]
fn outputs_land_as_the_shell_would_put_them() {
    use std::os::unix::fs::{FileTypeExt, symlink};
    let dir = private_dir("landing");
    let config = data("hf/mixtral-8x7b-v0.1.json");
    let expected = smelt().args(["import", &config]).output().unwrap().stdout;
    let target = dir.join("model.toml");
    std::fs::write(&target, "old").unwrap();
    let link = dir.join("link.toml");
    symlink(&target, &link).unwrap();
    let out = smelt()
        .args(["import", &config, "-o"])
        .arg(&link)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read(&target).unwrap(), expected);

    let fifo = dir.join("pipe");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    let out = smelt()
        .args(["import", &config, "-o"])
        .arg(&fifo)
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(reader.join().unwrap(), expected);
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        3,
        "no temporary file left"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A full device is an error that says so: a private node of Linux's `full` device (major 1,
/// minor 7, made in the test's own folder, never the machine's `/dev`) is written in place,
/// the write fails with "no space", the exit is non-zero and the node stays a device.
#[cfg(target_os = "linux")]
#[test]
fn a_full_device_is_an_error_naming_no_space() {
    use std::os::unix::fs::FileTypeExt;
    let dir = private_dir("full");
    let full = dir.join("full");
    let made = std::process::Command::new("mknod")
        .arg(&full)
        .args(["c", "1", "7"])
        .output()
        .unwrap();
    if !made.status.success() {
        eprintln!(
            "skipped: mknod of a private full device failed (needs root): {}",
            String::from_utf8_lossy(&made.stderr)
        );
        std::fs::remove_dir_all(&dir).unwrap();
        return;
    }
    let config = data("hf/mixtral-8x7b-v0.1.json");
    let out = smelt()
        .args(["import", &config, "-o"])
        .arg(&full)
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no space left on the device"), "{stderr}");
    assert!(out.stdout.is_empty());
    let node = std::fs::symlink_metadata(&full).unwrap().file_type();
    assert!(node.is_char_device(), "the device was replaced: {node:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A closed standard error loses the notes, never the result: no panic, exit 0, the file
/// written and standard output whole.
#[test]
fn a_closed_stderr_is_not_a_crash() {
    let dir = private_dir("stderr");
    let [budget, ..] = budget_copy(&dir);
    let out_file = dir.join("matched.toml");
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("smelt"))
        .arg("match")
        .arg(&budget)
        .args(["--format", "model", "-o"])
        .arg(&out_file)
        .stderr(writer)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let written = std::fs::read_to_string(&out_file).unwrap();
    assert!(written.contains("[model]"), "{written}");
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("smelt"))
        .arg("match")
        .arg(&budget)
        .stderr(writer)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("looped"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A UTF-8 byte-order mark before a config.json is skipped, as before a model file or CSV:
/// the same model, the same bytes out, read directly or as a budget's Baseline.
#[test]
fn a_byte_order_mark_is_skipped() {
    let plain = smelt()
        .args([
            "cost",
            &data("hf/mixtral-8x7b-v0.1.json"),
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    let marked = smelt()
        .args(["cost", &data("hf-bom-mixtral.json"), "--format", "json"])
        .output()
        .unwrap();
    assert!(
        marked.status.success(),
        "{}",
        String::from_utf8_lossy(&marked.stderr)
    );
    assert_eq!(marked.stdout, plain.stdout);
    let dir = private_dir("bom");
    let budget = dir.join("budget.toml");
    let text = format!(
        "\u{feff}baseline = {:?}\n[recipe]\nspan = \"half\"\nplacement = \"middle\"\nrepeats = 2\n",
        data("hf-bom-mixtral.json")
    );
    std::fs::write(&budget, text).unwrap();
    let out = smelt().arg("match").arg(&budget).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An array in any table's place is refused with its key, in a model file, a budget's
/// lattice, an inline Baseline and JSON, including the tables added last (`[model.mla]`,
/// `[model.window]`, `[model.indexer]`, `lattice.kv_lora_rank`): the rule is the reader's,
/// not a list of tables.
#[test]
fn arrays_where_tables_belong_are_refused() {
    use smelt::ModelSpec;
    use smelt::budget::Budget;
    let rule = "must be a table with named keys (got an array); positional forms are not read";
    let e = ModelSpec::from_toml_str("model = [1, 2]")
        .unwrap_err()
        .to_string();
    assert_eq!(e, format!("model: {rule}"));
    let e = ModelSpec::from_json_str("[1, 2]").unwrap_err().to_string();
    assert_eq!(e, format!("file: {rule}"));
    let small = "[model]\nlayers = 2\nhidden = 64\nheads = 4\nkv_heads = 1\nhead_dim = 16\n\
                 [model.moe]\nexperts = 8\ntop_k = 2\nexpert_ffn = 32\n\
                 [workload]\ncontext = 256\nmean_doc_len = 100\n";
    assert!(ModelSpec::from_toml_str(small).is_ok());
    for (table, array) in [
        ("mla", "[384, 256, 64, 32, 64]"),
        ("window", "[128, 1]"),
        ("indexer", "[64, 128, 4]"),
        ("loop", "[1, 2, 2]"),
    ] {
        let text = small.replacen("heads = 4\n", &format!("heads = 4\n{table} = {array}\n"), 1);
        let e = ModelSpec::from_toml_str(&text).unwrap_err().to_string();
        assert_eq!(e, format!("model.{table}: {rule}"));
    }
    let e = ModelSpec::from_json_str(r#"{"model": {"moe": [8, 2, 32]}}"#)
        .unwrap_err()
        .to_string();
    assert_eq!(e, format!("model.moe: {rule}"));
    let dir = std::path::Path::new(".");
    for key in ["hidden", "kv_lora_rank"] {
        let text = format!("baseline = {{ }}\n[lattice]\n{key} = [32, 640, 1280]\n");
        let e = Budget::from_toml_str(&text, dir).unwrap_err().to_string();
        assert_eq!(e, format!("lattice.{key}: {rule}"));
    }
    let e = Budget::from_json_str(r#"{"lattice": [1]}"#, dir)
        .unwrap_err()
        .to_string();
    assert_eq!(e, format!("lattice: {rule}"));
    let inline = "baseline = { model = [1, 2] }\n";
    let e = Budget::from_toml_str(inline, dir).unwrap_err().to_string();
    assert!(e.contains(&format!("model: {rule}")), "{e}");
}

//! Every pointer from the command line's help and from the comments of `budgets/*.toml` to
//! a section of a document names a heading that document has, so that `--help` never sends
//! a reader to a section that moved.
//!
//! A pointer is a document's name (`README`, `README.md`, `docs/NAME.md`), optionally
//! followed by `, "Section"`: the section must begin a heading of that document (code
//! spans' backticks left out), a bare name must be a file of the repository.

use crate::common::run;

/// The repository's file a name in a pointer refers to (`README` is `README.md`).
fn file_of(name: &str) -> String {
    match name {
        "README" => "README.md".to_owned(),
        other => other.to_owned(),
    }
}

/// The headings of the Markdown file `path` (relative to the repository), outside fenced
/// code blocks, without their `#`s and backticks.
fn headings(path: &str) -> Vec<String> {
    let full = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"));
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.push(line.trim_start_matches('#').trim().replace('`', ""));
        }
    }
    out
}

/// The pointers in `text` (whitespace collapsed first, so a pointer wrapped over lines is
/// read whole): each document named, with the section quoted after it, if any.
fn pointers(text: &str) -> Vec<(String, Option<String>)> {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = ["README", "docs/"]
        .iter()
        .filter_map(|n| rest.find(n))
        .min()
    {
        let from = &rest[at..];
        let len = match from.starts_with("docs/") {
            true => from.find(".md").map(|e| e + 3),
            false => Some(if from.starts_with("README.md") { 9 } else { 6 }),
        };
        let Some(len) = len else {
            rest = &from[5..];
            continue;
        };
        let name = &from[..len];
        let after = from[len..].trim_start_matches([',', ';', ':']).trim_start();
        let section = after
            .strip_prefix('"')
            .and_then(|q| q.find('"').map(|end| q[..end].to_owned()));
        out.push((name.to_owned(), section));
        rest = &from[len..];
    }
    out
}

/// Why `pointer` is not valid, if it is not.
fn broken((name, section): &(String, Option<String>)) -> Option<String> {
    let file = file_of(name);
    let path = format!("{}/{file}", env!("CARGO_MANIFEST_DIR"));
    if !std::path::Path::new(&path).is_file() {
        return Some(format!("{name}: no such file"));
    }
    let section = section.as_ref()?;
    let begins = |h: &String| {
        h.strip_prefix(section.as_str())
            .is_some_and(|r| !r.starts_with(|c: char| c.is_alphanumeric()))
    };
    match headings(&file).iter().any(begins) {
        true => None,
        false => Some(format!(
            "{name}, \"{section}\": no heading of {file} begins so"
        )),
    }
}

/// `smelt --help` and every subcommand's `--help`, each with its command line.
fn help_texts() -> Vec<(String, String)> {
    let (code, top, _) = run(&["--help"]);
    assert_eq!(code, Some(0));
    let commands: Vec<String> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .filter(|c| c != "help")
        .collect();
    assert!(
        commands.len() >= 10,
        "commands of smelt --help: {commands:?}"
    );
    let mut out = vec![("smelt --help".to_owned(), top)];
    for c in commands {
        let (code, text, err) = run(&[&c, "--help"]);
        assert_eq!(code, Some(0), "smelt {c} --help: {err}");
        out.push((format!("smelt {c} --help"), text));
    }
    out
}

/// The comments of every budget and grid file in `budgets/`, one text per file.
fn budget_comments() -> Vec<(String, String)> {
    let dir = format!("{}/budgets", env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let comments: Vec<&str> = text
                .lines()
                .filter_map(|l| l.split_once('#').map(|(_, c)| c))
                .collect();
            (p.display().to_string(), comments.join("\n"))
        })
        .collect()
}

#[test]
fn help_and_budget_pointers_name_existing_sections() {
    let mut found = Vec::new();
    let mut bad = Vec::new();
    for (source, text) in help_texts().into_iter().chain(budget_comments()) {
        for p in pointers(&text) {
            if let Some(why) = broken(&p) {
                bad.push(format!("{source}: {why}"));
            }
            found.push(p);
        }
    }
    assert!(bad.is_empty(), "pointers to nowhere:\n{}", bad.join("\n"));
    // The check saw the pointers it is for (it cannot pass by finding none).
    for (name, section) in [
        ("docs/guide.md", "Budget files"),
        ("docs/guide.md", "Grid files"),
        ("docs/guide.md", "JSON output"),
        ("docs/conventions.md", "Conventions"),
        ("docs/guide.md", "Predicted step time"),
    ] {
        let want = (name.to_owned(), Some(section.to_owned()));
        assert!(
            found.contains(&want),
            "{name}, \"{section}\" not found in {found:?}"
        );
    }
}

/// The checker reads pointers wrapped over lines and refuses a section a document lacks
/// (the README's old sections, now in the guide), a prefix that ends inside a word, and a
/// file that does not exist.
#[test]
fn the_pointer_check_can_fail() {
    let text = "see the README, \"Budget\n     files\"; docs/guide.md, \"Budget files\"; \
                docs/guide.md, \"Budget fil\"; docs/nowhere.md";
    let found = pointers(text);
    assert_eq!(found.len(), 4, "{found:?}");
    assert_eq!(found[0], ("README".into(), Some("Budget files".into())));
    let verdicts: Vec<bool> = found.iter().map(|p| broken(p).is_some()).collect();
    assert_eq!(verdicts, [true, false, true, true]);
}

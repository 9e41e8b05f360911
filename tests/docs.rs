//! The documentation against the code: the README's and the guide's Rust examples run and
//! are shown exactly as they are here (between the `README` markers, indentation removed),
//! the guide's budget in brief matches, and `docs/conventions.md` is the cost model's own
//! documentation.

/// The guide, "Library": matching a budget, as a launcher would.
fn match_a_budget() -> smelt::Result<()> {
    // README begin
    use smelt::budget::Budget;
    use smelt::report::{Format, render};

    let budget = Budget::load("budgets/match-200m-s95.toml")?;
    let report = smelt::match_budget(&budget, 1)?;
    println!("residuals: {:?}", report.residuals); // flops, params, kv: looped / Baseline - 1
    let model_file = smelt::report::model_file(&report)?; // what the launcher trains
    assert!(model_file.contains("[model.loop]"));
    let json = render(&report, Format::Json)?; // the `smelt match --format json` contract
    assert!(json.contains("\"residuals\""));
    // README end
    Ok(())
}

/// The guide, "Library": two models side by side.
fn compare_two_models() -> smelt::Result<()> {
    // README begin
    use smelt::report::{Format, render};
    use smelt::{ModelSpec, compare};

    let baseline = ModelSpec::load("budgets/base-200m-s95.toml")?;
    let looped = ModelSpec::load("budgets/smelt-200m-s95.toml")?;
    let cmp = compare(&baseline, &looped)?;
    assert!(cmp.residuals.flops > 0.0 && cmp.residuals.flops < 0.03);
    println!("{}", render(&cmp, Format::Table)?);
    // README end
    Ok(())
}

/// The guide, "Library": checking the tolerances and writing the config a launcher builds.
fn export_a_match() -> smelt::Result<()> {
    // README begin
    use smelt::budget::Budget;
    use smelt::hf;
    use smelt::search::Verdict;

    let budget = Budget::load("budgets/match-qwen1.5-moe-a2.7b.toml")?;
    let report = smelt::match_budget(&budget, 1)?;
    let broken = report.broken_tolerances(); // what `smelt match` prints before exit 3
    assert!(broken.is_empty(), "{broken:?}");
    // The config.json to build: the Baseline's family and keys, the loop in smelt_loop_* keys.
    let config = hf::export_match(budget.baseline_config(), &report.looped, None, None)?;
    assert_eq!(config["model_type"], "qwen2_moe");
    // README end
    Ok(())
}

#[test]
fn readme_examples_run() {
    // Integration tests run in the package root, where the README's paths start.
    assert!(std::path::Path::new("budgets/match-200m-s95.toml").exists());
    match_a_budget().unwrap();
    compare_two_models().unwrap();
    export_a_match().unwrap();
}

/// The Rust blocks of the README and the guide are exactly the examples above: each example
/// is shown in one of them as it is, and no block shows code that is not run here.
#[test]
fn docs_show_these_examples() {
    let root = env!("CARGO_MANIFEST_DIR");
    let docs: Vec<(&str, String)> = ["README.md", "docs/guide.md"]
        .into_iter()
        .map(|f| (f, std::fs::read_to_string(format!("{root}/{f}")).unwrap()))
        .collect();
    let source = std::fs::read_to_string(format!("{root}/tests/docs.rs")).unwrap();
    let mut examples = Vec::new();
    for block in source.split("// README begin\n").skip(1) {
        let body = block.split("    // README end").next().unwrap();
        let text: String = body
            .lines()
            .map(|l| l.strip_prefix("    ").unwrap_or(l))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(
            docs.iter()
                .any(|(_, d)| d.contains(&format!("```rust\n{text}```"))),
            "neither the README nor the guide shows this example as it is:\n{text}"
        );
        examples.push(text);
    }
    assert_eq!(examples.len(), 3);
    for (file, doc) in &docs {
        for block in doc.split("```rust\n").skip(1) {
            let code = format!("{}\n", block.split("```").next().unwrap().trim_end());
            assert!(
                examples.contains(&code),
                "{file} shows Rust code that tests/docs.rs does not run:\n{code}"
            );
        }
    }
}

/// The guide's budget in brief is a budget smelt reads and matches (its Baseline path is
/// relative to `budgets/`, where such a file would live).
#[test]
fn readme_budget_example_matches() {
    let root = env!("CARGO_MANIFEST_DIR");
    let guide = std::fs::read_to_string(format!("{root}/docs/guide.md")).unwrap();
    let section = &guide[guide.find("## A budget, in brief").unwrap()..];
    let toml = section.split("```toml\n").nth(1).unwrap();
    let toml = &toml[..toml.find("```").unwrap()];
    let budget =
        smelt::budget::Budget::from_toml_str(toml, &std::path::Path::new(root).join("budgets"))
            .unwrap();
    let report = smelt::match_budget(&budget, 1).unwrap();
    assert_eq!(report.looped.model.layers, 12);
    assert!(report.looped.model.looping.is_some());
    // The matched budgets (the activations are reported, not matched, by default).
    let r = &report.residuals;
    assert!(
        [r.flops, r.params, r.kv].iter().all(|x| x.abs() < 0.04),
        "{r:?}"
    );
}

/// `docs/conventions.md` is the module documentation of `crates/smelt/src/cost/mod.rs`
/// (rustdoc links shown as code), so the two cannot drift apart.
/// `SMELT_BLESS=1 cargo test --release --test tests conventions` rewrites it.
#[test]
fn conventions_doc_is_the_cost_model_docs() {
    let root = env!("CARGO_MANIFEST_DIR");
    let module = std::fs::read_to_string(format!("{root}/crates/smelt/src/cost/mod.rs")).unwrap();
    let docs: Vec<&str> = module
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .map(|l| {
            l.strip_prefix("//!")
                .unwrap()
                .strip_prefix(' ')
                .unwrap_or("")
        })
        .collect();
    assert!(docs.len() > 50, "the cost model's module docs are missing");
    let mut want = String::from(
        "<!-- Generated from the module documentation of crates/smelt/src/cost/mod.rs by\n     \
         `SMELT_BLESS=1 cargo test --release --test tests conventions`: edit the module docs,\n     \
         not this file. -->\n\n# smelt — counting conventions\n\n",
    );
    for line in docs {
        let line = line
            .strip_prefix("# Conventions")
            .map_or(line, |_| "## Conventions");
        want.push_str(&unlink(line));
        want.push('\n');
    }
    let path = format!("{root}/docs/conventions.md");
    if std::env::var_os("SMELT_BLESS").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let got = std::fs::read_to_string(&path).unwrap();
    assert!(
        got == want,
        "docs/conventions.md differs from the cost model's module docs; \
         SMELT_BLESS=1 cargo test --release --test tests conventions rewrites it"
    );
}

/// Each rustdoc link `` [`path`] `` of `line` as plain code `` `path` ``.
fn unlink(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(open) = rest.find("[`") {
        let Some(close) = rest[open + 2..].find("`]") else {
            break;
        };
        out.push_str(&rest[..open]);
        out.push_str(&rest[open + 1..open + 2 + close + 1]);
        rest = &rest[open + 2 + close + 2..];
    }
    out.push_str(rest);
    out
}

#[test]
fn unlink_keeps_code_with_brackets() {
    assert_eq!(
        unlink("see [`MeanKeys`] and `[model.dense]`, [`a::b`]."),
        "see `MeanKeys` and `[model.dense]`, `a::b`."
    );
}

/// The README's first screen is what `smelt grid budgets/smelt-grid.toml` prints (its
/// snapshot, which tests/snapshots.rs keeps current).
#[test]
fn readme_shows_the_grid_as_printed() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let snapshot = std::fs::read_to_string(format!("{root}/tests/snapshots/grid.txt")).unwrap();
    let printed = snapshot.split_once('\n').unwrap().1;
    assert!(
        readme.contains(&format!("```text\n{printed}```")),
        "the README's grid differs from tests/snapshots/grid.txt"
    );
}

/// The README stays a front page (what smelt is, how to install it, the two commands, one
/// screen of output, links): at most 250 lines; every feature's section is in the guide.
#[test]
fn the_readme_is_a_front_page() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 250, "README.md has {lines} lines (at most 250)");
    // It links to the guide rather than repeating it.
    assert!(
        readme.contains("](docs/guide.md#"),
        "the README links to no guide section"
    );
}

/// The `##` headings of a Markdown text, outside fenced code blocks.
fn sections(text: &str) -> Vec<&str> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if let Some(h) = line.strip_prefix("## ").filter(|_| !fenced) {
            out.push(h);
        }
    }
    out
}

/// The anchor GitHub gives a heading: lowercase, backticks and punctuation dropped (but `-`
/// and `_`), spaces as `-`.
fn anchor(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || " -_".contains(*c))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The guide's table of contents lists every section, in order, each with its anchor; and
/// every link from the README or the guide to a section of the guide names an anchor the
/// guide has.
#[test]
fn the_guides_contents_and_links_are_complete() {
    let root = env!("CARGO_MANIFEST_DIR");
    let guide = std::fs::read_to_string(format!("{root}/docs/guide.md")).unwrap();
    let heads = sections(&guide);
    assert!(heads.len() >= 15, "{heads:?}");
    let want: String = heads
        .iter()
        .map(|h| format!("- [{h}](#{})\n", anchor(h)))
        .collect();
    assert!(
        guide.contains(&want),
        "the guide's table of contents should read:\n{want}"
    );
    let anchors: Vec<String> = heads.iter().map(|h| anchor(h)).collect();
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let links = [
        ("README.md", &readme, "](docs/guide.md#"),
        ("docs/guide.md", &guide, "](#"),
    ];
    let mut seen = 0;
    for (file, text, prefix) in links {
        for link in text.split(prefix).skip(1) {
            let target = &link[..link.find(')').unwrap_or(link.len())];
            assert!(
                anchors.iter().any(|a| a == target),
                "{file} links to #{target}, which no section of the guide has"
            );
            seen += 1;
        }
    }
    assert!(seen > heads.len(), "{seen} links checked");
    assert_eq!(
        anchor("Predicted step time: `smelt predict`, `grid --predict`"),
        "predicted-step-time-smelt-predict-grid---predict"
    );
}

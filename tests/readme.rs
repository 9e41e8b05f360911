//! The README's Rust examples: they run, and the README shows them exactly as they are
//! here (between the `README` markers, indentation removed).

/// README, "Library": matching a budget, as a launcher would.
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

/// README, "Library": two models side by side.
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

/// README, "Library": checking the tolerances and writing the config a launcher builds.
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
    let source = std::fs::read_to_string(format!("{root}/tests/readme.rs")).unwrap();
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
                "{file} shows Rust code that tests/readme.rs does not run:\n{code}"
            );
        }
    }
}

/// The README's budget in brief is a budget smelt reads and matches (its Baseline path is
/// relative to `budgets/`, where such a file would live).
#[test]
fn readme_budget_example_matches() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let section = &readme[readme.find("## A budget, in brief").unwrap()..];
    let toml = section.split("```toml\n").nth(1).unwrap();
    let toml = &toml[..toml.find("```").unwrap()];
    let budget =
        smelt::budget::Budget::from_toml_str(toml, &std::path::Path::new(root).join("budgets"))
            .unwrap();
    let report = smelt::match_budget(&budget, 1).unwrap();
    assert_eq!(report.looped.model.layers, 12);
    assert!(report.looped.model.looping.is_some());
    assert!(report.residuals.max_abs() < 0.04, "{:?}", report.residuals);
}

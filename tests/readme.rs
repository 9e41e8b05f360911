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

#[test]
fn readme_shows_these_examples() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let source = std::fs::read_to_string(format!("{root}/tests/readme.rs")).unwrap();
    let mut examples = 0;
    for block in source.split("// README begin\n").skip(1) {
        let body = block.split("    // README end").next().unwrap();
        let text: String = body
            .lines()
            .map(|l| l.strip_prefix("    ").unwrap_or(l))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(
            readme.contains(&format!("```rust\n{text}```")),
            "the README does not show this example as it is:\n{text}"
        );
        examples += 1;
    }
    assert_eq!(examples, 3);
}

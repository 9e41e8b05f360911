//! One parser of card names for every entry point: over the whole table of cards, the library
//! ([`Card::parse`]), `smelt predict --card`, `smelt mfu --card`, `smelt grid --predict` and a
//! budget's `[objective.time] card` read the same names as the same card, and refuse the
//! same names with the same words (Python's `predict` and `mfu`: python/tests/test_predict.py).

use std::path::Path;

use smelt::Error;
use smelt::budget::Budget;
use smelt::time::Card;

use crate::common::{self, run, run_json};

/// Every card's names (its id, in capitals too, its short name, its name as a person writes
/// it), driver names as drivers report them, and names that are no card.
fn names() -> Vec<String> {
    let mut out = Vec::new();
    for spec in Card::table() {
        let id = spec.id.as_str();
        out.extend([
            id.to_owned(),
            id.to_uppercase(),
            spec.alias(),
            spec.name.to_owned(),
        ]);
    }
    out.extend(
        [
            "NVIDIA H100 80GB HBM3",
            "NVIDIA H200",
            "NVIDIA A100-SXM4-80GB",
            "NVIDIA GH200 480GB",
            "h20",
            "h20e",
            "l40",
            "a10",
            "gh100",
            "h100x",
            "tpu-v5p",
        ]
        .map(str::to_owned),
    );
    out.sort();
    out.dedup();
    out
}

/// The rule of the library's refusal of `name`.
fn rule(name: &str) -> String {
    match Card::parse(name) {
        Err(Error::InvalidSpec { field, rule }) if field == "card" => rule,
        other => panic!("{name}: not a refusal of the card: {other:?}"),
    }
}

/// The card `[objective.time] card = "name"` predicts on, or the error.
fn budget_card(name: &str) -> smelt::Result<String> {
    let text = std::fs::read_to_string(common::budget("match-200m-s95-small.toml")).unwrap();
    let extra = format!("[objective.time]\ncard = {}\n", toml_string(name));
    let b = Budget::from_toml_str(
        &format!("{text}\n{extra}"),
        Path::new(&common::budgets_dir()),
    )?;
    Ok(b.time().expect("a time budget").basis().device.name)
}

fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

#[test]
fn every_entry_point_reads_the_same_card_names() {
    let model = common::budget("base-200m-s95.toml");
    let (mut seen, mut refused) = (std::collections::BTreeSet::new(), 0);
    for name in names() {
        let card = Card::parse(&name).ok();
        let mfu = run(&[
            "mfu",
            &model,
            "--tokens-per-second",
            "1e6",
            "--card",
            &name,
            "--format",
            "json",
        ]);
        let predict = run(&["predict", &model, "--card", &name, "--format", "json"]);
        // A missing grid file: a card clap accepts fails on the file (exit 1), one it refuses
        // fails on the card (exit 2) before the file is read.
        let grid = run(&["grid", "/no/such/grid.toml", "--predict", &name]);
        match card {
            Some(c) => {
                seen.insert(c.as_str());
                let spec = c.spec();
                assert_eq!(mfu.0, Some(0), "mfu {name}: {}", mfu.2);
                let v: serde_json::Value = serde_json::from_str(&mfu.1).unwrap();
                assert_eq!(v["card"], c.as_str(), "mfu {name}");
                assert_eq!(v["peak_flops_per_second"], spec.peak_flops_per_second);
                assert_eq!(predict.0, Some(0), "predict {name}: {}", predict.2);
                let v: serde_json::Value = serde_json::from_str(&predict.1).unwrap();
                assert_eq!(v["basis"]["device"]["name"], spec.name, "predict {name}");
                assert_eq!(grid.0, Some(1), "grid --predict {name}: {}", grid.2);
                assert!(grid.2.contains("grid file"), "{}", grid.2);
                assert_eq!(budget_card(&name).unwrap(), spec.name, "budget {name}");
            }
            None => {
                refused += 1;
                let rule = rule(&name);
                assert!(rule.contains("h100 is h100-sxm"), "{rule}");
                for (what, (code, _, err)) in [("mfu", mfu), ("predict", predict), ("grid", grid)] {
                    assert_eq!(code, Some(2), "{what} {name}: {err}");
                    assert!(err.contains(&rule), "{what} {name}: {err}");
                    assert!(
                        !err.contains("similar value"),
                        "{what} suggests a card: {err}"
                    );
                }
                match budget_card(&name) {
                    Err(Error::InvalidSpec { field, rule: r }) => {
                        assert_eq!((field.as_str(), r), ("objective.time.card", rule.clone()));
                    }
                    other => panic!("budget {name}: {other:?}"),
                }
            }
        }
    }
    // Every card of the table was read, and every name that is none was refused.
    assert_eq!(seen.len(), Card::ALL.len());
    assert_eq!(refused, 7);
}

#[test]
fn grid_predict_names_the_card_it_read() {
    let v = run_json(&[
        "grid",
        &common::budget("smelt-grid.toml"),
        "--predict",
        "h100",
        "--format",
        "json",
        "--quiet",
    ]);
    let basis = &v["summary"]["predicted"]["basis"];
    assert_eq!(basis["device"]["name"], "NVIDIA H100 SXM");
}

/// The guide's table of cards ("Predicted step time") is the library's, generated from the
/// table in code (`smelt::time::cards_markdown`), as the families table is; after adding a
/// card, `SMELT_BLESS=1 cargo test --release --test tests cards` rewrites it.
#[test]
fn the_guide_shows_the_cards_of_the_table() {
    const BEGIN: &str = "<!-- cards:begin -->\n";
    const END: &str = "<!-- cards:end -->";
    let path = format!("{}/docs/guide.md", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    let start = text.find(BEGIN).expect("the guide's cards:begin marker") + BEGIN.len();
    let end = start
        + text[start..]
            .find(END)
            .expect("the guide's cards:end marker");
    let want = smelt::time::cards_markdown();
    if std::env::var_os("SMELT_BLESS").is_some() && text[start..end] != want {
        let mut text = text.clone();
        text.replace_range(start..end, &want);
        std::fs::write(&path, text).unwrap();
    }
    assert!(
        text[start..end] == want,
        "the guide's table of cards is not the library's (SMELT_BLESS=1 rewrites it); it \
         should read:\n{want}"
    );
    // A row per card, in the table's order, each with its figures.
    let ids: Vec<&str> = want
        .lines()
        .skip(2)
        .filter_map(|row| row.split('`').nth(1))
        .collect();
    let table: Vec<&str> = Card::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(ids, table);
    let h200 = want
        .lines()
        .find(|r| r.starts_with("| `h200-sxm`"))
        .unwrap();
    assert_eq!(
        h200,
        "| `h200-sxm` | NVIDIA H200 SXM | `h200` | 989.4 | 4.8 |"
    );
}

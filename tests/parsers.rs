//! The parsers against arbitrary input (a proptest in place of a fuzzer): model and budget
//! TOML, grid TOML, Hugging Face config.json and endpoint CSVs never panic, whatever the
//! bytes; and every file smelt writes reads back as the same thing.

use std::path::Path;

use proptest::prelude::*;
use smelt::budget::Budget;
use smelt::{GridSpec, ModelSpec};

use crate::common::{BASE_200M, SMALL_BUDGET, budgets_dir, data_text};

/// Every parser on `text`: any result but a panic (a panic fails the property).
fn parse_all(text: &str) {
    let dir = Path::new(".");
    if let Ok(spec) = ModelSpec::from_toml_str(text) {
        let _ = smelt::cost(&spec);
    }
    let _ = ModelSpec::from_json_str(text);
    if let Ok(b) = Budget::from_toml_str(text, dir) {
        let _ = b.lattice().combinations();
    }
    let _ = Budget::from_json_str(text, dir);
    let _ = GridSpec::from_toml_str(text, dir);
    if let Ok(spec) = smelt::hf::import(text, ModelSpec::default_workload()) {
        let _ = smelt::cost(&spec);
    }
    let _ = smelt::fit::data::parse(text, "fuzz.csv", Some("arch"));
}

/// `base` with `edits` applied: each replaces a character position (modulo the length)
/// by a piece of text.
fn mutate(base: &str, edits: &[(usize, String)]) -> String {
    let mut chars: Vec<char> = base.chars().collect();
    for (at, piece) in edits {
        let at = at % chars.len().max(1);
        chars.splice(at..(at + 1).min(chars.len()), piece.chars());
    }
    chars.into_iter().collect()
}

fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[0-9]{1,25}",
        "-[0-9]{1,20}",
        prop::sample::select(vec![
            "[",
            "]",
            "{",
            "}",
            "=",
            "\"",
            ",",
            "\n",
            "[[",
            "]]",
            "0",
            "1e308",
            "nan",
            "true",
            "null",
            "-1",
            "18446744073709551615",
            "9223372036854775807",
        ])
        .prop_map(str::to_owned),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        parse_all(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn mutated_files_never_panic(
        which in 0usize..4,
        edits in prop::collection::vec((any::<usize>(), piece()), 1..6),
    ) {
        let base = match which {
            0 => BASE_200M.to_owned(),
            1 => SMALL_BUDGET.replace("@BUDGETS@", &budgets_dir()),
            2 => data_text("hf/qwen1.5-moe-a2.7b.json"),
            _ => data_text("chinchilla/endpoints.csv").lines().take(20).collect::<Vec<_>>().join("\n"),
        };
        parse_all(&mutate(&base, &edits));
    }

    /// A model file smelt writes (the matched model file with its comment, an imported
    /// config) reads back as the same model, whatever the name and source path.
    #[test]
    fn written_model_files_read_back(name in any::<String>(), source in any::<String>()) {
        let mut spec = ModelSpec::from_toml_str(BASE_200M).unwrap();
        spec.name = Some(name.clone());
        match spec.validate() {
            Ok(()) => {
                let text = smelt::report::commented_model_file(&source, &spec).unwrap();
                prop_assert_eq!(ModelSpec::from_toml_str(&text).unwrap(), spec.clone());
                let text = smelt::report::imported_model_file(&source, &spec).unwrap();
                prop_assert_eq!(ModelSpec::from_toml_str(&text).unwrap(), spec);
            }
            Err(e) => prop_assert!(name.chars().any(char::is_control), "{e}"),
        }
    }
}

//! The library's one list of Hugging Face families against every place that names them: the
//! table of families in the README (or a guide under docs/), the Python docstring of
//! `import_hf` and the command line's help. After adding a family, `SMELT_BLESS=1 cargo test
//! --release --test tests hf_registry` rewrites the table between its markers.

use std::path::{Path, PathBuf};

use crate::common::run;
use smelt::hf::{self, Family};

const BEGIN: &str = "<!-- families:begin -->\n";
const END: &str = "<!-- families:end -->";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every docs/*.md, in name order.
fn documents() -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .map(|dir| {
            dir.map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "md"))
                .collect()
        })
        .unwrap_or_default();
    docs.sort();
    docs.insert(0, root().join("README.md"));
    docs
}

/// The byte range of the text between the markers, if the document has them.
fn block(text: &str, path: &Path) -> Option<std::ops::Range<usize>> {
    let start = text.find(BEGIN)? + BEGIN.len();
    let end = start
        + text[start..]
            .find(END)
            .unwrap_or_else(|| panic!("{}: {BEGIN:?} without {END:?}", path.display()));
    Some(start..end)
}

#[test]
fn the_families_table_is_the_registrys() {
    let want = hf::families_markdown();
    let bless = std::env::var_os("SMELT_BLESS").is_some();
    let (mut found, mut differ) = (Vec::new(), Vec::new());
    for path in documents() {
        let text = std::fs::read_to_string(&path).unwrap();
        let Some(range) = block(&text, &path) else {
            continue;
        };
        found.push(path.display().to_string());
        if text[range.clone()] == want {
            continue;
        }
        if bless {
            let mut text = text;
            text.replace_range(range, &want);
            std::fs::write(&path, text).unwrap();
        } else {
            differ.push(path.display().to_string());
        }
    }
    assert!(
        !found.is_empty(),
        "no {BEGIN:?} ... {END:?} block in README.md or docs/*.md"
    );
    assert!(
        differ.is_empty(),
        "the table of families in {differ:?} is not the library's (SMELT_BLESS=1 rewrites \
         it); it should read:\n{want}"
    );
}

#[test]
fn the_table_has_a_row_per_family() {
    let table = hf::families_markdown();
    let rows: Vec<&str> = table.lines().skip(2).collect();
    assert_eq!(rows.len(), Family::ALL.len());
    for (row, family) in rows.iter().zip(Family::ALL) {
        assert!(row.starts_with(&format!("| `{family}`")), "{row}");
        assert_eq!(row.matches(" | ").count(), 1, "two columns: {row}");
    }
    assert!(rows[Family::Llama4Text as usize].contains("a `llama4` wrapper's `text_config`"));
}

/// The docstring's "Families (model_type): ..." sentence, its lines joined.
fn docstring_families(source: &str) -> String {
    let key = "Families (model_type): ";
    let start = source
        .find(key)
        .expect("import_hf's docstring names its families")
        + key.len();
    let end = start + source[start..].find('.').expect("the sentence ends");
    source[start..end].replace("\n    ", " ")
}

#[test]
fn the_python_docstring_names_every_family() {
    let source = std::fs::read_to_string(root().join("python/smelt/__init__.py")).unwrap();
    assert_eq!(docstring_families(&source), hf::families_list());
}

#[test]
fn the_list_names_each_family_and_wrapper_once() {
    let list = hf::families_list();
    let first_words: Vec<&str> = list
        .split(", ")
        .filter_map(|i| i.split(' ').next())
        .collect();
    let names: Vec<&str> = Family::ALL.iter().map(|f| f.as_str()).collect();
    assert_eq!(first_words, names);
    assert!(list.contains("llama4_text (and a llama4 wrapper's text decoder)"));
}

#[test]
fn the_help_lists_every_family() {
    let (code, import, _) = run(&["import", "--help"]);
    assert_eq!(code, Some(0));
    let width = Family::ALL.iter().map(|f| f.as_str().len()).max().unwrap();
    for f in Family::ALL {
        let line = format!("  {:width$}  {}", f.as_str(), f.about());
        assert!(
            import.contains(&line),
            "smelt import --help lacks {line:?}:\n{import}"
        );
    }
    let (_, short, _) = run(&["--help"]);
    assert!(short.contains(&hf::families_list()), "{short}");
    let (_, matching, _) = run(&["match", "--help"]);
    for f in Family::ALL {
        let value = format!("- {}:", f.as_str());
        assert!(
            matching.contains(&value),
            "smelt match --help lacks {value:?}"
        );
    }
}

/// Every family has a published config in tests/data/hf/ (a family added without one fails
/// here), and each config written back in its own family reads back as the same model.
#[test]
fn every_family_has_a_published_config_that_round_trips() {
    let mut seen = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("tests/data/hf"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let raw: serde_json::Value = serde_json::from_str(&text).unwrap();
        let name = path.display();
        let family = hf::family_of_config(&raw).unwrap_or_else(|| panic!("{name}: no family"));
        let spec = hf::import(&text, smelt::ModelSpec::default_workload()).unwrap();
        let config = hf::export(&spec, family).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(config["model_type"], family.exported_model_type(), "{name}");
        assert_eq!(config["architectures"][0], family.architecture(), "{name}");
        let back = hf::import(&config.to_string(), spec.workload.clone()).unwrap();
        assert_eq!(back.model, spec.model, "{name}");
        seen.push(family);
    }
    for f in Family::ALL {
        assert!(seen.contains(f), "no config of {f} in tests/data/hf/");
    }
}

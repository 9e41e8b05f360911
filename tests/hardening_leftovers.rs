//! Issue 38's leftovers: values accepted that no run has (`activation_bytes = 3`), control
//! characters from arguments reaching the terminal through the argument parser's messages,
//! and help texts that state another rule than the one checked.

use crate::common::{budget, data, data_text, run, temp_file};

/// An activation element is 1, 2, 4 or 8 bytes: 3 (or 0, 5, 16) is refused by the flag, a
/// model file's `[counting]` and a budget's, naming the field and the sizes it takes (3 was
/// accepted, and the unfused counts printed for an element no format has).
#[test]
fn activation_bytes_are_an_element_size() {
    let rule = "counting.activation_bytes: must be 1, 2, 4 or 8";
    let model = budget("base-200m-s95.toml");
    for bytes in ["0", "3", "5", "16"] {
        let (code, out, err) = run(&["cost", &model, "--activation-bytes", bytes]);
        assert_eq!(code, Some(1), "{bytes}: {err}");
        assert!(out.is_empty(), "{out}");
        assert!(
            err.contains(rule) && err.contains(&format!("got {bytes}")),
            "{err}"
        );
        assert!(err.contains("--activation-bytes"), "{err}");
    }
    for bytes in ["1", "2", "4", "8"] {
        let (code, _, err) = run(&["cost", &model, "--activation-bytes", bytes]);
        assert_eq!(code, Some(0), "{bytes}: {err}");
    }
    let text = std::fs::read_to_string(&model).unwrap();
    let file = temp_file(
        "toml",
        &format!("{text}\n[counting]\nactivation_bytes = 3\n"),
    );
    let (code, _, err) = run(&["cost", &file.display().to_string()]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(rule), "{err}");
    let budget_file = temp_file(
        "toml",
        "baseline = \"@BUDGETS@/base-200m-s95.toml\"\n\
         [counting]\nactivation_bytes = 3\n\
         [recipe]\nspan = \"half\"\nplacement = \"middle\"\nrepeats = 2\n\
         [lattice]\nhidden = { step = 32, min = 992, max = 1120 }\n\
         experts = { step = 8, min = 8, max = 512 }\n\
         expert_ffn = { ratio = \"1/3\", multiple = 16 }\n\
         head_dim = { step = 8, min = 96, max = 112 }\n\
         heads = { min = 1, max = 64 }\nkv_heads = { min = 1, max = 2 }\n\
         gqa = { min = 8, max = 12 }\nq_width = { min = 0.75, max = 1.25 }\n",
    );
    let (code, out, err) = run(&["match", &budget_file.display().to_string()]);
    assert_eq!(code, Some(1), "{err}");
    assert!(out.is_empty() && err.contains(rule), "{err}");
}

/// A control character in an argument reaches the terminal escaped, both in the argument
/// parser's messages (an unknown subcommand, an invalid value) and in smelt's own (a file
/// not found, a note naming the file written): an escape sequence typed or pasted cannot
/// clear or retitle the terminal.
/// Messages without one are clap's, unchanged.
#[test]
fn control_characters_in_arguments_are_escaped() {
    let clear = "\u{1b}[2J\u{7}";
    let cases: [&[&str]; 4] = [
        &[clear],
        &["cost", "x.toml", "--format", clear],
        &["match", "budget.toml", "--top", clear],
        &["match", clear],
    ];
    for args in cases {
        let (code, out, err) = run(args);
        assert!(
            code == Some(2) || code == Some(1),
            "{args:?}: {code:?} {err}"
        );
        assert!(out.is_empty(), "{out}");
        assert!(
            !err.contains('\u{1b}') && !err.contains('\u{7}'),
            "{args:?}: {err:?}"
        );
        assert!(err.contains("\\u{1b}[2J\\u{7}"), "{args:?}: {err}");
    }
    // A note quoting the path written.
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("r{clear}.txt"));
    let (code, _, err) = run(&[
        "match",
        &budget("match-200m-s95-small.toml"),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.is_file());
    std::fs::remove_file(&out).unwrap();
    assert!(err.contains("wrote the report to") && err.contains("r\\u{1b}[2J\\u{7}.txt"));
    assert!(!err.contains('\u{1b}') && !err.contains('\u{7}'), "{err:?}");
    let (code, _, err) = run(&["cost", "x.toml", "--format", "bad"]);
    assert_eq!(code, Some(2));
    assert!(
        err.starts_with("error: invalid value 'bad' for '--format <FORMAT>'\n"),
        "{err}"
    );
}

/// Transformers' SparseMixer router (phimoe) picks two experts per token whatever
/// `num_experts_per_tok` says: a config or a model with another `top_k` is refused, on
/// import and on export, rather than counted as a model Transformers would not build.
#[test]
fn phimoe_routes_to_two_experts_or_is_refused() {
    let mut config: serde_json::Value =
        serde_json::from_str(&data_text("hf/phi-3.5-moe-instruct.json")).unwrap();
    config["num_experts_per_tok"] = 4.into();
    let file = temp_file("json", &config.to_string());
    let (code, out, err) = run(&["cost", file.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        err.contains("num_experts_per_tok: must be 2 for phimoe") && err.contains("got 4"),
        "{err}"
    );
    let (code, toml, err) = run(&["import", &data("hf/phi-3.5-moe-instruct.json")]);
    assert_eq!(code, Some(0), "{err}");
    assert!(toml.contains("top_k = 2\n"), "{toml}");
    // Without the router its validation refuses three experts for: the export's own rule.
    let unstated = toml.replace("router = \"sparsemixer\"\n", "");
    assert_ne!(unstated, toml);
    let model = temp_file("toml", &unstated.replace("top_k = 2\n", "top_k = 3\n"));
    let out_dir = model.with_extension("out");
    let (code, _, err) = run(&[
        "export",
        model.to_str().unwrap(),
        "-o",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("model.moe.top_k: must be 2 for a phimoe export"),
        "{err}"
    );
    assert!(!out_dir.exists());
}

/// A Baseline with a partial RoPE (MiniMax-M2 rotates 64 of each head's 128 dimensions):
/// the lattice holds no head narrower than what RoPE rotates, and a lattice with only such
/// heads is refused naming both fields (a looped model used to inherit `rope_dim` whatever
/// head width the search chose, and failed late on a field the user never set).
#[test]
fn a_partial_rope_bounds_the_lattices_head_widths() {
    let budget = temp_file(
        "toml",
        &format!(
            "name = \"mm\"\nbaseline = \"{}\"\n[recipe]\nspan = \"half\"\nrepeats = 2\n\
             [lattice]\nhead_dim = {{ step = 8, min = 32, max = 56 }}\n",
            data("hf/minimax-m2.json")
        ),
    );
    let (code, out, err) = run(&["match", budget.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        err.contains("lattice.head_dim: every value is below the Baseline's model.rope_dim (64)"),
        "{err}"
    );
}

/// A model file stating the SparseMixer router with other than two experts is refused by the
/// model's validation, whatever is asked of it (FLOPs included): SparseMixer routes to two.
#[test]
fn a_sparsemixer_model_routes_to_two_experts() {
    let (code, toml, err) = run(&["import", &data("hf/phi-3.5-moe-instruct.json")]);
    assert_eq!(code, Some(0), "{err}");
    assert!(toml.contains("router = \"sparsemixer\"\n"), "{toml}");
    let stated = toml.replace("top_k = 2\n", "top_k = 3\n");
    assert_ne!(stated, toml);
    let model = temp_file("toml", &stated);
    let (code, out, err) = run(&["cost", model.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        err.contains("model.moe.top_k: must be 2 with router = \"sparsemixer\"")
            && err.contains("got 3"),
        "{err}"
    );
}

//! What reaches a training launcher is what it thinks: comparisons under one convention,
//! the workload shown and settable, exports that a launcher can build (one round trip per
//! family, the family's own keys exactly), names that say what they are, and a command
//! line that reports progress, completes, and says why it exits 3.

use std::collections::BTreeSet;

use smelt::ModelSpec;
use smelt::hf::{self, Family};

use crate::common::{budget, data, hf_export, run, run_json, temp_file};

/// A model costed under another convention than its Baseline's (embeddings and LM head
/// counted, another workload) compares as if it were under the Baseline's, and says so.
#[test]
fn a_comparison_is_under_the_baselines_convention() {
    let baseline = ModelSpec::load(budget("base-200m-s95.toml")).unwrap();
    let looped = ModelSpec::load(budget("smelt-200m-s95.toml")).unwrap();
    let plain = smelt::compare(&baseline, &looped).unwrap();
    assert!(plain.harmonised.is_empty());
    let mut other = looped.clone();
    other.model.vocab = 32_000;
    other.counting.embeddings = true;
    other.counting.lm_head = true;
    other.workload = ModelSpec::default_workload();
    other.workload.context = 2048;
    let cmp = smelt::compare(&baseline, &other).unwrap();
    assert_eq!(
        cmp.residuals, plain.residuals,
        "the same residuals as like with like"
    );
    assert_eq!(cmp.harmonised.len(), 2, "{:?}", cmp.harmonised);
    assert!(cmp.harmonised[0].contains("[counting]"));
    assert!(cmp.harmonised[1].contains("context 2048"));
    let json = smelt::report::to_json(&cmp).unwrap();
    assert!(json.contains("\"harmonised\"") && json.contains("\"workload\""));
}

/// The workload is in every cost's table and JSON, and the flags set it.
#[test]
fn the_workload_is_shown_and_settable() {
    let cfg = data("hf/qwen1.5-moe-a2.7b.json");
    let (_, table, _) = run(&["cost", &cfg]);
    assert!(
        table.contains("workload: context 4096, documents of 991 tokens (mean), causal"),
        "{table}"
    );
    let v = run_json(&["cost", &cfg, "--format", "json"]);
    assert_eq!(v["conventions"]["workload"]["context"], 4096);
    let short = run_json(&[
        "cost",
        &cfg,
        "--format",
        "json",
        "--context",
        "2048",
        "--mean-doc-len",
        "500",
    ]);
    assert_eq!(short["conventions"]["workload"]["mean_doc_len"], 500);
    assert_ne!(
        short["flops_per_token"]["training"],
        v["flops_per_token"]["training"]
    );
    let hist = temp_file("csv", "length,count\n100,30\n4096,2\n");
    let h = run_json(&[
        "cost",
        &cfg,
        "--format",
        "json",
        "--doc-lengths",
        hist.to_str().unwrap(),
    ]);
    assert_eq!(h["conventions"]["attention_keys_from"], "doc_lengths");
    let (code, _, err) = run(&["cost", &cfg, "--context", "100"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("workload.mean_doc_len"), "{err}");
}

/// A budget's [counting] gives a config.json Baseline the paper's convention, and the
/// export still carries the config's other keys.
#[test]
fn a_budget_sets_the_counting_of_a_config_baseline() {
    let text = std::fs::read_to_string(budget("match-qwen1.5-moe-a2.7b.toml"))
        .unwrap()
        .replace(
            "baseline = \"",
            &format!("baseline = \"{}/", crate::common::budgets_dir()),
        )
        + "\n[counting]\nembeddings = false\nlm_head = false\n";
    let path = temp_file("toml", &text);
    let (_, json, err) = run(&["match", path.to_str().unwrap(), "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap_or_else(|_| panic!("{err}"));
    assert_eq!(
        v["baseline"].get("counting"),
        None,
        "the paper's convention"
    );
    let (_, c, err) = hf_export(path.to_str().unwrap(), &[]);
    let c = c.unwrap_or_else(|| panic!("{err}"));
    assert_eq!(c["rope_theta"], 1_000_000.0);
    assert_eq!(
        c["max_position_embeddings"], 32768,
        "the Baseline's, larger than the context"
    );
}

/// A budget's [counting] is merged key by key into its Baseline's: the Nemotron budget sets
/// only `kv`, and its config.json Baseline keeps the import's counted embedding and LM head
/// (`vocab x hidden` each, untied: 2 x 131072 x 2688 parameters), so its parameters are
/// `smelt cost`'s of the config; standard error says which keys came from where.
#[test]
fn a_budgets_counting_keeps_the_keys_it_leaves_out() {
    let b = smelt::Budget::load(budget("match-nemotron-3-nano-style.toml")).unwrap();
    let c = b.baseline().counting;
    assert!(c.embeddings && c.lm_head, "{c:?}");
    assert_eq!(c.kv, smelt::KvCount::AtContext);
    let with = smelt::cost(b.baseline()).unwrap().params.total.0;
    let mut bare = b.baseline().clone();
    (bare.counting.embeddings, bare.counting.lm_head) = (false, false);
    let without = smelt::cost(&bare).unwrap().params.total.0;
    assert_eq!(with - without, 2 * 131_072 * 2688);
    let config = data("hf/nemotron-3-nano-30b-a3b.json");
    let cost = run_json(&["cost", &config, "--format", "json"]);
    assert_eq!(cost["params"]["total"], with);
    assert_eq!(b.notes().len(), 1, "{:?}", b.notes());
    let note = &b.notes()[0];
    for part in [
        "takes kv",
        "embeddings = true",
        "lm_head = true",
        "config.json",
    ] {
        assert!(note.contains(part), "{part}: {note}");
    }
    let (code, json, err) = run(&[
        "match",
        &budget("match-nemotron-3-nano-style.toml"),
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("smelt: note: budget file") && err.contains(note),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["budgets"]["baseline"]["params"], with);
    // A model file's counting: the keys left out are its own (here `activations`), kept
    // and named; a Baseline at the defaults takes the budget's keys with no note.
    let base = std::fs::read_to_string(budget("base-200m-s95.toml")).unwrap();
    let inline = |counting: &str| {
        let text = format!(
            "[counting]\nkv = \"at_context\"\n[baseline]\n{}{counting}",
            base.replace("\n[", "\n[baseline.")
        );
        smelt::Budget::from_toml_str(&text, std::path::Path::new(".")).unwrap()
    };
    let plain = inline("");
    assert!(plain.notes().is_empty(), "{:?}", plain.notes());
    assert_eq!(
        plain.baseline().counting,
        smelt::Counting {
            kv: smelt::KvCount::AtContext,
            ..smelt::Counting::default()
        }
    );
    let full = inline("[baseline.counting]\nactivations = \"full\"\n");
    let c = full.baseline().counting;
    assert_eq!(c.activations, smelt::ActivationPolicy::Full);
    assert_eq!(c.kv, smelt::KvCount::AtContext);
    assert_eq!(full.notes().len(), 1, "{:?}", full.notes());
    assert!(
        full.notes()[0].contains("activations = \"unfused-full\"")
            && full.notes()[0].contains("inline Baseline"),
        "{:?}",
        full.notes()
    );
}

/// A match of a Baseline config.json is written in the Baseline's own family by default,
/// even when its shapes are also another family's (MiniMax-M2's router bias is also GLM's;
/// Granite's shapes are Mixtral's; a Llama-4 wrapper's text decoder is llama4_text).
#[test]
fn exports_default_to_the_baselines_family() {
    for (config, model_type) in [
        ("minimax-m2.json", "minimax_m2"),
        ("granite-3.0-1b-a400m.json", "granitemoe"),
        ("llama-4-scout-17b-16e.json", "llama4_text"),
        ("phi-3.5-moe-instruct.json", "phimoe"),
    ] {
        let text = format!(
            "baseline = \"{}\"\n[recipe]\nspan = \"half\"\nplacement = \"middle\"\n\
             repeats = 2\n",
            data(&format!("hf/{config}"))
        );
        let path = temp_file("toml", &text);
        let (_, c, err) = hf_export(path.to_str().unwrap(), &[]);
        let c = c.unwrap_or_else(|| panic!("{err}"));
        assert_eq!(c["model_type"], model_type, "{config}");
        assert_eq!(c["smelt_loop_repeats"], 2, "{config}");
        assert_eq!(
            hf::family_of_config(&c).map(|f| f.as_str()),
            Some(model_type)
        );
    }
}

/// An export a launcher could not build is refused: no vocabulary, or an OLMoE whose q/k
/// norms do not fit.
#[test]
fn exports_a_launcher_cannot_build_are_refused() {
    let (code, written, err) = hf_export(&budget("match-200m-s95.toml"), &[]);
    assert_eq!((code, written), (Some(1), None));
    assert!(err.contains("--vocab"), "{err}");
    let (code, v, err) = hf_export(&budget("match-200m-s95.toml"), &["--vocab", "32000"]);
    assert_eq!(code, Some(0), "{err}");
    let v = v.unwrap();
    assert_eq!(v["vocab_size"], 32000);
    assert_eq!(v["max_position_embeddings"], 4096);
    let mut spec = ModelSpec::load(data("hf/olmoe-1b-7b-0924.json")).unwrap();
    spec.model.head_dim = 112;
    spec.model.heads = 12;
    spec.model.kv_heads = 12;
    let e = hf::export(&spec, Family::Olmoe).unwrap_err().to_string();
    assert!(
        e.contains("heads x head_dim") && e.contains("tied = true"),
        "{e}"
    );
}

/// Per family: export, then import, gives the same model and the same counts, and the
/// exported keys are exactly the keys that family's code reads (and smelt's loop keys).
#[test]
fn every_family_round_trips_with_its_own_keys() {
    let configs = [
        (Family::Mixtral, "hf/mixtral-8x7b-v0.1.json"),
        (Family::Qwen2Moe, "hf/qwen1.5-moe-a2.7b.json"),
        (Family::Qwen3Moe, "hf/qwen3-30b-a3b.json"),
        (Family::Olmoe, "hf/olmoe-1b-7b-0924.json"),
        (Family::GraniteMoe, "hf/granite-3.0-3b-a800m.json"),
        (Family::MinimaxM2, "hf/minimax-m2.json"),
        (Family::Llama4Text, "hf/llama-4-maverick-17b-128e-text.json"),
        (Family::Phimoe, "hf/phi-3.5-moe-instruct.json"),
    ];
    for (family, file) in configs {
        let mut spec = ModelSpec::load(data(file)).unwrap();
        spec.model.looping = crate::common::looped(2, 4, 2);
        if let Some(l) = &mut spec.model.looping {
            l.residual_scale = Some(0.5);
        }
        let config = hf::export(&spec, family).unwrap();
        let keys: BTreeSet<&str> = config
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        let read: BTreeSet<&str> = family.keys().into_iter().collect();
        for k in &keys {
            assert!(
                read.contains(k),
                "{family}: exports {k}, which it does not read"
            );
        }
        let unwritten: Vec<&&str> = read
            .difference(&keys)
            // A window is never written (it would be refused); an alias is read, not written;
            // Qwen's dense width only when there are dense layers.
            // Llama-4's NoPE interval only when no_rope_layers is absent (it is written).
            .filter(|k| {
                ![
                    "sliding_window",
                    "num_local_experts",
                    "no_rope_layer_interval",
                ]
                .contains(k)
            })
            .filter(|k| **k != "intermediate_size" || spec.model.dense.is_some())
            .collect();
        assert!(
            unwritten.is_empty(),
            "{family}: reads but does not write {unwritten:?}"
        );
        let back = hf::import(&config.to_string(), spec.workload.clone()).unwrap();
        assert_eq!(back.model, spec.model, "{family}");
        assert_eq!(
            smelt::cost(&back).unwrap().budgets(),
            smelt::cost(&spec).unwrap().budgets()
        );
    }
}

/// Transformers' defaults: a Qwen window is off unless use_sliding_window says so, and
/// newer Qwen3-MoE configs call the expert count num_local_experts.
#[test]
fn qwen_configs_are_read_with_transformers_defaults() {
    let text = crate::common::data_text("hf/qwen1.5-moe-a2.7b.json")
        .replace("\"use_sliding_window\": false,", "");
    assert!(hf::import(&text, ModelSpec::default_workload()).is_ok());
    let text = crate::common::data_text("hf/qwen3-30b-a3b.json")
        .replace("\"num_experts\"", "\"num_local_experts\"");
    let spec = hf::import(&text, ModelSpec::default_workload()).unwrap();
    assert_eq!(spec.model.moe.experts, 128);
}

/// A matched model is named after its budget, as a match.
#[test]
fn a_matched_model_says_it_is_a_match() {
    let v = run_json(&["match", &budget("match-200m-s95.toml"), "--format", "json"]);
    assert_eq!(v["looped"]["name"], "smelt-200m-s95-looped");
}

/// Long work reports progress on standard error (plain lines off a terminal), never on
/// standard output; --quiet silences it. Completions are printed for each shell.
#[test]
fn progress_quiet_and_completions() {
    let grid = budget("smelt-grid.toml");
    let (_, out, err) = run(&["grid", &grid, "--format", "json"]);
    assert!(
        err.contains("matching grid cells (16 steps)") && err.contains("done in"),
        "{err}"
    );
    assert!(serde_json::from_str::<serde_json::Value>(&out).is_ok());
    let (_, _, err) = run(&["grid", &grid, "--format", "json", "--quiet"]);
    assert!(err.is_empty(), "{err}");
    for shell in ["bash", "zsh", "fish", "powershell"] {
        let (code, script, _) = run(&["completions", shell]);
        assert_eq!(code, Some(0));
        assert!(
            script.contains("smelt") && script.contains("match"),
            "{shell}"
        );
    }
}

/// Exit 3 says on standard error which budget broke which tolerance.
#[test]
fn exit_3_names_the_broken_tolerance() {
    let text = format!("{}[tolerance]\nkv = 0.001\n", crate::common::SMALL_BUDGET);
    let path = temp_file("toml", &text);
    let (code, _, err) = run(&["match", path.to_str().unwrap(), "--quiet"]);
    assert_eq!(code, Some(3));
    assert!(
        err.contains("tolerance not met: kv: |-2.50%| > 0.10%"),
        "{err}"
    );
}

/// A grid and a sweep say which cells and values break which tolerance, as `grid` and
/// `sweep` print before exit 3 (the library's `Verdict`, which a launcher logs too).
#[test]
fn grids_and_sweeps_name_what_breaks_a_tolerance() {
    use smelt::search::Verdict;
    use smelt::study::Knob;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("budgets");
    let text = std::fs::read_to_string(dir.join("smelt-grid.toml")).unwrap();
    let tight = format!("{text}\n[tolerance]\nkv = 0.001\n");
    let r = smelt::match_grid(&smelt::GridSpec::from_toml_str(&tight, &dir).unwrap()).unwrap();
    let words = r.broken_tolerances();
    let broken = r
        .cells
        .iter()
        .filter(|c| c.within_tolerance == Some(false))
        .count();
    assert!(broken > 0 && words.len() == broken, "{words:?}");
    assert!(
        words.contains(&"cell 200m s95 (kv)".to_owned()),
        "{words:?}"
    );
    let loose = smelt::GridSpec::from_toml_str(&text, &dir).unwrap();
    assert!(
        smelt::match_grid(&loose)
            .unwrap()
            .broken_tolerances()
            .is_empty()
    );
    let b = smelt::Budget::load(budget("match-200m-s95.toml")).unwrap();
    let s = smelt::sweep(&b, Knob::Span, &(0..=12).collect::<Vec<_>>()).unwrap();
    assert_eq!(s.broken_tolerances(), ["span = 9 (kv)", "span = 11 (kv)"]);
}

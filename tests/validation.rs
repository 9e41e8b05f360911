//! Every validation rule, tested in the library: a bad model, budget or grid file is an
//! error naming the field (as a dotted path) and the rule. The binary's tests only check
//! that such errors reach the user (tests/cli.rs, tests/bad_inputs.rs).

use crate::common;

use std::path::Path;

use common::{BASE_200M as BASE, SMALL_BUDGET as SMALL, budgets_dir};
use smelt::budget::Budget;
use smelt::{Error, GridSpec, ModelSpec};

/// One rule: replace `.0` by `.1` in a valid file; the error names `.2` (an
/// `InvalidSpec` field, or for a parse error a fragment of the message) and contains every
/// one of `.3`.
type Case = (
    &'static str,
    &'static str,
    &'static str,
    &'static [&'static str],
);

/// Checks one case against `result`.
fn check<T: std::fmt::Debug>(result: smelt::Result<T>, case: &Case) {
    let (_, to, field, rule) = case;
    let text = match result {
        Err(Error::InvalidSpec { field: f, rule: r }) => {
            assert!(
                f.contains(field),
                "{to}: field {f:?}, expected {field:?} ({r})"
            );
            r
        }
        Err(Error::Parse { message }) => {
            assert!(
                message.contains(field),
                "{to}: expected {field:?} in: {message}"
            );
            message
        }
        other => panic!("{to}: expected an error on {field}, got {other:?}"),
    };
    for n in *rule {
        assert!(text.contains(n), "{to}: expected {n:?} in: {text}");
    }
}

fn model(text: &str) -> smelt::Result<ModelSpec> {
    ModelSpec::from_toml_str(text).and_then(|s| smelt::cost(&s).map(|_| s))
}

fn budget(text: &str) -> smelt::Result<Budget> {
    let text = text.replace("@BUDGETS@/", "");
    Budget::from_toml_str(&text, Path::new(&budgets_dir()))
}

fn grid(extra: &str) -> smelt::Result<GridSpec> {
    let text = format!("name = \"g\"\n{extra}\n[lattice]\nhidden = {{ step = 64 }}\n");
    GridSpec::from_toml_str(&text, Path::new(&budgets_dir()))
}

const MODEL_RULES: &[Case] = &[
    // Parse errors name the key.
    ("hidden = 1280\n", "", "missing field", &["hidden"]),
    (
        "hidden = 1280",
        "hidden = 1280\nhiden = 3",
        "unknown field",
        &["hiden"],
    ),
    ("head_dim = 80", "head_dim = -80", "head_dim", &["-80"]),
    ("layers = 12", "layers = \"twelve\"", "layers", &[]),
    (
        "layers = 12",
        "layers = 99999999999999999999999",
        "layers",
        &[],
    ),
    (
        "head_dim = 80",
        "head_dim = 80\nattention_bias = \"qk\"",
        "attention_bias",
        &["qkv"],
    ),
    (
        "[workload]",
        "[model.dense]\nlayers = [1]\n[workload]",
        "ffn",
        &[],
    ),
    (
        "mean_doc_len = 991",
        "doc_lengths = [[100]]",
        "doc_lengths",
        &[],
    ),
    (
        "mean_doc_len = 991",
        "doc_lengths = [[10, -1]]",
        "doc_lengths",
        &[],
    ),
    // Sizes are positive and bounded.
    (
        "hidden = 1280",
        "hidden = 0",
        "model.hidden",
        &["at least 1"],
    ),
    (
        "experts = 192",
        "experts = 0",
        "model.moe.experts",
        &["at least 1"],
    ),
    (
        "hidden = 1280",
        "hidden = 1000000000000",
        "model.hidden",
        &["at most 1048576"],
    ),
    // Shapes are consistent.
    (
        "kv_heads = 2",
        "kv_heads = 3",
        "model.kv_heads",
        &["must divide model.heads (16)"],
    ),
    (
        "experts = 192",
        "experts = 4",
        "model.moe.top_k",
        &["not exceed model.moe.experts (4)"],
    ),
    (
        "expert_ffn = 432",
        "expert_ffn = 432\nshared_experts = 1",
        "model.moe.shared_ffn",
        &[],
    ),
    (
        "expert_ffn = 432",
        "expert_ffn = 432\nshared_gate = true",
        "model.moe.shared_gate",
        &["shared_experts"],
    ),
    (
        "[workload]",
        "[counting]\nlm_head = true\n[workload]",
        "model.vocab",
        &["must be positive"],
    ),
    // The loop fits the depth.
    (
        "[workload]",
        "[model.loop]\nfirst = 10\nspan = 6\nrepeats = 2\n[workload]",
        "model.loop",
        &["reaches past the last layer (12)"],
    ),
    (
        "[workload]",
        "[model.loop]\nfirst = 4\nspan = 6\nrepeats = 0\n[workload]",
        "model.loop.repeats",
        &["at least 1"],
    ),
    // Dense layers are real, increasing layers.
    (
        "[workload]",
        "[model.dense]\nlayers = [0]\nffn = 64\n[workload]",
        "model.dense.layers[0]",
        &["1-based", "got 0"],
    ),
    (
        "[workload]",
        "[model.dense]\nlayers = [13]\nffn = 64\n[workload]",
        "model.dense.layers[0]",
        &["model.layers (12)", "got 13"],
    ),
    (
        "[workload]",
        "[model.dense]\nlayers = [3, 3]\nffn = 64\n[workload]",
        "model.dense.layers[1]",
        &["strictly increasing"],
    ),
    (
        "[workload]",
        "[model.dense]\nlayers = []\nffn = 64\n[workload]",
        "model.dense.layers",
        &["at least one"],
    ),
    (
        "[workload]",
        "[model.dense]\nlayers = [1]\nffn = 0\n[workload]",
        "model.dense.ffn",
        &["at least 1"],
    ),
    // The workload has one valid length source.
    (
        "mean_doc_len = 991",
        "mean_doc_len = 5000",
        "workload.mean_doc_len",
        &["not exceed workload.context (4096)"],
    ),
    (
        "mean_doc_len = 991",
        "doc_lengths = []",
        "workload.doc_lengths",
        &["at least one"],
    ),
    (
        "mean_doc_len = 991",
        "doc_lengths = [[0, 3]]",
        "workload.doc_lengths[0]",
        &["length must be at least 1"],
    ),
    (
        "mean_doc_len = 991",
        "doc_lengths = [[10, 3], [5000, 1]]",
        "workload.doc_lengths[1]",
        &["exceeds workload.context (4096)"],
    ),
    (
        "mean_doc_len = 991",
        "doc_lengths = [[10, 0]]",
        "workload.doc_lengths[0]",
        &["count"],
    ),
    (
        "mean_doc_len = 991",
        "doc_lengths = [[4096, 1000000000000000]]",
        "workload.doc_lengths",
        &["absurdly large"],
    ),
    ("mean_doc_len = 991\n", "", "workload", &["mean_doc_len"]),
    // Multi-head latent attention.
    (
        "head_dim = 80",
        "head_dim = 80\n[model.mla]\nkv_lora_rank = 64\nqk_nope_head_dim = 32\nqk_rope_head_dim = 16\nv_head_dim = 32",
        "model.head_dim",
        &["qk_nope_head_dim + qk_rope_head_dim = 48"],
    ),
    (
        "head_dim = 80",
        "head_dim = 48\n[model.mla]\nkv_lora_rank = 64\nqk_nope_head_dim = 32\nqk_rope_head_dim = 16\nv_head_dim = 32",
        "model.kv_heads",
        &["must equal model.heads (16)"],
    ),
    (
        "kv_heads = 2\nhead_dim = 80",
        "kv_heads = 16\nhead_dim = 48\nattention_bias = \"qkv\"\n[model.mla]\nkv_lora_rank = 64\nqk_nope_head_dim = 32\nqk_rope_head_dim = 16\nv_head_dim = 32",
        "model.attention_bias",
        &["[model.mla]"],
    ),
    (
        "kv_heads = 2\nhead_dim = 80",
        "kv_heads = 16\nhead_dim = 48\n[model.mla]\nkv_lora_rank = 0\nqk_nope_head_dim = 32\nqk_rope_head_dim = 16\nv_head_dim = 32",
        "model.mla.kv_lora_rank",
        &["at least 1"],
    ),
    // Windowed layers, MTP modules, the KV budget.
    (
        "head_dim = 80",
        "head_dim = 80\n[model.window]\nkind = \"sliding\"\nsize = 0\nlayers = [1]",
        "model.window.size",
        &["at least 1"],
    ),
    (
        "head_dim = 80",
        "head_dim = 80\n[model.window]\nkind = \"sliding\"\nsize = 128\nlayers = [2, 13]",
        "model.window.layers[1]",
        &["between 1 and model.layers (12)"],
    ),
    (
        "head_dim = 80",
        "head_dim = 80\n[model.window]\nkind = \"sliding\"\nsize = 128\nlayers = []",
        "model.window.layers",
        &["omit [model.window]"],
    ),
    (
        "head_dim = 80",
        "head_dim = 80\n[model.window]\nkind = \"tumbling\"\nsize = 128\nlayers = [1]",
        "kind",
        &["tumbling"],
    ),
    (
        "head_dim = 80",
        "head_dim = 80\nmtp_layers = 99999999",
        "model.mtp_layers",
        &["at most"],
    ),
    (
        "mean_doc_len = 991",
        "mean_doc_len = 991\n[counting]\nkv = \"sometimes\"",
        "kv",
        &["sometimes"],
    ),
    (
        "mean_doc_len = 991",
        "mean_doc_len = 991\ndoc_lengths = [[10, 1]]",
        "workload",
        &["not both"],
    ),
    // Gemma 4's pieces.
    (
        "head_dim = 80",
        "head_dim = 80\n[model.full_attention]\nkv_heads = 3\nhead_dim = 160",
        "model.full_attention.kv_heads",
        &["must divide model.heads (16)"],
    ),
    (
        "head_dim = 80",
        "head_dim = 80\n[model.full_attention]\nkv_heads = 0\nhead_dim = 160",
        "model.full_attention.kv_heads",
        &["at least 1"],
    ),
    (
        "head_dim = 80",
        "head_dim = 80\n[model.full_attention]\nkv_heads = 2\nhead_dim = 0",
        "model.full_attention.head_dim",
        &["at least 1"],
    ),
    (
        "head_dim = 80",
        "head_dim = 80\n[model.full_attention]\nkv_head = 2\nhead_dim = 160",
        "unknown field",
        &["kv_head"],
    ),
    (
        "head_dim = 80",
        "head_dim = 80\nattention_gate = true\n[model.full_attention]\nkv_heads = 2\nhead_dim = 160",
        "model.full_attention",
        &["[model.recurrent] or model.attention_gate", "no family"],
    ),
    (
        "head_dim = 80",
        "head_dim = 80\n[model.window]\nkind = \"sliding\"\nsize = 128\nlayers = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]\n[model.full_attention]\nkv_heads = 2\nhead_dim = 160",
        "model.full_attention",
        &["the model has none", "omit it"],
    ),
    (
        "expert_ffn = 432",
        "expert_ffn = 432\nbranch_norms = true",
        "model.moe.branch_norms",
        &["model.moe.shared_experts must be at least 1"],
    ),
    (
        "head_dim = 80",
        "head_dim = 80\nmtp_layers = 1\npost_norms = true",
        "model.mtp_layers",
        &["model.post_norms"],
    ),
    (
        "expert_ffn = 432",
        "expert_ffn = 432\nactivation = \"geglu\"",
        "activation",
        &["geglu"],
    ),
];

#[test]
fn model_rules() {
    for case in MODEL_RULES {
        check(model(&BASE.replace(case.0, case.1)), case);
    }
}

#[test]
fn counts_that_overflow_are_errors() {
    let text = BASE
        .replace("hidden = 1280", "hidden = 1048576")
        .replace("expert_ffn = 432", "expert_ffn = 1048576")
        .replace("experts = 192", "experts = 1048576");
    assert!(matches!(model(&text), Err(Error::Overflow { .. })));
}

/// An inline Baseline whose kv heads do not divide its heads.
const INLINE_BAD: &str = "[baseline]\n[baseline.model]\nlayers = 12\nhidden = 1280\nheads = 16\nkv_heads = 3\nhead_dim = 80\n[baseline.model.moe]\nexperts = 192\ntop_k = 8\nexpert_ffn = 432\n[baseline.workload]\ncontext = 4096\nmean_doc_len = 991\n[recipe]";

const BUDGET_RULES: &[Case] = &[
    // The recipe.
    (
        "span = \"half\"",
        "span = 13",
        "recipe.span",
        &["do not fit in 12 layers"],
    ),
    (
        "span = \"half\"",
        "span = \"most\"",
        "recipe.span",
        &["\"half\""],
    ),
    ("repeats = 2", "repeats = 0", "recipe.repeats", &[]),
    (
        "repeats = 2",
        "repeats = 2\nfirst = 10",
        "recipe.first",
        &["does not fit"],
    ),
    (
        "repeats = 2",
        "repeats = 2\nfirst = 2\nplacement = \"middle\"",
        "recipe.first",
        &["not both"],
    ),
    (
        "repeats = 2",
        "repeats = 2\nplacement = \"left\"",
        "recipe.placement",
        &[],
    ),
    // The lattice.
    (
        "min = 960, max = 1152",
        "min = 1152, max = 960",
        "lattice.hidden",
        &["must not exceed max"],
    ),
    (
        "hidden = { step = 32,",
        "hidden = { step = 0,",
        "lattice.hidden.step",
        &[],
    ),
    (
        "[lattice]",
        "[lattice]\nexpert_ffn = { ratio = \"1/0\" }",
        "lattice.expert_ffn.ratio",
        &[],
    ),
    (
        "[lattice]",
        "[lattice]\nexpert_ffn = { ratio = \"1/3\", step = 16 }",
        "lattice.expert_ffn",
        &["not both"],
    ),
    (
        "[lattice]",
        "[lattice]\nheads = { tied = true, min = 2 }",
        "lattice.heads",
        &[],
    ),
    (
        "[lattice]",
        "[lattice]\nkv_lora_rank = { step = 32 }",
        "lattice.kv_lora_rank",
        &["no [model.mla]"],
    ),
    (
        "[lattice]",
        "[lattice.recurrent]\nheads = [32]\n[lattice]",
        "lattice.recurrent",
        &["no [model.recurrent]"],
    ),
    (
        "q_width = { min = 0.75,",
        "q_width = { min = 1.5,",
        "lattice.q_width",
        &[],
    ),
    (
        "experts = { step = 8, min = 8, max = 512 }",
        "experts = { step = 1, min = 1, max = 4 }",
        "lattice.experts",
        &["below the Baseline's top_k (8)"],
    ),
    (
        "[lattice]",
        "[lattice]\nhiden = { step = 4 }",
        "unknown field",
        &["hiden"],
    ),
    (
        "hidden = { step = 32,",
        "hidden = { step = -32,",
        "step",
        &["-32"],
    ),
    // The objective, the tolerance, the Baseline, the mode.
    (
        "[lattice]",
        "[objective]\nweights = { kv = 0 }\n[lattice]",
        "objective.weights.kv",
        &[],
    ),
    (
        "[lattice]",
        "[tolerance]\nflops = -0.1\n[lattice]",
        "tolerance.flops",
        &[],
    ),
    (
        "base-200m-s95.toml",
        "nope.toml",
        "baseline",
        &["cannot read model file"],
    ),
    (
        "baseline = \"@BUDGETS@/base-200m-s95.toml\"\n",
        "",
        "baseline",
        &["missing"],
    ),
    (
        "name = \"small\"",
        "name = \"small\"\nmode = \"sideways\"",
        "mode",
        &[],
    ),
    (
        "name = \"small\"",
        "name = \"small\"\ntemplate = \"x\"",
        "template",
        &["grid file"],
    ),
    (
        "baseline = \"@BUDGETS@/base-200m-s95.toml\"\n[recipe]",
        INLINE_BAD,
        "baseline",
        &["inline Baseline: model.kv_heads: must divide"],
    ),
];

#[test]
fn budget_rules() {
    for case in BUDGET_RULES {
        assert!(SMALL.contains(case.0), "{}", case.0);
        check(budget(&SMALL.replace(case.0, case.1)), case);
    }
}

/// `[lattice.recurrent]` of a hybrid Baseline: each rule names the knob (the Qwen3.5-style
/// budget's Gated DeltaNet layers, the Nemotron-style budget's Mamba-2 layers).
#[test]
fn recurrent_lattice_rules() {
    let gdn = std::fs::read_to_string(common::budget("match-qwen3.5-style.toml")).unwrap();
    let mamba =
        std::fs::read_to_string(common::budget("match-nemotron-3-nano-style.toml")).unwrap();
    let cases: [(&str, Case); 11] = [
        (
            &gdn,
            (
                "",
                "heads = [16]",
                "lattice.recurrent.heads",
                &[
                    "not a knob of the Baseline's gated_deltanet layers",
                    "value_heads",
                ],
            ),
        ),
        (
            &mamba,
            (
                "",
                "value_heads = [16]",
                "lattice.recurrent.value_heads",
                &[
                    "not a knob of the Baseline's mamba2 layers",
                    "heads, head_dim, state",
                ],
            ),
        ),
        (
            &gdn,
            (
                "",
                "key_heads = [16]\nvalue_heads = [24]",
                "lattice.recurrent.key_heads",
                &["16 divides none of the value_heads [24]"],
            ),
        ),
        (
            &mamba,
            (
                "",
                "heads = [56, 60]",
                "lattice.recurrent.heads",
                &["60 is not a multiple of the Baseline's groups (8)"],
            ),
        ),
        (
            &gdn,
            (
                "",
                "key_head_dim = [0]",
                "lattice.recurrent.key_head_dim",
                &["between 1 and"],
            ),
        ),
        (
            &mamba,
            (
                "",
                "state = []",
                "lattice.recurrent.state",
                &["1 to 64 values"],
            ),
        ),
        (
            &mamba,
            (
                "",
                "head_dim = [1048577]",
                "lattice.recurrent.head_dim",
                &["between 1 and 1048576"],
            ),
        ),
        (
            &gdn,
            (
                "",
                "value_heads = [16, 32, 48, 64, 80, 96, 112, 128]\nkey_head_dim = [8, 16, 24, 32, 40, 48, 56, 64]\nvalue_head_dim = [8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128]\nkey_heads = [1, 2, 4, 8, 16]",
                "lattice.recurrent",
                &["over the limit of 4096"],
            ),
        ),
        (
            &gdn,
            ("", "valu_heads = [1]", "unknown field", &["valu_heads"]),
        ),
        (
            &gdn,
            (
                "",
                "key_heads = [16, 64]",
                "lattice.recurrent.key_heads",
                &["64 divides none of the value_heads [32] (the Baseline's"],
            ),
        ),
        (
            &gdn,
            (
                "",
                "value_heads = [32, 40]",
                "lattice.recurrent.value_heads",
                &["40 is a multiple of none of the key_heads [16]"],
            ),
        ),
    ];
    // The file's own [lattice.recurrent] (up to the blank line after it) gives way to the
    // case's.
    let without_knobs = |text: &str| match text.find("\n[lattice.recurrent]\n") {
        Some(i) => {
            let end = text[i..].find("\n\n").map_or(text.len(), |j| i + j);
            format!("{}{}", &text[..i], &text[end..])
        }
        None => text.to_owned(),
    };
    for (text, case) in &cases {
        let text = format!("{}\n[lattice.recurrent]\n{}\n", without_knobs(text), case.1);
        check(
            Budget::from_toml_str(&text, Path::new(&budgets_dir())),
            case,
        );
    }
}

#[test]
fn grid_rules() {
    let template = "template = \"base-{scale}-{sparsity}.toml\"\nsparsities = [\"s95\"]\n";
    let cases: [(String, Case); 5] = [
        (
            format!(
                "{template}scales = [\"200m\"]\n[[cells]]\nscale = \"x\"\nsparsity = \"y\"\nbaseline = \"a.toml\""
            ),
            ("", "template and cells", "cells", &["not both"]),
        ),
        (
            format!("{template}scales = [\"300m\"]"),
            (
                "",
                "a missing Baseline",
                "cells[0] (300m, s95)",
                &["cannot read"],
            ),
        ),
        (
            "template = \"base.toml\"\nscales = [\"300m\"]\nsparsities = [\"s95\"]".into(),
            ("", "a template without names", "template", &["{scale}"]),
        ),
        (
            "baseline = \"base-200m-s95.toml\"".into(),
            ("", "a budget key", "baseline", &["budget file"]),
        ),
        (String::new(), ("", "no cells", "cells", &[])),
    ];
    for (text, case) in &cases {
        check(grid(text), case);
    }
}

/// The rules of budgets whose Baseline is an MLA or a windowed model (the configs of
/// tests/data/hf): an MLA lattice takes heads and latent ranks only; the looped model keeps
/// the Baseline's windowed layers.
#[test]
fn mla_and_window_budget_rules() {
    let hf = format!("{}/tests/data/hf", env!("CARGO_MANIFEST_DIR"));
    let parse = |baseline: &str, extra: &str| {
        let text = format!("baseline = \"{hf}/{baseline}\"\n{extra}");
        Budget::from_toml_str(&text, Path::new("."))
    };
    let cases: [(&str, &str, Case); 4] = [
        (
            "deepseek-v3.json",
            "[lattice]\nhead_dim = { step = 8 }",
            ("", "head_dim", "lattice.head_dim", &["MLA Baseline"]),
        ),
        (
            "deepseek-v3.json",
            "[lattice]\ngqa = { max = 8 }",
            ("", "gqa", "lattice.gqa", &["kv_heads = heads"]),
        ),
        (
            "deepseek-v3.json",
            "[lattice]\nkv_lora_rank = { step = 0 }",
            ("", "step 0", "lattice.kv_lora_rank.step", &["at least 1"]),
        ),
        (
            "gpt-oss-120b.json",
            "[recipe]\nlayers = 30\nspan = 4\nrepeats = 2",
            ("", "depth 30", "recipe.layers", &["windowed layer 35"]),
        ),
    ];
    for (baseline, extra, case) in &cases {
        check(parse(baseline, extra), case);
    }
    let ok = parse(
        "deepseek-v3.json",
        "[lattice]\nkv_lora_rank = { step = 64, max = 1024 }\nheads = { min = 64, max = 192 }",
    )
    .unwrap();
    let ranks = ok.lattice().kv_lora_rank.unwrap();
    assert_eq!((ranks.min, ranks.max, ranks.step), (32, 1024, 64));
}

/// Every `Budget::with_*` that can make a budget invalid goes through the checks of
/// `Budget::new`: a lattice of one kind of attention given to a Baseline of the other is
/// refused by `with_lattice` as it is in a file.
#[test]
fn with_lattice_checks_the_lattice_against_the_baseline() {
    let hf = format!("{}/tests/data/hf", env!("CARGO_MANIFEST_DIR"));
    let mla = Budget::from_toml_str(
        &format!("baseline = \"{hf}/deepseek-v3.json\"\n[lattice]\n"),
        Path::new("."),
    )
    .unwrap();
    let gqa = budget(SMALL).unwrap();
    let case: Case = ("", "GQA lattice", "lattice.kv_lora_rank", &["missing"]);
    check(mla.with_lattice(gqa.lattice().clone()), &case);
    let case: Case = (
        "",
        "MLA lattice",
        "lattice.kv_lora_rank",
        &["no [model.mla]"],
    );
    check(gqa.with_lattice(mla.lattice().clone()), &case);
    assert!(gqa.with_lattice(gqa.lattice().clone()).is_ok());
}

/// The weights and tolerances are read per budget by key: an unknown key is refused,
/// a key left out is the default (a weight of 1, no tolerance).
#[test]
fn weights_and_tolerances_are_read_by_budget_key() {
    let case: Case = (
        "",
        "flop",
        "unknown field",
        &["flop", "flops", "params", "kv"],
    );
    let text = SMALL.replace(
        "[lattice]",
        "[objective]\nweights = { flop = 2 }\n[lattice]",
    );
    check(budget(&text), &case);
    let text = SMALL.replace("[lattice]", "[tolerance]\nparam = 0.1\n[lattice]");
    check(budget(&text), &("", "param", "unknown field", &["param"]));
    let text = SMALL.replace(
        "[lattice]",
        "[objective]\nweights = { kv = 2 }\n[tolerance]\nparams = 0.1\n[lattice]",
    );
    let b = budget(&text).unwrap();
    assert_eq!(
        (b.weights().flops, b.weights().params, b.weights().kv),
        (1.0, 1.0, 2.0)
    );
    assert_eq!(
        (b.tolerance().flops, b.tolerance().params, b.tolerance().kv),
        (None, Some(0.1), None)
    );
}

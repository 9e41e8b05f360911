//! Activation memory end to end: the guide's figures for the 200M / S≈95% cell of the
//! paper-like grid, recomputed from the grid's match under every policy; and the optional
//! `activations` budget weighed in a budget file.

use smelt::{ActivationPolicy, GridSpec, ModelSpec, cost};

/// Digits in groups of three, as the guide's table writes them.
fn grouped(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `spec` with its activations budget under `policy`.
fn under(spec: &ModelSpec, policy: ActivationPolicy) -> ModelSpec {
    let mut s = spec.clone();
    s.counting.activations = policy;
    s
}

/// The guide's table ("Training memory") of the 200M / S95 cell under each policy, and the
/// README's, are what smelt computes.
#[test]
fn readme_shows_the_200m_cell_under_every_policy() {
    let grid = GridSpec::load("budgets/smelt-grid.toml").unwrap();
    let report = smelt::match_grid(&grid).unwrap();
    let cell = report
        .cells
        .iter()
        .find(|c| c.scale == "200m" && c.sparsity_label == "s95")
        .expect("the grid has a 200m s95 cell");
    let guide = std::fs::read_to_string("docs/guide.md").unwrap();
    let readme = std::fs::read_to_string("README.md").unwrap();
    let context = cell.baseline.workload.context;
    let policies = ActivationPolicy::UNFUSED
        .iter()
        .chain(ActivationPolicy::MEGATRON)
        .copied();
    let mut missing = Vec::new();
    for policy in policies {
        let bytes = |spec: &ModelSpec| {
            cost(&under(spec, policy))
                .unwrap()
                .budgets()
                .activations
                .as_integer()
                .expect("whole bytes for a mean_doc_len workload")
        };
        let (b, l) = (bytes(&cell.baseline), bytes(&cell.looped));
        let gib = |x: u64| format!("{:.2}", (x * context) as f64 / f64::from(1u32 << 30));
        let row = format!(
            "| `{}` | {} | {} | {:.4} | {} → {} GiB |",
            policy.as_str(),
            grouped(b),
            grouped(l),
            l as f64 / b as f64,
            gib(b),
            gib(l)
        );
        if !guide.contains(&row) {
            missing.push(row);
        }
        // The README's table shows five of them, each row ending with the same figures.
        let tail = format!(
            "| {} | {} | {:.4} |",
            grouped(b),
            grouped(l),
            l as f64 / b as f64
        );
        let named = format!("| `{}`", policy.as_str());
        let shown = [
            ActivationPolicy::Megatron,
            ActivationPolicy::MegatronSelective,
            ActivationPolicy::MegatronFull,
            ActivationPolicy::Eager,
            ActivationPolicy::Flash,
        ];
        if shown.contains(&policy)
            && !readme
                .lines()
                .any(|line| line.starts_with(&named) && line.ends_with(&tail))
        {
            missing.push(format!("README: {named} ... {tail}"));
        }
        if policy == ActivationPolicy::default() {
            // The grid's ratio is the default policy's.
            assert_eq!(cell.ratios.activations, l as f64 / b as f64);
        }
    }
    assert!(
        missing.is_empty(),
        "the guide lacks the rows\n{}",
        missing.join("\n")
    );
}

/// With `activations` weighed, the match trades the other budgets for it: its activation
/// residual shrinks, and yet no point of the paper-like lattice holds all four budgets
/// within 3% (what the guide says).
#[test]
fn weighing_activations_moves_the_match() {
    let text = std::fs::read_to_string("budgets/match-200m-s95.toml").unwrap();
    let weighed = text.replace(
        "[tolerance]",
        "[objective.weights]\nactivations = 1\n\n[tolerance]",
    );
    let dir = std::path::Path::new("budgets");
    let plain = smelt::Budget::from_toml_str(&text, dir).unwrap();
    let with = smelt::Budget::from_toml_str(&weighed, dir).unwrap();
    let (a, b) = (
        smelt::match_budget(&plain, 1).unwrap(),
        smelt::match_budget(&with, 1).unwrap(),
    );
    assert_eq!(plain.weights().activations, 0.0);
    assert_eq!(with.weights().activations, 1.0);
    assert!(b.residuals.activations.abs() < a.residuals.activations.abs());
    assert!(b.residuals.max_abs() > 0.03, "{:?}", b.residuals);
}

/// Each budget says what the objective does with it for a model: the 200M Baseline counts
/// its activations (reported at weight 0, matched when weighed); a hybrid does not count
/// them, whatever the weight, and every report shows them as not counted.
#[test]
fn each_budget_carries_its_status() {
    use smelt::cost::{BudgetKind, Exactness, PerBudget, TermStatus};
    let base_spec = ModelSpec::load("budgets/base-200m-s95.toml").unwrap();
    let base = base_spec.model.clone();
    let defaults = PerBudget::from_fn(BudgetKind::default_weight);
    let s = PerBudget::statuses(&base, &base_spec.counting, &defaults);
    assert_eq!(s.flops, TermStatus::Matched);
    assert_eq!(s.activations, TermStatus::Reported);
    let weighed = PerBudget::statuses(&base, &base_spec.counting, &PerBudget::splat(1.0));
    assert_eq!(weighed.activations, TermStatus::Matched);
    let hybrid = smelt::budget::Budget::load("budgets/match-qwen3.5-style.toml").unwrap();
    let model = &hybrid.baseline().model;
    let s = PerBudget::statuses(model, &hybrid.baseline().counting, &PerBudget::splat(1.0));
    assert_eq!(s.activations, TermStatus::NotCounted);
    assert_eq!(s.kv, TermStatus::Matched);
    assert!(
        BudgetKind::ALL
            .iter()
            .all(|k| k.exactness() == Exactness::Exact)
    );
    // What the reports show for it.
    let (code, out, _) =
        crate::common::run(&["match", "budgets/match-qwen3.5-style.toml", "--top", "2"]);
    assert!(code == Some(0) || code == Some(3));
    assert!(out.contains("not counted"), "{out}");
}

/// DeepSeek-V3.2's and GLM-5's published configs: the import states DeepSeek-V3's router
/// (their `TopkRouter` is its, with their config classes' defaults); the Transformers
/// policies count each model as they count it without its sparse attention indexer (which
/// runs without gradient and saves nothing: python/tests/test_saved_tensors.py holds both
/// to PyTorch), but GLM-5 under SDPA: its query/key heads are as wide as its value heads,
/// so SDPA runs PyTorch's flash kernel, which keeps the indexer's mask (`b·T²` per sequence
/// and layer) and the log-sum-exp, and which without the indexer (no mask) is refused. The
/// Megatron policy still refuses the indexer, and an export writes the router keys the
/// import reads back.
#[test]
fn the_indexer_saves_nothing_under_the_transformers_policies() {
    use smelt::hf::{self, Family};
    use smelt::model::{Router, RouterGroups};
    let families = [
        ("deepseek-v3.2-exp", Family::DeepseekV32, (8, 4)),
        ("glm-5", Family::GlmMoeDsa, (1, 1)),
    ];
    for (name, family, (groups, topk_groups)) in families {
        let spec = ModelSpec::load(format!("tests/data/hf/{name}.json")).unwrap();
        assert!(spec.model.indexer.is_some(), "{name}");
        assert_eq!(
            spec.model.moe.router,
            Some(Router::SigmoidGroupedRenormalisedFp32),
            "{name}"
        );
        let want = RouterGroups {
            groups,
            topk_groups,
        };
        assert_eq!(spec.model.moe.router_groups, Some(want), "{name}");
        let mut plain = spec.clone();
        plain.model.indexer = None;
        let mla = spec.model.mla.clone().unwrap();
        let flash = mla.qk_nope_head_dim + mla.qk_rope_head_dim == mla.v_head_dim;
        assert_eq!(flash, family == Family::GlmMoeDsa, "{name}");
        for policy in [
            ActivationPolicy::TransformersEager,
            ActivationPolicy::TransformersSdpa,
        ] {
            for bytes in [2, 4] {
                let entry = |s: &ModelSpec| {
                    let mut s = under(s, policy);
                    s.counting.activation_bytes = bytes;
                    let report = cost(&s)?.activations;
                    assert_eq!(report.refused, None, "{name} {policy}");
                    let entry = report.policies.into_iter().find(|p| p.policy == policy);
                    Ok::<_, smelt::Error>(entry.expect("the policy counts the model"))
                };
                let counted = entry(&spec).unwrap();
                assert!(counted.per_token.as_f64() > 0.0, "{name} {policy}");
                if !(flash && policy == ActivationPolicy::TransformersSdpa) {
                    assert_eq!(counted, entry(&plain).unwrap(), "{name} {policy} {bytes}");
                    continue;
                }
                let err = entry(&plain).unwrap_err().to_string();
                assert!(err.starts_with("model.mla.v_head_dim"), "{err}");
                // Per token and layer: the float32 log-sum-exp per head, the mask's row.
                let (a, t) = (spec.model.heads, spec.workload.context);
                let scores = spec.model.layers * (4 * a + bytes * t);
                let want = smelt::ActivationBytes::from_int(scores);
                assert_eq!(counted.breakdown.scores, want, "{name} {bytes}");
            }
        }
        let megatron = cost(&under(&spec, ActivationPolicy::Megatron)).unwrap();
        let refused = megatron.activations.refused.unwrap_or_default();
        assert!(refused.contains("model.indexer"), "{name}: {refused}");
        let out = hf::export(&spec, family).unwrap();
        assert_eq!(
            (&out["n_group"], &out["topk_group"], &out["norm_topk_prob"]),
            (&groups.into(), &topk_groups.into(), &true.into()),
            "{name}"
        );
        let back = hf::import(&out.to_string(), ModelSpec::default_workload()).unwrap();
        assert_eq!(back.model, spec.model, "{name}");
    }
}

/// Gemma 4's tiny model (python/tests/test_gemma4.py's config as smelt imports it: sliding
/// layers of a window of 4, full layers of their own shape with values from the keys, the
/// dense MLP beside the experts) under the Transformers policies: the bytes PyTorch saves
/// (python/tests/test_saved_tensors.py measures them), exactly. The unfused counts and the
/// Megatron-Core policy do not model Gemma 4's pieces and refuse them by name.
#[test]
fn gemma4_counts_what_pytorch_saves_under_the_transformers_policies() {
    let model = |policy: &str, bytes: u64, t: u64| {
        ModelSpec::from_toml_str(&format!(
            r#"
            [model]
            layers = 4
            hidden = 64
            heads = 4
            kv_heads = 2
            head_dim = 16
            vocab = 128
            tie_embeddings = true
            qk_norm = "per_head"
            v_norm = true
            post_norms = true
            [model.window]
            kind = "sliding"
            size = 4
            layers = [1, 3]
            [model.full_attention]
            kv_heads = 1
            head_dim = 32
            k_eq_v = true
            [model.moe]
            experts = 4
            top_k = 2
            expert_ffn = 32
            shared_experts = 1
            shared_ffn = 48
            activation = "gelu_tanh"
            router_scale = true
            branch_norms = true
            [workload]
            context = {t}
            mean_doc_len = {t}
            attention = "causal"
            kv_dtype_bytes = 2
            [counting]
            activations = "{policy}"
            activation_bytes = {bytes}
            "#
        ))
        .unwrap()
    };
    // PyTorch's bytes (policy, activation bytes, T): the stock rows of the saved-tensor test.
    let measured = [
        ("transformers-eager", 4, 48, 2_112_768),
        ("transformers-eager", 2, 80, 3_184_896),
        ("transformers-sdpa", 4, 80, 3_173_184),
        ("transformers-sdpa", 2, 48, 1_511_744),
    ];
    only_the_transformers_policies_count(model, &measured, "model.full_attention");
}

/// Nemotron-H's tiny model (python/tests/test_mamba2.py's config as smelt imports it:
/// `M*EM-E`, Mamba-2 layers with chunks of 8, relu2 MLPs) under the Transformers policies:
/// the bytes PyTorch saves (python/tests/test_saved_tensors.py measures them), exactly. The
/// unfused counts and the Megatron-Core policy do not model its Mamba-2 layers and refuse
/// them by name.
#[test]
fn nemotron_h_counts_what_pytorch_saves_under_the_transformers_policies() {
    let model = |policy: &str, bytes: u64, t: u64| {
        ModelSpec::from_toml_str(&format!(
            r#"
            [model]
            layers = 6
            hidden = 64
            heads = 4
            kv_heads = 2
            head_dim = 16
            vocab = 128
            [model.recurrent]
            layers = [1, 4]
            [model.recurrent.mixer.mamba2]
            heads = 4
            head_dim = 8
            state = 8
            groups = 2
            conv_kernel = 4
            chunk = 8
            conv_bias = true
            [model.blocks]
            mixer_only = [1, 2, 4]
            ffn_only = [3, 5, 6]
            [model.moe]
            experts = 4
            top_k = 2
            expert_ffn = 32
            shared_experts = 1
            shared_ffn = 48
            activation = "relu2"
            [model.dense]
            layers = [5]
            ffn = 40
            [workload]
            context = {t}
            mean_doc_len = {t}
            attention = "causal"
            kv_dtype_bytes = 2
            [counting]
            activations = "{policy}"
            activation_bytes = {bytes}
            "#
        ))
        .unwrap()
    };
    // PyTorch's bytes (policy, activation bytes, T): the stock rows of the saved-tensor test.
    let measured = [
        ("transformers-eager", 4, 48, 903_076),
        ("transformers-eager", 2, 80, 1_308_356),
        ("transformers-sdpa", 4, 80, 1_343_972),
        ("transformers-sdpa", 2, 48, 641_732),
    ];
    only_the_transformers_policies_count(model, &measured, "model.recurrent");
}

/// Each `measured` row (policy, activation bytes, T, PyTorch's bytes) is what `model` of
/// that policy counts, the Transformers policy alone reported; the unfused counts and the
/// Megatron-Core policy refuse the model naming `field`.
fn only_the_transformers_policies_count(
    model: impl Fn(&str, u64, u64) -> ModelSpec,
    measured: &[(&str, u64, u64, u64)],
    field: &str,
) {
    for &(policy, bytes, t, want) in measured {
        let report = cost(&model(policy, bytes, t)).unwrap().activations;
        assert_eq!(report.refused, None, "{policy}");
        let [entry] = report.policies.as_slice() else {
            panic!("{policy}: only the Transformers policy counts the model: {report:?}");
        };
        assert_eq!(entry.policy.as_str(), policy);
        assert_eq!(
            entry.at_context,
            smelt::ActivationBytes::from_int(want),
            "{policy}"
        );
    }
    for policy in ["unfused-eager", "megatron"] {
        let report = cost(&model(policy, 2, 48)).unwrap().activations;
        let refused = report.refused.unwrap_or_default();
        assert!(
            refused.starts_with(&format!("{field}: the activation memory does not model")),
            "{policy}: {refused}"
        );
        assert!(report.policies.is_empty(), "{policy}");
    }
}

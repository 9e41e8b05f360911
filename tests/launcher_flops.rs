//! Launcher conventions and MFU: each convention's count against a hand computation
//! transcribed from its source (Megatron-LM's `transformer_flops`, torchtitan's
//! `get_moe_model_nparams_and_flops`, `6N`, PaLM's `6N + 12LHQT`) on three public
//! `config.json` files and the 200M Baseline, the loop seen by none of them, and `smelt mfu`
//! with its errors.

use serde_json::Value;
use smelt::ModelSpec;
use smelt::conventions::{Convention, launcher_flops, pair, training_flops};

use crate::common::{budget, data, run, run_json};

const S: u128 = 4096;
const CONFIGS: [&str; 3] = [
    "hf/mixtral-8x7b-v0.1.json",
    "hf/qwen1.5-moe-a2.7b.json",
    "hf/deepseek-v3.json",
];

/// A `config.json`'s fields, read by hand.
struct Hf(Value);

impl Hf {
    fn load(name: &str) -> Self {
        let text = std::fs::read_to_string(data(name)).unwrap();
        Hf(serde_json::from_str(&text).unwrap())
    }
    fn get(&self, key: &str) -> u128 {
        self.0[key].as_u64().map_or(0, u128::from)
    }
    fn has(&self, key: &str) -> bool {
        self.get(key) > 0
    }
    fn h(&self) -> u128 {
        self.get("hidden_size")
    }
    fn heads(&self) -> u128 {
        self.get("num_attention_heads")
    }
    fn head_dim(&self) -> u128 {
        match self.get("head_dim") {
            0 => self.h() / self.heads(),
            d => d,
        }
    }
    fn mla(&self) -> bool {
        self.has("kv_lora_rank")
    }
    /// The routed experts' SwiGLU width.
    fn moe_ffn(&self) -> u128 {
        match self.get("moe_intermediate_size") {
            0 => self.get("intermediate_size"),
            f => f,
        }
    }
    /// The shared experts' total width (`moe_shared_expert_intermediate_size`).
    fn shared(&self) -> u128 {
        self.get("shared_expert_intermediate_size") + self.get("n_shared_experts") * self.moe_ffn()
    }
    fn experts(&self) -> u128 {
        self.get("num_local_experts") + self.get("num_experts") + self.get("n_routed_experts")
    }
    /// `(MoE, dense)` layers (DeepSeek's `first_k_dense_replace`).
    fn layers(&self) -> (u128, u128) {
        let dense = self.get("first_k_dense_replace");
        (self.get("num_hidden_layers") - dense, dense)
    }
    /// Query/key plus value width of a head.
    fn qk_plus_v(&self) -> u128 {
        match self.mla() {
            true => {
                self.get("qk_nope_head_dim") + self.get("qk_rope_head_dim") + self.get("v_head_dim")
            }
            false => 2 * self.head_dim(),
        }
    }
}

/// Megatron-LM `num_floating_point_operations` (d98e8a6, `transformer_flops`), divided by
/// the BSHD batch's `batch * seq_length` tokens.
fn megatron(c: &Hf, mtp: u128) -> u128 {
    let (h, heads) = (c.h(), c.heads());
    let (moe, dense) = c.layers();
    let (num_moe, num_layers) = (moe + mtp, moe + dense + mtp); // the last layer is MoE
    let mlp = 3
        * 2
        * h
        * (c.get("intermediate_size") * 3 * dense
            + c.moe_ffn() * c.get("num_experts_per_tok") * 3 * num_moe
            + c.shared() * 3 * num_moe);
    let (attn, core) = if c.mla() {
        let (nope, rope, v) = (
            c.get("qk_nope_head_dim"),
            c.get("qk_rope_head_dim"),
            c.get("v_head_dim"),
        );
        let q_term = match c.get("q_lora_rank") {
            0 => h * heads * (nope + rope),
            r => r * (h + heads * (nope + rope) + 1),
        };
        let r = c.get("kv_lora_rank");
        let attn = 6 * (q_term + r * (h + heads * (nope + v) + 1) + h * rope + heads * v * h);
        // 3 * 2 * (n (nope + rope) / 2 + n v / 2), times s^2 / s.
        (attn, 3 * heads * (nope + rope + v) * S)
    } else {
        let q = c.head_dim() * heads;
        let kv = c.head_dim() * c.get("num_key_value_heads");
        (6 * (h * (q + kv + kv) + q * h), 3 * 2 * q / 2 * 2 * S)
    };
    let padded = c.get("vocab_size").div_ceil(128) * 128;
    mlp + (attn + core) * num_layers + 6 * mtp * (3 * h + 2 * h * h) + 6 * h * padded * (mtp + 1)
}

/// Active non-embedding parameters, by hand: attention, norms, router (and its bias),
/// `top_k` routed experts, the shared experts and their gate, dense FFNs, the final norm.
fn active_params(c: &Hf) -> u128 {
    let (h, heads) = (c.h(), c.heads());
    let (moe, dense) = c.layers();
    let attention = if c.mla() {
        let (ql, kl) = (c.get("q_lora_rank"), c.get("kv_lora_rank"));
        let (nope, rope, v) = (
            c.get("qk_nope_head_dim"),
            c.get("qk_rope_head_dim"),
            c.get("v_head_dim"),
        );
        h * ql
            + ql
            + ql * heads * (nope + rope)
            + h * (kl + rope)
            + kl
            + kl * heads * (nope + v)
            + heads * v * h
    } else {
        let (q, kv) = (
            heads * c.head_dim(),
            c.get("num_key_value_heads") * c.head_dim(),
        );
        let bias = if c.0["model_type"] == "qwen2_moe" {
            q + 2 * kv
        } else {
            0
        };
        h * (q + 2 * kv) + q * h + bias
    };
    let router_bias = if c.0["model_type"] == "deepseek_v3" {
        c.experts()
    } else {
        0
    };
    let gate = if c.0["model_type"] == "qwen2_moe" {
        h
    } else {
        0
    };
    let per_moe = h * c.experts()
        + router_bias
        + c.get("num_experts_per_tok") * 3 * h * c.moe_ffn()
        + 3 * h * c.shared()
        + gate;
    (moe + dense) * (attention + 2 * h)
        + moe * per_moe
        + dense * 3 * h * c.get("intermediate_size")
        + h
}

/// torchtitan `get_moe_model_nparams_and_flops` (b5bcd76): `6 * nparams_for_matmul +
/// 6 * num_full_attn * n_heads * head_dims * seq_len`, the LM head in the former.
fn torchtitan(c: &Hf) -> u128 {
    let layers = c.get("num_hidden_layers");
    6 * (active_params(c) + c.get("vocab_size") * c.h())
        + 6 * layers * c.heads() * c.qk_plus_v() * S
}

fn spec(name: &str) -> ModelSpec {
    ModelSpec::load(data(name)).unwrap()
}

fn count(c: Convention, s: &ModelSpec) -> u128 {
    let f = training_flops(c, s).unwrap();
    assert_eq!(f.denom(), 1, "{c}: a whole number");
    f.numer()
}

#[test]
fn megatron_is_its_transformer_flops() {
    for name in CONFIGS {
        let (c, s) = (Hf::load(name), spec(name));
        assert_eq!(count(Convention::Megatron, &s), megatron(&c, 0), "{name}");
    }
    // DeepSeek-V3 with its MTP module counted: one more MoE layer, its norms and
    // projection, one more logit term.
    let mut s = spec("hf/deepseek-v3.json");
    s.counting.mtp = true;
    let c = Hf::load("hf/deepseek-v3.json");
    assert_eq!(count(Convention::Megatron, &s), megatron(&c, 1));
}

#[test]
fn torchtitan_is_its_moe_formula() {
    for name in CONFIGS {
        let (c, s) = (Hf::load(name), spec(name));
        assert_eq!(count(Convention::Torchtitan, &s), torchtitan(&c), "{name}");
    }
}

#[test]
fn six_n_and_palm() {
    for name in CONFIGS {
        let (c, s) = (Hf::load(name), spec(name));
        let n = active_params(&c);
        assert_eq!(count(Convention::SixN, &s), 6 * n, "{name}");
        let (l, q) = (c.get("num_hidden_layers"), c.qk_plus_v());
        // 12 * L * H * Q * T with Q the head size (GQA); MLA's 2Q is qk + v.
        assert_eq!(
            count(Convention::SixNAttn, &s),
            6 * n + 6 * l * c.heads() * q * S,
            "{name}"
        );
    }
}

/// The 200M Baseline (`budgets/base-200m-s95.toml`), by hand: H 1280, 12 layers, 16 heads
/// of 80, 2 kv heads, top-8 of 192 experts of 432, s 4096, no vocabulary counted.
#[test]
fn the_200m_baseline_by_hand() {
    let s = ModelSpec::load(budget("base-200m-s95.toml")).unwrap();
    let attention = 1280 * (1280 + 2 * 160) + 1280 * 1280; // 3,686,400
    let n = 12 * (attention + 1280 * 192 + 8 * 3 * 1280 * 432 + 2 * 1280) + 1280;
    assert_eq!(n, 206_470_400);
    let megatron = 18 * 1280 * 8 * 432 * 12 + 12 * (6 * 1280 * 2880 + 6 * 1280 * 4096);
    assert_eq!(count(Convention::Megatron, &s), megatron);
    assert_eq!(megatron, 1_598_423_040);
    assert_eq!(count(Convention::SixN, &s), 6 * n);
    let square = 6 * 12 * 16 * 160 * 4096;
    assert_eq!(count(Convention::Torchtitan, &s), 6 * n + square);
    assert_eq!(count(Convention::SixNAttn, &s), 6 * n + square);
    assert_eq!(count(Convention::Exact, &s), 1_330_053_120);
}

/// A launcher counts physical layers: the loop changes no convention's count, only the
/// exact one, so the matched looped model reads as cheaper than its Baseline.
#[test]
fn no_convention_sees_the_loop() {
    let looped = ModelSpec::load(budget("smelt-200m-s95.toml")).unwrap();
    let mut flat = looped.clone();
    flat.model.looping = None;
    for &c in &Convention::LAUNCHERS {
        assert_eq!(count(c, &looped), count(c, &flat), "{c}");
    }
    assert!(count(Convention::Exact, &looped) > count(Convention::Exact, &flat));
    let lf = launcher_flops(&looped).unwrap();
    assert_eq!((lf.physical_layers, lf.layer_executions), (12, 18));
    assert_eq!(lf.counts[0].convention, Convention::Exact);
    assert_eq!(lf.counts[0].ratio_to_exact, 1.0);
    let base = ModelSpec::load(budget("base-200m-s95.toml")).unwrap();
    let p = pair("200m", &base, &looped).unwrap();
    let exact = p.ratio(Convention::Exact).unwrap();
    assert!((exact - 1.029).abs() < 0.001, "{exact}");
    for &c in &Convention::LAUNCHERS {
        assert!(p.ratio(c).unwrap() < 0.9 * exact, "{c}");
    }
}

#[test]
fn cost_and_match_show_the_conventions() {
    let v = run_json(&[
        "cost",
        &budget("base-200m-s95.toml"),
        "--conventions",
        "--format",
        "json",
    ]);
    assert_eq!(v["counts"][1]["convention"], "megatron");
    assert_eq!(v["counts"][1]["training_flops"], 1_598_423_040u64);
    assert!(v["counts"][1]["ignores"].to_string().contains("loops"));
    let m = run_json(&[
        "match",
        &budget("match-200m-s95.toml"),
        "--conventions",
        "--format",
        "json",
    ]);
    assert!(m["residuals"].is_object(), "the match report is kept");
    let counts = &m["launcher_flops"][0]["counts"];
    assert_eq!(counts.as_array().map(Vec::len), Some(5));
    let (code, csv, err) = run(&[
        "grid",
        &budget("smelt-grid.toml"),
        "--conventions",
        "--format",
        "csv",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        csv.starts_with("cell,exact,megatron,torchtitan,6n,6n-attn\n"),
        "{csv}"
    );
    assert_eq!(csv.lines().count(), 17);
}

#[test]
fn mfu_is_throughput_times_flops_over_the_peak() {
    let model = budget("base-200m-s95.toml");
    let v = run_json(&[
        "mfu",
        &model,
        "--tokens-per-second",
        "1e6",
        "--gpus",
        "8",
        "--card",
        "h200-nvl",
        "--format",
        "json",
    ]);
    assert_eq!(v["peak_flops_per_second"].as_f64(), Some(835.5e12));
    let exact = &v["rows"][0];
    assert_eq!(exact["convention"], "exact");
    let want = 1e6 * 1_330_053_120.0 / 8.0 / 835.5e12;
    assert!((exact["mfu"].as_f64().unwrap() - want).abs() < 1e-12);
    let given = run_json(&[
        "mfu",
        &model,
        "--tokens-per-second",
        "1e6",
        "--peak",
        "1000",
        "--format",
        "json",
    ]);
    assert_eq!(given["peak_source"], "--peak");
    assert!((given["rows"][0]["mfu"].as_f64().unwrap() - 1.33005312).abs() < 1e-9);
}

#[test]
fn mfu_refuses_bad_inputs() {
    let model = budget("base-200m-s95.toml");
    let cases: [(&[&str], i32, &str); 9] = [
        (
            &["--tokens-per-second", "0", "--card", "h100-sxm"],
            1,
            "tokens_per_second",
        ),
        (
            &["--tokens-per-second", "-5", "--card", "h100-sxm"],
            1,
            "tokens_per_second",
        ),
        (
            &["--tokens-per-second", "inf", "--card", "h100-sxm"],
            1,
            "tokens_per_second",
        ),
        (
            &["--tokens-per-second", "NaN", "--card", "h100-sxm"],
            1,
            "tokens_per_second",
        ),
        (
            &["--tokens-per-second", "1", "--gpus", "0", "--card", "a100"],
            1,
            "gpus",
        ),
        (
            &["--tokens-per-second", "1", "--card", "h100"],
            2,
            "h100-sxm",
        ),
        (&["--tokens-per-second", "1", "--peak", "0"], 2, "--peak"),
        (&["--tokens-per-second", "1", "--peak", "-3"], 2, "--peak"),
        (&["--tokens-per-second", "1"], 2, "--card"),
    ];
    for (args, want, word) in cases {
        let (code, _, err) = run(&[&["mfu", &model][..], args].concat());
        assert_eq!(code, Some(want), "{args:?}: {err}");
        assert!(err.contains(word), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// The README's launcher table is the end of `smelt match ... --conventions` as printed
/// (its snapshot, which tests/snapshots.rs keeps current).
#[test]
fn readme_shows_the_launcher_table_as_printed() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let snapshot =
        std::fs::read_to_string(format!("{root}/tests/snapshots/match-conventions.txt")).unwrap();
    let start = snapshot.find("Launcher FLOPs:").unwrap();
    assert!(
        readme.contains(&format!("```text\n{}```", &snapshot[start..])),
        "the README's launcher table differs from tests/snapshots/match-conventions.txt"
    );
}

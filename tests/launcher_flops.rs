//! Launcher conventions and MFU: each convention's count against a hand computation
//! transcribed from its source (Megatron-LM's `transformer_flops`, torchtitan's
//! `get_moe_model_nparams_and_flops`, `6N`, PaLM's `6N + 12LHQT`) on three public
//! `config.json` files and the 200M Baseline, the loop seen by none of them, and `smelt mfu`
//! with its errors.

use serde_json::Value;
use smelt::ModelSpec;
use smelt::launcher_flops::{Convention, launcher_flops, pair, training_flops};

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

/// Megatron-LM `hybrid_flops` (d98e8a6) of one BSHD sequence of `S` tokens, over `S`,
/// transcribed in floating point as its Python computes it, with the args a Nemotron-H
/// `config.json` gives: `hybrid_layer_pattern` its `hybrid_override_pattern` (counted by
/// symbol), no `--swiglu` (relu2 MLPs), `mamba_num_heads`, `mamba_state_dim` =
/// `ssm_state_size`, `mamba_num_groups` = `n_groups`, `kv_channels` = `head_dim`,
/// `num_query_groups` = `num_key_value_heads`, `moe_shared_expert_intermediate_size`, the
/// vocabulary padded to 128.
fn megatron_hybrid(c: &Hf) -> f64 {
    let f = |k: &str| c.get(k) as f64;
    let pattern = c.0["hybrid_override_pattern"].as_str().unwrap();
    let count = |symbol: char| pattern.chars().filter(|&x| x == symbol).count() as f64;
    let (t, squares) = (S as f64, (S * S) as f64);
    let h = f("hidden_size");
    let scale = 1.0; // 3/2 with swiglu
    // mlp_layer_flops(expansion = ffn_hidden_size / hidden_size)
    let mlp = 4.0 * (f("intermediate_size") / h) * scale * t * h * h;
    // moe_layer_flops, no latent
    let moe = 4.0 * t * h * f("moe_intermediate_size") * f("num_experts_per_tok") * scale
        + 4.0 * t * h * f("moe_shared_expert_intermediate_size") * scale;
    // attn_layer_flops
    let (n, g) = (f("num_attention_heads"), f("num_key_value_heads"));
    let p = f("head_dim") * n / h;
    let attn = 4.0 * t * h * p * (h + h * (g / n)) + 2.0 * squares * h * p;
    // mamba_layer_flops: d_in = 2·hidden_size
    let d_in = 2.0 * h;
    let (state, groups, heads) = (f("ssm_state_size"), f("n_groups"), f("mamba_num_heads"));
    let mamba = 2.0 * t * h * (2.0 * d_in + 2.0 * groups * state + heads)
        + 7.0 * t * d_in * state
        + 2.0 * t * d_in * h;
    let vocab = (c.get("vocab_size").div_ceil(128) * 128) as f64;
    let forward = count('*') * attn
        + count('-') * mlp
        + count('M') * mamba
        + count('E') * moe
        + 2.0 * t * h * vocab;
    forward * 3.0 / t
}

/// Megatron-LM `transformer_flops` (d98e8a6) with its Gated DeltaNet variant
/// (`experimental_attention_variant = "gated_delta_net"`, `linear_attention_freq` =
/// `full_attention_interval`) and `attention_output_gate`, as its Python computes it for one
/// BSHD sequence, over `S`: a Qwen3-Next or Qwen3.5 `config.json` (SwiGLU, every layer MoE).
fn megatron_linear_attention(c: &Hf) -> f64 {
    let f = |k: &str| c.get(k) as f64;
    let (t, squares) = (S as f64, (S * S) as f64);
    let layers = c.get("num_hidden_layers");
    let freq = c.get("full_attention_interval");
    let linear_layers = (0..layers).filter(|i| (i + 1) % freq != 0).count() as f64;
    let standard_layers = layers as f64 - linear_layers;
    let (fb, fma, ffn_factor) = (3.0, 2.0, 3.0);
    let h = f("hidden_size");
    let q = f("head_dim") * f("num_attention_heads");
    let kv = f("head_dim") * f("num_key_value_heads");
    let standard = fb * fma * (h * (q + kv + kv + q) + q * h);
    let core = fb * fma * q / 2.0 * 2.0;
    let qk_dim = f("linear_key_head_dim") * f("linear_num_key_heads");
    let (v_head, v_heads) = (f("linear_value_head_dim"), f("linear_num_value_heads"));
    let v_dim = v_head * v_heads;
    let in_proj = 2.0 * qk_dim + 2.0 * v_dim + 2.0 * v_heads;
    let linear = fb
        * fma
        * (h * in_proj
            + f("linear_conv_kernel_dim") * (2.0 * qk_dim + v_dim)
            + v_heads * v_head * v_head * 4.0
            + h * v_dim);
    let moe_layers = layers as f64;
    let mlp = fb
        * fma
        * h
        * (f("moe_intermediate_size") * f("num_experts_per_tok") * ffn_factor * moe_layers
            + f("shared_expert_intermediate_size") * ffn_factor * moe_layers);
    let vocab = (c.get("vocab_size").div_ceil(128) * 128) as f64;
    let total = t
        * (mlp + linear * linear_layers + standard * standard_layers + fb * fma * h * vocab)
        + squares * core * standard_layers;
    total / t
}

/// `a` within a relative 1e-12 of `b` (the Python's floating point against smelt's integers).
fn close(a: u128, b: f64) -> bool {
    (a as f64 - b).abs() <= 1e-12 * b
}

/// Megatron-LM's hybrid model (`hybrid_flops`) for Nemotron-H, its GPT model's Gated
/// DeltaNet variant for Qwen3-Next and Qwen3.5 (which counts the output gate), each as the
/// pinned commit's Python computes it; the features it leaves out are those it misses.
#[test]
fn megatron_is_its_hybrid_and_linear_attention_flops() {
    let name = "hf/nemotron-3-nano-30b-a3b.json";
    let (c, s) = (Hf::load(name), spec(name));
    let got = count(Convention::Megatron, &s);
    assert!(
        close(got, megatron_hybrid(&c)),
        "{got} {}",
        megatron_hybrid(&c)
    );
    // 6 `*`, 23 `M`, 23 `E` (H 2688, 32 heads of 128, 2 kv heads; d_in 5376, 8 groups of
    // state 128, 64 heads; top-6 of 1856 and a shared 3712; vocabulary 131072):
    // 3 × (6·80,347,136 + 23·102,875,136 + 23·159,645,696 + 704,643,072).
    assert_eq!(got, 21_674_115_072);
    let here = &launcher_flops(&s).unwrap().counts[1];
    assert_eq!(here.convention, Convention::Megatron);
    let names: Vec<&str> = here.ignored_here.iter().map(|f| f.as_str()).collect();
    assert!(names.contains(&"recurrent closed form"), "{names:?}");
    for gone in [
        "recurrent layers",
        "one-block layers",
        "attention on recurrent layers",
    ] {
        assert!(!names.contains(&gone), "{gone}: {names:?}");
    }
    for name in ["hf/qwen3-next-80b-a3b.json", "hf/qwen3.5-35b-a3b.json"] {
        let (c, s) = (Hf::load(name), spec(name));
        let (got, want) = (
            count(Convention::Megatron, &s),
            megatron_linear_attention(&c),
        );
        assert!(close(got, want), "{name}: {got} {want}");
        let here = &launcher_flops(&s).unwrap().counts[1];
        let names: Vec<&str> = here.ignored_here.iter().map(|f| f.as_str()).collect();
        assert!(!names.contains(&"attention gate"), "{name}: {names:?}");
        assert!(
            names.contains(&"recurrent closed form"),
            "{name}: {names:?}"
        );
    }
}

/// torchtitan charges its attention term to the layers with attention only
/// (`num_full_attn`): torchtitan − 6n is the LM head's `6·V·H` and `6·n_attn·h·2d·s`, with
/// Nemotron-H's 6 `*` layers and Qwen3.5's and Qwen3-Next's every 4th layer. PaLM's
/// `12·L·H·Q·T` takes every layer.
#[test]
fn torchtitan_charges_attention_to_attention_layers() {
    for (name, attention_layers) in [
        ("hf/nemotron-3-nano-30b-a3b.json", 6),
        ("hf/qwen3.5-35b-a3b.json", 10),
        ("hf/qwen3-next-80b-a3b.json", 12),
    ] {
        let (c, s) = (Hf::load(name), spec(name));
        let (h, v, heads, d) = (c.h(), c.get("vocab_size"), c.heads(), c.head_dim());
        let six_n = count(Convention::SixN, &s);
        assert_eq!(
            count(Convention::Torchtitan, &s) - six_n,
            6 * v * h + 6 * attention_layers * heads * 2 * d * S,
            "{name}"
        );
        let layers = c.get("num_hidden_layers");
        assert_eq!(
            count(Convention::SixNAttn, &s) - six_n,
            6 * layers * heads * 2 * d * S,
            "{name}"
        );
    }
}

/// Two tiny hybrids by hand (H 16, 2 heads of 8, 1 kv head, s 32, top-2 experts of 8).
///
/// A one-block model, pattern `M*E-` (a Mamba-2 mixer of 4 heads, 2 groups of state 4; a
/// relu2 MoE with a shared expert of 8; a dense MLP of 24), Megatron's `hybrid_flops` per
/// token: attention 4·16·(16 + 8) + 2·32·16 = 2,560; Mamba-2 (d_in 32)
/// 2·16·(64 + 16 + 4) + 7·32·4 + 2·32·16 = 4,608; MoE 4·16·(2·8 + 8) = 1,536; MLP
/// 4·16·24 = 1,536; 3 × 10,240 = 30,720.
///
/// A GPT model of a Gated DeltaNet layer (1 key head of 4, 2 value heads of 4, 4 taps) and
/// a gated attention layer, SwiGLU experts, Megatron's `transformer_flops` per token: MLP
/// 18·16·16·2 = 9,216; the attention layer 6·16·(16 + 8 + 8 + 16 + 16) + 6·16·32 = 9,216;
/// the Gated DeltaNet layer 6·(16·(8 + 16 + 4) + 4·(8 + 8) + 4·2·16 + 16·8) = 4,608;
/// 23,040. torchtitan adds to `6N` the one attention layer's 6·2·16·32 = 6,144; PaLM's
/// every layer's.
#[test]
fn tiny_hybrids_by_hand() {
    let common = "hidden = 16\nheads = 2\nkv_heads = 1\nhead_dim = 8\n";
    let workload = "[workload]\ncontext = 32\nmean_doc_len = 32\n";
    let one_block = ModelSpec::from_toml_str(&format!(
        "[model]\nlayers = 4\n{common}\
         [model.recurrent]\nlayers = [1]\n\
         [model.recurrent.mixer.mamba2]\nheads = 4\nhead_dim = 8\nstate = 4\ngroups = 2\n\
         conv_kernel = 4\nchunk = 8\n\
         [model.blocks]\nmixer_only = [1, 2]\nffn_only = [3, 4]\n\
         [model.moe]\nexperts = 4\ntop_k = 2\nexpert_ffn = 8\nshared_experts = 1\n\
         shared_ffn = 8\nactivation = \"relu2\"\n\
         [model.dense]\nlayers = [4]\nffn = 24\n{workload}"
    ))
    .unwrap();
    assert_eq!(count(Convention::Megatron, &one_block), 30_720);
    let six_n = count(Convention::SixN, &one_block);
    assert_eq!(count(Convention::Torchtitan, &one_block), six_n + 6_144);
    assert_eq!(count(Convention::SixNAttn, &one_block), six_n + 4 * 6_144);
    let gpt = ModelSpec::from_toml_str(&format!(
        "[model]\nlayers = 2\n{common}attention_gate = true\n\
         [model.recurrent]\nlayers = [1]\n\
         [model.recurrent.mixer.gated_deltanet]\nkey_heads = 1\nvalue_heads = 2\n\
         key_head_dim = 4\nvalue_head_dim = 4\nconv_kernel = 4\n\
         [model.moe]\nexperts = 4\ntop_k = 2\nexpert_ffn = 8\n{workload}"
    ))
    .unwrap();
    assert_eq!(count(Convention::Megatron, &gpt), 23_040);
    let six_n = count(Convention::SixN, &gpt);
    assert_eq!(count(Convention::Torchtitan, &gpt), six_n + 6_144);
    assert_eq!(count(Convention::SixNAttn, &gpt), six_n + 2 * 6_144);
    // MTP modules of a hybrid are refused: which mixer they have is not in the model.
    let mut mtp = gpt.clone();
    (mtp.model.mtp_layers, mtp.counting.mtp) = (1, true);
    match training_flops(Convention::Megatron, &mtp) {
        Err(smelt::Error::InvalidSpec { field, rule }) => {
            assert_eq!(field, "counting.mtp");
            assert!(rule.contains("MTP"), "{rule}");
        }
        other => panic!("{other:?}"),
    }
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
fn a_convention_that_cannot_count_a_model_is_refused_by_name_and_the_others_still_count() {
    // Nemotron 3 Super's LatentMoE: no launcher formula has a term for its latent experts.
    // The exact count counts it; each launcher convention is refused, with the field.
    let model = format!(
        "{}/crates/smelt/data/published/models/nemotron-3-super-120b-a12b.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let args = ["--tokens-per-second", "1e4", "--card", "h100", "--format"];
    let v = run_json(&[&["mfu", model.as_str()][..], &args, &["json"]].concat());
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["convention"], "exact");
    let exact = rows[0]["training_flops"].as_f64().unwrap();
    let peak = v["peak_flops_per_second"].as_f64().unwrap();
    assert!((rows[0]["mfu"].as_f64().unwrap() - 1e4 * exact / peak).abs() < 1e-12);
    let refused = v["refused"].as_array().unwrap();
    let names: Vec<&str> = refused
        .iter()
        .map(|r| r["convention"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["megatron", "torchtitan", "6n", "6n-attn"]);
    for r in refused {
        assert!(
            r["reason"].as_str().unwrap().contains("model.moe.latent"),
            "{r}"
        );
    }
    // The table says so row by row, with the reasons below.
    let (code, out, err) = run(&[&["mfu", model.as_str()][..], &args, &["table"]].concat());
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("refused") && out.contains("megatron refused: model.moe.latent"));
    let c = run_json(&["cost", &model, "--conventions", "--format", "json"]);
    assert_eq!(c["counts"].as_array().map(Vec::len), Some(1), "{c}");
    assert_eq!(c["refused"].as_array().map(Vec::len), Some(4), "{c}");
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
            &["--tokens-per-second", "1", "--card", "h20"],
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

/// The guide's launcher table ("Your launcher's numbers") is the end of `smelt match ... --conventions` as printed
/// (its snapshot, which tests/snapshots.rs keeps current).
#[test]
fn readme_shows_the_launcher_table_as_printed() {
    let root = env!("CARGO_MANIFEST_DIR");
    let guide = std::fs::read_to_string(format!("{root}/docs/guide.md")).unwrap();
    let snapshot =
        std::fs::read_to_string(format!("{root}/tests/snapshots/match-conventions.txt")).unwrap();
    let start = snapshot.find("Launcher FLOPs:").unwrap();
    assert!(
        guide.contains(&format!("```text\n{}```", &snapshot[start..])),
        "the guide's launcher table differs from tests/snapshots/match-conventions.txt"
    );
}

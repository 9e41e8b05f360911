//! Helpers shared by the integration tests: running the binary, temporary files, the
//! repository's budgets and data, and model builders.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use smelt::{Attention, AttentionBias, Loop, Model, ModelSpec, Moe, Workload};

/// The 200M Baseline at S95 (`budgets/base-200m-s95.toml`), as model-file text.
pub const BASE_200M: &str = r#"
name = "t"
[model]
layers = 12
hidden = 1280
heads = 16
kv_heads = 2
head_dim = 80
[model.moe]
experts = 192
top_k = 8
expert_ffn = 432
[workload]
context = 4096
mean_doc_len = 991
"#;

/// A budget on the 200M Baseline with a small lattice (`@BUDGETS@`: the budgets folder).
pub const SMALL_BUDGET: &str = r#"
name = "small"
baseline = "@BUDGETS@/base-200m-s95.toml"
[recipe]
span = "half"
repeats = 2
[lattice]
hidden = { step = 32, min = 960, max = 1152 }
experts = { step = 8, min = 8, max = 512 }
head_dim = { step = 8, min = 64, max = 128 }
kv_heads = { min = 1, max = 4 }
gqa = { min = 1, max = 16 }
q_width = { min = 0.75, max = 1.25 }
"#;

/// The repository's `budgets/` folder.
pub fn budgets_dir() -> String {
    format!("{}/budgets", env!("CARGO_MANIFEST_DIR"))
}

/// A file in `budgets/`, by its file name.
pub fn budget(name: &str) -> String {
    format!("{}/{name}", budgets_dir())
}

/// A file in `tests/data/`, by its path there.
pub fn data(name: &str) -> String {
    format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// The text of a file in `tests/data/`.
pub fn data_text(name: &str) -> String {
    let path = data(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Writes `text` (with `@BUDGETS@` replaced by the budgets folder) to a fresh file with
/// extension `ext` under the target directory, and returns its path.
pub fn temp_file(ext: &str, text: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "t-{}-{}.{ext}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::write(&path, text.replace("@BUDGETS@", &budgets_dir())).unwrap();
    path
}

/// The `smelt` binary.
pub fn smelt() -> assert_cmd::Command {
    assert_cmd::Command::cargo_bin("smelt").unwrap()
}

/// Runs `smelt args`: exit code, standard output, standard error.
pub fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = smelt().args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// Runs `smelt args`, requires success, and parses standard output as JSON.
pub fn run_json(args: &[&str]) -> serde_json::Value {
    let (code, out, err) = run(args);
    assert_eq!(code, Some(0), "{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// A model from `[layers, hidden, kv_heads, gqa, head_dim, experts, top_k, expert_ffn]`,
/// not looped, no extras, on a workload of documents of `doc` tokens in a 4096 context.
pub fn spec(shape: [u64; 8], doc: u64, attention: Attention) -> ModelSpec {
    let [layers, hidden, kv, g, d, experts, top_k, ffn] = shape;
    ModelSpec {
        name: Some("m".into()),
        model: Model {
            layers,
            hidden,
            heads: kv * g,
            kv_heads: kv,
            head_dim: d,
            vocab: 0,
            tie_embeddings: false,
            qk_norm: Default::default(),
            attention_bias: AttentionBias::None,
            attention_sinks: false,
            mla: None,
            window: None,
            nope: None,
            moe: Moe {
                experts,
                top_k,
                expert_ffn: ffn,
                latent: None,
                shared_experts: 0,
                shared_ffn: 0,
                shared_gate: false,
                router_bias: false,
                expert_bias: false,
                activation: Default::default(),
                router_scale: false,
                branch_norms: false,
                router: None,
                router_groups: None,
                jitter: None,
            },
            dense: None,
            looping: None,
            mtp_layers: 0,
            norm_bias: false,
            indexer: None,
            attention_gate: false,
            recurrent: None,
            full_attention: None,
            v_norm: false,
            post_norms: false,
            blocks: None,
            lm_head_bias: false,
            rope_dim: None,
        },
        workload: Workload {
            context: 4096,
            mean_doc_len: Some(doc),
            doc_lengths: None,
            attention,
            kv_dtype_bytes: 2,
        },
        counting: Default::default(),
        training: None,
    }
}

/// A loop of `span` layers from 1-based `first`, run `repeats` times.
pub fn looped(first: u64, span: u64, repeats: u64) -> Option<Loop> {
    Some(Loop {
        first,
        span,
        repeats,
        residual_scale: None,
    })
}

/// Multi-head latent attention from `(q_lora_rank, kv_lora_rank, nope, rope, v)`, with at
/// least one query/key width per head (a zero `nope` is raised to 1 when `rope` is 0).
pub fn mla((q_lora_rank, kv_lora_rank, nope, rope, v): (u64, u64, u64, u64, u64)) -> smelt::Mla {
    smelt::Mla {
        q_lora_rank,
        kv_lora_rank,
        qk_nope_head_dim: nope.max(1 - rope.min(1)),
        qk_rope_head_dim: rope,
        v_head_dim: v,
        complex_rope: false,
    }
}

/// `m` with multi-head latent attention: `kv_heads = heads`, the head width MLA's, no
/// attention biases.
pub fn with_mla(m: &mut Model, a: smelt::Mla) {
    m.kv_heads = m.heads;
    m.head_dim = a.qk_nope_head_dim + a.qk_rope_head_dim;
    m.attention_bias = AttentionBias::None;
    m.mla = Some(a);
}

/// Windowed layers of a `layers`-layer model from `(chunked, size, bit mask)`; none when the
/// mask picks no layer.
pub fn window(layers: u64, (chunked, size, mask): (bool, u64, u64)) -> Option<smelt::Window> {
    let listed: Vec<u64> = (1..=layers).filter(|l| mask >> (l - 1) & 1 == 1).collect();
    let kind = if chunked {
        smelt::WindowKind::Chunked
    } else {
        smelt::WindowKind::Sliding
    };
    (!listed.is_empty()).then_some(smelt::Window {
        kind,
        size,
        layers: listed,
    })
}

/// Runs `smelt match BUDGET --format hf -o DIR` (with `extra` flags) into a fresh folder and
/// returns the exit code, standard error and the family config written: a looped export's
/// `text_config` with its loop put back in the `smelt_loop_*` keys (what `smelt import`
/// reads), or an unlooped export's config.json.
pub fn hf_export(budget: &str, extra: &[&str]) -> (Option<i32>, Option<serde_json::Value>, String) {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "hf-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let dir_arg = dir.display().to_string();
    let mut args = vec!["match", budget, "--format", "hf", "-o", &dir_arg];
    args.extend_from_slice(extra);
    let (code, _, err) = run(&args);
    let Ok(text) = std::fs::read_to_string(dir.join("config.json")) else {
        return (code, None, err);
    };
    let mut config: serde_json::Value = serde_json::from_str(&text).unwrap();
    if config["model_type"] == "smelt_looped" {
        let mut family = config["text_config"].take();
        for key in ["first_layer", "span", "repeats", "residual_scale"] {
            family[format!("smelt_loop_{key}")] = config[format!("loop_{key}")].take();
        }
        config = family;
    }
    let _ = std::fs::remove_dir_all(&dir);
    (code, Some(config), err)
}

/// A grid of two 100M cells (dense and sparse), SMELT's recipe.
pub fn two_cell_grid() -> std::path::PathBuf {
    temp_file(
        "toml",
        r#"name = "two"
template = "@BUDGETS@/base-{scale}-{sparsity}.toml"
scales = ["100m"]
sparsities = ["s0", "s85"]
[recipe]
span = "half"
repeats = 2
[lattice]
hidden = { step = 32 }
experts = { step = 8 }
head_dim = { step = 8, min = 32, max = 128 }
kv_heads = { min = 1, max = 4 }
"#,
    )
}

"""Exports a launcher trains: every family's looped match, built by Transformers.

For a tiny Baseline of each family smelt imports (shrunk from the published configs in
tests/data/hf), SMELT's recipe is matched and exported with `smelt.export_hf`; Transformers
builds the exported directory with `trust_remote_code=True` (and refuses it without), and the
model it builds is the model smelt costed:

* its parameters are smelt's count (Transformers keeps a router's score-correction bias as a
  buffer, not a parameter: those buffers are added, and the test says which);
* one training step (forward and backward, eager attention and eager experts) executes
  smelt's training FLOPs under the dense-attention convention (what eager attention
  computes: the whole masked square), counted by torch's FlopCounterMode;
* cached decoding, token by token, gives the full forward's logits;
* its loop runs: each looped layer is visited `repeats` times, and the model computes the
  family's stock model unrolled by hand (a layer per execution, the looped layers' weights
  copied, their residual updates scaled in the weights: `tiny_hf.check_looped`).

Where Transformers computes something else, the test states the exact difference:
Llama-4's eager experts run every expert on every token, and DeepSeek-V3.2's and GLM-5's
indexer runs without gradient (and its top-k selection differs between a full forward and
cached decoding, in the stock model as in the looped one).
"""

import copy
import json
import pathlib
import pickle

import pytest

import smelt

torch = pytest.importorskip("torch", reason="torch is not installed (CI installs it)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402
from tiny_hf import check_looped, decode_stepwise, output_projections  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
HF = ROOT / "tests" / "data" / "hf"
T = 12  # tokens of the test sequence
VOCAB = 128

COMMON = dict(
    hidden_size=64,
    num_attention_heads=4,
    num_key_value_heads=2,
    num_hidden_layers=4,
    vocab_size=VOCAB,
    max_position_embeddings=64,
)
DEEPSEEK = dict(
    n_routed_experts=4,
    num_experts_per_tok=2,
    moe_intermediate_size=32,
    n_shared_experts=1,
    first_k_dense_replace=1,
    intermediate_size=48,
    q_lora_rank=32,
    kv_lora_rank=32,
    qk_nope_head_dim=16,
    qk_rope_head_dim=8,
    v_head_dim=16,
    num_key_value_heads=4,
    n_group=1,
    topk_group=1,
    num_nextn_predict_layers=0,
    rope_scaling=None,
)

# family: (published config, what changes to make it tiny)
TINY = {
    "mixtral": ("mixtral-8x7b-v0.1", dict(num_local_experts=4, num_experts_per_tok=2, intermediate_size=32)),
    "qwen2_moe": (
        "qwen1.5-moe-a2.7b",
        dict(
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            shared_expert_intermediate_size=48,
            intermediate_size=48,
            decoder_sparse_step=1,
        ),
    ),
    "qwen3_moe": (
        "qwen3-30b-a3b",
        dict(
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            intermediate_size=48,
            head_dim=16,
            mlp_only_layers=[],
            decoder_sparse_step=1,
        ),
    ),
    "olmoe": ("olmoe-1b-7b-0924", dict(num_experts=4, num_experts_per_tok=2, intermediate_size=32)),
    "deepseek_v2": ("deepseek-v2", DEEPSEEK),
    "deepseek_v3": ("deepseek-v3", DEEPSEEK),
    "deepseek_v32": (
        "deepseek-v3.2-exp",
        dict(DEEPSEEK, index_n_heads=2, index_head_dim=16, index_topk=8),
    ),
    "glm_moe_dsa": (
        "glm-5",
        dict(DEEPSEEK, index_n_heads=2, index_head_dim=16, index_topk=8),
    ),
    "kimi_k2": ("kimi-k2-instruct", DEEPSEEK),
    "glm4_moe": (
        "glm-4.5-air",
        dict(
            n_routed_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            n_shared_experts=1,
            first_k_dense_replace=1,
            intermediate_size=48,
            head_dim=16,
            n_group=1,
            topk_group=1,
            num_nextn_predict_layers=0,
        ),
    ),
    "gpt_oss": (
        "gpt-oss-20b",
        dict(
            num_local_experts=4,
            experts_per_token=2,
            num_experts_per_tok=2,
            intermediate_size=32,
            head_dim=16,
            sliding_window=4,
            layer_types=["sliding_attention", "full_attention"] * 2,
        ),
    ),
    "minimax_m2": (
        "minimax-m2",
        dict(num_local_experts=4, num_experts_per_tok=2, intermediate_size=32, head_dim=16, rotary_dim=8,
             attn_type_list=[1] * 4),  # one entry per layer (smelt refuses a list of another length)
    ),
    "llama4_text": (
        "llama-4-maverick-17b-128e-text",
        dict(
            num_local_experts=4,
            num_experts_per_tok=1,
            intermediate_size=32,
            intermediate_size_mlp=48,
            head_dim=16,
            attention_chunk_size=4,
            interleave_moe_layer_step=2,
            no_rope_layers=[1, 1, 1, 0],
            moe_layers=None,
        ),
    ),
    "granitemoe": (
        "granite-3.0-1b-a400m",
        dict(num_local_experts=4, num_experts_per_tok=2, intermediate_size=32),
    ),
    "phimoe": (
        "phi-3.5-moe-instruct",
        dict(num_local_experts=4, num_experts_per_tok=2, intermediate_size=32, sliding_window=None),
    ),
}


# OLMoE's q/k norms are sized from the hidden size: its exports need heads x head_dim =
# hidden, which the lattice keeps with tied heads (smelt refuses any other OLMoE export).
# Llama-4's match keeps more experts than it routes to, so that its eager experts (which
# run every expert) show their difference.
LATTICE = {
    "olmoe": {"heads": {"tied": True}},
    "llama4_text": {"experts": {"step": 1, "min": 4, "max": 8}},
}


# Families with DeepSeek's sparse attention indexer (GLM-5's is DeepSeek-V3.2's, with
# interleaved RoPE and, where a config asks, layers sharing a top-k, which smelt refuses).
INDEXED = {"deepseek_v32", "glm_moe_dsa"}


def tiny_config(family):
    published, changes = TINY[family]
    config = json.loads((HF / f"{published}.json").read_text())
    config.pop("quantization_config", None)
    config.pop("auto_map", None)
    config.update(COMMON)
    config.update(copy.deepcopy(changes))
    for key in ("pad_token_id", "eos_token_id", "bos_token_id"):
        if isinstance(config.get(key), int) and config[key] >= VOCAB:
            config[key] = 0
        if isinstance(config.get(key), list):
            config[key] = [0]
    return config


def export(family, tmp_path, lattice=None, changes=None):
    """The tiny Baseline of `family` (with `changes` to its config) matched with SMELT's
    recipe and exported (on `lattice`, by default the family's `LATTICE`)."""
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps(dict(tiny_config(family), **(changes or {}))))
    budget = {
        "name": f"tiny-{family}",
        "baseline": str(baseline),
        "recipe": {"span": "half", "repeats": 2},
        "lattice": LATTICE.get(family, {}) if lattice is None else lattice,
    }
    out = tmp_path / "looped"
    written = smelt.export_hf(budget, out)
    assert [m["looped"] for m in written["models"]] == [True], written
    return out


def smelt_cost(directory):
    """smelt's count of the exported model at a dense T-token workload."""
    model = smelt.import_hf(directory)
    model["workload"] = {"context": T, "mean_doc_len": T, "attention": "dense", "kv_dtype_bytes": 2}
    return smelt.cost(model), model


def build(directory):
    config = transformers.AutoConfig.from_pretrained(directory, trust_remote_code=True)
    return transformers.AutoModelForCausalLM.from_config(
        config, trust_remote_code=True, attn_implementation="eager", experts_implementation="eager"
    )


def score_correction_buffers(model):
    """Router biases Transformers keeps as buffers (smelt counts them: they are in checkpoints)."""
    return sum(b.numel() for name, b in model.named_buffers() if name.endswith("e_score_correction_bias"))


def training_flops_per_token(model):
    torch.manual_seed(0)
    x = torch.randint(0, VOCAB, (1, T))
    counter = FlopCounterMode(display=False)
    with counter:
        model(x, labels=x).loss.backward()
    return counter.get_total_flops() / T


def llama4_every_expert_extra(model_file):
    """Llama-4's eager experts run all experts on every token: (E - k) extra experts' FLOPs."""
    m = model_file["model"]
    moe_layers = m["layers"] - len((m.get("dense") or {}).get("layers", []))
    loop = m.get("loop")
    executions_moe = moe_layers
    if loop:
        dense = set((m.get("dense") or {}).get("layers", []))
        span = range(loop["first"], loop["first"] + loop["span"])
        executions_moe += (loop["repeats"] - 1) * sum(1 for i in span if i not in dense)
    e, k, f, h = m["moe"]["experts"], m["moe"]["top_k"], m["moe"]["expert_ffn"], m["hidden"]
    return 3 * executions_moe * (e - k) * 2 * 3 * h * f


@pytest.mark.parametrize("family", sorted(TINY))
def test_the_export_builds_the_model_smelt_costed(family, tmp_path):
    directory = export(family, tmp_path)
    config = json.loads((directory / "config.json").read_text())
    assert config["model_type"] == "smelt_looped"
    model = build(directory)
    cost, model_file = smelt_cost(directory)
    assert model_file["model"]["loop"]["repeats"] == 2

    params = sum(p.numel() for p in model.parameters()) + score_correction_buffers(model)
    assert params == cost["params"]["total"]

    flops = training_flops_per_token(model)
    want = cost["flops_per_token"]["training"]
    if family == "llama4_text":
        extra = llama4_every_expert_extra(model_file)
        assert extra > 0, "the match routes to every expert: nothing to tell apart"
        want += extra
    if family in INDEXED:
        # The indexer's projections and scores run under no_grad: no backward for them
        # (2/3 of the indexer's training FLOPs), and its scores are computed by matmuls
        # over the whole key range, as smelt's dense convention counts them.
        indexer = cost["flops_per_token"]["forward_breakdown"]["indexer"]
        assert flops == pytest.approx(want - 2 * indexer, abs=0.5)
    else:
        assert flops == pytest.approx(want, abs=0.5)


@pytest.mark.parametrize("family", sorted(set(TINY) - INDEXED))
def test_cached_decoding_equals_the_full_forward(family, tmp_path):
    model = build(export(family, tmp_path)).eval()
    torch.manual_seed(1)
    x = torch.randint(0, VOCAB, (1, T))
    with torch.no_grad():
        full = model(x).logits
    stepwise, _ = decode_stepwise(model, x, 8)
    assert torch.allclose(full, stepwise, atol=1e-5)


# Llama-4 places its MoE layers by index (`interleave_moe_layer_step`): unrolled, the stock
# model would place them otherwise.
UNROLLED = sorted(set(TINY) - INDEXED - {"llama4_text"})


@pytest.mark.parametrize("family", UNROLLED)
def test_the_loop_runs_as_the_stock_model_unrolled(family, tmp_path):
    directory = export(family, tmp_path)
    config = json.loads((directory / "config.json").read_text())
    keys = {"first": "loop_first_layer", "span": "loop_span", "repeats": "loop_repeats", "residual_scale": "loop_residual_scale"}
    loop = {k: config[v] for k, v in keys.items()}
    assert loop["residual_scale"] == 0.5
    text = config["text_config"]
    per_layer = [k for k in ("layer_types", "attn_type_list") if isinstance(text.get(k), list)]
    check_looped(directory, text, loop, per_layer, output_projections, tokens=T)


def test_without_trust_remote_code_transformers_refuses(tmp_path):
    directory = export("mixtral", tmp_path)
    with pytest.raises(ValueError, match="trust_remote_code"):
        transformers.AutoConfig.from_pretrained(directory, trust_remote_code=False)


def test_a_launcher_trains_the_looped_model(tmp_path):
    directory = export("qwen3_moe", tmp_path)
    model = build(directory)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    torch.manual_seed(2)
    x = torch.randint(0, VOCAB, (2, T))
    losses = []
    for _ in range(3):
        loss = model(x, labels=x).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    # A copy (an EMA model, say) is the same model, its visits bound to its own layers.
    twin = copy.deepcopy(model).eval()
    layers = twin.language_model.model.layers
    assert layers[0]._layer is layers._modules["0"]
    with torch.no_grad():
        assert torch.equal(twin(x).logits, model.eval()(x).logits)
        assert torch.equal(pickle.loads(pickle.dumps(model))(x).logits, model(x).logits)
    model.save_pretrained(tmp_path / "trained")
    again = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "trained", trust_remote_code=True)
    assert sum(p.numel() for p in again.parameters()) == sum(p.numel() for p in model.parameters())


def build_on_meta(directory):
    """The model Transformers builds from an exported folder, without allocating weights."""
    config = transformers.AutoConfig.from_pretrained(directory, trust_remote_code=True)
    with torch.device("meta"):
        return transformers.AutoModelForCausalLM.from_config(config, trust_remote_code=True)


def test_every_grid_and_sweep_export_builds_as_written(tmp_path):
    """The paper's grid (16 cells, 100M to 1.6B) and a sweep with an unlooped value, exported
    as `smelt grid --export` / `smelt sweep --export` write them: each builds in Transformers
    with smelt's parameter count and its loop."""
    grid = smelt.grid(ROOT / "budgets" / "smelt-grid.toml")
    written = smelt.export_hf(grid, tmp_path / "grid", vocab=VOCAB)
    sweep = smelt.sweep(ROOT / "budgets" / "match-200m-s95.toml", "span", [0, 4])
    written_sweep = smelt.export_hf(sweep, tmp_path / "sweep", vocab=VOCAB)
    models = written["models"] + written_sweep["models"]
    assert len(models) == 18 and sum(m["looped"] for m in models) == 17
    for m in models:
        model = build_on_meta(m["path"])
        cost = smelt.cost(m["path"])
        assert sum(p.numel() for p in model.parameters()) == cost["params"]["total"], m["name"]
        config = model.config
        if m["looped"]:
            assert config.model_type == "smelt_looped"
            executions = config.text_config.num_hidden_layers + config.loop_span * (config.loop_repeats - 1)
            assert len(model.language_model.model.layers) == executions == cost["layer_executions"]
        else:
            assert config.model_type == "mixtral"
            assert config.num_hidden_layers == cost["layer_executions"]


def test_the_published_glm5_config_builds_smelts_count():
    """GLM-5's flagship config (tests/data/hf/glm-5.json: Transformers' GlmMoeDsaConfig
    defaults) as Transformers builds it, on the meta device: smelt's 743,911,218,432 (the
    router's score-correction buffers in, the MTP layer out: Transformers builds none)."""
    config = json.loads((HF / "glm-5.json").read_text())
    built = transformers.AutoConfig.for_model(**config)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(built)
    params = sum(p.numel() for p in model.parameters()) + score_correction_buffers(model)
    cost = smelt.cost(smelt.import_hf(config))
    assert params == cost["params"]["total"] == 743_911_218_432


# Keys a published config may leave out, per fixture, whose absence Transformers' config
# class fills with its own default (DeepseekV3Config: first_k_dense_replace = 3, ...).
ABSENT_KEYS = [
    ("deepseek-v2.json", ["n_shared_experts", "q_lora_rank", "first_k_dense_replace"]),
    ("deepseek-v3.json", ["first_k_dense_replace", "n_shared_experts", "q_lora_rank"]),
    ("deepseek-v3.2-exp.json", ["first_k_dense_replace", "n_shared_experts"]),
    ("glm-4.5.json", ["first_k_dense_replace", "n_shared_experts", "num_key_value_heads"]),
    ("glm-4.5-air.json", ["first_k_dense_replace", "n_shared_experts", "num_key_value_heads"]),
    ("gpt-oss-20b.json", ["head_dim", "num_key_value_heads"]),
    ("minimax-m2.json", ["head_dim", "num_key_value_heads"]),
    ("mixtral-8x7b-v0.1.json", ["num_key_value_heads"]),
    ("phi-3.5-moe-instruct.json", ["num_key_value_heads"]),
    ("qwen3-30b-a3b.json", ["num_key_value_heads"]),
]


def four_layers(config):
    """`config` cut to 4 layers (per-layer lists too) and without MTP modules, which smelt
    counts and Transformers does not build: the counts then compare directly."""
    config = copy.deepcopy(config)
    config["num_hidden_layers"] = 4
    for key in ("layer_types", "mlp_layer_types", "attn_type_list"):
        if isinstance(config.get(key), list):
            config[key] = config[key][:4]
    config.pop("num_nextn_predict_layers", None)
    return config


def built_params(config):
    built = transformers.AutoConfig.for_model(**config)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(built)
    return sum(p.numel() for p in model.parameters()) + score_correction_buffers(model)


@pytest.mark.parametrize("fixture,keys", ABSENT_KEYS, ids=[f for f, _ in ABSENT_KEYS])
def test_a_key_left_out_is_read_as_transformers_default(fixture, keys):
    """A config without a key is the model Transformers builds from it (its config class's
    default), not another one: the parameters smelt counts change as Transformers' do."""
    full = four_layers(json.loads((HF / fixture).read_text()))
    smelt_full = smelt.cost(smelt.import_hf(full))["params"]["total"]
    built_full = built_params(full)
    for key in keys:
        left_out = {k: v for k, v in full.items() if k != key}
        try:
            counted = smelt.cost(smelt.import_hf(left_out))["params"]["total"] - smelt_full
        except smelt.SmeltError as e:
            pytest.fail(f"{fixture} without {key}: refused: {e}")
        assert counted == built_params(left_out) - built_full, f"{fixture} without {key}"

"""Gemma 4 (gemma4_text, and the gemma4 wrapper's text_config) against Transformers' torch code.

For a tiny Gemma 4 MoE text decoder (shrunk from the published 26B-A4B config in
tests/data/hf: sliding layers of one attention shape, full layers of another with values
from the key projection, a dense MLP beside the experts):

* smelt's export of the imported model builds in Transformers (`Gemma4ForCausalLM`) with
  smelt's parameter count, and so does the tiny config itself;
* one training step (forward and backward, eager attention and eager experts) counted by
  torch's FlopCounterMode equals smelt's training FLOPs under the dense-attention
  convention: Transformers' sliding window is a mask over the dense square its eager
  attention computes, so the windows reduce nothing it executes, and smelt's dense mode
  counts a windowed layer as a full one;
* the published 26B-A4B text decoder, built on the meta device, has smelt's
  25,233,141,760 parameters (Google's card: 25.2B total, 3.8B active).

A looped model of it (layers 2-3, a full and a sliding layer, run twice, residual scale 0.5
and 1), exported as a model directory, builds in Transformers with smelt's parameter count
(each physical layer once) and executes smelt's training FLOPs; it runs its loop (each
looped layer visited twice), computes the stock model unrolled by hand with each post
norm's output scaled (Gemma 4 norms an update before adding it, so the scale is the post
norms': before them it would cancel; the FFN's post norm follows the sum of the dense MLP's
and the experts' branches), and decodes on a cache with a slot per execution, the sliding
and full layers' masks and RoPE chosen per execution, as its full forward computes
(`tiny_hf.check_looped`).

Neither count includes the norms (the value norm included), the router's scales, the
soft-capping or the embedding scale: elementwise, not matmuls.
"""

import copy
import json
import pathlib

import pytest

import smelt

torch = pytest.importorskip("torch", reason="torch is not installed (CI installs it)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")
from tiny_hf import build, check_looped, decode_stepwise, export_looped, smelt_model, training_step_flops  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
HF = ROOT / "tests" / "data" / "hf"
FIXTURE = HF / "gemma-4-26b-a4b.json"
VOCAB = 128
T = 12

TINY = dict(
    hidden_size=64,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    num_global_key_value_heads=1,
    global_head_dim=32,
    num_hidden_layers=4,
    layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
    sliding_window=4,
    vocab_size=VOCAB,
    max_position_embeddings=64,
    num_experts=4,
    top_k_experts=2,
    moe_intermediate_size=32,
    intermediate_size=48,
)


def tiny_config(**changes):
    config = json.loads(FIXTURE.read_text())["text_config"]
    config.update(copy.deepcopy(TINY))
    config.update(changes)
    return config


def test_the_export_builds_the_model_smelt_costed(tmp_path):
    config = tiny_config()
    imported = smelt.import_hf(config)
    assert imported["model"]["full_attention"] == {"kv_heads": 1, "head_dim": 32, "k_eq_v": True}
    written = smelt.export_hf(imported, tmp_path / "export", family="gemma4_text")
    directory = pathlib.Path(written["models"][0]["path"])
    exported = json.loads((directory / "config.json").read_text())
    assert exported["model_type"] == "gemma4_text"
    assert exported["top_k_experts"] == 2 and "num_experts_per_tok" not in exported
    built = transformers.AutoConfig.from_pretrained(directory)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(built)
    assert type(model).__name__ == "Gemma4ForCausalLM"
    cost = smelt.cost(directory)
    assert sum(p.numel() for p in model.parameters()) == cost["params"]["total"]
    assert sum(p.numel() for p in build(config).parameters()) == cost["params"]["total"]
    # The full layers have no value projection, their own head width and kv heads.
    attn = model.model.layers[1].self_attn
    assert attn.v_proj is None and attn.head_dim == 32 and attn.k_proj.out_features == 32
    assert model.model.layers[0].self_attn.k_proj.out_features == 2 * 16


@pytest.mark.parametrize("k_eq_v", [True, False])
def test_a_training_step_executes_smelts_flops(k_eq_v):
    # Without k_eq_v the full layers keep num_key_value_heads (Gemma4TextConfig reads
    # num_global_key_value_heads only with it) and have a value projection.
    config = tiny_config(attention_k_eq_v=k_eq_v)
    model = build(config)
    model_file = smelt_model(config, T)
    assert model_file["model"]["full_attention"].get("k_eq_v", False) is k_eq_v
    cost = smelt.cost(model_file)
    assert sum(p.numel() for p in model.parameters()) == cost["params"]["total"]
    counted = training_step_flops(model, T)
    want = cost["flops_per_token"]["training"] * T
    assert counted == pytest.approx(want, abs=0.5), (counted, want)


def test_cached_decoding_equals_the_full_forward():
    """The exported shapes run as one model: cached decoding gives the full forward's logits
    (the sliding layers' window reaches back past the cache's start)."""
    model = build(tiny_config()).eval()
    torch.manual_seed(1)
    x = torch.randint(0, VOCAB, (1, T))
    with torch.no_grad():
        full = model(x).logits
    stepwise, _ = decode_stepwise(model, x, 8)
    assert torch.allclose(full, stepwise, atol=1e-5)


def test_the_published_config_builds_smelts_count():
    """Gemma 4 26B-A4B's text decoder as Transformers builds it on the meta device: smelt's
    25,233,141,760 parameters (the tied embedding once); 3,822,530,560 active."""
    config = json.loads(FIXTURE.read_text())
    built = transformers.AutoConfig.for_model(**config["text_config"])
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(built)
    params = sum(p.numel() for p in model.parameters())
    cost = smelt.cost(smelt.import_hf(config))
    assert params == cost["params"]["total"] == 25_233_141_760
    assert cost["params"]["active"] == 3_822_530_560
    # Active by hand from the built model: all but the 120 unused experts of each layer.
    experts = model.model.layers[0].experts
    per_expert = (experts.gate_up_proj.numel() + experts.down_proj.numel()) // experts.num_experts
    assert params - 30 * (128 - 8) * per_expert == cost["params"]["active"]


def post_norms(layer):
    """What scales Gemma 4's residual updates: the post norms' weights (their outputs are
    what the layer adds; an RMSNorm's output is linear in its weight)."""
    return [layer.post_attention_layernorm.weight, layer.post_feedforward_layernorm.weight]


@pytest.mark.parametrize("scale", [0.5, 1.0])
def test_a_looped_export_builds_the_model_smelt_costed(scale, tmp_path):
    config = tiny_config()
    loop = dict(first=2, span=2, repeats=2, residual_scale=scale)
    directory = export_looped(config, "gemma4_text", tmp_path / "looped", loop)
    exported = json.loads((pathlib.Path(directory) / "config.json").read_text())
    assert exported["model_type"] == "smelt_looped"
    text = exported["text_config"]
    assert text["model_type"] == "gemma4_text"
    assert text["layer_types"][1:3] == ["full_attention", "sliding_attention"]
    # The config.json's other keys are carried (RoPE per layer type, the norms' epsilon).
    assert text["rope_parameters"] == config["rope_parameters"]
    assert text["rms_norm_eps"] == config["rms_norm_eps"]
    model = check_looped(directory, text, loop, ["layer_types"], post_norms)
    # The full layers keep their own shape on every visit.
    run = model.language_model.config
    assert run.layer_types == [text["layer_types"][p] for p in [0, 1, 2, 1, 2, 3]]
    assert [run.per_layer_config[e].head_dim for e in range(6)] == [16, 32, 16, 32, 16, 32]

    model_file = smelt_model(directory, T)
    cost = smelt.cost(model_file)
    assert sum(p.numel() for p in model.parameters()) == cost["params"]["total"]
    model.train()
    counted = training_step_flops(model, T)
    want = cost["flops_per_token"]["training"] * T
    assert counted == pytest.approx(want, abs=0.5)

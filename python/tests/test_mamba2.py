"""Mamba-2 hybrids (nemotron_h) against Transformers' torch code.

* The published Nemotron 3 Nano 30B-A3B config (tests/data/hf) and Nemotron 3 Super
  120B-A12B's (LatentMoE, `moe_latent_size`; the one shipped for the published run R211)
  build in Transformers on the meta device with smelt's parameter count.
* For a tiny model shrunk from it, with every kind of layer (`M*EM-E`: Mamba-2, attention,
  MoE, Mamba-2, MLP, MoE), smelt's export builds in Transformers with smelt's parameter
  count, and one training step (forward and backward, eager attention and eager experts,
  the torch fallbacks `causal_conv1d_fn` and `mamba2_chunk_scan` of
  `NemotronHMamba2Mixer`) counted by torch's FlopCounterMode equals smelt's training FLOPs
  under the dense-attention convention, up to one difference the test computes exactly and
  asserts: torch 2.15's FlopCounterMode ignores `groups` in the convolution backward's
  weight-gradient term (pytorch/pytorch#183405), so for the depthwise conv of `c` channels,
  `w` taps and `T + w - 1` outputs it counts `2·c·c·(T + w - 1)·w` instead of
  `2·c·(T + w - 1)·w`, `2·c·(c - 1)·(T + w - 1)·w` too many per Mamba-2 layer execution.

  Both count the SSD scan's five einsums (`C·Bᵀ`, the masked scores times `x`, the chunk
  states, the chunk-to-chunk decay matrix over the `chunks + 1` state slots, the states'
  read-out) on the sequence padded to `chunk_size`, and their backward as twice the
  forward (every operand needs a gradient: the zero initial state is concatenated to the
  chunk states before the einsum, and the unused final state is a slice of its output).
  Neither counts the elementwise products (by `dt`, the decays, `D`), softplus, cumulative
  sums, exponentials, masks or the gated RMSNorm.
  Each of these also with LatentMoE (`moe_latent_size` 24: the routed experts at that
  width between `fc1_latent_proj` and `fc2_latent_proj`).
* A looped model of it (layers 2-4, `*EM`: attention, MoE and Mamba-2, run twice, residual
  scale 0.5 and 1), exported as a model directory, builds in Transformers with smelt's
  parameter count (each physical layer once), executes smelt's training FLOPs (the same
  overcount, per Mamba-2 layer execution), runs its loop (each looped layer visited
  twice), computes the stock model unrolled by hand with every block's output scaled, and
  decodes on a cache with a slot per execution (the conv and SSM states included) as its
  full forward computes (`tiny_hf.check_looped`).
"""

import copy
import json
import pathlib

import pytest

import smelt

torch = pytest.importorskip("torch", reason="torch is not installed (CI installs it)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")
from tiny_hf import build, check_looped, executions_of, export_looped, output_projections, smelt_model, training_step_flops  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
NANO = ROOT / "tests" / "data" / "hf" / "nemotron-3-nano-30b-a3b.json"
SUPER = ROOT / "crates" / "smelt" / "data" / "published" / "models" / "nemotron-3-super-120b-a12b.json"
# The routed experts' width without (None) and with LatentMoE.
LATENTS = [None, 24]
VOCAB = 128

TINY = dict(
    hidden_size=64,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    num_hidden_layers=6,
    hybrid_override_pattern="M*EM-E",
    vocab_size=VOCAB,
    max_position_embeddings=256,
    n_routed_experts=4,
    num_experts_per_tok=2,
    moe_intermediate_size=32,
    moe_shared_expert_intermediate_size=48,
    intermediate_size=40,
    mamba_num_heads=4,
    mamba_head_dim=8,
    ssm_state_size=8,
    n_groups=2,
    conv_kernel=4,
    chunk_size=8,
)


def tiny_config(latent=None):
    config = json.loads(NANO.read_text())
    config.update(copy.deepcopy(TINY))
    if latent is not None:
        config["moe_latent_size"] = latent
    for key in ("pad_token_id", "eos_token_id", "bos_token_id", "torch_dtype"):
        config.pop(key, None)
    return config


def conv_overcount(model_file, tokens):
    """FlopCounterMode's depthwise weight-gradient overcount per sequence (module doc)."""
    m = model_file["model"]
    x = m["recurrent"]["mixer"]["mamba2"]
    layers = executions_of(model_file, m["recurrent"]["layers"])
    channels = x["heads"] * x["head_dim"] + 2 * x["groups"] * x["state"]
    w = x["conv_kernel"]
    return layers * 2 * channels * (channels - 1) * (tokens + w - 1) * w


@pytest.mark.parametrize(
    "path, total, latent",
    [(NANO, 31_577_937_344, 0), (SUPER, 120_668_687_360, 2 * 4096 * 1024 * 40)],
)
def test_the_published_config_builds_smelts_count(path, total, latent):
    config = json.loads(path.read_text())
    cfg = transformers.AutoConfig.for_model(**config)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    cost = smelt.cost(smelt.import_hf(config))
    assert sum(p.numel() for p in model.parameters()) == cost["params"]["total"] == total
    projections = [p.numel() for n, p in model.named_parameters() if "latent_proj" in n]
    assert sum(projections) == cost["params"]["breakdown"].get("latent_projections", 0) == latent


@pytest.mark.parametrize("latent", LATENTS)
def test_the_export_builds_the_model_smelt_costed(latent, tmp_path):
    config = tiny_config(latent)
    imported = smelt.import_hf(config)
    written = smelt.export_hf(imported, tmp_path / "export", family="nemotron_h")
    directory = pathlib.Path(written["models"][0]["path"])
    exported = json.loads((directory / "config.json").read_text())
    assert exported["model_type"] == "nemotron_h"
    assert exported.get("moe_latent_size") == latent
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.from_pretrained(directory))
    assert model.config.layers_block_type == [
        "linear_attention",
        "full_attention",
        "moe",
        "linear_attention",
        "mlp",
        "moe",
    ]
    cost = smelt.cost(directory)
    assert sum(p.numel() for p in model.parameters()) == cost["params"]["total"]
    assert sum(p.numel() for p in build(config).parameters()) == cost["params"]["total"]


@pytest.mark.parametrize("latent", LATENTS)
@pytest.mark.parametrize("tokens", [12, 70])
def test_a_training_step_executes_smelts_flops(tokens, latent):
    config = tiny_config(latent)
    model = build(config)
    assert model.config.chunk_size == 8
    model_file = smelt_model(config, tokens)
    cost = smelt.cost(model_file)
    counted = training_step_flops(model, tokens)
    conv = conv_overcount(model_file, tokens)
    want = cost["flops_per_token"]["training"] * tokens
    assert counted == pytest.approx(want + conv, abs=0.5), (counted, want, conv)
    # With torch's weight-gradient term corrected, the step is smelt's count exactly.
    assert counted - conv == pytest.approx(want, abs=0.5)


@pytest.mark.parametrize("latent", LATENTS)
@pytest.mark.parametrize("scale", [0.5, 1.0])
def test_a_looped_export_builds_the_model_smelt_costed(scale, latent, tmp_path):
    config = tiny_config(latent)
    loop = dict(first=2, span=3, repeats=2, residual_scale=scale)
    directory = export_looped(config, "nemotron_h", tmp_path / "looped", loop)
    exported = json.loads((pathlib.Path(directory) / "config.json").read_text())
    assert exported["model_type"] == "smelt_looped"
    text = exported["text_config"]
    assert text["model_type"] == "nemotron_h" and "hybrid_override_pattern" not in text
    assert text["layers_block_type"][1:4] == ["full_attention", "moe", "linear_attention"]
    model = check_looped(directory, text, loop, ["layers_block_type"], output_projections)
    # Every block kind is a residual update of its own: the attention, the MoE, Mamba-2.
    assert model.language_model.config.layers_block_type == [text["layers_block_type"][p] for p in [0, 1, 2, 3, 1, 2, 3, 4, 5]]

    tokens = 12
    model_file = smelt_model(directory, tokens)
    cost = smelt.cost(model_file)
    assert sum(p.numel() for p in model.parameters()) == cost["params"]["total"]
    model.train()
    counted = training_step_flops(model, tokens)
    conv = conv_overcount(model_file, tokens)
    assert executions_of(model_file, model_file["model"]["recurrent"]["layers"]) == 2 + 1
    want = cost["flops_per_token"]["training"] * tokens
    assert counted == pytest.approx(want + conv, abs=0.5), (counted, want, conv)

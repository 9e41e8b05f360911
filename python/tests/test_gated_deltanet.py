"""Gated DeltaNet hybrids (qwen3_next, qwen3_5_moe_text) against Transformers' torch code.

For a tiny model of each family (shrunk from the published configs in tests/data/hf):

* smelt's export of the imported model builds in Transformers with smelt's parameter count;
* one training step (forward and backward, eager attention and eager experts, the torch
  fallbacks `torch_chunk_gated_delta_rule` and `causal_conv1d_fn`) counted by torch's
  FlopCounterMode equals smelt's training FLOPs under the dense-attention convention, up to
  two differences the test computes exactly and asserts:

  1. torch 2.15's FlopCounterMode ignores `groups` in the convolution backward's
     weight-gradient term (pytorch/pytorch#183405): for the depthwise conv of `c` channels,
     `w` taps and `T + w - 1` outputs it counts `2·c·c·(T + w - 1)·w` instead of
     `2·c·(T + w - 1)·w`, i.e. `2·c·(c - 1)·(T + w - 1)·w` too many per layer execution;
  2. the backward of each of the two unit-triangular solves per chunk and value head
     (`solve_triangular`, which FlopCounterMode does not count, nor does smelt) contains one
     matmul that FlopCounterMode does count: `-grad_B @ X^T`, `2·C²·d_v` and `2·C²·d_k`
     FLOPs, so `2·C²·(d_k + d_v)` per chunk, value head and recurrent layer execution;
  3. autograd skips what no loss depends on: the first chunk reads a state of zeros that
     needs no gradient (`initial_state` is None in training), so the backward of its two
     reads `k_cumdecay·S` and `q·S` has no gradient with respect to `S`
     (`2·(2·C·d_k·d_v)` FLOPs), and the last chunk's state update `kᵀ·v_new` feeds only the
     final state, which is not returned, so it has no backward at all (`2·(2·C·d_k·d_v)`):
     `8·C·d_k·d_v` FLOPs fewer per value head and recurrent layer execution than smelt's
     backward of 2 × forward.

  Neither counts the cumulative sums, exponentials, masks, l2 norms, the gated RMSNorm or
  the solves themselves.

* a looped model (layers 2-4, two Gated DeltaNet layers and an attention layer, run twice,
  residual scale 0.5 and 1), exported as a model directory, builds in Transformers with
  smelt's parameter count (each physical layer once), executes smelt's training FLOPs (the
  same differences, per recurrent layer execution), runs its loop (each looped layer
  visited twice), computes the stock model unrolled by hand with its updates scaled, and
  decodes on a cache with a slot per execution (the recurrent states included) as its full
  forward computes (`tiny_hf.check_looped`). So does one exported from a `qwen3_5_moe`
  wrapper's config.
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
HF = ROOT / "tests" / "data" / "hf"
VOCAB = 128
CHUNK = 64  # torch_chunk_gated_delta_rule's chunk_size default

TINY = dict(
    hidden_size=64,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    num_hidden_layers=4,
    vocab_size=VOCAB,
    max_position_embeddings=256,
    num_experts=4,
    num_experts_per_tok=2,
    moe_intermediate_size=32,
    shared_expert_intermediate_size=48,
    linear_num_key_heads=2,
    linear_num_value_heads=4,
    linear_key_head_dim=16,
    linear_value_head_dim=8,
    linear_conv_kernel_dim=4,
    full_attention_interval=4,
)

FAMILIES = {"qwen3_next": "qwen3-next-80b-a3b", "qwen3_5_moe_text": "qwen3.5-35b-a3b"}


def tiny_config(family):
    config = json.loads((HF / f"{FAMILIES[family]}.json").read_text())
    config.update(copy.deepcopy(TINY))
    for key in ("pad_token_id", "eos_token_id", "bos_token_id"):
        config.pop(key, None)
    return config


def flop_counter_differences(model_file, tokens):
    """What FlopCounterMode counts beyond smelt's training FLOPs, per sequence (module doc)."""
    m = model_file["model"]
    g = m["recurrent"]["mixer"]["gated_deltanet"]
    layers = executions_of(model_file, m["recurrent"]["layers"])
    channels = 2 * g["key_heads"] * g["key_head_dim"] + g["value_heads"] * g["value_head_dim"]
    w = g["conv_kernel"]
    outputs = tokens + w - 1
    conv = 2 * channels * (channels - 1) * outputs * w
    chunks = -(-tokens // CHUNK)
    solves = chunks * g["value_heads"] * 2 * CHUNK * CHUNK * (g["key_head_dim"] + g["value_head_dim"])
    skipped = g["value_heads"] * 8 * CHUNK * g["key_head_dim"] * g["value_head_dim"]
    return layers * conv, layers * (solves - skipped)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_export_builds_the_model_smelt_costed(family, tmp_path):
    config = tiny_config(family)
    imported = smelt.import_hf(config)
    written = smelt.export_hf(imported, tmp_path / "export", family=family)
    directory = pathlib.Path(written["models"][0]["path"])
    exported = json.loads((directory / "config.json").read_text())
    assert exported["model_type"] == family
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.from_pretrained(directory))
    cost = smelt.cost(directory)
    assert sum(p.numel() for p in model.parameters()) == cost["params"]["total"]
    assert sum(p.numel() for p in build(config).parameters()) == cost["params"]["total"]


@pytest.mark.parametrize("tokens", [12, 70])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_training_step_executes_smelts_flops(family, tokens):
    config = tiny_config(family)
    model = build(config)
    model_file = smelt_model(config, tokens)
    cost = smelt.cost(model_file)
    counted = training_step_flops(model, tokens)
    conv, solves = flop_counter_differences(model_file, tokens)
    want = cost["flops_per_token"]["training"] * tokens
    assert counted == pytest.approx(want + conv + solves, abs=0.5), (counted, want, conv, solves)
    # The conv overcount is torch's, not the model's: with the weight-gradient term
    # corrected, the step is smelt's count plus the solves' backward matmuls, less the
    # gradients autograd skips.
    assert counted - conv == pytest.approx(want + solves, abs=0.5)


LOOP = dict(first=2, span=3, repeats=2)


@pytest.mark.parametrize("scale", [0.5, 1.0])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_looped_export_builds_the_model_smelt_costed(family, scale, tmp_path):
    config = tiny_config(family)
    loop = dict(LOOP, residual_scale=scale)
    directory = export_looped(config, family, tmp_path / "looped", loop)
    exported = json.loads((pathlib.Path(directory) / "config.json").read_text())
    assert exported["model_type"] == "smelt_looped"
    text = exported["text_config"]
    assert text["model_type"] == family
    # The loop holds both kinds of layer.
    assert text["layer_types"][1:4] == ["linear_attention", "linear_attention", "full_attention"]
    model = check_looped(directory, text, loop, ["layer_types"], output_projections)

    tokens = 12
    model_file = smelt_model(directory, tokens)
    assert model_file["model"]["loop"] == loop
    cost = smelt.cost(model_file)
    assert sum(p.numel() for p in model.parameters()) == cost["params"]["total"]
    model.train()
    counted = training_step_flops(model, tokens)
    conv, solves = flop_counter_differences(model_file, tokens)
    assert executions_of(model_file, model_file["model"]["recurrent"]["layers"]) == 3 + 2
    want = cost["flops_per_token"]["training"] * tokens
    assert counted == pytest.approx(want + conv + solves, abs=0.5), (counted, want, conv, solves)


def test_a_looped_qwen3_5_wrapper_exports_its_text_decoder(tmp_path):
    """A `qwen3_5_moe` wrapper (what Qwen3.5's checkpoints name) is read as its text decoder,
    and its looped export is a `qwen3_5_moe_text` model directory, the wrapper's text keys
    carried."""
    text = dict(tiny_config("qwen3_5_moe_text"), rms_norm_eps=2e-6)
    wrapper = {"model_type": "qwen3_5_moe", "architectures": ["Qwen3_5MoeForConditionalGeneration"], "text_config": text}
    loop = dict(LOOP, residual_scale=0.5)
    directory = export_looped(wrapper, None, tmp_path / "looped", loop)
    exported = json.loads((pathlib.Path(directory) / "config.json").read_text())
    assert exported["text_config"]["model_type"] == "qwen3_5_moe_text"
    assert exported["text_config"]["rms_norm_eps"] == 2e-6
    check_looped(directory, exported["text_config"], loop, ["layer_types"], output_projections)

"""smelt's `transformers-eager` and `transformers-sdpa` activation policies against what
PyTorch keeps for the backward pass of a Transformers training step, byte for byte.

For a tiny model of each family the policies count (the stock model, built by Transformers
from the family's config, and the tiny Baseline's looped export, whose every visit of a
layer saves its own), one forward pass runs on CPU under
`torch.autograd.graph.saved_tensors_hooks`; every packed tensor is kept alive until the
forward ends (so that no storage address is reused), and each storage saved inside a
decoder layer (a class whose name ends in `DecoderLayer`, or Nemotron-H's `NemotronHBlock`;
parameters and buffers left out) is counted once, by its `nbytes`. That
total equals smelt's `activations.policies[].at_context` for the policy, exactly:

* `transformers-eager`: `attn_implementation="eager"`, `experts_implementation="eager"`;
* `transformers-sdpa`: Transformers' defaults, `"sdpa"` and `"grouped_mm"` (Llama-4's
  experts have one implementation, which setting any raises: left unset);

in float32 (`activation_bytes = 4`) and in bfloat16 weights (`2`), at two sequence lengths.
`python test_saved_tensors.py` prints the table.
"""

import itertools
import json
import pathlib
import tempfile

import pytest
import smelt

torch = pytest.importorskip("torch", reason="torch is not installed (CI installs it)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import test_export_hf as hf
import test_gated_deltanet as gated_deltanet
import test_gemma4 as gemma4
import test_mamba2 as mamba2
from tiny_hf import export_looped

# Every family smelt imports (test_every_family_is_counted).
FAMILIES = [
    "mixtral",
    "olmoe",
    "qwen2_moe",
    "qwen3_moe",
    "granitemoe",
    "minimax_m2",
    "phimoe",
    "gpt_oss",
    "deepseek_v2",
    "deepseek_v3",
    "kimi_k2",
    "glm4_moe",
    "deepseek_v32",
    "glm_moe_dsa",
    "llama4_text",
    "gemma4_text",
    "nemotron_h",
    "qwen3_next",
    "qwen3_5_moe_text",
]
# PhiMoE's rows without its input noise (with it: test_counts_the_input_noise). Kimi-K2's
# and DeepSeek-V2's experts in two groups, their tokens routed within the best one
# (DeepSeek-V3's tiny config has one group; DeepSeek-V2's greedy router:
# test_deepseek_v2_lite).
GROUPS = {"n_group": 2, "topk_group": 1}
# Llama-4's tiny config is Maverick's, whose `attn_temperature_tuning` is 4: Transformers 5.24
# builds only a bool (its config class refuses 4). Its L2 q/k norm on (Scout's), so that
# the rows count it; Maverick's (off) and the default chunk size: test_llama4_variants.
LLAMA4 = {"attn_temperature_tuning": True, "use_qk_norm": True}
CHANGES = {
    "phimoe": {"input_jitter_noise": 0.0},
    "kimi_k2": GROUPS,
    "deepseek_v2": GROUPS,
    "llama4_text": LLAMA4,
}
# Transformers has no `kimi_k2` type: Kimi-K2's checkpoints are built by their own copy of
# DeepSeek-V3's code, so its stock config is built by Transformers' DeepSeek-V3 classes (as
# its export is, whose `model_type` smelt writes as `deepseek_v3`).
BUILT_AS = {"kimi_k2": "deepseek_v3"}
STACKS = {
    "transformers-eager": ("eager", "eager"),
    "transformers-sdpa": ("sdpa", "grouped_mm"),
}
# Transformers builds gpt-oss with eager attention only (`_supports_sdpa = False`):
# transformers-sdpa refuses it (test_refuses_gpt_oss_under_sdpa).
EAGER_ONLY = {"gpt_oss"}
DTYPES = {"float32": (torch.float32, 4), "bfloat16": (torch.bfloat16, 2)}
LENGTHS = (48, 80)
EXPORTS = tempfile.TemporaryDirectory(prefix="smelt-saved-")


def is_decoder_layer(module):
    """A decoder layer's class: `*DecoderLayer`, or Nemotron-H's `NemotronHBlock` (one norm
    and one block: Mamba-2, attention, MLP or MoE)."""
    name = type(module).__name__
    return name.endswith("DecoderLayer") or name == "NemotronHBlock"


def saved_bytes(model, tokens):
    """Bytes of the storages a forward of `tokens` random ids saves inside decoder layers,
    each storage once."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    params |= {b.untyped_storage().data_ptr() for b in model.buffers()}
    depth, keep, seen = [0], [], {}

    def pre(module, args):
        depth[0] += is_decoder_layer(module)

    def post(module, args, out):
        depth[0] -= is_decoder_layer(module)

    hooks = [
        h
        for m in model.modules()
        for h in (m.register_forward_pre_hook(pre), m.register_forward_hook(post))
    ]

    def pack(t):
        keep.append(t)
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in params and ptr not in seen:
            seen[ptr] = (storage.nbytes(), depth[0] > 0)
        return t

    torch.manual_seed(0)
    x = torch.randint(0, hf.VOCAB, (1, tokens))
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = model(x)
    finally:
        for h in hooks:
            h.remove()
    del out
    return sum(n for n, inside in seen.values() if inside)


# The Gated DeltaNet hybrids' tiny configs (test_gated_deltanet.py's: three Gated DeltaNet
# layers, then a gated attention layer; 2 query/key heads, 4 value heads).
GATED_DELTANET = set(gated_deltanet.FAMILIES)


def tiny_config(family):
    """The family's tiny config: test_export_hf.py's, Gemma 4's test_gemma4.py's (sliding and
    full layers of their own shape, values from the keys, the dense MLP beside the experts),
    Nemotron-H's test_mamba2.py's (`M*EM-E`: every kind of block), the Gated DeltaNet
    hybrids' test_gated_deltanet.py's."""
    if family == "gemma4_text":
        return gemma4.tiny_config()
    if family == "nemotron_h":
        return mamba2.tiny_config()
    if family in GATED_DELTANET:
        return gated_deltanet.tiny_config(family)
    return hf.tiny_config(family)


def stock(family):
    """The family's tiny config, as a directory smelt imports and Transformers builds."""
    directory = pathlib.Path(tempfile.mkdtemp(dir=EXPORTS.name))
    config = dict(tiny_config(family), **CHANGES.get(family, {}))
    (directory / "config.json").write_text(json.dumps(config))
    return directory


# Kimi-K2's and DeepSeek-V2's looped matches keep a multiple of their two expert groups (with
# the family's lattice they keep two experts, which the groups do not fit: the router is
# then not stated).
LATTICES = {f: {"experts": {"step": 4, "min": 4, "max": 8}} for f in ("kimi_k2", "deepseek_v2")}


# Gemma 4's looped export: layers 2-3 (a full and a sliding layer) visited twice, its
# updates scaled by 0.5 (test_gemma4.py's loop).
GEMMA4_LOOP = dict(first=2, span=2, repeats=2, residual_scale=0.5)
# Nemotron-H's looped export: layers 2-4 (attention, MoE, Mamba-2) visited twice
# (test_mamba2.py's loop).
NEMOTRON_H_LOOP = dict(first=2, span=3, repeats=2, residual_scale=0.5)
OWN_LOOPS = {"gemma4_text": GEMMA4_LOOP, "nemotron_h": NEMOTRON_H_LOOP}


# The hybrids' looped export: layers 2-4 (two Gated DeltaNet layers and the attention
# layer) visited twice, its updates scaled by 0.5 (test_gated_deltanet.py's loop).
GATED_DELTANET_LOOP = dict(gated_deltanet.LOOP, residual_scale=0.5)


def looped(family):
    directory = pathlib.Path(tempfile.mkdtemp(dir=EXPORTS.name))
    if family in OWN_LOOPS:
        return export_looped(tiny_config(family), family, directory / "looped", OWN_LOOPS[family])
    if family in GATED_DELTANET:
        return export_looped(tiny_config(family), family, directory / "looped", GATED_DELTANET_LOOP)
    return hf.export(family, directory, lattice=LATTICES.get(family), changes=CHANGES.get(family))


def config_of(directory):
    """The Transformers config of `directory` (a family in `BUILT_AS` as the type it names)."""
    config = json.loads((pathlib.Path(directory) / "config.json").read_text())
    if config.get("model_type") not in BUILT_AS:
        return transformers.AutoConfig.from_pretrained(directory, trust_remote_code=True)
    return transformers.AutoConfig.for_model(**dict(config, model_type=BUILT_AS[config["model_type"]]))


# Transformers builds Llama-4's experts one way (`Llama4TextExperts`): setting
# `experts_implementation` raises (test_llama4_has_one_experts_implementation), and
# unset it is that one, which transformers-sdpa counts.
ONE_EXPERTS_IMPLEMENTATION = {"llama4_text"}


def family_type(config):
    """The `model_type` of a config's family (a looped export's is its text config's)."""
    return config.text_config.model_type if config.model_type == "smelt_looped" else config.model_type


def build(directory, stack, dtype):
    attn, experts = STACKS[stack]
    config = config_of(directory)
    implementation = {"experts_implementation": experts}
    if family_type(config) in ONE_EXPERTS_IMPLEMENTATION and stack == "transformers-sdpa":
        implementation = {}
    model = transformers.AutoModelForCausalLM.from_config(
        config,
        trust_remote_code=True,
        attn_implementation=attn,
        **implementation,
    )
    return model.to(dtype).train()


def smelt_bytes(directory, stack, activation_bytes, tokens):
    return policy_bytes(smelt.import_hf(directory), stack, activation_bytes, tokens)


def policy_bytes(spec, stack, activation_bytes, tokens):
    """smelt's `at_context` for the model file `spec` under the policy `stack`."""
    spec["workload"] = {
        "context": tokens,
        "mean_doc_len": tokens,
        "attention": "causal",
        "kv_dtype_bytes": 2,
    }
    spec.setdefault("counting", {}).update(activations=stack, activation_bytes=activation_bytes)
    cost = smelt.cost(spec)
    (entry,) = [p for p in cost["activations"]["policies"] if p["policy"] == stack]
    return entry["at_context"]


BUILDS = {"stock": stock, "looped": looped}
DIRECTORIES = {}


def directory_of(family, build_kind):
    key = (family, build_kind)
    if key not in DIRECTORIES:
        DIRECTORIES[key] = BUILDS[build_kind](family)
    return DIRECTORIES[key]


def row(family, build_kind, stack, dtype_name, tokens):
    directory = directory_of(family, build_kind)
    dtype, activation_bytes = DTYPES[dtype_name]
    pytorch = saved_bytes(build(directory, stack, dtype), tokens)
    return pytorch, smelt_bytes(directory, stack, activation_bytes, tokens)


CASES = [
    case
    for case in itertools.product(FAMILIES, BUILDS, STACKS, DTYPES, LENGTHS)
    if case[0] not in EAGER_ONLY or case[2] == "transformers-eager"
]


@pytest.mark.parametrize("family,build_kind,stack,dtype_name,tokens", CASES)
def test_smelt_counts_what_pytorch_saves(family, build_kind, stack, dtype_name, tokens):
    pytorch, counted = row(family, build_kind, stack, dtype_name, tokens)
    assert counted == pytorch, (pytorch, counted, pytorch - counted)


@pytest.mark.parametrize("stack,dtype_name", list(itertools.product(STACKS, DTYPES)))
def test_deepseek_v2_lite(stack, dtype_name):
    """DeepSeek-V2-Lite's shape: a plain query projection (`q_lora_rank` null) and the greedy
    router (`router = "softmax_fp32"`)."""
    directory = pathlib.Path(tempfile.mkdtemp(dir=EXPORTS.name))
    config = dict(hf.tiny_config("deepseek_v2"), q_lora_rank=None, topk_method="greedy")
    (directory / "config.json").write_text(json.dumps(config))
    assert smelt.import_hf(directory)["model"]["moe"]["router"] == "softmax_fp32"
    dtype, activation_bytes = DTYPES[dtype_name]
    pytorch = saved_bytes(build(directory, stack, dtype), LENGTHS[0])
    assert smelt_bytes(directory, stack, activation_bytes, LENGTHS[0]) == pytorch


@pytest.mark.parametrize("family", ["deepseek_v32", "glm_moe_dsa"])
@pytest.mark.parametrize("stack,dtype_name", list(itertools.product(STACKS, DTYPES)))
def test_the_indexer_saves_nothing(family, stack, dtype_name):
    """DeepSeek-V3.2's and GLM-5's sparse attention indexer runs under no_grad and its
    top-k only masks the scores: their classes save what DeepSeek-V3's save from the same
    config (GLM-5's RoPE is as wide as `qk_rope_head_dim`), with an `index_topk` between
    the two lengths (all keys chosen at the shorter) as with one below both, and smelt
    counts the model with the indexer as without it."""
    directory = pathlib.Path(tempfile.mkdtemp(dir=EXPORTS.name))
    config = dict(hf.tiny_config(family), index_topk=64)
    assert LENGTHS[0] <= config["index_topk"] < LENGTHS[1]
    (directory / "config.json").write_text(json.dumps(config))
    plain = dict(config, model_type="deepseek_v3", head_dim=config["qk_rope_head_dim"])
    dtype, activation_bytes = DTYPES[dtype_name]
    for tokens in LENGTHS:
        pytorch = saved_bytes(build(directory, stack, dtype), tokens)
        model = transformers.AutoModelForCausalLM.from_config(
            transformers.AutoConfig.for_model(**plain),
            attn_implementation=STACKS[stack][0],
            experts_implementation=STACKS[stack][1],
        )
        assert saved_bytes(model.to(dtype).train(), tokens) == pytorch, tokens
        assert smelt_bytes(directory, stack, activation_bytes, tokens) == pytorch, tokens
        spec = smelt.import_hf(directory)
        assert spec["model"].pop("indexer")["topk"] == 64
        assert policy_bytes(spec, stack, activation_bytes, tokens) == pytorch, tokens


# GLM-5's published heads: query/key heads (qk_nope_head_dim + qk_rope_head_dim) as wide as
# the value heads, on the tiny configs' widths (8 + 8 = 16).
EQUAL_WIDTHS = {"qk_nope_head_dim": 8}


def equal_widths(family, build_kind):
    directory = pathlib.Path(tempfile.mkdtemp(dir=EXPORTS.name))
    if build_kind == "looped":
        return hf.export(family, directory, changes=EQUAL_WIDTHS)
    (directory / "config.json").write_text(json.dumps(dict(hf.tiny_config(family), **EQUAL_WIDTHS)))
    return directory


@pytest.mark.parametrize("family", ["deepseek_v32", "glm_moe_dsa"])
@pytest.mark.parametrize("build_kind", sorted(BUILDS))
@pytest.mark.parametrize("stack,dtype_name", list(itertools.product(STACKS, DTYPES)))
def test_mla_with_equal_widths_and_the_indexer(family, build_kind, stack, dtype_name):
    """With MLA's query/key heads as wide as its value heads (GLM-5's shape), SDPA runs
    PyTorch's flash kernel, with the mask the indexer makes Transformers pass: it keeps
    the mask (T x T in the dtype) and its head-major output besides o_proj's copy. Counted
    exactly, stock and looped, at both lengths."""
    directory = equal_widths(family, build_kind)
    spec = smelt.import_hf(directory)
    mla = spec["model"]["mla"]
    assert mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"] == mla["v_head_dim"]
    dtype, activation_bytes = DTYPES[dtype_name]
    for tokens in LENGTHS:
        pytorch = saved_bytes(build(directory, stack, dtype), tokens)
        assert smelt_bytes(directory, stack, activation_bytes, tokens) == pytorch, (tokens, pytorch)


def test_refuses_mla_with_equal_widths_without_the_indexer():
    """Without the indexer Transformers hands SDPA no mask, and PyTorch's flash kernel
    without one was not checked: transformers-sdpa refuses DeepSeek-V3 with equal widths,
    naming the field (transformers-eager counts it)."""
    config = dict(hf.tiny_config("deepseek_v3"), **EQUAL_WIDTHS)
    error = refusal_of(smelt.import_hf(config), "transformers-sdpa")
    assert error.startswith("model.mla.v_head_dim") and "without a sparse attention indexer" in error, error
    assert policy_bytes(smelt.import_hf(config), "transformers-eager", 4, LENGTHS[0]) > 0


def test_every_family_is_counted():
    """Every family smelt imports is counted by both policies (gpt-oss under
    transformers-eager only: Transformers builds no SDPA attention for it)."""
    assert sorted(smelt.families()) == sorted(FAMILIES)


@pytest.mark.parametrize("build_kind", sorted(BUILDS))
def test_refuses_gpt_oss_under_sdpa(build_kind):
    """Transformers builds no SDPA attention for gpt-oss (its sinks), stock or looped: the
    policy named after it refuses the model, naming why."""
    directory = directory_of("gpt_oss", build_kind)
    with pytest.raises(ValueError, match="does not support an attention implementation"):
        build(directory, "transformers-sdpa", torch.float32)
    with pytest.raises(smelt.SmeltError, match="builds with no SDPA attention: use transformers-eager"):
        smelt_bytes(directory, "transformers-sdpa", 4, 48)


def refusal_of(spec, stack):
    spec["workload"] = {"context": 48, "mean_doc_len": 48, "attention": "causal", "kv_dtype_bytes": 2}
    spec.setdefault("counting", {})["activations"] = stack
    with pytest.raises(smelt.SmeltError) as e:
        smelt.cost(spec)
    return str(e.value)


@pytest.mark.parametrize(
    "change,field",
    [
        ({"attention_sinks": False}, "model.attention_sinks"),
        ({"moe": {"expert_bias": False}}, "model.moe.expert_bias"),
        ({"moe": {"activation": "swiglu"}}, "model.moe.activation"),
    ],
)
def test_refuses_gpt_oss_features_apart(change, field):
    """gpt-oss's sinks, expert biases and clamped SwiGLU are counted as its classes, which
    build them together: a model with some but not all is refused, naming the one missing."""
    spec = smelt.import_hf(hf.tiny_config("gpt_oss"))
    for key, value in change.items():
        if isinstance(value, dict):
            spec["model"][key].update(value)
        else:
            spec["model"][key] = value
    error = refusal_of(spec, "transformers-eager")
    assert error.startswith(field) and "no Transformers class builds them apart" in error, error


def test_refuses_partial_rope_in_a_window_under_sdpa():
    """A sliding-window layer with a partial RoPE under SDPA (its mask with the head-major
    copy) was not checked against PyTorch: refused, naming the field."""
    spec = smelt.import_hf(hf.tiny_config("minimax_m2"))
    spec["model"]["window"] = {"kind": "sliding", "size": 8, "layers": [1, 2, 3, 4]}
    error = refusal_of(spec, "transformers-sdpa")
    assert error.startswith("model.rope_dim") and "partial RoPE" in error, error


def windowed(build_kind, window):
    """Mixtral's tiny stock model or looped export with a sliding window of `window` tokens
    on every layer."""
    directory = pathlib.Path(tempfile.mkdtemp(dir=EXPORTS.name))
    if build_kind == "looped":
        return hf.export("mixtral", directory, changes={"sliding_window": window})
    config = dict(hf.tiny_config("mixtral"), sliding_window=window)
    (directory / "config.json").write_text(__import__("json").dumps(config))
    return directory


# Windows shorter than both lengths, as long as the shorter (SDPA gets a mask where the
# window is no longer than the sequence) and longer than it (no mask at T = 48).
WINDOWS = (8, 48, 64)


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("build_kind", sorted(BUILDS))
@pytest.mark.parametrize("stack", sorted(STACKS))
@pytest.mark.parametrize("dtype_name", sorted(DTYPES))
def test_sliding_window(window, build_kind, stack, dtype_name):
    """Mixtral with a sliding window, counted exactly at both lengths: under eager attention
    it saves what full attention does (the mask is made outside the layers and added);
    under SDPA, where Transformers hands the layer a mask, the mask (T x T in the dtype) and
    the keys and values copied to every head, as much as without a window otherwise."""
    dtype, activation_bytes = DTYPES[dtype_name]
    directory = windowed(build_kind, window)
    for tokens in LENGTHS:
        model = build(directory, stack, dtype)
        pytorch = saved_bytes(model, tokens)
        assert smelt_bytes(directory, stack, activation_bytes, tokens) == pytorch, (tokens, pytorch)
        full = row("mixtral", build_kind, stack, dtype_name, tokens)[0] if build_kind == "stock" else None
        if full is not None and (stack == "transformers-eager" or window > tokens):
            assert pytorch == full

@pytest.mark.parametrize("stack", sorted(STACKS))
@pytest.mark.parametrize("dtype_name", sorted(DTYPES))
def test_heads_wider_than_256(stack, dtype_name):
    """Heads wider than 256 (a match may pick them): Transformers hands SDPA grouped keys
    only up to 256, so above it `repeat_kv` copies the keys and values to every head, as
    eager attention does; counted exactly at both lengths."""
    directory = pathlib.Path(tempfile.mkdtemp(dir=EXPORTS.name))
    config = dict(hf.tiny_config("mixtral"), head_dim=272)
    assert config["num_key_value_heads"] not in (1, config["num_attention_heads"])
    (directory / "config.json").write_text(__import__("json").dumps(config))
    dtype, activation_bytes = DTYPES[dtype_name]
    for tokens in LENGTHS:
        pytorch = saved_bytes(build(directory, stack, dtype), tokens)
        assert smelt_bytes(directory, stack, activation_bytes, tokens) == pytorch, (tokens, pytorch)


# Llama-4 apart from the rows' tiny config (chunks of 4 tokens, Scout's L2 q/k norm, NoPE
# layers with the temperature): Maverick's q/k norm off with the default chunk size (8192,
# longer than both lengths: SDPA gets no mask), a chunk as long as the shorter length (a
# mask at both), and NoPE layers without the temperature.
LLAMA4_VARIANTS = {
    "maverick": {"use_qk_norm": False, "attention_chunk_size": 8192},
    "chunk_48": {"attention_chunk_size": 48},
    "no_temperature": {"attn_temperature_tuning": False},
}


@pytest.mark.parametrize("variant", sorted(LLAMA4_VARIANTS))
@pytest.mark.parametrize("build_kind", sorted(BUILDS))
@pytest.mark.parametrize("stack", sorted(STACKS))
@pytest.mark.parametrize("dtype_name", sorted(DTYPES))
def test_llama4_variants(variant, build_kind, stack, dtype_name):
    """Llama-4's variants, stock and looped, counted exactly at both lengths."""
    changes = dict(LLAMA4, **LLAMA4_VARIANTS[variant])
    directory = pathlib.Path(tempfile.mkdtemp(dir=EXPORTS.name))
    if build_kind == "looped":
        directory = hf.export("llama4_text", directory, changes=changes)
    else:
        (directory / "config.json").write_text(json.dumps(dict(hf.tiny_config("llama4_text"), **changes)))
    dtype, activation_bytes = DTYPES[dtype_name]
    for tokens in LENGTHS:
        pytorch = saved_bytes(build(directory, stack, dtype), tokens)
        assert smelt_bytes(directory, stack, activation_bytes, tokens) == pytorch, (tokens, pytorch)


def test_llama4_has_one_experts_implementation():
    """Transformers 5.24 builds Llama-4's experts one way: asking for `grouped_mm` (or any
    implementation) raises, so transformers-sdpa counts them as they are built unset."""
    config = config_of(directory_of("llama4_text", "stock"))
    with pytest.raises(ValueError, match="does not support setting experts implementation"):
        transformers.AutoModelForCausalLM.from_config(config, experts_implementation="grouped_mm")


# The MoE's input noise (`[model.moe] jitter`) as each family's config names it, and the
# noise tensors a training step draws per MoE layer execution: Mixtral's and MiniMax-M2's
# MoE block draws one, PhiMoE's block one and its router another (Phi-3.5-MoE's published
# config has 0.01).
JITTER = {
    "mixtral": ({"router_jitter_noise": 0.01}, 1),
    "minimax_m2": ({"router_jitter_noise": 0.01}, 1),
    "phimoe": ({"input_jitter_noise": 0.01}, 2),
}


def moe_executions(spec):
    """The layer executions of a model whose every layer is a MoE layer (these families'):
    its layers, and each looped layer's visits after the first."""
    model = spec["model"]
    assert "dense" not in model, model
    loop = model.get("loop")
    return model["layers"] + (loop["span"] * (loop["repeats"] - 1) if loop else 0)


def jittered(family, build_kind):
    """The family's tiny model with its input noise: the stock config, or the looped
    export of a Baseline that has it (the export writes it)."""
    directory = pathlib.Path(tempfile.mkdtemp(dir=EXPORTS.name))
    changes = dict(CHANGES.get(family, {}), **JITTER[family][0])
    if build_kind == "looped":
        directory = hf.export(family, directory, changes=changes)
    else:
        (directory / "config.json").write_text(json.dumps(dict(tiny_config(family), **changes)))
    assert smelt.import_hf(directory)["model"]["moe"]["jitter"] == 0.01
    return directory


@pytest.mark.parametrize("family", sorted(JITTER))
@pytest.mark.parametrize("build_kind", sorted(BUILDS))
@pytest.mark.parametrize("stack,dtype_name", list(itertools.product(STACKS, DTYPES)))
def test_counts_the_input_noise(family, build_kind, stack, dtype_name):
    """With the MoE's input noise on, stock and looped, smelt counts exactly what PyTorch
    saves, at both lengths, and the noise is what the step saves beyond the same model
    without it: one `b·H` tensor per token, draw and MoE layer execution."""
    directory = jittered(family, build_kind)
    quiet = directory_of(family, build_kind)
    dtype, activation_bytes = DTYPES[dtype_name]
    spec = smelt.import_hf(directory)
    for tokens in LENGTHS:
        pytorch = saved_bytes(build(directory, stack, dtype), tokens)
        assert smelt_bytes(directory, stack, activation_bytes, tokens) == pytorch, (tokens, pytorch)
        without = saved_bytes(build(quiet, stack, dtype), tokens)
        draws = JITTER[family][1]
        noise = pytorch - without
        per_execution = draws * activation_bytes * spec["model"]["hidden"] * tokens
        assert noise > 0 and noise % per_execution == 0, (noise, per_execution)
        assert noise // per_execution == moe_executions(spec), (noise, per_execution)


@pytest.mark.parametrize("family", FAMILIES)
def test_looped_export_builds_in_the_baselines_dtype(family):
    """Built without a dtype, the looped export and its Baseline have the same one (the
    config's `torch_dtype`): the export carries it to the top-level config, which
    Transformers reads."""

    def dtype_of(directory):
        model = transformers.AutoModelForCausalLM.from_config(config_of(directory), trust_remote_code=True)
        return next(model.parameters()).dtype

    assert dtype_of(directory_of(family, "looped")) == dtype_of(directory_of(family, "stock"))


@pytest.mark.parametrize("stack,dtype_name", list(itertools.product(STACKS, DTYPES)))
def test_gemma4_full_layers_with_a_value_projection(stack, dtype_name):
    """Gemma 4's full layers without `k_eq_v` (a value projection, the model's key/value
    heads): the value norm keeps its own float32 input; counted exactly at both lengths."""
    directory = pathlib.Path(tempfile.mkdtemp(dir=EXPORTS.name))
    (directory / "config.json").write_text(json.dumps(gemma4.tiny_config(attention_k_eq_v=False)))
    assert smelt.import_hf(directory)["model"]["full_attention"].get("k_eq_v", False) is False
    dtype, activation_bytes = DTYPES[dtype_name]
    for tokens in LENGTHS:
        pytorch = saved_bytes(build(directory, stack, dtype), tokens)
        assert smelt_bytes(directory, stack, activation_bytes, tokens) == pytorch, (tokens, pytorch)


@pytest.mark.parametrize(
    "change,field",
    [
        ({"v_norm": False}, "model.v_norm"),
        ({"post_norms": False}, "model.post_norms"),
        ({"moe": {"branch_norms": False}}, "model.moe.branch_norms"),
        ({"moe": {"router_scale": False}}, "model.moe.router_scale"),
        ({"moe": {"activation": "swiglu"}}, "model.moe.activation"),
    ],
)
@pytest.mark.parametrize("stack", sorted(STACKS))
def test_refuses_gemma4_pieces_apart(change, field, stack):
    """Gemma 4's pieces are counted as its classes, which build them together: a model with
    some but not all is refused, naming the one missing."""
    spec = smelt.import_hf(gemma4.tiny_config())
    for key, value in change.items():
        if isinstance(value, dict):
            spec["model"][key].update(value)
        else:
            spec["model"][key] = value
    error = refusal_of(spec, stack)
    assert error.startswith(field) and "no Transformers class builds them apart" in error, error


def test_gemma4_only_under_the_transformers_policies():
    """The unfused counts do not model Gemma 4's pieces: under them the activations budget
    is refused by name; under a Transformers policy only that policy is reported."""
    spec = smelt.import_hf(gemma4.tiny_config())
    spec["workload"] = {"context": 48, "mean_doc_len": 48, "attention": "causal", "kv_dtype_bytes": 2}
    activations = smelt.cost(spec)["activations"]
    assert "the activation memory does not model" in activations["refused"], activations
    assert activations["policies"] == []
    spec["counting"] = {"activations": "transformers-sdpa"}
    activations = smelt.cost(spec)["activations"]
    assert "refused" not in activations, activations
    assert [p["policy"] for p in activations["policies"]] == ["transformers-sdpa"]


# Nemotron-H beside the rows' tiny config: LatentMoE (`moe_latent_size`, the routed experts
# at 24 wide between `fc1_latent_proj` and `fc2_latent_proj`), and sequences the SSD scan pads
# to its chunks of 8 (45 and 75 tokens: 48 and 80 padded).
NEMOTRON_H_VARIANTS = {"latent": (24, LENGTHS), "padded": (None, (45, 75))}


def nemotron_h(build_kind, latent):
    directory = pathlib.Path(tempfile.mkdtemp(dir=EXPORTS.name))
    config = mamba2.tiny_config(latent)
    if build_kind == "looped":
        return export_looped(config, "nemotron_h", directory / "looped", NEMOTRON_H_LOOP)
    (directory / "config.json").write_text(json.dumps(config))
    return directory


@pytest.mark.parametrize("variant", sorted(NEMOTRON_H_VARIANTS))
@pytest.mark.parametrize("build_kind", sorted(BUILDS))
@pytest.mark.parametrize("stack,dtype_name", list(itertools.product(STACKS, DTYPES)))
def test_nemotron_h_variants(variant, build_kind, stack, dtype_name):
    """Nemotron-H with LatentMoE, and at lengths the Mamba-2 scan pads, stock and looped,
    counted exactly."""
    latent, lengths = NEMOTRON_H_VARIANTS[variant]
    directory = nemotron_h(build_kind, latent)
    assert smelt.import_hf(directory)["model"]["moe"].get("latent") == latent
    dtype, activation_bytes = DTYPES[dtype_name]
    for tokens in lengths:
        pytorch = saved_bytes(build(directory, stack, dtype), tokens)
        assert smelt_bytes(directory, stack, activation_bytes, tokens) == pytorch, (tokens, pytorch)


def test_nemotron_h_only_under_the_transformers_policies():
    """The unfused counts and the Megatron-Core policies do not model Nemotron-H's Mamba-2
    layers, one-block layers and relu2 MLP: under them the activations budget is refused by
    name; under a Transformers policy only that policy is reported."""
    spec = smelt.import_hf(mamba2.tiny_config())
    spec["workload"] = {"context": 48, "mean_doc_len": 48, "attention": "causal", "kv_dtype_bytes": 2}
    activations = smelt.cost(spec)["activations"]
    assert "the activation memory does not model mamba2 layers" in activations["refused"], activations
    assert activations["policies"] == []
    for stack in STACKS:
        spec["counting"] = {"activations": stack}
        activations = smelt.cost(spec)["activations"]
        assert "refused" not in activations, activations
        assert [p["policy"] for p in activations["policies"]] == [stack]


@pytest.mark.parametrize(
    "change,field",
    [
        ({"moe": {"activation": "swiglu"}}, "model.moe.activation"),
        ({"moe": {"router": "sigmoid_renormalised_fp32", "router_bias": True}}, "model.moe.router"),
        ({"qk_norm": "per_head"}, "model.qk_norm"),
    ],
)
@pytest.mark.parametrize("stack", sorted(STACKS))
def test_refuses_what_nemotron_hs_classes_do_not_build(change, field, stack):
    """Nemotron-H's pieces are counted as its classes: a model without one of them (here the
    relu2 MLP), or with what the classes do not build (a stated router, q/k norms), is
    refused, naming the field."""
    spec = smelt.import_hf(mamba2.tiny_config())
    for key, value in change.items():
        if isinstance(value, dict):
            spec["model"][key].update(value)
        else:
            spec["model"][key] = value
    error = refusal_of(spec, stack)
    assert error.startswith(field) and "Nemotron-H" in error, error


@pytest.mark.parametrize("family", sorted(GATED_DELTANET))
def test_gated_deltanet_imports(family):
    """The hybrids' import states what a training step's saved tensors depend on: the
    router (a renormalised float32 softmax) and the partial RoPE (a quarter of each head)."""
    model = smelt.import_hf(tiny_config(family))["model"]
    assert model["moe"]["router"] == "softmax_renormalised"
    assert model["rope_dim"] == model["head_dim"] // 4


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_gated_deltanet_with_as_many_value_heads_as_key_heads(stack):
    """With as many value heads as query/key heads, Qwen3-Next's fused projection keeps its
    whole output for the gated norm in float32 and Qwen3.5's split ones do not: the model
    file does not say which class runs, so float32 is refused, naming the field; bf16,
    where both save the same, is counted exactly for both families."""
    changes = {"linear_num_value_heads": 2}
    spec = smelt.import_hf(dict(tiny_config("qwen3_next"), **changes))
    spec["counting"] = {"activation_bytes": 4}
    error = refusal_of(spec, stack)
    assert error.startswith("model.recurrent.mixer.gated_deltanet.value_heads"), error
    for family in sorted(GATED_DELTANET):
        directory = pathlib.Path(tempfile.mkdtemp(dir=EXPORTS.name))
        (directory / "config.json").write_text(json.dumps(dict(tiny_config(family), **changes)))
        for tokens in LENGTHS:
            pytorch = saved_bytes(build(directory, stack, torch.bfloat16), tokens)
            assert smelt_bytes(directory, stack, 2, tokens) == pytorch, (family, tokens, pytorch)


def test_gated_deltanet_only_under_the_transformers_policies():
    """The unfused counts and the Megatron-Core policies do not model the hybrids' pieces;
    a Transformers policy refuses an attention layer without the gate beside Gated DeltaNet
    layers (no class builds it), naming the field."""
    spec = smelt.import_hf(tiny_config("qwen3_next"))
    spec["workload"] = {"context": 48, "mean_doc_len": 48, "attention": "causal", "kv_dtype_bytes": 2}
    activations = smelt.cost(spec)["activations"]
    assert "the activation memory does not model" in activations["refused"], activations
    assert activations["policies"] == []
    spec["model"]["attention_gate"] = False
    error = refusal_of(spec, "transformers-eager")
    assert error.startswith("model.attention_gate") and "without the output gate" in error, error


if __name__ == "__main__":
    print("| family | build | stack | dtype | T | PyTorch bytes | smelt bytes | difference |")
    print("|---|---|---|---|---:|---:|---:|---:|")
    for case in CASES:
        pytorch, counted = row(*case)
        print("| " + " | ".join(map(str, case)) + f" | {pytorch} | {counted} | {counted - pytorch} |")

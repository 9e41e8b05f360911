"""Activation memory against PyTorch: what a training forward saves for backward.

For a tiny Baseline of every family smelt imports, SMELT's recipe is matched and exported
(as in test_export_hf.py); Transformers builds the export with eager attention, and one
forward pass runs on CPU in fp32 under `torch.autograd.graph.saved_tensors_hooks`. Every
distinct saved tensor (by storage, offset, shape and dtype; parameters and buffers left
out; each kept alive until the forward ends, so that no storage address is reused) is
attributed to the module that saved it, and sorted:

* `freed`: saved, but released before the forward ends, with the node that saved it (no
  gradient reaches it: the integer intermediates of group-limited routing, whose only
  consumer is a top-k);
* `outside`: saved outside the decoder layers (the token ids, the final norm, the LM
  head's input): smelt counts the decoder layers only;
* `view`: a storage already saved under another shape (eager attention saves its
  probabilities for the softmax's backward and, reshaped, for the PV matmul);
* `int`: integer tensors (top-k and dispatch indices): smelt counts floating activations;
* `shared`: one tensor saved by several layer executions (RoPE's cos and sin, computed once
  per forward);
* `norm_stat`: a norm's fp32 per-row statistic, which smelt leaves out;
* `norm_xhat`: a norm's second full-width tensor, `x·rsqrt(mean x²)`, saved for its
  weight's gradient besides its input (smelt counts the input and the normed output its
  consumer saves);
* `counted`: the rest, which smelt's `eager` count describes.

Exact checks, for every family: the attention probabilities PyTorch saves are smelt's
`scores` component; and `counted` equals smelt's `eager` bytes plus a difference the test
states exactly, with its reason, for every family (a family without one fails). Per token
and MoE execution (`E` experts, `k` routed, hidden `H`, expert width `F`), the differences
are Transformers' implementation of the family or, where said, a small feature of one
family that smelt's model does not describe:

* dispatch through `index_add_` keeps the weighted expert outputs, `k·H` (every family
  but Llama-4, whose experts see every token);
* routers that renormalise their top-k keep the `k` weights before and their sum, `k + 1`
  (Mixtral, Qwen3-MoE, MiniMax-M2, and DeepSeek-V3's sigmoid-plus-bias routing: DeepSeek-V3,
  V3.2, Kimi-K2, GLM-4.5, GLM-5); a softmax over the top-k only saves `k`, not `E`
  (Granite-MoE, GPT-OSS); group-limited routing's intermediates are integers, freed;
* PhiMoE: its input jitter (a training-time multiplicative noise, like the dropout smelt
  leaves out) is applied twice, by the MoE block and by its router, `2H`; its SparseMixer
  routing (a feature smelt does not model) adds a second softmax over the scores with the
  first choice masked, `E`, and the two multipliers its custom backward keeps, `2`;
* Llama-4's eager experts run every expert on every token: `(E − k)·(2H + 4F + 1)` (the
  repeated input, its scaled copy, SwiGLU's `4F`, the score per copy); its layers without
  RoPE scale their queries by a position temperature (a feature smelt does not model), `1`
  per token and such execution;
* DeepSeek-V3.2's and GLM-5's indexer runs without gradient and saves nothing, as smelt's
  `eager` count has it.

GPT-OSS's clamped SwiGLU, `(clamp(up) + 1)·g·σ(α·g)` with `g = clamp(gate)`, saves `7F` per
routed copy (both clamps' inputs, `g`, `σ(α·g)`, `up + 1`, `g·σ(α·g)`, the product) where
SwiGLU saves `4F`: that is the model's own activation, which smelt counts
(`activation = "clamped_swiglu"`), so it is no stated difference.

GPT-OSS and PhiMoE are matched with more experts than they route to (`LATTICE`), so that
their terms in `E − k` are seen. `python test_memory.py` prints the table.
"""

import collections
import functools
import itertools
import pathlib
import tempfile
import weakref

import pytest
import smelt

torch = pytest.importorskip("torch", reason="torch is not installed (CI installs it)")
pytest.importorskip("transformers", reason="transformers is not installed")

import test_export_hf as hf

BYTES = 4  # fp32 on CPU
# The exports, removed when the interpreter exits.
EXPORTS = tempfile.TemporaryDirectory(prefix="smelt-memory-")


class Saved:
    """What the pack hook hands autograd for one saved tensor: an object that lives exactly
    as long as the autograd node that saved it."""

    def __init__(self, tensor):
        self.tensor = tensor


def saved_tensors(model, x):
    """Each tensor the forward saves for backward: storage, offset, shape, dtype, bytes and
    the stack of (module class, call number) it was saved under."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    params |= {b.untyped_storage().data_ptr() for b in model.buffers()}
    stack, calls, saved, keep = [], itertools.count(), [], []

    def pre(module, args):
        stack.append((type(module).__name__, next(calls)))

    def post(module, args, out):
        stack.pop()

    hooks = [
        h
        for m in model.modules()
        for h in (m.register_forward_pre_hook(pre), m.register_forward_hook(post))
    ]

    def pack(t):
        storage = t.untyped_storage().data_ptr()
        holder = Saved(t)
        keep.append(t)
        if storage not in params:
            saved.append(
                (
                    storage,
                    t.storage_offset(),
                    tuple(t.shape),
                    t.dtype,
                    t.numel() * t.element_size(),
                    tuple(stack),
                    weakref.ref(holder),
                )
            )
        return holder

    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda holder: holder.tensor):
            out = model(x)
        # A saved tensor whose node no longer exists (no gradient path reaches it) died
        # with its holder; the others are what the backward pass reads.
        live = [s[:-1] + (s[-1]() is not None,) for s in saved]
        del out
    finally:
        for h in hooks:
            h.remove()
    return live


def classify(saved):
    """Bytes per category (module docs), and the attention probabilities' bytes."""
    layer_calls = collections.defaultdict(set)
    for storage, offset, shape, dtype, _, stack, _ in saved:
        layer = next((c for n, c in stack if n.endswith("DecoderLayer")), None)
        layer_calls[(storage, offset, shape, dtype)].add(layer)
    out, seen, places, norm_calls = (
        collections.Counter(),
        set(),
        set(),
        collections.Counter(),
    )
    probabilities = 0
    for storage, offset, shape, dtype, size, stack, live in saved:
        key = (storage, offset, shape, dtype)
        if key in seen:
            continue
        seen.add(key)
        names = [n for n, _ in stack]
        if not live:
            category = "freed"
        elif not any(n.endswith("DecoderLayer") for n in names):
            category = "outside"
        elif (storage, offset) in places:
            category = "view"
        elif not dtype.is_floating_point:
            category = "int"
        elif len(layer_calls[key]) > 1:
            category = "shared"
        elif names[-1].endswith("Norm") and shape[-1] == 1:
            category = "norm_stat"
        elif names[-1].endswith("Norm"):
            norm_calls[stack[-1][1]] += 1
            category = "norm_xhat" if norm_calls[stack[-1][1]] > 1 else "counted"
        else:
            category = "counted"
        if (
            category == "counted"
            and names[-1].endswith("Attention")
            and len(shape) == 4
            and shape[-2] == hf.T
        ):
            # (batch, heads, queries, keys [+ sink]): the softmax's saved output.
            probabilities += size if shape[-1] in (hf.T, hf.T + 1) else 0
        places.add((storage, offset))
        out[category] += size
    return out, probabilities


# Families whose stated difference has a term in `E - k`: their matches keep more experts
# than they route to, so that the term is seen.
MORE_EXPERTS = {"experts": {"step": 1, "min": 4, "max": 8}}
LATTICE = {"gpt_oss": MORE_EXPERTS, "phimoe": MORE_EXPERTS}


@functools.cache
def measure(family):
    """smelt's model dict and eager count of `family`'s tiny looped export, what PyTorch
    saves in one forward, and the facts of Transformers' build that the stated differences
    depend on (each family built once per session)."""
    directory = hf.export(
        family,
        pathlib.Path(tempfile.mkdtemp(dir=EXPORTS.name)),
        LATTICE.get(family, hf.LATTICE.get(family, {})),
    )
    model = hf.build(directory).float().train()  # the export carries bf16; counted here in fp32
    spec = smelt.import_hf(directory)
    spec["workload"] = {
        "context": hf.T,
        "mean_doc_len": hf.T,
        "attention": "causal",
        "kv_dtype_bytes": 2,
    }
    spec.setdefault("counting", {})["activation_bytes"] = BYTES
    cost = smelt.cost(spec)
    eager = next(p for p in cost["activations"]["policies"] if p["policy"] == "unfused-eager")
    torch.manual_seed(0)
    x = torch.randint(0, hf.VOCAB, (1, hf.T))
    categories, probabilities = classify(saved_tensors(model, x))
    text = model.language_model.config
    facts = {
        # Layer executions whose queries Llama-4 scales by a position temperature (its
        # layers without RoPE, with `attn_temperature_tuning`).
        "temperature_executions": sum(
            1
            for layer in model.language_model.model.layers
            if not getattr(layer.self_attn, "use_rope", True)
            and getattr(layer.self_attn, "attn_temperature_tuning", False)
        ),
        # PhiMoE's multiplicative input noise in training.
        "input_jitter": bool(getattr(text, "input_jitter_noise", None)),
    }
    return spec, eager, categories, probabilities, facts


INDEX_ADD = "index_add_ keeps the weighted expert outputs (k·H)"
RENORMALISED = "top-k renormalised: the k weights before and their sum (k + 1)"


def explained(family, spec, eager, facts):
    """The bytes `counted` exceeds smelt's eager count by, with the reason, where known.

    Every term is per token and MoE execution (times the MoE executions, tokens and bytes)
    unless said otherwise; `E` experts, `k` routed, hidden `H`, expert width `F`.
    """
    m = spec["model"]
    e, k, h, f = (
        m["moe"]["experts"],
        m["moe"]["top_k"],
        m["hidden"],
        m["moe"]["expert_ffn"],
    )
    # The router saves E probabilities and k chosen weights per token and MoE execution
    # (its per-token bytes give the MoE executions).
    moe_executions = eager["breakdown"]["router"] // ((e + k) * BYTES)

    def moe(elements):
        return elements * moe_executions * hf.T * BYTES

    index_add = moe(k * h)
    renormalised = moe(k + 1)
    dispatch_renormalised = (
        index_add + renormalised,
        f"{INDEX_ADD}; {RENORMALISED}",
    )
    # Sigmoid scores plus a correction bias choose the experts (DeepSeek-V3's routing;
    # the sigmoid saves its E outputs as a softmax does), group-limited (the group
    # top-k's indices and masks are integers, freed once the choice is made), and the k
    # chosen scores renormalised.
    sigmoid_routing = (
        index_add + renormalised,
        f"{INDEX_ADD}; sigmoid + bias routing, group-limited (integer intermediates only), {RENORMALISED}",
    )
    jitter = moe(2 * h) if facts["input_jitter"] else 0
    return {
        "mixtral": dispatch_renormalised,
        "qwen3_moe": dispatch_renormalised,
        "minimax_m2": dispatch_renormalised,
        "qwen2_moe": (index_add, INDEX_ADD),
        "olmoe": (index_add, INDEX_ADD),
        "granitemoe": (
            index_add - moe(e - k),
            f"{INDEX_ADD}; softmax over the top-k only (k, not E)",
        ),
        "deepseek_v2": (
            index_add,
            f"{INDEX_ADD}; softmax routing, group-limited greedy (integer intermediates only), not renormalised",
        ),
        "deepseek_v3": sigmoid_routing,
        "kimi_k2": sigmoid_routing,
        "glm4_moe": sigmoid_routing,
        "deepseek_v32": (
            sigmoid_routing[0],
            sigmoid_routing[1] + "; the indexer runs without gradient (saves nothing)",
        ),
        "glm_moe_dsa": (
            sigmoid_routing[0],
            sigmoid_routing[1] + "; the indexer runs without gradient (saves nothing)",
        ),
        "gpt_oss": (
            index_add - moe(e - k),
            f"{INDEX_ADD}; softmax over the top-k only (k, not E)",
        ),
        "phimoe": (
            index_add + jitter + moe(e + 2),
            f"{INDEX_ADD}; input jitter, a training-time multiplicative noise like dropout "
            "(which smelt leaves out), applied twice (by the MoE block and by its router: 2·H); "
            "SparseMixer routing: a second softmax over the scores with the first choice masked "
            "(E) and the two multipliers its custom backward keeps (2)",
        ),
        "llama4_text": (
            moe((e - k) * (2 * h + 4 * f + 1))
            + facts["temperature_executions"] * hf.T * BYTES,
            "eager experts run every expert on every token: (E − k)·(2H + 4F + 1) more (the "
            "repeated input, its scaled copy, SwiGLU's 4F and the score per copy); queries of "
            "its layers without RoPE scaled by a position temperature (1 per token and such "
            "execution)",
        ),
    }.get(family)


@pytest.mark.parametrize("family", sorted(hf.TINY))
def test_attention_probabilities_are_smelt_scores(family):
    _, eager, _, probabilities, _ = measure(family)
    assert probabilities == eager["breakdown"]["scores"] * hf.T


@pytest.mark.parametrize("family", sorted(hf.TINY))
def test_pytorch_saves_what_smelt_counts(family):
    spec, eager, categories, _, facts = measure(family)
    want = eager["per_token"] * hf.T
    difference = categories["counted"] - want
    known = explained(family, spec, eager, facts)
    assert known is not None, (
        f"{family}: PyTorch's counted tensors exceed smelt's eager bytes by {difference}, "
        "and the test states no reason"
    )
    assert difference == known[0], known[1]


COLUMNS = ("counted", "outside", "view", "int", "shared", "norm_stat", "norm_xhat", "freed")

if __name__ == "__main__":
    print(
        "| family | smelt eager | PyTorch saved | counted | outside | view | int | shared "
        "| norm stat | norm x̂ | freed | counted − smelt | reason |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for family in sorted(hf.TINY):
        spec, eager, c, _, facts = measure(family)
        want = eager["per_token"] * hf.T
        known = explained(family, spec, eager, facts)
        diff = c["counted"] - want
        if diff == 0:
            why = "-"
        elif known is None:
            why = "NOT EXPLAINED"
        else:
            why = f"{known[0]}{'' if known[0] == diff else ' (≠!)'}: {known[1]}"
        kept = sum(v for key, v in c.items() if key != "freed")
        print(
            f"| {family} | {want} | {kept} | "
            + " | ".join(str(c[key]) for key in COLUMNS)
            + f" | {diff} | {why} |"
        )

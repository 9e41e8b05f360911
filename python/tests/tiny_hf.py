"""Helpers the per-family tests share: a tiny config built by Transformers with eager
attention and experts (what FlopCounterMode counts), smelt's model of it at a dense
workload of one sequence (the masked square eager attention computes), and the checks of a
looped export (`check_looped`). Imported only by tests that have skipped themselves when
torch or Transformers is missing."""

import copy

import torch  # imported by the tests after their own importorskip
import transformers

import smelt


def build(config):
    """The model Transformers builds from `config`, eager attention and experts."""
    cfg = transformers.AutoConfig.for_model(**config)
    return transformers.AutoModelForCausalLM.from_config(
        cfg, attn_implementation="eager", experts_implementation="eager"
    )


def smelt_model(config, tokens):
    """smelt's import of `config` at one dense sequence of `tokens`."""
    model = smelt.import_hf(config)
    model["workload"] = {"context": tokens, "mean_doc_len": tokens, "attention": "dense", "kv_dtype_bytes": 2}
    return model


# Looped models of a family: exported by smelt as a model directory, built by Transformers
# with trust_remote_code, and checked against the family's stock model unrolled by hand.

VOCAB = 128


def training_step_flops(model, tokens):
    """FlopCounterMode's count of one training step of `model` (forward and backward of the
    language-model loss) on `tokens` random token ids, drawn with seed 0."""
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    x = torch.randint(0, VOCAB, (1, tokens))
    counter = FlopCounterMode(display=False)
    with counter:
        model(x, labels=x).loss.backward()
    return counter.get_total_flops()


def executions_of(model_file, layers):
    """How many times the 1-based `layers` of smelt's `model_file` execute: once each, and
    `repeats` times those inside its loop."""
    loop = model_file["model"].get("loop")
    if loop is None:
        return len(layers)
    span = range(loop["first"], loop["first"] + loop["span"])
    return len(layers) + (loop["repeats"] - 1) * sum(1 for i in layers if i in span)


def execution_order(loop, layers):
    """The 0-based physical layer of each execution: the layers before the loop, its span
    `repeats` times, the rest (written here from the loop's definition, not from the
    exported code)."""
    start, end = loop["first"] - 1, loop["first"] - 1 + loop["span"]
    return list(range(start)) + list(range(start, end)) * loop["repeats"] + list(range(end, layers))


def export_looped(config, family, path, loop):
    """smelt's import of the family `config` with `loop` added, exported as a model directory
    (the config's other keys carried, as `smelt export CONFIG` does)."""
    model = smelt.import_hf(config)
    model["model"]["loop"] = dict(loop)
    written = smelt.export_hf(model, path, family=family, baseline=config)
    assert [m["looped"] for m in written["models"]] == [True], written
    return written["models"][0]["path"]


def build_looped(directory):
    """The model Transformers builds from a looped directory, eager attention and experts."""
    config = transformers.AutoConfig.from_pretrained(directory, trust_remote_code=True)
    assert config.model_type == "smelt_looped"
    return transformers.AutoModelForCausalLM.from_config(
        config, trust_remote_code=True, attn_implementation="eager", experts_implementation="eager"
    )


def visits_per_layer(model, x):
    """How many times one forward calls each physical decoder layer (forward hooks)."""
    layers = model.language_model.model.layers.physical()
    calls = [0] * len(layers)
    handles = [
        layer.register_forward_hook(lambda *_, i=i: calls.__setitem__(i, calls[i] + 1))
        for i, layer in enumerate(layers)
    ]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in handles:
            h.remove()
    return calls


def unrolled(looped, text_config, loop, per_layer_keys, scaled):
    """The family's stock model with one layer per execution, holding the looped model's
    weights (each visit a copy of its physical layer), and every residual update inside the
    loop scaled by `loop["residual_scale"]` in the weights: `scaled(layer)` names the
    parameters that end each of a layer's residual updates (what it adds to its residual
    stream is linear in them). Built by Transformers' own code without the exported
    templates, it is the model the looped directory must be."""
    config = copy.deepcopy(text_config)
    layers = config["num_hidden_layers"]
    order = execution_order(loop, layers)
    for key in per_layer_keys:
        config[key] = [config[key][p] for p in order]
    config["num_hidden_layers"] = len(order)
    reference = build(config).float().eval()  # as the looped model, whatever `dtype` says
    prefix = "language_model."
    state = {}
    for name, value in looped.state_dict().items():
        assert name.startswith(prefix), name
        name = name[len(prefix) :]
        parts = name.split(".")
        if parts[:2] == ["model", "layers"]:
            for e, p in enumerate(order):
                if p == int(parts[2]):
                    state[".".join(parts[:2] + [str(e)] + parts[3:])] = value.clone()
        else:
            state[name] = value.clone()
    reference.load_state_dict(state, strict=True)
    start = loop["first"] - 1
    with torch.no_grad():
        for e in range(start, start + loop["span"] * loop["repeats"]):
            params = scaled(reference.model.layers[e])
            assert params, f"no residual update found in execution {e}"
            for p in params:
                p.mul_(loop["residual_scale"])
    return reference


def output_projections(layer):
    """The parameters that end a pre-norm layer's residual updates: the attention's `o_proj`,
    a Gated DeltaNet's or Mamba-2 mixer's `out_proj`, an MLP's, an expert's and a shared
    expert's `down_proj` (Granite's experts: `output_linear`), weights and biases."""
    ends = {"o_proj", "out_proj", "down_proj", "down_proj_bias", "output_linear"}
    return [p for name, p in layer.named_parameters() if ends & set(name.split("."))]


def decode_stepwise(model, x, prompt):
    """Logits of `x` from the first `prompt` tokens, then one token at a time on the cache."""
    with torch.no_grad():
        out = model(x[:, :prompt], use_cache=True)
        cache, steps = out.past_key_values, [out.logits]
        for t in range(prompt, x.shape[1]):
            out = model(x[:, t : t + 1], cache=cache, use_cache=True)
            cache = out.past_key_values
            steps.append(out.logits)
    return torch.cat(steps, 1), cache


def check_looped(directory, text_config, loop, per_layer_keys, scaled, tokens=12):
    """What every looped export must be, whatever its family:

    * its physical layers are built once each, and one forward visits each `repeats` times
      inside the loop, once outside;
    * it computes the stock model unrolled by hand (`unrolled`) to float rounding, and with a
      residual scale other than 1 it differs from the same model unscaled;
    * cached decoding, token by token, gives the full forward's logits, the cache holding
      one slot per layer execution;
    * smelt reads the directory back with its loop.

    Returns the built model (in float32: the export carries the Baseline's `dtype`, which
    `test_memory`/`test_saved_tensors` check; the computation is compared here in float32)."""
    model = build_looped(directory).float().eval()
    layers = text_config["num_hidden_layers"]
    order = execution_order(loop, layers)
    assert len(model.language_model.model.layers.physical()) == layers
    torch.manual_seed(1)
    x = torch.randint(0, VOCAB, (1, tokens))
    assert visits_per_layer(model, x) == [order.count(p) for p in range(layers)]
    assert [order.count(p) for p in range(layers)] != [1] * layers
    with torch.no_grad():
        full = model(x).logits
        want = unrolled(model, text_config, loop, per_layer_keys, scaled)(x).logits
        assert torch.allclose(full, want, atol=1e-5), (full - want).abs().max()
        if loop["residual_scale"] != 1.0:
            unscaled = unrolled(model, text_config, dict(loop, residual_scale=1.0), per_layer_keys, scaled)(x).logits
            assert (full - unscaled).abs().max() > 1e-3
    steps, cache = decode_stepwise(model, x, tokens - 4)
    assert torch.allclose(full, steps, atol=1e-5), (full - steps).abs().max()
    assert len(cache.layers) == len(order)
    read = smelt.import_hf(directory)
    assert read["model"]["loop"] == loop
    assert smelt.cost(directory)["layer_executions"] == len(order)
    return model

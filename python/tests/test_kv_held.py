"""The KV cache held at the end of a context, under both window conventions, against Transformers.

smelt holds `W` keys per sliding layer and a whole chunk of `C` per chunked layer (what the
last query of a window or chunk attends); Transformers' cache keeps `W - 1` after a prefill,
and its chunked layers (Llama-4) use the same sliding-window cache with the window set to the
chunk, `C - 1`. `smelt cost` gives that count beside its own (`elements_cache`): here a tiny
model of each kind is built by Transformers, a prefill run, and its cache counted.
"""

import json

import pytest
import smelt
from test_export_hf import VOCAB, tiny_config

torch = pytest.importorskip("torch", reason="torch is not installed (CI installs it)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

CONTEXT = 10  # not a multiple of the chunk (4): the last query attends 2 keys of its chunk


def held_by_transformers(config):
    """(windowed?, key and value elements) of each layer of Transformers' cache after a
    CONTEXT-token prefill."""
    cfg = transformers.AutoConfig.for_model(**config)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").eval()
    torch.manual_seed(0)
    with torch.no_grad():
        cache = model(torch.randint(0, VOCAB, (1, CONTEXT)), use_cache=True).past_key_values
    return [(layer.is_sliding, layer.keys.numel() + layer.values.numel()) for layer in cache.layers]


@pytest.mark.parametrize("family,kind", [("llama4_text", "chunked"), ("gpt_oss", "sliding")])
def test_elements_cache_is_what_transformers_holds(family, kind, tmp_path):
    config = tiny_config(family)
    if "attn_temperature_tuning" in config:
        # The published Llama-4 config's 4 predates Transformers typing this key as a bool.
        config["attn_temperature_tuning"] = bool(config["attn_temperature_tuning"])
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    model = smelt.import_hf(path)
    assert model["model"]["window"]["kind"] == kind
    size = model["model"]["window"]["size"]
    model["workload"] = {"context": CONTEXT, "mean_doc_len": CONTEXT, "kv_dtype_bytes": 2}
    at = smelt.cost(model)["kv_cache_per_token"]["at_context"]
    assert at["held_per_windowed_layer"] == size
    layers = held_by_transformers(config)
    assert at["elements_cache"] == sum(n for _, n in layers)
    windowed = [n for sliding, n in layers if sliding]
    full = [n for sliding, n in layers if not sliding]
    assert windowed and full, layers
    # Transformers keeps size - 1 positions per windowed layer, CONTEXT per full one; smelt
    # one position more per windowed layer.
    per_position = full[0] // CONTEXT
    assert windowed == [per_position * (size - 1)] * len(windowed)
    assert at["elements"] - at["elements_cache"] == per_position * len(windowed)

"""The Python module: dicts in, dicts out, smelt's errors as SmeltError."""

import pathlib

import pytest

import smelt

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUDGETS = ROOT / "budgets"

BASE = {
    "name": "base-200m-s95",
    "model": {
        "layers": 12,
        "hidden": 1280,
        "heads": 16,
        "kv_heads": 2,
        "head_dim": 80,
        "moe": {"experts": 192, "top_k": 8, "expert_ffn": 432},
    },
    "workload": {"context": 4096, "mean_doc_len": 991},
}


def test_cost_of_a_dict_matches_the_published_figures():
    c = smelt.cost(BASE)
    assert c["flops_per_token"]["training"] == 1_330_053_120
    assert c["params"]["total"] == 3_869_277_440
    assert c["kv_cache_per_token"]["elements"] == 3840
    assert c["layer_executions"] == 12
    assert abs(c["sparsity"]["s"] - 0.9467) < 1e-4


def test_cost_of_a_path_equals_cost_of_the_dict():
    assert smelt.cost(BUDGETS / "base-200m-s95.toml") == smelt.cost(BASE)


def test_match_the_200m_cell_and_read_its_residuals():
    budget = {
        "name": "smelt-200m-s95",
        "baseline": BASE,
        "recipe": {"span": "half", "placement": "middle", "repeats": 2},
        "lattice": {
            "hidden": {"step": 32, "min": 640, "max": 1280},
            "experts": {"step": 8, "min": 8, "max": 1024},
            "expert_ffn": {"ratio": "1/3", "multiple": 16},
            "head_dim": {"step": 8, "min": 32, "max": 256},
            "heads": {"min": 1, "max": 64},
            "kv_heads": {"min": 1, "max": 16},
            "gqa": {"min": 1, "max": 16},
            "q_width": {"min": 0.75, "max": 1.25},
        },
    }
    m = smelt.match(budget)
    assert m["looped"]["model"]["hidden"] == 1056
    assert m["looped"]["model"]["moe"]["experts"] == 288
    assert m["looped"]["model"]["loop"] == {"first": 4, "span": 6, "repeats": 2, "residual_scale": 0.5}
    r = m["residuals"]
    assert abs(r["flops"]) < 0.029 and abs(r["params"]) < 0.004 and abs(r["kv"]) < 0.04
    # The matched model is valid input to cost().
    assert smelt.cost(m["looped"])["layer_executions"] == 18
    # The same budget from its file gives the same answer.
    from_file = smelt.match(BUDGETS / "match-200m-s95.toml")
    assert from_file["looped"]["model"] == m["looped"]["model"]
    assert len(smelt.match(budget, top=3)["ranked"]) == 3


def test_grid_from_a_file():
    g = smelt.grid(BUDGETS / "smelt-grid.toml")
    assert len(g["cells"]) == 16
    assert g["summary"]["sparse_cells"] == 12
    assert g["summary"]["max_abs_residual"]["kv"] < 0.036


def test_errors_are_smelt_errors_naming_the_field():
    bad = {**BASE, "model": {**BASE["model"], "kv_heads": 3}}
    with pytest.raises(smelt.SmeltError, match=r"model\.kv_heads: must divide model\.heads \(16\)"):
        smelt.cost(bad)
    with pytest.raises(smelt.SmeltError, match="unknown field `hiden`"):
        smelt.cost({**BASE, "model": {**BASE["model"], "hiden": 3}})
    with pytest.raises(ValueError):
        smelt.match({"baseline": BASE, "recipe": {"span": 13}})
    with pytest.raises(smelt.SmeltError, match="cannot read model file"):
        smelt.match({"baseline": "no-such-file.toml"})


def test_import_hf_then_cost():
    spec = smelt.import_hf(ROOT / "tests" / "data" / "hf" / "mixtral-8x7b-v0.1.json")
    assert spec["model"]["moe"] == {
        "experts": 8, "top_k": 2, "expert_ffn": 14336, "router": "softmax_renormalised_fp32"
    }
    c = smelt.cost(spec)
    assert round(c["params"]["total"] / 1e9, 1) == 46.7
    assert round(c["params"]["active"] / 1e9, 1) == 12.9
    with pytest.raises(smelt.SmeltError, match="sliding_window"):
        smelt.import_hf({"model_type": "qwen2_moe", "sliding_window": 4096,
                         "use_sliding_window": True})


def test_import_qwen15_moe_with_its_shared_expert_gate_and_biases():
    spec = smelt.import_hf(ROOT / "tests" / "data" / "hf" / "qwen1.5-moe-a2.7b.json")
    assert spec["model"]["attention_bias"] == "qkv"
    assert spec["model"]["moe"]["shared_gate"] is True
    assert "dense" not in spec["model"]
    c = smelt.cost(spec)
    assert c["params"]["total"] == 14_315_784_192
    assert round(c["params"]["active"] / 1e9, 1) == 2.7
    assert c["params"]["breakdown"]["dense"] == 0


def test_sweep_fit_gain_and_bench_are_functions_too():
    s = smelt.sweep(BUDGETS / "match-200m-s95.toml", "repeats", "1..=3")
    assert [r["layer_executions"] for r in s["rows"]] == [12, 18, 24]
    assert smelt.sweep(BUDGETS / "match-200m-s95.toml", "span", [0, 6])["rows"][0]["value"] == 0
    f = smelt.fit(ROOT / "tests" / "data" / "chinchilla" / "endpoints.csv", starts="small")
    assert f["fits"][0]["form"] == "chinchilla"
    small = dict(BASE, model={**BASE["model"], "hidden": 64, "head_dim": 8, "moe": {"experts": 16, "top_k": 2, "expert_ffn": 32}})
    b = smelt.bench(small, against=small, tokens=200, rounds=1)
    assert b["models"][0]["flops_exact"] and b["time_ratio"] > 0
    with pytest.raises(smelt.SmeltError, match="backend"):
        smelt.bench(small, backend="tpu")
    p = smelt.bench(small, tokens=200, rounds=1, peak=1.0)  # TFLOP/s, as --peak
    assert p["peak_flops_per_second"] == 1e12 and p["ceiling_of_peak"] > 0
    with pytest.raises(smelt.SmeltError, match="max_seconds"):
        smelt.bench(small, max_seconds=0.0)
    with pytest.raises(smelt.SmeltError, match="max-seconds"):
        smelt.bench(small, tokens=200, max_seconds=1e-6)


def test_limits_and_bad_calls_raise_smelt_error_never_crash():
    budget = BUDGETS / "match-200m-s95.toml"
    with pytest.raises(smelt.SmeltError, match="top: must be between 1 and 1000"):
        smelt.match(budget, top=0)
    with pytest.raises(smelt.SmeltError, match="top: must be between 1 and 1000"):
        smelt.match(budget, top=10**12)
    huge = {"baseline": BASE, "lattice": {"head_dim": {"min": 1, "max": 2**62, "step": 1}}}
    with pytest.raises(smelt.SmeltError, match="lattice.head_dim.max"):
        smelt.match(huge)
    with pytest.raises(smelt.SmeltError, match="must be a table"):
        smelt.cost({**BASE, "model": [12, 1280]})
    with pytest.raises(smelt.SmeltError, match="config: expected a path or a dict, got a list"):
        smelt.import_hf([1, 2, 3])
    with pytest.raises(smelt.SmeltError, match="knob"):
        smelt.sweep(budget, "width", [1])
    with pytest.raises(smelt.SmeltError, match="at most 1024 values"):
        smelt.sweep(budget, "span", list(range(2000)))


def test_the_families_of_issue_14():
    oss = smelt.cost(ROOT / "tests" / "data" / "hf" / "gpt-oss-20b.json")
    assert oss["params"]["total"] == 20_914_757_184
    assert oss["attention"]["windowed"]["size"] == 128
    m = smelt.match(BUDGETS / "match-deepseek-v3.toml")
    assert m["within_tolerance"]
    # The three matched budgets (activations are reported, not matched, by default).
    assert all(abs(m["residuals"][k]) <= 0.03 for k in ("flops", "params", "kv"))
    assert m["looped"]["model"]["mla"]["qk_rope_head_dim"] == 64


def test_llama4_wrapper_reads_its_text_decoder():
    spec = smelt.import_hf(ROOT / "tests" / "data" / "hf" / "llama-4-scout-17b-16e.json")
    assert spec["name"] == "Llama4ForConditionalGeneration text decoder"
    assert spec["model"]["window"]["kind"] == "chunked"
    assert smelt.cost(spec)["params"]["total"] == 107_769_861_120


def test_gain_compares_two_architectures_and_refuses_one_with_itself(two_architectures):
    csv = two_architectures
    g = smelt.gain(csv, "base", "smelt", starts="small")
    assert [(r["compute"], r["sparsity"]) for r in g["rows"]][:2] == [(1e20, 0.85), (1e20, 0.95)]
    gains = [r["gain"] for r in g["rows"]]
    assert len(gains) == 6 and all(0 < x < 1 for x in gains), gains
    with pytest.raises(smelt.SmeltError, match="both name 'smelt'"):
        smelt.gain(csv, "smelt", "smelt", starts="small")

"""smelt.predict: the library's step-time prediction, the same JSON as `smelt predict`."""

import json
import subprocess
from pathlib import Path

import pytest

import smelt

ROOT = Path(__file__).resolve().parents[2]
BUDGETS = ROOT / "budgets"


def cli_json(*args):
    """`smelt ARGS --format json` of the release build (CI builds it before pytest runs)."""
    binary = ROOT / "target" / "release" / "smelt"
    if not binary.exists():
        pytest.fail(f"{binary} is missing: build the command line first (cargo build --release)")
    run = subprocess.run([str(binary), *map(str, args), "--format", "json", "--quiet"],
                         capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_a_pair_on_a_card():
    base, looped = BUDGETS / "base-200m-s95.toml", BUDGETS / "smelt-200m-s95.toml"
    p = smelt.predict(looped, against=base, card="h200")
    assert p["basis"]["device"]["name"] == "NVIDIA H200 SXM"
    assert p["basis"]["calibrated"] is False
    assert p["basis"]["attention"] == "fused" and p["basis"]["experts"] == "grouped"
    b, l = (m["seconds_per_token"] for m in p["models"])
    assert abs(p["time_ratio"] - l / b) < 1e-12
    assert p == cli_json("predict", looped, "--against", base, "--card", "h200")


def test_bad_devices_name_the_field():
    base = BUDGETS / "base-200m-s95.toml"
    with pytest.raises(smelt.SmeltError) as e:
        smelt.predict(base, card="h20")
    assert e.value.field == "card" and "h200-sxm" in str(e.value)
    with pytest.raises(smelt.SmeltError) as e:
        smelt.predict(base)
    assert e.value.field == "card"
    with pytest.raises(smelt.SmeltError) as e:
        smelt.predict(base, card="h200", peak=900.0)
    assert e.value.field == "peak"
    with pytest.raises(smelt.SmeltError) as e:
        smelt.predict(base, peak=500.0, bandwidth=-1.0)
    assert e.value.field == "bandwidth"
    p = smelt.predict(base, peak=500.0, bandwidth=2.0, experts="per-expert")
    assert p["basis"]["device"]["memory_bytes_per_second"] == 2e12
    assert p["basis"]["experts"] == "per-expert"


def test_every_card_name_is_read_as_the_command_line_reads_it():
    """Over the whole table of cards, `predict` and `mfu` read each card's names (its id, in
    capitals too, its short name, its name as a person writes it) as `smelt predict --card`
    and `smelt mfu --card` do, and refuse a name that is no card with the same words."""
    base = BUDGETS / "base-200m-s95.toml"
    binary = ROOT / "target" / "release" / "smelt"
    table = smelt.cards()
    assert len(table) == len({c["id"] for c in table}) >= 14
    for card in table:
        for name in {card["id"], card["id"].upper(), " ".join(card["fragments"]), card["name"]}:
            m = smelt.mfu(base, 1e6, card=name)
            assert m["card"] == card["id"], name
            assert m["peak_flops_per_second"] == card["peak_flops_per_second"]
            assert m == cli_json("mfu", base, "--tokens-per-second", "1e6", "--card", name)
            p = smelt.predict(base, card=name)
            assert p["basis"]["device"]["name"] == card["name"], name
    assert smelt.mfu(base, 1e6, card="h100")["card"] == "h100-sxm"
    assert smelt.predict(base, card="h100")["basis"]["device"]["name"] == "NVIDIA H100 SXM"
    for bad in ["h20", "h20e", "l40", "a10", "tpu-v5p"]:
        for call in (lambda: smelt.mfu(base, 1.0, card=bad), lambda: smelt.predict(base, card=bad)):
            with pytest.raises(smelt.SmeltError) as e:
                call()
            assert e.value.field == "card" and "h100 is h100-sxm" in e.value.rule
            run = subprocess.run([str(binary), "mfu", str(base), "--tokens-per-second", "1",
                                  "--card", bad], capture_output=True, text=True, check=False)
            assert run.returncode == 2 and e.value.rule in run.stderr, run.stderr


HF = ROOT / "tests" / "data" / "hf"


def test_a_step_of_a_parallel_layout_is_the_command_lines():
    """`predict_step` is `smelt predict --global-batch`: the same JSON, byte for byte, for a
    published row's layout (Qwen3-30B-A3B on 8 H100s, NeMo AutoModel: EP 8, FSDP over 8,
    micro-batch 4, 512 sequences of 4096, full recompute, DeepEP), with `dp` derived from
    `gpus`; and for a Megatron-Core layout with pipeline stages and virtual stages."""
    model = HF / "qwen3-30b-a3b.json"
    step = smelt.predict_step(model, "h100", 512, gpus=8, ep=8, zero=3, micro_batch=4,
                              recompute="full", framework="fsdp2", dispatcher="deepep",
                              context=4096)
    assert step == cli_json("predict", model, "--card", "h100", "--global-batch", 512,
                            "--gpus", 8, "--ep", 8, "--zero", 3, "--micro-batch", 4,
                            "--recompute", "full", "--framework", "fsdp2",
                            "--dispatcher", "deepep", "--context", 4096)
    assert step["step"]["tokens_per_second_per_gpu"] > 0
    piped = smelt.predict_step(model, "h100", 64, gpus=32, pp=4, vp=2, ep=8)
    assert piped == cli_json("predict", model, "--card", "h100", "--global-batch", 64,
                             "--gpus", 32, "--pp", 4, "--vp", 2, "--ep", 8)


@pytest.mark.parametrize("layout,field", [
    ({"gpus": 12, "pp": 8}, "gpus"),
    ({"gpus": 8, "dp": 4}, "gpus"),
    ({"zero": 4}, "zero"),
    ({"tp": 0}, "tp"),
    ({"recompute": "some"}, "recompute"),
    ({"framework": "deepspeed"}, "framework"),
    ({"dispatcher": "nccl"}, "dispatcher"),
])
def test_a_bad_layout_names_the_field(layout, field):
    with pytest.raises(smelt.SmeltError) as e:
        smelt.predict_step(HF / "qwen3-30b-a3b.json", "h100", 64, **layout)
    assert e.value.field == field, str(e.value)


def test_a_step_needs_a_card_of_the_table_and_a_global_batch():
    with pytest.raises(smelt.SmeltError) as e:
        smelt.predict_step(HF / "qwen3-30b-a3b.json", "h20", 64)
    assert e.value.field == "card"
    with pytest.raises(smelt.SmeltError) as e:
        smelt.predict_step(HF / "qwen3-30b-a3b.json", "h100", 0)
    assert e.value.field == "global_batch"

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

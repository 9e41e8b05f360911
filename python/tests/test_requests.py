"""One request per call, read by the library: the same words as the command line (the
tolerance verdict), every field named, Ctrl-C in a long match, the HF config dict as a
source, and `calibrate` and `merge`.

The command-line comparisons run the release build's `smelt` (`cargo build --release`)."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import smelt

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUDGETS = ROOT / "budgets"
HF = ROOT / "tests" / "data" / "hf"


def cli(*args):
    binary = ROOT / "target" / "release" / "smelt"
    if not binary.exists():
        pytest.fail(f"{binary} is missing: build the command line first (cargo build --release)")
    return subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True)


TIGHT = textwrap.dedent(f"""\
    name = "tight"
    baseline = {json.dumps(str(BUDGETS / "base-200m-s95.toml"))}
    [recipe]
    span = "half"
    [lattice]
    hidden = {{ step = 32, min = 1024, max = 1024 }}
    experts = {{ step = 8, min = 64, max = 64 }}
    expert_ffn = {{ ratio = "1/4", multiple = 16 }}
    head_dim = {{ step = 8, min = 64, max = 64 }}
    [tolerance]
    flops = 0.001
    kv = 0.001
    """)


def cli_lines(err):
    return [line[len("smelt: "):] for line in err.splitlines()
            if line.startswith("smelt: tolerance not met")]


@pytest.mark.parametrize("how", ["match", "sweep", "grid"])
def test_the_tolerance_message_is_the_command_lines(tmp_path, how):
    budget = tmp_path / "tight.toml"
    budget.write_text(TIGHT)
    if how == "match":
        run = cli("match", budget, "--quiet")
        call = lambda: smelt.match(budget, strict=True)
    elif how == "sweep":
        run = cli("sweep", budget, "--span", "4,6", "--quiet")
        call = lambda: smelt.sweep(budget, "span", [4, 6], strict=True)
    else:
        grid = tmp_path / "grid.toml"
        grid.write_text(TIGHT.replace(f'baseline = {json.dumps(str(BUDGETS / "base-200m-s95.toml"))}',
                                      f'template = {json.dumps(str(BUDGETS / "base-{scale}-{sparsity}.toml"))}\n'
                                      'scales = ["200m"]\nsparsities = ["s95", "s85"]'))
        run = cli("grid", grid, "--quiet")
        call = lambda: smelt.grid(grid, strict=True)
    assert run.returncode == 3, run.stderr
    expected = cli_lines(run.stderr)
    assert expected, run.stderr
    with pytest.raises(smelt.ToleranceError) as e:
        call()
    assert e.value.broken == expected
    assert str(e.value) == "\n".join(expected)


LONG_MATCH = textwrap.dedent(f"""\
    import sys, time, smelt
    budget = {{
        "baseline": {json.dumps(str(BUDGETS / "base-200m-s95.toml"))},
        "recipe": {{"span": "half"}},
        "lattice": {{"hidden": {{"step": 8, "min": 256, "max": 8192}},
                    "experts": {{"step": 1, "min": 8, "max": 2048}},
                    "expert_ffn": {{"step": 8, "min": 64, "max": 4096}},
                    "head_dim": {{"step": 8, "min": 32, "max": 256}}}},
    }}
    print("started", flush=True)
    try:
        smelt.match(budget, force=True)
        print("finished")
    except KeyboardInterrupt:
        print("interrupted")
        sys.exit(130)
    """)


def test_ctrl_c_stops_a_long_match():
    """A forced match over a lattice far above the limit (minutes of search) stops within a
    second of SIGINT, as KeyboardInterrupt."""
    p = subprocess.Popen([sys.executable, "-c", LONG_MATCH], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "started"
    time.sleep(2.0)
    assert p.poll() is None, "the match ended before it could be interrupted"
    p.send_signal(signal.SIGINT)
    sent = time.monotonic()
    out, err = p.communicate(timeout=60)
    assert time.monotonic() - sent < 5.0
    assert p.returncode == 130, (out, err)
    assert out.strip() == "interrupted"


def test_fields_are_named_not_positions():
    budget = {"baseline": str(BUDGETS / "base-200m-s95.toml"),
              "objective": {"weights": {"time": "a"}}}
    with pytest.raises(smelt.SmeltError) as e:
        smelt.match(budget)
    assert e.value.field == "objective.weights.time"
    assert "line 1" not in str(e.value)
    with pytest.raises(smelt.SmeltError) as e:
        smelt.cost(BUDGETS / "base-200m-s95.toml", against=3)
    assert e.value.field == "against"
    with pytest.raises(smelt.SmeltError) as e:
        smelt.predict(BUDGETS / "base-200m-s95.toml", card="h200", tokens="many")
    assert e.value.field == "device.tokens"


def test_export_of_a_hf_config_dict(tmp_path):
    config = json.loads((HF / "qwen1.5-moe-a2.7b.json").read_text())
    out = smelt.export_hf(config, tmp_path / "hf")
    written = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert written["model_type"] == config["model_type"]
    assert written["num_experts"] == config["num_experts"]
    assert [m["looped"] for m in out["models"]] == [False]
    smelt.export_toml(config, tmp_path / "m.toml")
    assert smelt.cost(tmp_path / "m.toml")["params"] == smelt.cost(config)["params"]


def test_export_refuses_an_empty_path_and_a_non_bool(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = smelt.match(BUDGETS / "match-200m-s95.toml")
    with pytest.raises(smelt.SmeltError) as e:
        smelt.export_hf(result, "", vocab=1000)
    assert e.value.field == "path"
    with pytest.raises(smelt.SmeltError) as e:
        smelt.export_toml(result, "")
    assert e.value.field == "path"
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(smelt.SmeltError) as e:
        smelt.export_hf(BUDGETS / "match-200m-s95.toml", tmp_path / "x", force="yes")
    assert e.value.field == "force"


def test_calibrate_and_merge(tmp_path):
    """calibrate: the command line's file, from a bench result or its path; merge: two
    shards of a grid timed on the CPU, joined as `smelt merge` joins them."""
    base = BUDGETS / "base-100m-s0.toml"
    bench = smelt.bench(base, tokens=128, rounds=1, mean_doc_len=64)
    (tmp_path / "bench.json").write_text(json.dumps(bench))
    ours = smelt.calibrate(bench)
    from_file = smelt.calibrate(tmp_path / "bench.json", output=tmp_path / "cal.json")
    # The same calibration, its sources naming the file it was read from.
    path = str(tmp_path / "bench.json")
    assert from_file["source"] == path and ours["source"] == "bench"
    assert from_file["device"]["source"] == ours["device"]["source"].replace("bench", path, 1)
    same = lambda c: {k: v for k, v in c.items() if k != "source"} | {
        "device": {k: v for k, v in c["device"].items() if k != "source"}}
    assert same(from_file) == same(ours)
    run = cli("calibrate", tmp_path / "bench.json", "-o", tmp_path / "cli.json")
    assert run.returncode == 0, run.stderr
    assert json.loads((tmp_path / "cal.json").read_text()) == json.loads(
        (tmp_path / "cli.json").read_text())
    p = smelt.predict(base, calibration=tmp_path / "cal.json")
    assert p["models"][0]["seconds_per_token"] > 0

    grid = tmp_path / "grid.toml"
    grid.write_text(textwrap.dedent(f"""\
        template = {json.dumps(str(BUDGETS / "base-{scale}-{sparsity}.toml"))}
        scales = ["100m"]
        sparsities = ["s0", "s85"]
        [recipe]
        span = "half"
        [lattice]
        hidden = {{ step = 32 }}
        experts = {{ step = 8 }}
        head_dim = {{ step = 8, min = 32, max = 128 }}
        kv_heads = {{ min = 1, max = 4 }}
        """))
    shards = []
    for k in ("1/2", "2/2"):
        run = cli("grid", grid, "--format", "json", "--bench", "cpu", "--shard", k,
                  "--mean-doc-len", "64", "--tokens", "128", "--rounds", "1", "-q")
        assert run.returncode == 0, run.stderr
        path = tmp_path / f"shard-{k.replace('/', 'of')}.json"
        path.write_text(run.stdout)
        shards.append(path)
    merged = smelt.merge([shards[1], json.loads(shards[0].read_text())])
    run = cli("merge", *shards)
    assert run.returncode == 0, run.stderr
    # The command line's JSON as Python returns every result (its loops read as Python's).
    assert merged == smelt._loads(run.stdout)
    with pytest.raises(smelt.SmeltError, match="is missing"):
        smelt.merge([shards[0]])


def test_the_docs_python_residuals_example_shows_what_match_returns():
    import ast
    import re
    result = smelt.match(BUDGETS / "match-200m-s95.toml")
    for doc in (ROOT / "README.md", ROOT / "docs" / "guide.md"):
        text = doc.read_text()
        for shown in re.findall(r'print\(m\["residuals"\]\)\s*# (\{.*\})', text):
            shown = ast.literal_eval(shown)
            assert list(shown) == list(result["residuals"]), doc
            for k, v in shown.items():
                assert abs(v - result["residuals"][k]) < 1e-4, (doc, k)

"""The CPU study (examples/study/study.py) in its quick mode: plan, train every run with
PyTorch and Transformers, collect, fit, gain. Checks the chain, not the science: every run's
validation loss goes down, the collected compute is the plan's (the tokens trained times the
exact per-token count), the exported configs are the ones the manifest names, and the fit
and the gain run. Also `smelt.plan` and `smelt.collect`'s contracts and refusals."""

import csv
import hashlib
import importlib.util
import json
from fractions import Fraction
from pathlib import Path

import pytest

import smelt

ROOT = Path(__file__).resolve().parents[2]
GRID = ROOT / "examples" / "study" / "grid.toml"


def test_plan_runs_land_within_half_a_step_by_the_exact_count():
    plan = smelt.plan(GRID, [1e11, 3e11, 1e12], 16)
    assert len(plan["runs"]) == 24 and plan["tokens_per_step"] == 16 * 128
    for r in plan["runs"]:
        f = Fraction(r["training_flops_per_token_exact"])
        assert r["tokens"] == r["steps"] * 16 * 128
        reached = f * r["tokens"]
        assert float(reached) == r["compute_reached"], r["id"]
        assert abs(reached - Fraction(r["compute"])) <= f * 16 * 128 / 2, r["id"]
    # The looped models' exact count takes each layer execution, as smelt.cost does.
    looped = next(r for r in plan["runs"] if r["arch"] == "looped")
    assert looped["training_flops_per_token"] > 0


def test_plan_refuses_what_does_nothing_and_what_cannot_be_planned(tmp_path):
    with pytest.raises(smelt.SmeltError, match="give export"):
        smelt.plan(GRID, [1e11], 16, vocab=256)
    with pytest.raises(smelt.SmeltError, match="given twice"):
        smelt.plan(GRID, [1e11, 1e11], 16)
    with pytest.raises(smelt.SmeltError, match="s-s0-baseline-1e6.*half an optimizer step"):
        smelt.plan(GRID, [1e6], 16)


def _results(path, runs, edit=lambda i, r: r):
    with open(path, "w", encoding="utf-8") as f:
        for i, r in enumerate(runs):
            line = edit(i, {"id": r["id"], "tokens": r["tokens"], "loss": 4.0 - 0.01 * i})
            if line is not None:
                f.write(json.dumps(line) + "\n")
    return path


def test_collect_refuses_each_run_that_is_not_the_plans(tmp_path):
    plan = smelt.plan(GRID, [1e11, 3e11, 1e12], 16, export=tmp_path / "runs")
    manifest, runs = plan["manifest"], plan["runs"]
    for r in runs:
        config = (tmp_path / "runs" / r["directory"] / "config.json").read_bytes()
        assert r["config_sha256"] == hashlib.sha256(config).hexdigest()
    ok = smelt.collect(manifest, _results(tmp_path / "ok.jsonl", runs))
    assert [e["C"] for e in ok["endpoints"]] == [r["compute_reached"] for r in runs]
    assert ok["cells_lacking"] == [] and ok["csv"].startswith("run,arch,cell,F,S,D,C,compute,loss")
    missing = _results(tmp_path / "missing.jsonl", runs, lambda i, r: None if i == 4 else r)
    with pytest.raises(smelt.SmeltError, match=f"no result: {runs[4]['id']}; cells lacking runs: s-s0 looped at 3e11"):
        smelt.collect(manifest, missing)
    partial = smelt.collect(manifest, missing, partial=True)
    assert partial["missing"] == [runs[4]["id"]] and len(partial["endpoints"]) == 23
    unknown = _results(tmp_path / "unknown.jsonl", runs, lambda i, r: {**r, "id": "nope"} if i == 0 else r)
    with pytest.raises(smelt.SmeltError, match="run 'nope' is not in the plan"):
        smelt.collect(manifest, unknown)
    tokens = _results(tmp_path / "tokens.jsonl", runs, lambda i, r: {**r, "tokens": r["tokens"] + 1} if i == 2 else r)
    with pytest.raises(smelt.SmeltError, match=f"run '{runs[2]['id']}' trained"):
        smelt.collect(manifest, tokens)
    model = _results(tmp_path / "model.jsonl", runs, lambda i, r: {**r, "config_sha256": "ab" * 32} if i == 6 else r)
    with pytest.raises(smelt.SmeltError, match=f"run '{runs[6]['id']}' trained a model"):
        smelt.collect(manifest, model)


def _study():
    spec = importlib.util.spec_from_file_location("smelt_study", ROOT / "examples" / "study" / "study.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cpu_study_runs_end_to_end_in_quick_mode(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    study = _study()
    summary = study.run_study(tmp_path / "study", quick=True, say=lambda *_: None)
    plan, results = summary["plan"], summary["results"]
    assert len(results) == 24
    for r in results:
        assert r["loss"] < r["initial_loss"], r
    # The collected compute is the plan's: the tokens trained times the exact count.
    planned = {r["id"]: r for r in plan["runs"]}
    with open(tmp_path / "study" / "endpoints.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 24
    for row in rows:
        run = planned[row["run"]]
        exact = Fraction(run["training_flops_per_token_exact"]) * int(row["D"])
        assert float(row["C"]) == float(exact) == run["compute_reached"], row["run"]
        assert int(row["D"]) == run["tokens"]
    # The fit ran, one surface per architecture; the gain ran, or was refused because a fit
    # has no compute-optimal frontier (and only then).
    assert [f["group"] for f in summary["fits"]["fits"]] == ["baseline", "looped"]
    gain = summary["gain"]
    assert gain.get("rows") or "no compute-optimal frontier" in gain.get("refused", ""), gain
    # What was trained is logged: tokens and validation loss per run.
    log = [json.loads(line) for line in open(tmp_path / "study" / "log.jsonl")]
    assert {e["id"] for e in log} == set(planned)

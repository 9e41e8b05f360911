"""The Python module as a launcher uses it: real signatures and types, exports equal to the
command line's files, every bad input a SmeltError naming its field, Ctrl-C, progress, and
the command line's options (workload, force, strict, peak in TFLOP/s, inline HF Baselines).

The command-line comparisons run the `smelt` binary of the release build (`cargo build
--release`, which CI's `cargo test --release` makes before pytest runs)."""

import filecmp
import inspect
import json
import os
import pathlib
import signal
import subprocess
import threading
import typing

import pytest

import smelt
import smelt.types

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUDGETS = ROOT / "budgets"
HF = ROOT / "tests" / "data" / "hf"
BUDGET = BUDGETS / "match-200m-s95.toml"


def cli(*args, check=True):
    binary = ROOT / "target" / "release" / "smelt"
    if not binary.exists():
        pytest.fail(f"{binary} is missing: build the command line first (cargo build --release)")
    run = subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True, check=False)
    if check:
        assert run.returncode == 0, run.stderr
    return run


# --- Types and signatures --------------------------------------------------------------

PUBLIC = [smelt.cost, smelt.match, smelt.grid, smelt.sweep, smelt.fit, smelt.gain, smelt.bench,
          smelt.import_hf, smelt.export_hf, smelt.export_toml, smelt.families,
          smelt.launcher_flops, smelt.mfu, smelt.predict]


@pytest.mark.parametrize("function", PUBLIC, ids=lambda f: f.__name__)
def test_signatures_are_real(function):
    signature = inspect.signature(function)
    assert signature.return_annotation is not inspect.Signature.empty
    for p in signature.parameters.values():
        assert p.default is not Ellipsis, (function.__name__, p.name)
        assert p.annotation is not inspect.Parameter.empty, (function.__name__, p.name)
    assert function.__doc__


def test_gain_shows_its_defaults():
    parameters = inspect.signature(smelt.gain).parameters
    assert parameters["compute"].default == (1e20, 1e21)
    assert parameters["sparsity"].default == (0.85, 0.95, 0.97)


def test_the_package_is_typed():
    package = pathlib.Path(smelt.__file__).parent
    assert (package / "py.typed").exists()
    assert (package / "_smelt.pyi").exists()
    hints = typing.get_type_hints(smelt.types.MatchResult)
    assert {"looped", "baseline", "residuals", "within_tolerance"} <= set(hints)
    assert typing.get_type_hints(smelt.types.Loop)["repeats"] is int


def test_a_missing_loop_is_an_explicit_none():
    m = smelt.match(BUDGET)
    assert m["baseline"]["model"]["loop"] is None
    assert m["looped"]["model"]["loop"]["repeats"] == 2
    # The explicit None is valid input back.
    assert smelt.cost(m["baseline"])["layer_executions"] == 12
    g = smelt.grid(BUDGETS / "smelt-grid.toml")
    assert all(c["baseline"]["model"]["loop"] is None for c in g["cells"])


# --- Exports: the command line's files ---------------------------------------------------

def explicit_loops(value):
    """The command line's JSON as the module returns it: each model's `loop` present."""
    if isinstance(value, dict):
        model = value.get("model")
        if isinstance(model, dict) and "moe" in model:
            model.setdefault("loop", None)
        for v in value.values():
            explicit_loops(v)
    elif isinstance(value, list):
        for v in value:
            explicit_loops(v)
    return value


def same_tree(a, b):
    files_a = sorted(p.relative_to(a) for p in pathlib.Path(a).rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(b) for p in pathlib.Path(b).rglob("*") if p.is_file())
    assert files_a == files_b
    for f in files_a:
        assert filecmp.cmp(pathlib.Path(a) / f, pathlib.Path(b) / f, shallow=False), f
    return len(files_a)


def test_export_toml_of_a_result_is_the_command_lines_model_file(tmp_path):
    ours = tmp_path / "ours.toml"
    written = smelt.export_toml(smelt.match(BUDGET), ours)
    assert written["models"][0]["path"] == str(ours)
    cli("match", BUDGET, "--format", "model", "-o", tmp_path / "cli.toml")
    assert ours.read_text() == (tmp_path / "cli.toml").read_text()
    assert ours.read_text().startswith("# Matched by smelt to base-200m-s95 (two-sided mode)")
    # The budget itself (matched first) writes the same file, and says its residuals.
    again = smelt.export_toml(BUDGET, tmp_path / "again.toml")
    assert (tmp_path / "again.toml").read_text() == ours.read_text()
    assert abs(again["residuals"]["flops"]) < 0.03


def test_export_hf_of_a_result_is_the_command_lines_directory(tmp_path):
    budget = BUDGETS / "match-qwen1.5-moe-a2.7b.toml"
    config = json.loads((HF / "qwen1.5-moe-a2.7b.json").read_text())
    written = smelt.export_hf(smelt.match(budget), tmp_path / "ours", baseline=config)
    assert written["models"][0]["looped"]
    cli("match", budget, "--format", "hf", "-o", tmp_path / "cli")
    # The three files and the folder's list of them (.smelt-export).
    assert same_tree(tmp_path / "ours", tmp_path / "cli") == 4
    # Without the Baseline's config, the family's defaults stand for its other keys; the
    # model is the same.
    smelt.export_hf(smelt.match(budget), tmp_path / "bare")
    assert smelt.cost(tmp_path / "bare") == smelt.cost(tmp_path / "cli")


@pytest.mark.parametrize("fmt", ["hf", "model"])
def test_a_grid_result_exports_as_the_command_line_does(fmt, tmp_path):
    grid = BUDGETS / "smelt-grid.toml"
    export = smelt.export_hf if fmt == "hf" else smelt.export_toml
    kwargs = {"vocab": 50304} if fmt == "hf" else {}
    written = export(smelt.grid(grid), tmp_path / "ours", **kwargs)
    assert len(written["models"]) == 16
    extra = ["--vocab", 50304] if fmt == "hf" else []
    cli("grid", grid, "--export", tmp_path / "cli", "--export-format", fmt, *extra)
    # Each folder written into also lists the files smelt wrote there (.smelt-export).
    assert same_tree(tmp_path / "ours", tmp_path / "cli") == (48 + 16 if fmt == "hf" else 16 + 1)


def test_a_sweep_result_exports_as_the_command_line_does(tmp_path):
    s = smelt.sweep(BUDGET, "span", [0, 4])
    smelt.export_hf(s, tmp_path / "ours", vocab=1000)
    cli("sweep", BUDGET, "--span", "0,4", "--export", tmp_path / "cli", "--vocab", 1000)
    assert same_tree(tmp_path / "ours", tmp_path / "cli") == 4 + 2
    assert not (tmp_path / "ours" / "span-0" / "modeling_smelt_looped.py").exists()


def test_exports_refuse_what_they_cannot_write(tmp_path):
    with pytest.raises(smelt.SmeltError, match="vocab") as e:
        smelt.export_hf(smelt.match(BUDGET), tmp_path / "x")
    assert e.value.field == "model.vocab"
    with pytest.raises(smelt.SmeltError, match="not a match result smelt returned") as e:
        smelt.export_hf({"looped": 3, "residuals": {}, "mode": "two-sided", "baseline": {}},
                        tmp_path / "y")
    assert e.value.field == "source.looped"
    with pytest.raises(smelt.SmeltError, match="not a grid result smelt returned") as e:
        smelt.export_hf({"cells": 3}, tmp_path / "y")
    assert e.value.field == "source.cells"
    with pytest.raises(smelt.SmeltError, match="is for a result"):
        smelt.export_hf(BUDGET, tmp_path / "z", baseline={})
    # Never over an input: the budget file the match read.
    copy = tmp_path / "budget.toml"
    copy.write_text(BUDGET.read_text().replace('"base-200m-s95.toml"', json.dumps(str(BUDGETS / "base-200m-s95.toml"))))
    with pytest.raises(smelt.SmeltError, match="input of this run"):
        smelt.export_toml(copy, copy)


def test_export_hf_keeps_a_model_directorys_own_files(tmp_path):
    """A folder holding a user's config.json and weights is refused, the file named, unless
    overwrite=True; the weights are never touched, and smelt's own export is replaced."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"mine": true}')
    (folder / "model.safetensors").write_text("weights")
    result = smelt.match(BUDGET)
    with pytest.raises(smelt.SmeltError, match="config.json: refusing to replace a file smelt did not write"):
        smelt.export_hf(result, folder, vocab=1000)
    assert (folder / "config.json").read_text() == '{"mine": true}'
    smelt.export_hf(result, folder, vocab=1000, overwrite=True)
    assert json.loads((folder / "config.json").read_text())["model_type"] == "smelt_looped"
    assert (folder / "model.safetensors").read_text() == "weights"
    smelt.export_hf(result, folder, vocab=1000)
    with pytest.raises(smelt.SmeltError, match="overwrite: must be true or false") as e:
        smelt.export_hf(result, folder, vocab=1000, overwrite="yes")
    assert e.value.field == "overwrite"


# --- Every bad input a SmeltError naming its field --------------------------------------

@pytest.mark.parametrize("call, field", [
    (lambda: smelt.match(BUDGET, top=-1), "top"),
    (lambda: smelt.match(BUDGET, top=2**64), "top"),
    (lambda: smelt.sweep(BUDGET, "span", [-1]), "values"),
    (lambda: smelt.sweep(BUDGET, "span", [2**64]), "values"),
    (lambda: smelt.sweep(BUDGET, "span", []), "values"),
    (lambda: smelt.sweep(BUDGET, "span", ""), "values"),
    (lambda: smelt.bench(BUDGETS / "base-200m-s95.toml", tokens=-5), "tokens"),
    (lambda: smelt.bench(BUDGETS / "base-200m-s95.toml", rounds=0), "rounds"),
    (lambda: smelt.bench(BUDGETS / "base-200m-s95.toml", repeats=3), "repeats"),
    (lambda: smelt.bench(BUDGETS / "base-200m-s95.toml", peak=9.8e14), "peak"),
    (lambda: smelt.bench(BUDGETS / "base-200m-s95.toml", peak=float("inf")), "peak"),
    (lambda: smelt.gain("x.csv", "a", "b", bootstrap=-1), "bootstrap"),
    (lambda: smelt.gain("x.csv", "a", "b", seed=2**64), "seed"),
    (lambda: smelt.gain("x.csv", "a", "b", compute=[10**400]), "compute[0]"),
    (lambda: smelt.cost(BUDGETS / "base-200m-s95.toml", context=0), "workload.context"),
    (lambda: smelt.cost(BUDGETS / "base-200m-s95.toml", doc_lengths=[(1, 2, 3)]),
     "workload.doc_lengths"),
    (lambda: smelt.cost({"model": {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 3,
                                   "head_dim": 16, "moe": {"experts": 4, "top_k": 2,
                                                           "expert_ffn": 32}},
                         "workload": {"context": 64, "mean_doc_len": 64}}), "model.kv_heads"),
    (lambda: smelt.cost({"model": {"hiden": 3}, "workload": {}}), "model.hiden"),
    (lambda: smelt.cost({"model": {"layers": float("nan")}}), "spec.model.layers"),
    (lambda: smelt.match("[baseline]\nmodel = 1\n"), "budget"),
    (lambda: smelt.grid('{"cells": []}'), "grid"),
])
def test_bad_inputs_raise_smelt_error_with_the_field(call, field):
    with pytest.raises(smelt.SmeltError) as e:
        call()
    assert e.value.field == field, str(e.value)
    assert isinstance(e.value, ValueError)


def test_a_deep_dict_and_odd_types():
    deep = {}
    node = deep
    for _ in range(10_000):
        node["x"] = {}
        node = node["x"]
    with pytest.raises(smelt.SmeltError, match="nested too deeply") as e:
        smelt.cost(deep)
    assert e.value.field == "spec"
    with pytest.raises(smelt.SmeltError, match="top: must be a whole number from 0 to 18446744073709551615; got string") as e:
        smelt.match(BUDGET, top="3")
    assert e.value.field == "top"
    with pytest.raises(TypeError, match="spec: holds a value of type object"):
        smelt.cost({"model": object()})
    with pytest.raises(smelt.SmeltError, match="spec: expected a path or a model") as e:
        smelt.cost(42)
    assert e.value.field == "spec"
    with pytest.raises(smelt.SmeltError, match="force: must be true or false") as e:
        smelt.match(BUDGET, force="yes")
    assert e.value.field == "force"


def test_text_given_as_a_path_is_said_plainly():
    with pytest.raises(smelt.SmeltError, match="text of a file where a path is expected"):
        smelt.match(BUDGET.read_text())


def test_a_path_inside_a_dict_is_read_as_a_path():
    budget = {"baseline": BUDGETS / "base-200m-s95.toml", "recipe": {"span": "half"},
              "lattice": {"hidden": {"step": 32, "min": 640, "max": 1280},
                          "experts": {"step": 8, "min": 8, "max": 1024},
                          "expert_ffn": {"ratio": "1/3", "multiple": 16},
                          "head_dim": {"step": 8, "min": 32, "max": 256}}}
    assert smelt.match(budget)["looped"]["model"]["loop"]["span"] == 6


# --- Parity with the command line -------------------------------------------------------

def test_workload_keywords_are_the_flags(tmp_path):
    base = BUDGETS / "base-200m-s95.toml"
    ours = smelt.cost(base, context=8192, mean_doc_len=2048, dense=True)
    theirs = json.loads(cli("cost", base, "--context", 8192, "--mean-doc-len", 2048, "--dense",
                            "--format", "json").stdout)
    assert ours == theirs
    hist = tmp_path / "h.csv"
    hist.write_text("length,count\n100,3\n4096,1\n")
    from_file = smelt.cost(base, doc_lengths=hist)
    assert from_file == smelt.cost(base, doc_lengths={100: 3, 4096: 1})
    assert from_file == smelt.cost(base, doc_lengths=[(100, 3), (4096, 1)])
    assert from_file == json.loads(cli("cost", base, "--doc-lengths", hist, "--format", "json").stdout)
    m = smelt.match(BUDGET, context=2048)
    assert m["looped"]["workload"]["context"] == 2048
    theirs = json.loads(cli("match", BUDGET, "--context", 2048, "--format", "json").stdout)
    assert m == explicit_loops(theirs)
    s = smelt.sweep(BUDGET, "span", [4], force=True, dense=True)
    assert s["baseline"]["workload"]["attention"] == "dense"


def test_strict_raises_when_a_tolerance_is_broken():
    budget = {"baseline": str(BUDGETS / "base-200m-s95.toml"), "recipe": {"span": "half"},
              "lattice": {"hidden": {"step": 32, "min": 1024, "max": 1024},
                          "experts": {"step": 8, "min": 64, "max": 64},
                          "expert_ffn": {"ratio": "1/4", "multiple": 16},
                          "head_dim": {"step": 8, "min": 64, "max": 64}},
              "tolerance": {"flops": 0.001}}
    loose = smelt.match(budget)
    assert not loose["within_tolerance"]
    with pytest.raises(smelt.ToleranceError, match="tolerance not met: flops") as e:
        smelt.match(budget, strict=True)
    assert e.value.result == loose and e.value.field == "tolerance"
    assert isinstance(e.value, smelt.SmeltError)
    assert smelt.match(BUDGET, strict=True)["within_tolerance"]


def test_a_hf_config_dict_is_a_baseline_inline():
    by_path = smelt.match(BUDGETS / "match-qwen1.5-moe-a2.7b.toml")
    text = (BUDGETS / "match-qwen1.5-moe-a2.7b.toml").read_text()
    import tomllib
    budget = tomllib.loads(text)
    budget["baseline"] = json.loads((HF / "qwen1.5-moe-a2.7b.json").read_text())
    inline = smelt.match(budget)
    assert inline["looped"]["model"] == by_path["looped"]["model"]
    assert inline["residuals"] == by_path["residuals"]
    budget["baseline"]["num_key_value_heads"] = 5
    with pytest.raises(smelt.SmeltError) as e:
        smelt.match(budget)
    assert "the inline config.json" in str(e.value) and "smelt-baseline-" not in str(e.value)
    # cost() takes a config dict as it takes a config.json path.
    config = json.loads((HF / "mixtral-8x7b-v0.1.json").read_text())
    assert smelt.cost(config) == smelt.cost(HF / "mixtral-8x7b-v0.1.json")


# --- Progress and Ctrl-C ----------------------------------------------------------------

def test_progress_reaches_a_callback_and_stderr(capsys):
    heard = []
    smelt.grid(BUDGETS / "smelt-grid.toml", progress=lambda *a: heard.append(a))
    assert heard[0] == ("matching grid cells", 0, 16)
    assert heard[-1] == ("matching grid cells", 16, 16)
    smelt.sweep(BUDGET, "span", [2, 4], quiet=False)
    err = capsys.readouterr().err
    assert "smelt: sweeping span: 2/2" in err
    smelt.sweep(BUDGET, "span", [2, 4])
    assert capsys.readouterr().err == ""


def test_an_exception_in_the_callback_stops_the_work():
    def fail(task, done, total):
        raise RuntimeError(f"stop at {done}")

    with pytest.raises(RuntimeError, match="stop at 0"):
        smelt.grid(BUDGETS / "smelt-grid.toml", progress=fail)


def test_ctrl_c_interrupts_a_long_call(two_architectures):
    csv = two_architectures
    heard = []

    def interrupt(task, done, total):
        heard.append((task, done, total))
        if task == "bootstrap resamples" and done == 0:
            threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()

    # 100,000 resamples take minutes; SIGINT arrives after 0.2 s of them.
    with pytest.raises(KeyboardInterrupt):
        smelt.gain(csv, "base", "smelt", starts="small", bootstrap=100_000, progress=interrupt)
    task, done, total = heard[-1]
    assert task == "bootstrap resamples" and done < total == 100_000


def test_launcher_conventions_and_mfu_are_the_command_lines():
    base = BUDGETS / "base-200m-s95.toml"
    ours = smelt.launcher_flops(base)
    theirs = json.loads(cli("cost", base, "--conventions", "--format", "json").stdout)
    assert ours == theirs
    m = smelt.mfu(base, 1.2e6, gpus=8, card="h100-sxm")
    assert m == json.loads(cli("mfu", base, "--tokens-per-second", "1.2e6", "--gpus", 8,
                               "--card", "h100-sxm", "--format", "json").stdout)
    with pytest.raises(smelt.SmeltError) as e:
        smelt.mfu(base, 1.0, card="h100-sxm", peak=900.0)
    assert e.value.field == "card"
    with pytest.raises(smelt.SmeltError, match="h100-sxm"):
        smelt.mfu(base, 1.0, card="h999")
    pair = smelt.launcher_flops(BUDGETS / "smelt-200m-s95.toml", against=base)
    exact = [c for c in pair["counts"] if c["convention"] == "exact"][0]
    megatron = [c for c in pair["counts"] if c["convention"] == "megatron"][0]
    assert abs(exact["ratio"] - 1) < 0.03 and megatron["ratio"] < 0.9 * exact["ratio"]

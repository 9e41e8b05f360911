"""Representative results of every function that returns one, by the TypedDict of
`smelt.types` that describes it: what `test_types.py` holds the types equal to (and what
`python/tests/gen_types.py` writes the types from)."""

import json
import pathlib

import smelt

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUDGETS = ROOT / "budgets"
HF = ROOT / "tests" / "data" / "hf"
CHINCHILLA = ROOT / "tests" / "data" / "chinchilla" / "endpoints.csv"

#: Hugging Face configs whose imports between them use every part of a model file.
CONFIGS = ["qwen1.5-moe-a2.7b", "gemma-4-26b-a4b", "nemotron-3-nano-30b-a3b", "qwen3-next-80b-a3b",
           "deepseek-v3.2-exp", "gpt-oss-20b", "mixtral-8x7b-v0.1", "glm-5", "llama-4-scout-17b-16e",
           "granite-3.0-1b-a400m", "phi-3.5-moe-instruct", "qwen3.5-35b-a3b"]
#: Nemotron 3 Super's config (LatentMoE), shipped with the published runs.
SUPER = ROOT / "crates" / "smelt" / "data" / "published" / "models" / "nemotron-3-super-120b-a12b.json"

TRAINING = {"tp": 2, "ep": 2, "pp": 1, "dp": 4, "zero": 1, "micro_batch": 1}


def two_architectures(tmp):
    """An endpoints CSV of two architectures on one synthetic surface (the second with a
    smaller A: a positive gain), 27 endpoints each (three token counts: with two, E, K and c
    would not be determined, and smelt refuses the fit), written into `tmp`; conftest's
    fixture of the same name."""
    rows = ["arch,cell,F,S,D,loss"]
    for arch, a in (("base", 400.0), ("smelt", 300.0)):
        for i, f in enumerate((1e9, 3e9, 1e10)):
            for s in (0.0, 0.5, 0.9):
                for d in (1e10, 1e11, 1e12):
                    loss = 1.8 + a * (1 - s) ** 0.3 / f**0.3 + 400.0 / d**0.3
                    rows.append(f"{arch},c{i}-{s},{f:e},{s},{d:e},{loss!r}")
    csv = tmp / "endpoints.csv"
    csv.write_text("\n".join(rows) + "\n")
    return csv


def samples(tmp):
    """(type name, result) pairs; `tmp` a folder for the exports."""
    base, other = BUDGETS / "base-200m-s95.toml", BUDGETS / "base-200m-s85.toml"
    out = []
    models = [smelt.import_hf(HF / f"{c}.json") for c in CONFIGS] + [smelt.import_hf(SUPER)]
    trained = dict(models[0], training=TRAINING)
    out += [("ModelDict", m) for m in models + [trained]]
    out += [("CostResult", smelt.cost(m)) for m in models + [trained]]
    out.append(("CompareResult", smelt.cost(base, against=other)))
    out.append(("CompareResult", smelt.cost(trained, against=trained)))
    match = smelt.match(BUDGETS / "match-200m-s95-time.toml", top=2, advise=True)
    out.append(("MatchResult", match))
    out.append(("MatchResult", smelt.match(BUDGETS / "match-200m-s95.toml")))
    out.append(("MatchResult", smelt.match(BUDGETS / "match-nemotron-3-nano-half.toml")))
    out.append(("MatchResult", smelt.match(
        {"baseline": str(base), "training": TRAINING, "recipe": {"span": "half"}})))
    out.append(("MatchResult", smelt.match(
        {"baseline": str(base), "recipe": {"span": "half"}, "tolerance": {"flops": 0.001},
         "lattice": {"hidden": {"step": 32, "min": 1024, "max": 1024},
                     "experts": {"step": 8, "min": 64, "max": 64},
                     "expert_ffn": {"ratio": "1/4", "multiple": 16},
                     "head_dim": {"step": 8, "min": 64, "max": 64}}})))
    out.append(("GridResult", smelt.grid(BUDGETS / "smelt-grid.toml")))
    out.append(("SweepResult", smelt.sweep(BUDGETS / "match-200m-s95.toml", "span", [4, 6])))
    out.append(("FitResult", smelt.fit(CHINCHILLA, starts="small")))
    out.append(("GainResult", smelt.gain(two_architectures(tmp), "base", "smelt",
                                         starts="small", bootstrap=3)))
    small = BUDGETS / "base-100m-s0.toml"
    bench = smelt.bench(small, against=small, tokens=128, rounds=1, mean_doc_len=64)
    out.append(("BenchResult", bench))
    out.append(("Calibration", smelt.calibrate(bench)))
    out.append(("PredictResult", smelt.predict(base, against=other, card="h200")))
    out.append(("PredictResult", smelt.predict(base, peak=100, bandwidth=1)))
    out.append(("StepResult", smelt.predict_step(base, "h100", 64, gpus=16, ep=8, pp=2)))
    out.append(("StepResult", smelt.predict_step(
        models[2], "b200", 32, gpus=8, ep=8, recompute="full", framework="fsdp2",
        dispatcher="deepep", context=2048)))
    out.append(("MfuResult", smelt.mfu(base, 1e5, card="h200")))
    out.append(("MfuResult", smelt.mfu(models[2], 1e5, peak=900)))
    out.append(("LauncherFlopsResult", smelt.launcher_flops(base)))
    out.append(("LauncherFlopsResult", smelt.launcher_flops(models[2])))
    # LatentMoE: the launchers' formulas refuse it, the exact count counts it.
    out.append(("MfuResult", smelt.mfu(models[-1], 1e5, card="h100")))
    out.append(("LauncherFlopsResult", smelt.launcher_flops(models[-1])))
    out.append(("LauncherPairResult", smelt.launcher_flops(base, against=other)))
    out += [("CardRow", c) for c in smelt.cards()]
    out.append(("ExportResult", smelt.export_hf(match, tmp / "one", vocab=1000)))
    out.append(("ExportResult", smelt.export_toml(BUDGETS / "match-200m-s95.toml", tmp / "m.toml")))
    plan = smelt.plan(BUDGETS / "match-200m-s95.toml", [1e18, 3e18], 256, export=tmp / "plan",
                      vocab=1000)
    out.append(("PlanResult", plan))
    out.append(("PlanResult", smelt.plan(BUDGETS / "smelt-grid.toml", [1e19], 256)))
    results = tmp / "results.csv"
    results.write_text("id,tokens,loss\n" + "".join(
        f"{r['id']},{r['tokens']},{3.0 - 0.1 * i}\n" for i, r in enumerate(plan["runs"])))
    out.append(("CollectResult", smelt.collect(plan["manifest"], results, output=tmp / "e.csv")))
    return out


def dump(tmp):
    return json.dumps(samples(tmp))

"""A compute-matched IsoFLOP study on a CPU, end to end, at toy scale.

    python examples/study/study.py [--quick] [--out DIR]

1. plan: the toy grid (grid.toml: two sizes at two sparsities, each Baseline matched with a
   looped model) at three compute levels, each run a whole number of optimizer steps by the
   exact per-token training FLOPs (`smelt.plan`, as `smelt plan --export`);
2. train: every run's exported model built by Transformers (a looped one with
   trust_remote_code=True) and trained by a plain PyTorch loop on bytes (vocabulary 256) of
   the Python standard library's own source files, a fixed held-out split for validation;
   tokens and validation loss logged (log.jsonl), each run's final result in results.jsonl;
3. collect: the results checked against the plan and written as endpoints
   (`smelt.collect`, as `smelt collect`);
4. fit and gain: a surface per architecture (`smelt.fit`) and the looped model's
   compute-efficiency gain over the Baseline (`smelt.gain`).

A toy: models of a few hundred thousand parameters trained for seconds to a minute each.
The numbers say that the chain runs and what it gives at this scale, nothing about large
models. `--quick` trains a few steps per run (the CI test, python/tests/test_study.py).
Needs only smelt's Python module, PyTorch and Transformers.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import sysconfig
import time
from pathlib import Path

import torch
import transformers

import smelt

HERE = Path(__file__).resolve().parent
GRID = HERE / "grid.toml"

# Sequences per optimizer step, each the grid's context (128 tokens): full mode, quick mode.
GLOBAL_BATCH = 16
QUICK_BATCH = 4
# Compute levels in FLOPs (full mode: about 25 minutes on 2 cores; quick: a few steps a run).
FULL_COMPUTE = (2e11, 6e11, 1.8e12)
QUICK_COMPUTE = (8e9, 1.6e10, 3.2e10)
# Validation: this many held-out sequences, the same for every run.
VALID_SEQUENCES = 64
LEARNING_RATE = 3e-3


def corpus(limit=8 << 20):
    """The Python standard library's own source files as bytes: every `.py` file under the
    stdlib folder (site-packages left out), in sorted order of their relative paths; every
    20th file (by that order) is held out for validation. At most `limit` bytes of
    training text are read."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*.py")
        if "site-packages" not in p.parts and "dist-packages" not in p.parts
    )
    train, valid = bytearray(), bytearray()
    for i, rel in enumerate(files):
        held = i % 20 == 0
        if not held and len(train) >= limit:
            continue
        try:
            data = (root / rel).read_bytes()
        except OSError:
            continue
        (valid if held else train).extend(data)
    as_ids = lambda b: torch.frombuffer(bytes(b), dtype=torch.uint8).long()
    return as_ids(train), as_ids(valid)


def build(directory):
    """The model Transformers builds from an exported directory."""
    config = transformers.AutoConfig.from_pretrained(directory, trust_remote_code=True)
    return transformers.AutoModelForCausalLM.from_config(config, trust_remote_code=True)


def validation_loss(model, valid, context, sequences=VALID_SEQUENCES):
    """Mean next-byte loss (nats) on the first `sequences` held-out sequences."""
    n = min(sequences, len(valid) // context)
    x = valid[: n * context].view(n, context)
    model.eval()
    with torch.no_grad():
        losses = [model(b, labels=b).loss.item() for b in x.split(16)]
    model.train()
    return sum(losses) / len(losses)


def lr_at(step, steps):
    """Linear warm-up over the first tenth of the run, then cosine decay to a tenth."""
    warm = max(1, steps // 10)
    if step < warm:
        return LEARNING_RATE * (step + 1) / warm
    t = (step - warm) / max(1, steps - warm)
    return LEARNING_RATE * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def train(run, directory, train_bytes, valid, log, quick=False):
    """Trains one run for its planned steps; returns its result line. Validation loss at
    the start, at each quarter (not in quick mode) and at the end."""
    context, batch = run["sequence_length"], run["global_batch"]
    sequences = 16 if quick else VALID_SEQUENCES
    torch.manual_seed(0)
    model = build(directory)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=0.0)
    generator = torch.Generator().manual_seed(1)
    first = validation_loss(model, valid, context, sequences)
    log({"id": run["id"], "tokens": 0, "valid_loss": first})
    steps, tokens = run["steps"], 0
    every = max(1, steps // 4)
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, steps)
        starts = torch.randint(0, len(train_bytes) - context, (batch,), generator=generator)
        x = torch.stack([train_bytes[s : s + context] for s in starts.tolist()])
        loss = model(x, labels=x).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        tokens += batch * context
        if not quick and (step + 1) % every == 0 and step + 1 < steps:
            log({"id": run["id"], "tokens": tokens, "train_loss": loss.item(),
                 "valid_loss": validation_loss(model, valid, context, sequences)})
    final = validation_loss(model, valid, context, sequences)
    log({"id": run["id"], "tokens": tokens, "valid_loss": final})
    sha = hashlib.sha256((Path(directory) / "config.json").read_bytes()).hexdigest()
    return {"id": run["id"], "tokens": tokens, "loss": final, "config_sha256": sha,
            "initial_loss": first}


def run_study(out, quick=False, say=print):
    """The whole chain into the folder `out`; returns what it found."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    compute = QUICK_COMPUTE if quick else FULL_COMPUTE
    batch = QUICK_BATCH if quick else GLOBAL_BATCH
    plan = smelt.plan(GRID, compute, batch, export=out / "models", overwrite=True)
    say(f"plan: {len(plan['runs'])} runs, {plan['tokens_per_step']} tokens a step, "
        f"levels {', '.join(f'{c:g}' for c in compute)}")
    train_bytes, valid = corpus()
    say(f"corpus: {len(train_bytes):,} training bytes, {len(valid):,} held out")
    models = out / "models"
    results = []
    with open(out / "log.jsonl", "w", encoding="utf-8") as log_file:
        def log(entry):
            log_file.write(json.dumps(entry) + "\n")
            log_file.flush()

        for run in plan["runs"]:
            t0 = time.monotonic()
            r = train(run, models / run["directory"], train_bytes, valid, log, quick)
            results.append(r)
            say(f"{run['id']:>24}: {run['steps']:>4} steps, {r['tokens']:>9,} tokens, "
                f"valid loss {r['initial_loss']:.3f} -> {r['loss']:.3f} "
                f"({time.monotonic() - t0:.1f} s)")
    with open(out / "results.jsonl", "w", encoding="utf-8") as f:
        for r in results:
            f.write(json.dumps({k: r[k] for k in ("id", "tokens", "loss", "config_sha256")}) + "\n")
    collected = smelt.collect(plan["manifest"], out / "results.jsonl",
                              output=out / "endpoints.csv")
    fits = smelt.fit(out / "endpoints.csv", "arch", "small")
    sparsities = sorted({round(e["S"], 4) for e in collected["endpoints"]
                         if e["arch"] == "baseline"})
    try:
        gain = smelt.gain(out / "endpoints.csv", "baseline", "looped", "arch",
                          compute=[compute[0], compute[-1]], sparsity=sparsities, starts="small")
    except smelt.SmeltError as e:
        # A fit without a compute-optimal frontier (a toy study's runs are far from it) has
        # no gain: smelt refuses it, and the study says so.
        gain = {"refused": str(e)}
    seconds = time.monotonic() - started
    summary = {"quick": quick, "seconds": seconds, "plan": plan, "results": results,
               "collected": collected, "fits": fits, "gain": gain}
    with open(out / "summary.json", "w", encoding="utf-8") as f:
        json.dump({k: v for k, v in summary.items() if k != "plan"}, f, indent=1)
    for fit in fits["fits"]:
        say(f"fit {fit['group']}: {json.dumps(fit.get('surface', fit))[:300]}")
    say(f"gain: {json.dumps(gain)[:600]}")
    say(f"done in {seconds:.0f} s; endpoints in {out / 'endpoints.csv'}")
    return summary


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a few steps per run")
    parser.add_argument("--out", default="study-out", help="the folder written")
    args = parser.parse_args(argv)
    run_study(args.out, quick=args.quick)


if __name__ == "__main__":
    sys.exit(main())

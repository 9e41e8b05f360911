#!/usr/bin/env bash
# The GPU check of the kernel benchmark, one prepared script (docs/guide.md, "Kernel
# benchmark"), under 8 minutes in all, each stage bounded by `timeout` and by smelt's own
# --max-seconds:
#   0. a smoke test: the 100M dense Baseline, one round (limit 60 s);
#   1. the 200M Baseline (S~95%) and its SMELT match, bf16 cuBLAS on GPU 0, balanced and
#      skewed routing (limit 150 s; FLOPs exact; ceiling >= 70% of the card's bf16 dense
#      peak; the time ratio with its interval);
#   2. PyTorch as an independent anchor (benches/anchor.py): one Baseline layer and one
#      matched layer, forward + backward, their time ratio beside smelt's (limit 90 s);
#   3. `grid --bench cuda` of budgets/smelt-grid.toml, a measured time ratio per cell with
#      its interval; --max-seconds bounds the whole grid, and a cell left without time is
#      reported as not timed (limit 180 s).
# Each stage's wall time is recorded; a failed stage is reported and the next one still runs,
# and the script exits 1 when any stage (the anchor included) failed, 0 when all succeeded.
#
# The GPU machine may have no Rust toolchain and no network: build the binary where you
# can (no CUDA toolkit needed, cudarc loads the driver at run time) and bring it along:
#   cargo build --release --features smelt/cuda     # -> target/release/smelt
#   SMELT=target/release/smelt OUT=gpu-out bash benches/gpu.sh
# Without SMELT set, the script builds it if cargo is there. Results go to $OUT; the
# summary is $OUT/summary.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
smelt=${SMELT:-target/release/smelt}
if [ ! -x "$smelt" ] || ! "$smelt" bench --help >/dev/null 2>&1; then
    cargo build --release --features smelt/cuda || exit 1
    smelt=target/release/smelt
fi
tokens=${TOKENS:-16384}
# BACKEND=cpu TOKENS=256 runs the same stages on the CPU: a dry run of this script.
backend=${BACKEND:-cuda}
summary="$out/summary.txt"
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }

(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || true) \
    | tee "$out/gpu.txt"
say "date: $(date -u +%Y-%m-%d)"

# Runs "$@" as stage $2 under a limit of $1 seconds (the rest is the command), recording
# its wall time; counts failures.
failed=0
stage() {
    local limit=$1 name=$2
    shift 2
    local t0 t1
    t0=$(date +%s.%N)
    if timeout --kill-after=10 "$limit" bash -c "$(declare -f "$1"); $*"; then
        t1=$(date +%s.%N)
        say "stage $name: done in $(python3 -c "print(f'{$t1 - $t0:.1f}')") s"
    else
        say "stage $name: FAILED (exit $?)"
        failed=$((failed + 1))
    fi
}

export smelt backend tokens out ANCHOR_ARGS=${ANCHOR_ARGS:-}

smoke() {
    "$smelt" bench budgets/base-100m-s0.toml --backend "$backend" --tokens 1024 --rounds 1 \
        --max-seconds 50 --format json > "$out/smoke.json"
}
stage 60 "smoke test (100M dense, one round)" smoke

pair() {
    for routing in balanced skew=1.0; do
        "$smelt" bench --budget budgets/match-200m-s95.toml --backend "$backend" --tokens "$tokens" \
            --rounds 7 --routing "$routing" --max-seconds 65 --format json \
            > "$out/bench-200m-${routing/=/-}.json" || return 1
    done
}
stage 150 "200M pair (balanced + skew=1.0)" pair

anchor() {
    "$smelt" match budgets/match-200m-s95.toml --format json --quiet > "$out/match-200m.json" &&
        python3 benches/anchor.py "$out/match-200m.json" --tokens "$tokens" \
            $ANCHOR_ARGS > "$out/anchor.json"
}
stage 90 "PyTorch anchor" anchor

grid() {
    "$smelt" grid budgets/smelt-grid.toml --bench "$backend" --tokens "$tokens" --rounds 5 \
        --max-seconds 160 --format json > "$out/grid-bench.json"
}
stage 180 "16-cell grid --bench $backend" grid

python3 - "$out" <<'PY' | tee -a "$summary"
import json, os, sys
out = sys.argv[1]
def load(name):
    p = os.path.join(out, name)
    return json.load(open(p)) if os.path.exists(p) and os.path.getsize(p) else None
for tag in ("balanced", "skew-1.0"):
    r = load(f"bench-200m-{tag}.json")
    if not r:
        print(f"{tag}: no result"); continue
    c = r["ceiling_flops_per_second"]
    peak = r.get("peak_flops_per_second")
    share = f" = {100 * c / peak:.1f}% of the {peak / 1e12:.1f} TFLOP/s peak ({r['peak_source']})" if peak else " (no peak known: pass --peak)"
    print(f"\n## {tag} routing, {r['device']}, {r.get('library', 'no library reported')}")
    print(f"ceiling {c / 1e12:.1f} TFLOP/s{share}, rounds spread {100 * r['ceiling_spread']:.1f}%")
    print("| model | component | TFLOP/s | of ceiling | time share | FLOP share |")
    print("|---|---|---:|---:|---:|---:|")
    for m in r["models"]:
        for x in m["components"]:
            print(f"| {m['name']} | {x['component']} | {x['flops_per_second'] / 1e12:.1f} | "
                  f"{100 * x['of_ceiling']:.1f}% | {100 * x['time_share']:.1f}% | {100 * x['flop_share']:.1f}% |")
    for m in r["models"]:
        core = [x for x in m["components"] if x["component"] == "attention_core"]
        if core:
            x = core[0]
            print(f"{m['name']}: attention core as fused tiles, {x['executed_flops'] / x['flops']:.3f} x the model's FLOPs executed; "
                  f"{m['launch_bound_shapes']} of {m['kernel_shapes']} shapes launch-bound, {100 * m['launch_bound_time_share']:.1f}% of the time")
    exact = all(m["flops_exact"] for m in r["models"])
    print(f"FLOPs exact for every model: {exact}")
    t = r.get("time_ratio_stats") or {}
    lo, hi = t.get("interval", [float("nan")] * 2)
    noisy = " (noisy: not a figure to quote)" if t.get("noisy") else ""
    print(f"time ratio {r['time_ratio']:.3f} [{lo:.3f}, {hi:.3f}]{noisy} vs FLOP ratio {r['flop_ratio']:.3f}")
g = load("grid-bench.json")
if g:
    print(f"\n## grid --bench {g['summary']['time_ratio']['backend'] if g['summary'].get('time_ratio') else '?'}: looped / Baseline time per token, per cell")
    print("| scale | sparsity | F ratio | T ratio | 95% interval | quoted |")
    print("|---|---|---:|---:|---|---|")
    for c in g["cells"]:
        t = c.get("time")
        if t:
            lo, hi = t["interval"]
            print(f"| {c['scale']} | {c['sparsity_label']} | {c['ratios']['flops']:.4f} | {t['ratio']:.4f} | "
                  f"[{lo:.4f}, {hi:.4f}] | {'no (noisy)' if t['noisy'] else 'yes'} |")
        else:
            print(f"| {c['scale']} | {c['sparsity_label']} | {c['ratios']['flops']:.4f} | - | "
                  f"not timed: {c.get('time_failed', '?')} | no |")
    s = g["summary"].get("time_ratio") or {}
    fmt = lambda v: "-" if v is None else f"{v:.4f}"
    print(f"largest {fmt(s.get('max_ratio'))}, mean {fmt(s.get('mean_ratio'))} over the quoted cells; "
          f"{s.get('noisy_cells', 0)} noisy, {s.get('failed_cells', 0)} not timed")
a, b = load("anchor.json"), load("bench-200m-balanced.json")
if a:
    print(f"\n## PyTorch anchor ({a['device']}, torch {a['torch']}, grouped_mm {a['looped']['grouped_mm']})")
    print(f"PyTorch looped / Baseline time per token: {a['time_ratio']:.3f}")
    if b:
        print(f"smelt bench (same pair, balanced):      {b['time_ratio']:.3f} (FLOP ratio {b['flop_ratio']:.3f})")
PY
if [ "$failed" -gt 0 ]; then
    say "$failed stage(s) failed"
    exit 1
fi

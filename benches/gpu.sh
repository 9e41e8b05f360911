#!/usr/bin/env bash
# The GPU check, one prepared script (docs/guide.md, "Kernel benchmark"): at most 7.5
# minutes in all, each stage bounded by `timeout` and by smelt's own --max-seconds:
#   0. a smoke test: the 100M dense Baseline, one round (limit 45 s);
#   1. the 200M Baseline (S~95%) and its SMELT match, bf16 cuBLAS on GPU 0, balanced routing
#      (limit 80 s; FLOPs exact; ceiling >= 70% of the card's bf16 dense peak; the time
#      ratio with its interval);
#   2. the 1.6B Baseline at S~97% alone, the largest GEMMs of the grid (limit 70 s);
#   3. the step model's kernel predictions against stages 1 and 2's measured GEMM shapes
#      (`smelt validate-time --bench`: per shape measured, predicted and the error; per
#      class the median |error|), no GPU needed (limit 30 s);
#   4. PyTorch as an independent anchor (benches/anchor.py): one Baseline layer and one
#      matched layer, forward + backward, their time ratio beside smelt's (limit 90 s);
#   5. `grid --bench cuda` of budgets/smelt-grid.toml, a measured time ratio per cell with
#      its interval; --max-seconds bounds the whole grid, and a cell left without time is
#      reported as not timed (limit 120 s).
# Each stage's wall time is recorded; a failed stage is reported and the next one still runs,
# and the script exits 1 when any stage (the anchor included) failed, 0 when all succeeded.
#
# The GPU machine may have no Rust toolchain and no network: build the binary where you
# can (no CUDA toolkit needed, cudarc loads the driver and cuBLAS at run time) and bring it:
#   cargo build --release --features cuda           # -> target/release/smelt
#   SMELT=target/release/smelt OUT=gpu-out bash benches/gpu.sh
# Without SMELT set, the script uses target/release/smelt, and builds it only if cargo is
# there. Results go to $OUT (default gpu-out); the summary is $OUT/summary.txt and the
# kernel comparison $OUT/kernel-check-*.md.
#
# BACKEND=cpu TOKENS=256 runs the same stages on the CPU: a dry run of this script (the
# kernel predictions are then for CARD, default h100, against CPU times: they check the
# script, not the model).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
smelt=${SMELT:-target/release/smelt}
if [ ! -x "$smelt" ] || ! "$smelt" bench --help >/dev/null 2>&1; then
    if ! command -v cargo >/dev/null; then
        echo "no smelt binary at $smelt and no cargo to build one: build it elsewhere" \
            "(cargo build --release --features cuda) and set SMELT" >&2
        exit 1
    fi
    cargo build --release --features cuda || exit 1
    smelt=target/release/smelt
fi
tokens=${TOKENS:-16384}
backend=${BACKEND:-cuda}
card=${CARD:-}
if [ "$backend" = cpu ] && [ -z "$card" ]; then
    card=h100
fi
summary="$out/summary.txt"
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }

(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || true) \
    | tee "$out/gpu.txt"
say "date: $(date -u +%Y-%m-%d), backend $backend, tokens $tokens"

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

export smelt backend tokens out card ANCHOR_ARGS=${ANCHOR_ARGS:-}

smoke() {
    "$smelt" bench budgets/base-100m-s0.toml --backend "$backend" --tokens 1024 --rounds 1 \
        --max-seconds 40 --format json > "$out/smoke.json"
}
stage 45 "smoke test (100M dense, one round)" smoke

pair() {
    "$smelt" bench --budget budgets/match-200m-s95.toml --backend "$backend" --tokens "$tokens" \
        --rounds 7 --max-seconds 70 --format json > "$out/bench-200m-balanced.json"
}
stage 80 "200M pair (balanced routing)" pair

large() {
    "$smelt" bench budgets/base-1.6b-s97.toml --backend "$backend" --tokens "$tokens" \
        --rounds 3 --max-seconds 60 --format json > "$out/bench-1.6b-s97.json"
}
stage 70 "1.6B S97 Baseline" large

kernels() {
    local status=0
    for name in bench-200m-balanced bench-1.6b-s97; do
        [ -s "$out/$name.json" ] || { echo "no $name.json"; status=1; continue; }
        for format in markdown json; do
            "$smelt" validate-time --bench "$out/$name.json" ${card:+--card "$card"} \
                --format "$format" > "$out/kernel-check-${name#bench-}.${format/markdown/md}" \
                || status=1
        done
    done
    return $status
}
stage 30 "step model's kernel predictions vs measured" kernels

anchor() {
    "$smelt" match budgets/match-200m-s95.toml --format json --quiet > "$out/match-200m.json" &&
        python3 benches/anchor.py "$out/match-200m.json" --tokens "$tokens" \
            $ANCHOR_ARGS > "$out/anchor.json"
}
stage 90 "PyTorch anchor" anchor

grid() {
    "$smelt" grid budgets/smelt-grid.toml --bench "$backend" --tokens "$tokens" --rounds 5 \
        --max-seconds 110 --format json > "$out/grid-bench.json"
}
stage 120 "16-cell grid --bench $backend" grid

python3 - "$out" <<'PY' | tee -a "$summary"
import json, os, sys
out = sys.argv[1]
def load(name):
    p = os.path.join(out, name)
    try:
        return json.load(open(p)) if os.path.exists(p) and os.path.getsize(p) else None
    except ValueError:
        return None
r = load("bench-200m-balanced.json")
if not r:
    print("200M pair: no result")
else:
    c = r["ceiling_flops_per_second"]
    peak = r.get("peak_flops_per_second")
    share = f" = {100 * c / peak:.1f}% of the {peak / 1e12:.1f} TFLOP/s peak ({r['peak_source']})" if peak else " (no peak known: pass --peak)"
    print(f"\n## 200M pair, balanced routing, {r['device']}, {r.get('library', 'no library reported')}")
    print(f"ceiling {c / 1e12:.1f} TFLOP/s{share}, rounds spread {100 * r['ceiling_spread']:.1f}%")
    print("| model | component | TFLOP/s | of ceiling | time share | FLOP share |")
    print("|---|---|---:|---:|---:|---:|")
    for m in r["models"]:
        for x in m["components"]:
            print(f"| {m['name']} | {x['component']} | {x['flops_per_second'] / 1e12:.1f} | "
                  f"{100 * x['of_ceiling']:.1f}% | {100 * x['time_share']:.1f}% | {100 * x['flop_share']:.1f}% |")
    exact = all(m["flops_exact"] for m in r["models"])
    print(f"FLOPs exact for every model: {exact}")
    t = r.get("time_ratio_stats") or {}
    lo, hi = t.get("interval", [float("nan")] * 2)
    noisy = " (noisy: not a figure to quote)" if t.get("noisy") else ""
    print(f"time ratio {r['time_ratio']:.3f} [{lo:.3f}, {hi:.3f}]{noisy} vs FLOP ratio {r['flop_ratio']:.3f}")
for tag in ("200m-balanced", "1.6b-s97"):
    k = load(f"kernel-check-{tag}.json")
    if not k:
        print(f"\n## kernel predictions ({tag}): no result")
        continue
    print(f"\n## step model's kernel predictions on {k['card']} vs measured on {k['device']} ({tag})")
    print("| class | shapes | median abs error | summed error | measured s |")
    print("|---|---:|---:|---:|---:|")
    for c in k["classes"]:
        print(f"| {c['class']} | {c['kernels']} | {100 * c['median_abs_error']:.1f}% | "
              f"{100 * c['total_error']:+.1f}% | {c['measured_seconds']:.4g} |")
    print(f"not predicted: {k['not_predicted']} attention-core shapes, "
          f"{100 * k['not_predicted_time_share']:.1f}% of the measured time; "
          f"every shape in kernel-check-{tag}.md")
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
a = load("anchor.json")
if a:
    print(f"\n## PyTorch anchor ({a['device']}, torch {a['torch']}, grouped_mm {a['looped']['grouped_mm']})")
    print(f"PyTorch looped / Baseline time per token: {a['time_ratio']:.3f}")
    if r:
        print(f"smelt bench (same pair, balanced):      {r['time_ratio']:.3f} (FLOP ratio {r['flop_ratio']:.3f})")
PY
if [ "$failed" -gt 0 ]; then
    say "$failed stage(s) failed"
    exit 1
fi

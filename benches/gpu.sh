#!/usr/bin/env bash
# The GPU check of the kernel benchmark: the 200M Baseline (S~95%) and its SMELT match,
# bf16 cuBLAS on GPU 0, with balanced and skewed routing. A few minutes on an H100/H200.
#
# The GPU machine may have no Rust toolchain and no network: build the binary where you
# can (no CUDA toolkit needed, cudarc loads the driver at run time) and bring it along:
#   cargo build --release --features cuda     # -> target/release/smelt
#   SMELT=target/release/smelt OUT=gpu-out bash benches/gpu.sh
# Without SMELT set, the script builds it if cargo is there. Results go to $OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
smelt=${SMELT:-target/release/smelt}
if [ ! -x "$smelt" ] || ! "$smelt" bench --help >/dev/null 2>&1; then
    cargo build --release --features cuda
    smelt=target/release/smelt
fi
# bf16 dense peak of the card, for the ceiling check (H100/H200 SXM: 989.4 TFLOP/s).
peak=${PEAK_TFLOPS:-989.4}

(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || true) \
    | tee "$out/gpu.txt"

tokens=${TOKENS:-16384}
for routing in balanced skew=1.0; do
    tag=${routing/=/-}
    "$smelt" bench --budget budgets/match-200m-s95.toml --backend cuda --tokens "$tokens" \
        --repeats 5 --routing "$routing" --format json > "$out/bench-200m-$tag.json"
    "$smelt" bench --budget budgets/match-200m-s95.toml --backend cuda --tokens "$tokens" \
        --repeats 5 --routing "$routing" | tee "$out/bench-200m-$tag.txt"
done

# The ceiling against the card's peak (target: at least 70%).
python3 - "$out/bench-200m-balanced.json" "$peak" <<'PY' | tee "$out/ceiling.txt"
import json, sys
r = json.load(open(sys.argv[1]))
c = r["ceiling_flops_per_second"] / 1e12
peak = float(sys.argv[2])
print(f"ceiling {c:.1f} TFLOP/s = {100 * c / peak:.1f}% of {peak} TFLOP/s bf16 dense peak")
for m in r["models"]:
    parts = ", ".join(f'{x["component"]} {x["flops_per_second"] / 1e12:.1f}' for x in m["components"])
    print(f'{m["name"]}: {parts} TFLOP/s; exact FLOPs: {m["flops_exact"]}')
print(f'time ratio {r["time_ratio"]:.3f} vs FLOP ratio {r["flop_ratio"]:.3f}')
PY

#!/usr/bin/env python3
"""Times two `smelt` binaries on the same command as whole processes, pair by pair: each
pair runs both, one after the other, the order alternating from pair to pair, so that a
slow spell of a shared machine hits both. Prints each binary's median wall time and the
median of the pairs' ratios (new / old), with their range.

    python3 benches/pairs.py N OLD NEW -- ARGS...

e.g., from the repository root, against a build of another commit:

    git worktree add ../old COMMIT && (cd ../old && cargo build --release)
    python3 benches/pairs.py 30 ../old/target/release/smelt target/release/smelt -- \\
        grid budgets/smelt-grid-fine.toml --format json --quiet
"""

import statistics
import subprocess
import sys
import time


def main():
    if len(sys.argv) < 5 or "--" not in sys.argv:
        sys.exit(__doc__)
    n, old, new = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    args = sys.argv[sys.argv.index("--") + 1:]

    def run(binary):
        start = time.perf_counter()
        subprocess.run([binary, *args], stdout=subprocess.DEVNULL, check=True)
        return time.perf_counter() - start

    for binary in (old, new):  # the page cache warmed for both
        run(binary)
    a, b = [], []
    for i in range(n):
        if i % 2 == 0:
            a.append(run(old))
            b.append(run(new))
        else:
            b.append(run(new))
            a.append(run(old))
    ratios = [y / x for x, y in zip(a, b)]
    print(f"old median {statistics.median(a):.4f} s, new median {statistics.median(b):.4f} s, "
          f"median pair ratio new/old {statistics.median(ratios):.3f} "
          f"(from {min(ratios):.3f} to {max(ratios):.3f}), {n} pairs")


if __name__ == "__main__":
    main()

//! Solver speed: one match and the whole grid on the paper-like lattice, and the exact
//! solver beside the MILP formulation on the same small instance.
//!
//! Run: `cargo bench --bench search`. Candidates costed per second = the `costed` count
//! printed first, divided by the median time of the same benchmark.

use criterion::{Criterion, criterion_group, criterion_main};
use smelt::budget::{Budget, GridSpec};
use smelt::search;

use smelt_benches::budget as path;

fn bench(c: &mut Criterion) {
    let full = Budget::load(path("match-200m-s95.toml")).expect("budget");
    let small = Budget::load(path("match-200m-s95-small.toml")).expect("budget");
    let grid = GridSpec::load(path("smelt-grid.toml")).expect("grid");
    for (name, b) in [("match-200m-s95", &full), ("match-200m-s95-small", &small)] {
        let s = search::solve(b, 1).expect("solvable");
        eprintln!(
            "{name}: {} lattice points, {} costed",
            s.stats.lattice_points, s.stats.evaluated
        );
    }
    let mut g = c.benchmark_group("match");
    g.bench_function("200M/S95 paper-like lattice", |bench| {
        bench.iter(|| search::solve(std::hint::black_box(&full), 1))
    });
    g.bench_function("small instance, exact solver", |bench| {
        bench.iter(|| search::solve(std::hint::black_box(&small), 1))
    });
    g.sample_size(10);
    g.bench_function("small instance, good_lp MILP", |bench| {
        bench.iter(|| search::milp::solve(std::hint::black_box(&small)))
    });
    g.bench_function("grid 4x4 paper-like lattice", |bench| {
        bench.iter(|| search::match_grid(std::hint::black_box(&grid)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

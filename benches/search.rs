//! Solver speed: the paper-like and fine 4×4 grids, one match on the paper-like lattice,
//! three large lattices (1.6B/S97 with hidden size, head width and expert count in steps of
//! 1; 200M/S95 with a free expert width; 200M/S95 with head widths 32..16384), and the exact
//! solver beside the `good_lp` MILP on the same small instance; DeepSeek-V3 (MLA) and
//! gpt-oss-120b (windows, sinks) with SMELT's recipe on their default lattices; and the
//! small instance with the predicted time on an H200 SXM weighed (every expert count
//! scored, the time predicted where it can still win).
//!
//! Run: `cargo bench -p smelt-benches --bench search`. The lattice points, candidates scored
//! and models costed of each instance are printed first.

use criterion::{Criterion, criterion_group, criterion_main};
use smelt::budget::{Budget, GridSpec};
use smelt::search;
use smelt_benches::budget as path;

/// A file in `benches/instances/`.
fn instance(name: &str) -> String {
    format!("{}/instances/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn bench(c: &mut Criterion) {
    let load = |p: String| Budget::load(&p).unwrap_or_else(|e| panic!("{p}: {e}"));
    let matches = [
        (
            "match 200M/S95 paper-like lattice",
            load(path("match-200m-s95.toml")),
        ),
        (
            "match 1.6B/S97 steps of 1",
            load(instance("1.6b-s97-steps-of-1.toml")),
        ),
        (
            "match 200M/S95 free expert width",
            load(instance("200m-s95-free-ffn.toml")),
        ),
        (
            "match 200M/S95 head_dim 32..16384",
            load(instance("200m-s95-wide-head-dim.toml")),
        ),
        (
            "match DeepSeek-V3 (MLA)",
            load(path("match-deepseek-v3.toml")),
        ),
        (
            "match gpt-oss-120b (sliding windows, sinks)",
            load(path("match-gpt-oss-120b.toml")),
        ),
        (
            "match 200M/S95 small, time on H200 weighed",
            load(path("match-200m-s95-time.toml")),
        ),
    ];
    let small = load(path("match-200m-s95-small.toml"));
    let grids = [
        (
            "grid 4x4 paper-like lattice",
            GridSpec::load(path("smelt-grid.toml")).expect("grid"),
        ),
        (
            "grid 4x4 fine lattice",
            GridSpec::load(path("smelt-grid-fine.toml")).expect("grid"),
        ),
    ];
    for (name, b) in matches.iter().chain([&("small instance", small.clone())]) {
        let s = search::solve(b, 1).expect("solvable");
        eprintln!("{name}: {:?}", s.stats);
    }
    let mut g = c.benchmark_group("search");
    g.sample_size(10);
    for (name, b) in &matches {
        g.bench_function(*name, |bench| {
            bench.iter(|| search::solve(std::hint::black_box(b), 1))
        });
    }
    for (name, grid) in &grids {
        g.bench_function(*name, |bench| {
            bench.iter(|| smelt::study::match_grid(std::hint::black_box(grid)))
        });
    }
    g.bench_function("small instance, exact solver", |bench| {
        bench.iter(|| search::solve(std::hint::black_box(&small), 1))
    });
    g.bench_function("small instance, good_lp MILP", |bench| {
        bench.iter(|| search::milp::solve(std::hint::black_box(&small)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

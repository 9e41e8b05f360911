//! The CUDA backend's host-side setup, which needs no driver: planning the 200M pair
//! (`budgets/match-200m-s95.toml`, 16,384 tokens) and laying out its input pool, with
//! balanced routing and with skewed routing (many more kernel shapes), and filling the pool.
//! The layout is one pass over the shapes and the pool's size is set by the largest
//! operands, not by their number.
//!
//! Run: `cargo bench -p smelt-benches --bench kernels`. The shape counts and pool sizes are
//! printed first.

use criterion::{Criterion, criterion_group, criterion_main};
use smelt::ModelSpec;
use smelt::bench::pool;
use smelt::budget::Budget;
use smelt::plan::{self, Plan, Routing};
use smelt_benches::budget as path;

/// The ceiling's edge on a GPU.
const CEILING: u64 = 8192;
/// The GPU backend's default batch.
const TOKENS: u64 = 16384;

fn plans(pair: &[ModelSpec], routing: Routing) -> Vec<Plan> {
    pair.iter()
        .map(|s| {
            let docs = plan::documents(&s.workload, TOKENS).expect("documents");
            plan::plan(&s.model, &docs, s.workload.attention, routing).expect("plan")
        })
        .collect()
}

fn setup(pair: &[ModelSpec], routing: Routing) -> pool::Layout {
    let plans = plans(pair, routing);
    let refs: Vec<&Plan> = plans.iter().collect();
    pool::layout(&refs, CEILING).expect("layout")
}

fn bench(c: &mut Criterion) {
    let p = path("match-200m-s95.toml");
    let budget = Budget::load(&p).unwrap_or_else(|e| panic!("{p}: {e}"));
    let m = smelt::search::match_budget(&budget, 1).expect("match");
    let pair = [m.baseline, m.looped];
    let routings = [
        ("balanced", Routing::Balanced),
        ("skew=1", Routing::Skewed(1.0)),
    ];
    for (name, r) in routings {
        let l = setup(&pair, r);
        let shapes: usize = l.slots.iter().map(Vec::len).sum();
        println!(
            "{name}: {shapes} kernel shapes, pool {} MiB, output {} MiB",
            (l.pool * 2) >> 20,
            (l.out * 2) >> 20
        );
    }
    let mut g = c.benchmark_group("cuda host setup, 200M pair, 16384 tokens");
    for (name, r) in routings {
        g.bench_function(format!("plan + pool layout, {name}"), |b| {
            b.iter(|| setup(&pair, r))
        });
    }
    let len = setup(&pair, Routing::Balanced).pool;
    g.sample_size(10);
    g.bench_function("pool fill (host, all threads)", |b| {
        b.iter(|| pool::fill(len))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

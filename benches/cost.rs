//! How fast the cost model is: one full report, and the bare budgets the solver uses.

use criterion::{Criterion, criterion_group, criterion_main};
use smelt::ModelSpec;

fn load(name: &str) -> ModelSpec {
    ModelSpec::load(smelt_benches::budget(&format!("{name}.toml"))).expect("budget file")
}

fn bench(c: &mut Criterion) {
    let base = load("base-200m-s95");
    let looped = load("smelt-200m-s95");
    c.bench_function("cost report 200M/S95", |b| {
        b.iter(|| smelt::cost(std::hint::black_box(&base)))
    });
    c.bench_function("budgets 200M SMELT", |b| {
        b.iter(|| smelt::budgets(std::hint::black_box(&looped)))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);

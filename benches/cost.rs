//! How fast the cost model is: one full report, the bare budgets the solver uses, and a
//! long loop over many windowed layers (counted per layer, not per execution).

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

/// Windowed-layer executions of a long loop over many windowed layers: counted along the
/// execution order (how the cost model counted them before, one list scan per execution)
/// and per layer (how it counts them now), side by side; and the whole cost report.
fn windowed(c: &mut Criterion) {
    let (layers, repeats) = (2048u64, 64u64);
    let text = format!(
        "[model]\nlayers = {layers}\nhidden = 64\nheads = 4\nkv_heads = 1\nhead_dim = 16\n\
         [model.window]\nkind = \"sliding\"\nsize = 128\nlayers = [{}]\n\
         [model.moe]\nexperts = 8\ntop_k = 2\nexpert_ffn = 32\n\
         [model.loop]\nfirst = 1\nspan = {layers}\nrepeats = {repeats}\n\
         [workload]\ncontext = 4096\nmean_doc_len = 991\n",
        (2..=layers)
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let spec = ModelSpec::from_toml_str(&text).expect("model");
    let m = &spec.model;
    let windows = &m.window.as_ref().expect("window").layers;
    let mut g = c.benchmark_group("windowed executions, 2047 of 2048 layers looped 64 times");
    g.sample_size(10);
    g.bench_function("before: per execution", |b| {
        b.iter(|| {
            let order = std::hint::black_box(m).execution_order();
            order
                .iter()
                .filter(|&&l| windows.contains(&(l + 1)))
                .count() as u64
        })
    });
    g.bench_function("after: per layer", |b| {
        b.iter(|| std::hint::black_box(m).executions_of(windows))
    });
    g.bench_function("after: whole cost report", |b| {
        b.iter(|| smelt::cost(std::hint::black_box(&spec)))
    });
    g.finish();
}

criterion_group!(benches, bench, windowed);
criterion_main!(benches);

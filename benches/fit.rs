//! Fitting speed: one surface fit from the full start grid, and a 2000-resample cell
//! bootstrap of the gain table (two refits per resample, warm-started).

use criterion::{Criterion, criterion_group, criterion_main};
use smelt::fit::{self, BootstrapOptions, FitOptions, Form, GainOptions, data};

fn bench(c: &mut Criterion) {
    let (base, smelt) = data::paper_like_endpoints(&[0.85, 0.95, 0.97], 0.002);
    let opts = FitOptions::standard(Form::Surface);
    let mut g = c.benchmark_group("fit");
    g.sample_size(10);
    g.bench_function("surface fit, 48 endpoints, 13,500 starts", |bench| {
        bench.iter(|| fit::fit("baseline", std::hint::black_box(&base), &opts))
    });
    let gain = GainOptions {
        bootstrap: Some(BootstrapOptions {
            resamples: 2000,
            seed: 0,
        }),
        ..GainOptions::standard()
    };
    g.bench_function("gain table, 2000-resample cell bootstrap", |bench| {
        bench.iter(|| fit::gain_table(("baseline", &base), ("smelt", &smelt), &gain))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! Fitting speed: one surface fit from the full start grid, and a 2000-resample cell
//! bootstrap of the gain table (two refits per resample, warm-started).

use criterion::{Criterion, criterion_group, criterion_main};
use smelt::fit::{self, BootstrapOptions, FitOptions, Form, data};

fn bench(c: &mut Criterion) {
    let (b, s) = data::paper_like_surfaces();
    let flops = [6.0e8, 1.33e9, 4.0e9, 1.0e10];
    let sp = [0.85, 0.95, 0.97];
    let tokens = [2.5e9, 1.0e10, 4.0e10, 1.6e11];
    let base = data::synthetic(&b, &flops, &sp, &tokens, 0.002, 1);
    let smelt = data::synthetic(&s, &flops, &sp, &tokens, 0.002, 2);
    let opts = FitOptions::standard(Form::Surface);
    let mut g = c.benchmark_group("fit");
    g.sample_size(10);
    g.bench_function("surface fit, 48 endpoints, 13,500 starts", |bench| {
        bench.iter(|| fit::fit("baseline", std::hint::black_box(&base), &opts))
    });
    g.bench_function("gain table, 2000-resample cell bootstrap", |bench| {
        bench.iter(|| {
            fit::gain_table(
                ("baseline", &base),
                ("smelt", &smelt),
                &[1e20, 1e21],
                &[0.85, 0.95, 0.97],
                &opts,
                Some(BootstrapOptions {
                    resamples: 2000,
                    seed: 0,
                }),
            )
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

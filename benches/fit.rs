//! Fitting speed: one surface fit from the full start grid, the two scaling cases of the
//! start search (Chinchilla's 240 points with 4,500 starts; 10,000 synthetic endpoints in
//! one group with 13,500 starts), each searched screened (the default) and exhaustively
//! (L-BFGS from every start, the protocol before the screened search), and a 2000-resample
//! cell bootstrap of the gain table (two refits per resample, warm-started).
//!
//! L-BFGS from all 13,500 starts on 10,000 endpoints takes minutes per run, so that case is
//! run on a 216-start grid and its time is scaled by 13,500 / 216 (a per-start cost is not
//! the same at every start, so the scaled figure is an estimate; docs/benchmarks.md).
//!
//! A million endpoints (the large-input case: the screened search screens on a subsample
//! and runs L-BFGS on every endpoint from its best ends) is fitted from the small grid's 32
//! starts, as `smelt fit --starts small` does.

use criterion::{Criterion, criterion_group, criterion_main};
use smelt::fit::{self, BootstrapOptions, FitOptions, Form, GainOptions, Search, StartGrid, data};

/// Chinchilla's points (Epoch AI's extraction, tests/data/chinchilla).
fn chinchilla() -> Vec<fit::Endpoint> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/data/chinchilla/svg_extracted_data.csv"
    );
    let text = std::fs::read_to_string(path).expect("tests/data/chinchilla is in the repository");
    data::epoch_chinchilla(&text, path).expect("the Chinchilla data parse")
}

/// `n` values from `from` to `to`, evenly spaced in log.
fn geometric(from: f64, to: f64, n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| from * (to / from).powf(i as f64 / (n - 1) as f64))
        .collect()
}

/// 10,000 endpoints of the paper-like baseline surface, one group: 25 scales x 4 sparsities x
/// 100 token counts, 1% noise.
fn ten_thousand() -> Vec<fit::Endpoint> {
    let (truth, _) = data::paper_like_surfaces();
    data::synthetic(
        &truth,
        &geometric(1e8, 1e11, 25),
        &[0.0, 0.5, 0.85, 0.95],
        &geometric(1e9, 1e12, 100),
        0.01,
        11,
    )
}

/// 1,000,000 endpoints of the same surface, one group: 25 scales x 4 sparsities x 10,000
/// token counts, 1% noise (`cargo run --release --example synthetic_endpoints -- 1000000`
/// writes the same points as CSV).
fn million() -> Vec<fit::Endpoint> {
    let (truth, _) = data::paper_like_surfaces();
    data::synthetic(
        &truth,
        &geometric(1e8, 1e11, 25),
        &[0.0, 0.5, 0.85, 0.95],
        &geometric(1e9, 1e12, 10_000),
        0.01,
        11,
    )
}

/// A 216-start grid (3 x 3 x 2 x 2 x 3 x 2) spread like the standard one.
fn coarse() -> StartGrid {
    StartGrid {
        e: vec![-1.0, 0.0, 1.0],
        log_a: vec![0.0, 10.0, 20.0],
        a: vec![0.5, 1.5],
        b: vec![0.0, 1.0],
        log_k: vec![0.0, 10.0, 20.0],
        c: vec![0.5, 1.5],
    }
}

fn with(search: Search, form: Form) -> FitOptions {
    FitOptions {
        search,
        ..FitOptions::standard(form)
    }
}

fn scaling(c: &mut Criterion) {
    let mut g = c.benchmark_group("fit scaling");
    g.sample_size(10);
    let points = chinchilla();
    for search in [Search::Screened, Search::Exhaustive] {
        let opts = with(search, Form::Chinchilla);
        let name = format!("chinchilla, 240 points, 4,500 starts, {}", search.as_str());
        g.bench_function(name, |bench| {
            bench.iter(|| fit::fit("", std::hint::black_box(&points), &opts))
        });
    }
    let many = ten_thousand();
    let opts = with(Search::Screened, Form::Surface);
    g.bench_function("10,000 endpoints, 13,500 starts, screened", |bench| {
        bench.iter(|| fit::fit("", std::hint::black_box(&many), &opts))
    });
    let opts = FitOptions {
        starts: coarse(),
        ..with(Search::Exhaustive, Form::Surface)
    };
    g.bench_function("10,000 endpoints, 216 starts, exhaustive", |bench| {
        bench.iter(|| fit::fit("", std::hint::black_box(&many), &opts))
    });
    let large = million();
    let opts = FitOptions {
        starts: StartGrid::small(Form::Surface),
        ..with(Search::Screened, Form::Surface)
    };
    g.bench_function("1,000,000 endpoints, 32 starts, screened", |bench| {
        bench.iter(|| fit::fit("", std::hint::black_box(&large), &opts))
    });
    g.finish();
}

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

criterion_group!(benches, scaling, bench);
criterion_main!(benches);

//! Writes synthetic endpoints for two architectures to standard output, drawn from
//! [`smelt::fit::data::paper_like_surfaces`] (the paper's published `E`, `a`, `K`, `c`; `A`
//! and `b` chosen by us), 4 scales x 3 sparsities (12 cells) x 4 token counts, 0.2% noise.
//!
//! Run: `cargo run --example synthetic_endpoints > endpoints.csv`, then
//! `smelt fit endpoints.csv --group arch` or
//! `smelt gain endpoints.csv --group arch --reference baseline --target smelt --bootstrap 2000`.
//!
//! With a count, `cargo run --release --example synthetic_endpoints -- 1000000`: that many
//! endpoints (rounded down to a multiple of 100) of the Baseline's surface alone, 25 scales
//! (1e8 to 1e11 FLOPs per token) x 4 sparsities (0, 0.5, 0.85, 0.95) x N/100 token counts
//! (1e9 to 1e12), 1% noise: the large input of docs/benchmarks.md.

use smelt::fit::data;

/// `n` values from `from` to `to`, evenly spaced in log.
fn geometric(from: f64, to: f64, n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| from * (to / from).powf(i as f64 / (n.max(2) - 1) as f64))
        .collect()
}

fn main() {
    let count = std::env::args().nth(1);
    let Some(count) = count else {
        let (b, s) = data::paper_like_endpoints(&[0.85, 0.95, 0.97], 0.002);
        print!("{}", data::to_csv(&[("baseline", &b), ("smelt", &s)]));
        return;
    };
    let Some(n) = count.parse::<usize>().ok().filter(|n| *n >= 100) else {
        eprintln!("synthetic_endpoints: the count must be a whole number of at least 100");
        std::process::exit(2);
    };
    let (truth, _) = data::paper_like_surfaces();
    let points = data::synthetic(
        &truth,
        &geometric(1e8, 1e11, 25),
        &[0.0, 0.5, 0.85, 0.95],
        &geometric(1e9, 1e12, n / 100),
        0.01,
        11,
    );
    print!("{}", data::to_csv(&[("baseline", &points)]));
}

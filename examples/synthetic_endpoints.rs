//! Writes synthetic endpoints for two architectures to standard output, drawn from
//! [`smelt::fit::data::paper_like_surfaces`] (the paper's published `E`, `a`, `K`, `c`; `A`
//! and `b` chosen by us), 4 scales x 3 sparsities (12 cells) x 4 token counts, 0.2% noise.
//!
//! Run: `cargo run --example synthetic_endpoints > endpoints.csv`, then
//! `smelt fit endpoints.csv --group arch` or
//! `smelt gain endpoints.csv --group arch --reference baseline --target smelt --bootstrap 2000`.

use smelt::fit::data;

fn main() {
    let (baseline, smelt) = smelt::fit::data::paper_like_surfaces();
    let flops = [6.0e8, 1.33e9, 4.0e9, 1.0e10];
    let sparsities = [0.85, 0.95, 0.97];
    let tokens = [2.5e9, 1.0e10, 4.0e10, 1.6e11];
    let b = data::synthetic(&baseline, &flops, &sparsities, &tokens, 0.002, 1);
    let s = data::synthetic(&smelt, &flops, &sparsities, &tokens, 0.002, 2);
    print!("{}", data::to_csv(&[("baseline", &b), ("smelt", &s)]));
}

//! Writes synthetic endpoints for two architectures to standard output, drawn from
//! [`smelt::fit::data::paper_like_surfaces`] (the paper's published `E`, `a`, `K`, `c`; `A`
//! and `b` chosen by us), 4 scales x 3 sparsities (12 cells) x 4 token counts, 0.2% noise.
//!
//! Run: `cargo run --example synthetic_endpoints > endpoints.csv`, then
//! `smelt fit endpoints.csv --group arch` or
//! `smelt gain endpoints.csv --group arch --reference baseline --target smelt --bootstrap 2000`.

use smelt::fit::data;

fn main() {
    let (b, s) = data::paper_like_endpoints(&[0.85, 0.95, 0.97], 0.002);
    print!("{}", data::to_csv(&[("baseline", &b), ("smelt", &s)]));
}

//! Whether endpoints can identify a surface's parameters: refused before fitting where they
//! cannot, flagged (a warning on the fit, which `gain` repeats) where they barely can.
//!
//! The surface is `E + g + h`, a compute term `g = A(1 - S)^b / F^a` and a data term
//! `h = K / D^c`. A term that only has to pass through as many values as it has parameters
//! can pass through any of them, and `E` can then move by any small amount with the terms
//! moving the other way: an exact family of equally good fits. Hence, refused:
//!
//! - fewer distinct `(F, S, D)` points than parameters; a constant loss (it fixes `E`
//!   alone); one value of `F`, of `D` or (full surface) of `S`;
//! - two values of `D` (`E`, `K` and `c` not determined), two of `F` in Chinchilla's form
//!   (`E`, `A`, `a`), three or fewer `(F, S)` pairs for the full surface (`E`, `A`, `a`,
//!   `b`);
//! - `log(1 - S)` an affine function of `log F` (full surface: each scale at its own
//!   sparsity, so `a` and `b` trade off exactly);
//! - `log D` an affine function of `log F` (and `log(1 - S)`): a fixed tokens-per-parameter
//!   ratio, say. Then `K/D^c` is a power of `F` too, and the two terms can trade places
//!   (`a` with `c`, `A` with `K`): two optima, no way to tell which law is which.
//!
//! Values of `F`, `S` or `D` within a relative [`SAME`] of each other count as one value
//! (rounding in a CSV), so a size given twice with a different last digit is not a third.
//! "Affine" is to a relative residual of [`COLLINEAR`] (rounding in a CSV); a residual below
//! [`NEARLY`] is flagged instead. Also flagged: losses whose relative spread is below the
//! Huber threshold `δ` (the power laws then rest on differences that small), and, after the
//! fit, a term that is constant over the data to [`FLAT`] of the losses' spread (the other
//! term explains the data; this one's scale and exponent are then not determined, only its
//! sum with `E`).

use super::{Endpoint, Form, Surface};
use crate::error::{Error, Result};

/// The relative spread of the losses under which they count as one value (below it, the
/// differences are rounding of a constant, not a signal a surface can be fitted to).
const LOSS_SPREAD: f64 = 1e-9;

/// A regression's residual, relative to the spread of what it predicts, at or under which
/// one logarithm is an exact affine function of others (refused).
pub const COLLINEAR: f64 = 1e-6;

/// The relative residual under which the dependence is flagged as near.
pub const NEARLY: f64 = 1e-2;

/// A term's variation over the data, relative to the losses' spread, at or under which it
/// is flagged as constant.
pub const FLAT: f64 = 1e-6;

/// The relative difference under which two values of `F`, `S` or `D` count as one (CSV
/// rounding of one value, not a second one: `3e9` and `3e9·(1 + 1e-12)` do not make a
/// third size that could determine `E`, `A` and `a`).
pub const SAME: f64 = 1e-9;

/// `col` with each run of values within a relative [`SAME`] of the run's smallest mapped
/// to that smallest, and whether any value moved.
fn merge_near(col: &[f64]) -> (Vec<f64>, bool) {
    let mut sorted: Vec<f64> = col.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mut runs: Vec<(f64, f64)> = Vec::with_capacity(sorted.len());
    let mut rep = f64::NAN;
    for v in sorted {
        // The first value (against NaN) starts a run.
        let same = rep.is_finite() && v - rep <= SAME * v.abs().max(rep.abs());
        if !same {
            rep = v;
        }
        runs.push((v, rep));
    }
    let out: Vec<f64> = col
        .iter()
        .map(|v| runs[runs.partition_point(|(x, _)| x.total_cmp(v).is_lt())].1)
        .collect();
    let moved = out.iter().zip(col).any(|(a, b)| a.to_bits() != b.to_bits());
    (out, moved)
}

/// `points` with near-equal values of `F`, `S` and `D` merged ([`merge_near`]), and
/// whether any was.
fn merged_points(points: &[Endpoint]) -> (Vec<Endpoint>, bool) {
    let column = |f: fn(&Endpoint) -> f64| merge_near(&points.iter().map(f).collect::<Vec<_>>());
    let ((f, mf), (s, ms), (d, md)) = (column(|p| p.f), column(|p| p.s), column(|p| p.d));
    let out = (points.iter().enumerate())
        .map(|(i, p)| Endpoint {
            f: f[i],
            s: s[i],
            d: d[i],
            ..p.clone()
        })
        .collect();
    (out, mf || ms || md)
}

/// The values of `key` over `points`, each once.
fn distinct<const N: usize>(points: &[Endpoint], key: impl Fn(&Endpoint) -> [f64; N]) -> usize {
    let mut v: Vec<[u64; N]> = points.iter().map(|p| key(p).map(f64::to_bits)).collect();
    v.sort_unstable();
    v.dedup();
    v.len()
}

/// The residual of the least-squares fit of `y` by `1` and the columns of `x`, relative to
/// `y`'s own spread about its mean (0 when `y` is exactly affine in `x`; 1 when `x` says
/// nothing of it). `None` when `y` does not vary.
fn relative_residual(y: &[f64], x: &[Vec<f64>]) -> Option<f64> {
    let n = y.len() as f64;
    let centred = |v: &[f64]| {
        let m = v.iter().sum::<f64>() / n;
        v.iter().map(|a| a - m).collect::<Vec<f64>>()
    };
    let y = centred(y);
    let spread = y.iter().map(|a| a * a).sum::<f64>();
    if spread == 0.0 {
        return None;
    }
    // Gram-Schmidt on the centred columns: each drops out when it is (to rounding) a
    // combination of those before it.
    let mut basis: Vec<Vec<f64>> = Vec::new();
    for col in x {
        let mut v = centred(col);
        let norm0 = v.iter().map(|a| a * a).sum::<f64>();
        for q in &basis {
            let d: f64 = v.iter().zip(q).map(|(a, b)| a * b).sum();
            v.iter_mut().zip(q).for_each(|(a, b)| *a -= d * b);
        }
        let norm = v.iter().map(|a| a * a).sum::<f64>();
        if norm > 1e-24 * norm0.max(f64::MIN_POSITIVE) {
            let s = norm.sqrt();
            basis.push(v.iter().map(|a| a / s).collect());
        }
    }
    let mut r = y;
    for q in &basis {
        let d: f64 = r.iter().zip(q).map(|(a, b)| a * b).sum();
        r.iter_mut().zip(q).for_each(|(a, b)| *a -= d * b);
    }
    Some((r.iter().map(|a| a * a).sum::<f64>() / spread).sqrt())
}

/// Refuses data that cannot identify the surface (module docs); the warnings for data that
/// barely can. `delta` is the Huber threshold.
pub(crate) fn check_data(
    group: &str,
    points: &[Endpoint],
    form: Form,
    delta: f64,
) -> Result<Vec<String>> {
    let field = if group.is_empty() {
        "endpoints".to_owned()
    } else {
        format!("group '{group}'")
    };
    let (merged, near) = merged_points(points);
    let points = merged.as_slice();
    let refuse = |why: String| {
        let note = match near {
            true => format!(
                " (values of F, S or D within a relative {SAME:e} of each other count as one)"
            ),
            false => String::new(),
        };
        Err(Error::invalid(
            field.clone(),
            format!("cannot identify the surface: {why}{note}"),
        ))
    };
    let params = match form {
        Form::Surface => 6,
        Form::Chinchilla => 5,
    };
    let unique = distinct(points, |p| [p.f, p.s, p.d]);
    if unique <= params {
        return refuse(format!(
            "{unique} distinct (F, S, D) points for {params} parameters (repeated rows count once)"
        ));
    }
    let (n_f, n_d) = (distinct(points, |p| [p.f]), distinct(points, |p| [p.d]));
    for (name, n) in [("F", n_f), ("D", n_d)] {
        if n < 2 {
            return refuse(format!("every endpoint has the same {name}"));
        }
    }
    // A loss that does not vary determines E alone: A, B and the exponents are then
    // anything that makes both power-law terms vanish, and a "converged" fit of them (or a
    // gain computed from two such fits) would be arbitrary.
    let (low, high) = points.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), p| {
        (lo.min(p.loss), hi.max(p.loss))
    });
    if high - low <= LOSS_SPREAD * high {
        return refuse(format!(
            "every endpoint has the same loss ({low}, to a relative {LOSS_SPREAD:e}), which \
             fixes E alone: the power-law terms (A, B, alpha, beta) are not determined"
        ));
    }
    if form == Form::Surface && distinct(points, |p| [p.s]) < 2 {
        return refuse(
            "every endpoint has the same sparsity S > 0, so A and b cannot be told apart".into(),
        );
    }
    if n_d < 3 {
        return refuse(
            "D takes only 2 values: K/D^c passes through any two, so E, K and c are not \
             determined (give 3 or more token counts)"
                .into(),
        );
    }
    let pairs = distinct(points, |p| [p.f, p.s]);
    match form {
        Form::Chinchilla if n_f < 3 => {
            return refuse(
                "F takes only 2 values: A/F^a passes through any two, so E, A and a are not \
                 determined (give 3 or more sizes)"
                    .into(),
            );
        }
        Form::Surface if pairs < 4 => {
            return refuse(format!(
                "only {pairs} distinct (F, S) pairs: A(1-S)^b/F^a passes through any {pairs} \
                 values, so E, A, a and b are not determined (give 4 or more)"
            ));
        }
        _ => {}
    }
    let mut warnings = Vec::new();
    collinear(points, form, &refuse, &mut warnings)?;
    let spread = (high - low) / high;
    if spread < delta {
        warnings.push(format!(
            "the losses vary by only {spread:.1e} (relative), less than the Huber threshold \
             {delta:e}: A, a, K and c (and b) rest on differences that small and are poorly \
             determined"
        ));
    }
    Ok(warnings)
}

/// The two affine dependences of the module docs: refused when exact, flagged when near.
fn collinear(
    points: &[Endpoint],
    form: Form,
    refuse: &dyn Fn(String) -> Result<Vec<String>>,
    warnings: &mut Vec<String>,
) -> Result<()> {
    let column = |f: fn(&Endpoint) -> f64| points.iter().map(f).collect::<Vec<f64>>();
    let (lf, ls, ld) = (
        column(|p| p.f.ln()),
        column(|p| (1.0 - p.s).ln()),
        column(|p| p.d.ln()),
    );
    let mut says = Vec::new();
    if form == Form::Surface
        && let Some(r) = relative_residual(&ls, std::slice::from_ref(&lf))
    {
        says.push((
            r,
            "log(1-S) is an affine function of log F (each scale at its own sparsity)",
            "a and b trade off",
            "a and b are not determined",
        ));
    }
    let regressors = match form {
        Form::Surface => vec![lf, ls],
        Form::Chinchilla => vec![lf],
    };
    if let Some(r) = relative_residual(&ld, &regressors) {
        says.push((
            r,
            "log D is an affine function of log F (a fixed ratio of tokens to size, say)",
            "the F and D terms can trade places",
            "A, a, K and c are not determined",
        ));
    }
    for (r, what, so, undetermined) in says {
        if r <= COLLINEAR {
            refuse(format!("{what}: {so}, so {undetermined}"))?;
        } else if r <= NEARLY {
            warnings.push(format!(
                "{} to a relative residual of {r:.1e}: {so} almost freely, so {}",
                what.replacen("is an", "is nearly an", 1),
                undetermined.replace("not determined", "poorly determined")
            ));
        }
    }
    Ok(())
}

/// The warnings for a fitted `surface` on `points`: a term constant over the data.
pub(crate) fn check_fit(surface: &Surface, points: &[Endpoint]) -> Vec<String> {
    let s = surface;
    let range = |term: &dyn Fn(&Endpoint) -> f64| {
        let (lo, hi) = points
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), p| {
                let v = term(p);
                (l.min(v), h.max(v))
            });
        hi - lo
    };
    let spread = range(&|p| p.loss);
    let compute = range(&|p| s.A * (1.0 - p.s).powf(s.b) / p.f.powf(s.a));
    let data = range(&|p| s.K / p.d.powf(s.c));
    let mut out: Vec<String> = surface.frontier_defect().into_iter().collect();
    for (name, r, params) in [
        ("A(1-S)^b/F^a", compute, "A, a and b"),
        ("K/D^c", data, "K and c"),
    ] {
        // A NaN variation (a non-finite fit) is flagged too.
        if r.is_nan() || r <= FLAT * spread {
            out.push(format!(
                "the fitted {name} varies by {r:.1e} over the data (under {FLAT:e} of the \
                 losses' spread, {spread:.1e}): it acts as a constant added to E, so {params} \
                 are not determined"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_residual_finds_affine_dependence() {
        let x: Vec<f64> = (0..10).map(|i| i as f64).collect();
        let y: Vec<f64> = x.iter().map(|v| 3.0 * v - 2.0).collect();
        assert!(relative_residual(&y, std::slice::from_ref(&x)).unwrap() < 1e-12);
        let z: Vec<f64> = x.iter().map(|v| v * v).collect();
        let r = relative_residual(&z, std::slice::from_ref(&x)).unwrap();
        assert!(r > 0.1 && r < 1.0, "{r}");
        // A second column that repeats the first adds nothing.
        assert!((relative_residual(&z, &[x.clone(), x.clone()]).unwrap() - r).abs() < 1e-12);
        assert_eq!(relative_residual(&[1.0; 10], &[x]), None);
    }

    #[test]
    fn a_term_constant_over_the_data_is_flagged() {
        let points: Vec<Endpoint> = (0..12)
            .map(|i| Endpoint {
                f: 1e8 * 2f64.powi(i % 4),
                s: 0.0,
                d: 1e10 * 3f64.powi(i / 4),
                loss: 2.0 + 0.1 * (i / 4) as f64,
                cell: i.to_string(),
            })
            .collect();
        let mut s = Surface {
            E: 1.8,
            A: 400.0,
            a: 0.34,
            b: 0.0,
            K: 2000.0,
            c: 0.37,
        };
        assert!(check_fit(&s, &points).is_empty());
        // An exponent of 0 makes A/F^a the constant A: only E + A is determined.
        s.a = 0.0;
        // (It also leaves the surface without a compute-optimal frontier, said first.)
        let w = check_fit(&s, &points);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("a = 0.000 is not positive"), "{w:?}");
        assert!(w[1].contains("A(1-S)^b/F^a varies by 0.0e0") && w[1].contains("A, a and b"));
        // A data term far below the losses' spread says nothing either.
        s.K = 1e-9;
        let w = check_fit(&s, &points);
        assert!(
            w.len() == 3 && w[2].contains("K and c are not determined"),
            "{w:?}"
        );
    }
}

//! Limited-memory BFGS with a strong-Wolfe line search (Nocedal & Wright, *Numerical
//! Optimization*, 2nd ed., Algorithms 7.4, 3.5 and 3.6).
//!
//! Unconstrained, like the published Chinchilla refits (scipy's L-BFGS-B with no bounds set
//! is this algorithm). Stopping rules follow scipy's L-BFGS-B so that a fit can be compared
//! with one made there: stop when the largest gradient component is at most `gtol`, or when
//! the relative reduction `(f_k - f_{k+1}) / max(|f_k|, |f_{k+1}|, 1)` is at most `ftol`, or
//! after `max_iter` iterations. Note the `max(.., 1)`: for an objective much smaller than 1
//! the `ftol` test is an *absolute* one, which is how a rescaled objective (a mean instead
//! of a sum) can stop a fit early.

/// Stopping rules.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Options {
    /// Largest gradient component at which to stop.
    pub gtol: f64,
    /// Relative reduction of the objective at which to stop.
    pub ftol: f64,
    /// Iteration limit.
    pub max_iter: usize,
    /// History length.
    pub memory: usize,
}

impl Default for Options {
    /// scipy's L-BFGS-B defaults: `gtol = 1e-5`, `ftol = 2.22e-9` (`factr = 1e7`),
    /// 15,000 iterations, 10 correction pairs.
    fn default() -> Self {
        Self {
            gtol: 1e-5,
            ftol: 1e7 * f64::EPSILON,
            max_iter: 15_000,
            memory: 10,
        }
    }
}

impl Options {
    /// Run to convergence: stop only when the largest gradient component is at most
    /// `1e-10` (or when no step decreases the objective any more), not on a small reduction.
    pub fn converged() -> Self {
        Self {
            gtol: 1e-10,
            ftol: 0.0,
            ..Self::default()
        }
    }
}

/// Why the iteration stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Termination {
    /// The gradient test passed.
    Gradient,
    /// The relative-reduction test passed.
    Reduction,
    /// The iteration limit was reached.
    MaxIter,
    /// The line search found no acceptable step (usually: converged to rounding level).
    LineSearch,
}

impl std::fmt::Display for Termination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Termination::Gradient => "gradient test met",
            Termination::Reduction => "objective stopped decreasing (ftol)",
            Termination::MaxIter => "iteration limit",
            Termination::LineSearch => "no further decrease (rounding level)",
        })
    }
}

/// The result of a minimisation.
#[derive(Debug, Clone, PartialEq)]
pub struct Minimum {
    /// The point reached.
    pub x: Vec<f64>,
    /// The objective there.
    pub f: f64,
    /// The largest gradient component there.
    pub grad_max: f64,
    /// Iterations taken.
    pub iterations: usize,
    /// Why it stopped.
    pub termination: Termination,
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn max_abs(a: &[f64]) -> f64 {
    a.iter().fold(0.0, |m, v| m.max(v.abs()))
}

/// Minimises `f`, which returns the objective and writes its gradient, from `x0`.
pub fn minimize<F>(mut f: F, x0: &[f64], opts: &Options) -> Minimum
where
    F: FnMut(&[f64], &mut [f64]) -> f64,
{
    let n = x0.len();
    let mut x = x0.to_vec();
    let mut g = vec![0.0; n];
    let mut fx = f(&x, &mut g);
    let mut s_hist: Vec<Vec<f64>> = Vec::new();
    let mut y_hist: Vec<Vec<f64>> = Vec::new();
    let mut rho: Vec<f64> = Vec::new();
    let mut iterations = 0;
    let finish = |x: Vec<f64>, f: f64, g: &[f64], it: usize, t: Termination| Minimum {
        x,
        f,
        grad_max: max_abs(g),
        iterations: it,
        termination: t,
    };
    if !fx.is_finite() {
        return finish(x, fx, &g, 0, Termination::LineSearch);
    }
    loop {
        if max_abs(&g) <= opts.gtol {
            return finish(x, fx, &g, iterations, Termination::Gradient);
        }
        if iterations >= opts.max_iter {
            return finish(x, fx, &g, iterations, Termination::MaxIter);
        }
        // Two-loop recursion: d = -H g.
        let mut q = g.clone();
        let m = s_hist.len();
        let mut alpha = vec![0.0; m];
        for i in (0..m).rev() {
            alpha[i] = rho[i] * dot(&s_hist[i], &q);
            for (qj, yj) in q.iter_mut().zip(&y_hist[i]) {
                *qj -= alpha[i] * yj;
            }
        }
        let gamma = if m > 0 {
            dot(&s_hist[m - 1], &y_hist[m - 1]) / dot(&y_hist[m - 1], &y_hist[m - 1])
        } else {
            1.0 / max_abs(&g).max(1e-300)
        };
        for qj in q.iter_mut() {
            *qj *= gamma;
        }
        for i in 0..m {
            let beta = rho[i] * dot(&y_hist[i], &q);
            for (qj, sj) in q.iter_mut().zip(&s_hist[i]) {
                *qj += sj * (alpha[i] - beta);
            }
        }
        let mut d: Vec<f64> = q.iter().map(|v| -v).collect();
        let mut dg = dot(&d, &g);
        if dg >= 0.0 {
            // Not a descent direction: restart from steepest descent.
            s_hist.clear();
            y_hist.clear();
            rho.clear();
            d = g.iter().map(|v| -v / max_abs(&g).max(1e-300)).collect();
            dg = dot(&d, &g);
        }
        let Some((step, f_new, g_new)) = line_search(&mut f, &x, fx, &g, &d, dg) else {
            return finish(x, fx, &g, iterations, Termination::LineSearch);
        };
        iterations += 1;
        let x_new: Vec<f64> = x.iter().zip(&d).map(|(xi, di)| xi + step * di).collect();
        let s: Vec<f64> = x_new.iter().zip(&x).map(|(a, b)| a - b).collect();
        let y: Vec<f64> = g_new.iter().zip(&g).map(|(a, b)| a - b).collect();
        let sy = dot(&s, &y);
        if sy > 1e-12 * dot(&y, &y).sqrt() * dot(&s, &s).sqrt() {
            if s_hist.len() == opts.memory {
                s_hist.remove(0);
                y_hist.remove(0);
                rho.remove(0);
            }
            s_hist.push(s);
            y_hist.push(y);
            rho.push(1.0 / sy);
        }
        let reduction = (fx - f_new) / fx.abs().max(f_new.abs()).max(1.0);
        x = x_new;
        g = g_new;
        let f_old = fx;
        fx = f_new;
        if reduction <= opts.ftol && f_new <= f_old {
            let t = if max_abs(&g) <= opts.gtol {
                Termination::Gradient
            } else {
                Termination::Reduction
            };
            return finish(x, fx, &g, iterations, t);
        }
    }
}

/// A step length satisfying the strong Wolfe conditions (c1 = 1e-4, c2 = 0.9), with the
/// objective and gradient there.
fn line_search<F>(
    f: &mut F,
    x: &[f64],
    f0: f64,
    g0: &[f64],
    d: &[f64],
    dg0: f64,
) -> Option<(f64, f64, Vec<f64>)>
where
    F: FnMut(&[f64], &mut [f64]) -> f64,
{
    const C1: f64 = 1e-4;
    const C2: f64 = 0.9;
    let n = x.len();
    // Every point evaluated, with its value and gradient. Once the step is so short that
    // `x + t·d` rounds to a point already evaluated (`x` itself, at the end of a run that has
    // converged to rounding level), the objective there is known: it is taken from here, the
    // same bits `f` would return, without a pass over the endpoints.
    let mut seen: Vec<(Vec<f64>, f64, Vec<f64>)> = vec![(x.to_vec(), f0, g0.to_vec())];
    let mut eval = |t: f64| {
        let xt: Vec<f64> = x.iter().zip(d).map(|(xi, di)| xi + t * di).collect();
        let same = |p: &Vec<f64>| p.iter().zip(&xt).all(|(a, b)| a.to_bits() == b.to_bits());
        if let Some((_, v, g)) = seen.iter().find(|(p, _, _)| same(p)) {
            return (*v, dot(g, d), g.clone());
        }
        let mut g = vec![0.0; n];
        let v = f(&xt, &mut g);
        let dg = dot(&g, d);
        seen.push((xt, v, g.clone()));
        (v, dg, g)
    };
    let (mut t_prev, mut f_prev, mut dg_prev) = (0.0, f0, dg0);
    let mut t = 1.0;
    for i in 0..40 {
        let (ft, dgt, gt) = eval(t);
        if !ft.is_finite() || ft > f0 + C1 * t * dg0 || (i > 0 && ft >= f_prev) {
            return zoom(&mut eval, f0, dg0, (t_prev, f_prev, dg_prev), (t, ft, dgt));
        }
        if dgt.abs() <= -C2 * dg0 {
            return Some((t, ft, gt));
        }
        if dgt >= 0.0 {
            return zoom(&mut eval, f0, dg0, (t, ft, dgt), (t_prev, f_prev, dg_prev));
        }
        (t_prev, f_prev, dg_prev) = (t, ft, dgt);
        t *= 2.0;
    }
    None
}

type Eval<'a> = dyn FnMut(f64) -> (f64, f64, Vec<f64>) + 'a;

fn zoom(
    eval: &mut Eval<'_>,
    f0: f64,
    dg0: f64,
    mut lo: (f64, f64, f64),
    mut hi: (f64, f64, f64),
) -> Option<(f64, f64, Vec<f64>)> {
    const C1: f64 = 1e-4;
    const C2: f64 = 0.9;
    for _ in 0..60 {
        // Bisection guarded cubic-free step: the midpoint.
        let t = 0.5 * (lo.0 + hi.0);
        if (hi.0 - lo.0).abs() < 1e-16 * lo.0.abs().max(1.0) {
            break;
        }
        let (ft, dgt, gt) = eval(t);
        if !ft.is_finite() || ft > f0 + C1 * t * dg0 || ft >= lo.1 {
            hi = (t, ft, dgt);
        } else {
            if dgt.abs() <= -C2 * dg0 {
                return Some((t, ft, gt));
            }
            if dgt * (hi.0 - lo.0) >= 0.0 {
                hi = lo;
            }
            lo = (t, ft, dgt);
        }
    }
    // Accept the best sufficient-decrease point found, if it decreased at all.
    if lo.0 > 0.0 && lo.1 < f0 {
        let (ft, _, gt) = eval(lo.0);
        return Some((lo.0, ft, gt));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rosenbrock(x: &[f64], g: &mut [f64]) -> f64 {
        let (a, b) = (x[0], x[1]);
        g[0] = -2.0 * (1.0 - a) - 400.0 * a * (b - a * a);
        g[1] = 200.0 * (b - a * a);
        (1.0 - a).powi(2) + 100.0 * (b - a * a).powi(2)
    }

    #[test]
    fn minimises_rosenbrock() {
        let opts = Options {
            gtol: 1e-10,
            ftol: 0.0,
            ..Options::default()
        };
        let m = minimize(rosenbrock, &[-1.2, 1.0], &opts);
        assert!(
            (m.x[0] - 1.0).abs() < 1e-6 && (m.x[1] - 1.0).abs() < 1e-6,
            "{m:?}"
        );
        assert_eq!(m.termination, Termination::Gradient);
    }

    #[test]
    fn minimises_an_ill_conditioned_quadratic() {
        let q = |x: &[f64], g: &mut [f64]| {
            let w = [1.0, 1e3, 1e6];
            let mut f = 0.0;
            for i in 0..3 {
                g[i] = w[i] * (x[i] - i as f64);
                f += 0.5 * w[i] * (x[i] - i as f64).powi(2);
            }
            f
        };
        let opts = Options {
            gtol: 1e-9,
            ftol: 0.0,
            ..Options::default()
        };
        let m = minimize(q, &[5.0, 5.0, 5.0], &opts);
        for i in 0..3 {
            assert!((m.x[i] - i as f64).abs() < 1e-6, "{m:?}");
        }
    }
}

//! The fitting objective: the Huber loss of `log L̂ - log L`, summed (or averaged) over the
//! endpoints, and its gradient (see the [module docs](super)).
//!
//! The log-sum-exp is taken about its largest term, whose exponential is `exp(0) = 1`
//! exactly and is therefore not computed: the same value, bit for bit, at three
//! exponentials and one logarithm per endpoint instead of four. [`value_logs`] is the
//! objective without its gradient, in the same operations and order, so it returns the same
//! bits as [`objective_logs`] (a start's score is the objective there).

use super::{Endpoint, Form, Scale, Surface};

fn huber(r: f64, delta: f64) -> (f64, f64) {
    if r.abs() <= delta {
        (0.5 * r * r, r)
    } else {
        (delta * (r.abs() - 0.5 * delta), delta * r.signum())
    }
}

/// An endpoint's logarithms, computed once per fit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Logs {
    pub(crate) lf: f64,
    pub(crate) ld: f64,
    pub(crate) ls: f64,
    pub(crate) ll: f64,
}

pub(crate) fn logs(points: &[Endpoint]) -> Vec<Logs> {
    points
        .iter()
        .map(|p| Logs {
            lf: p.f.ln(),
            ld: p.d.ln(),
            ls: (1.0 - p.s).ln(),
            ll: p.loss.ln(),
        })
        .collect()
}

/// `exp(x)`, with `exp(0) = 1` not computed (the log-sum-exp's largest term).
#[inline(always)]
fn exp_shifted(x: f64) -> f64 {
    if x == 0.0 { 1.0 } else { x.exp() }
}

/// The three log-terms at `pt`, their exponentials about the largest `m`, their sum `z`,
/// and the log-prediction `m + ln z`.
#[inline(always)]
fn terms(pt: &Logs, p: &[f64]) -> ([f64; 3], f64, f64) {
    let t = [
        p[0],
        p[1] + p[3] * pt.ls - p[2] * pt.lf,
        p[4] - p[5] * pt.ld,
    ];
    let m = t[0].max(t[1]).max(t[2]);
    let w = [
        exp_shifted(t[0] - m),
        exp_shifted(t[1] - m),
        exp_shifted(t[2] - m),
    ];
    let z = w[0] + w[1] + w[2];
    (w, z, m + z.ln())
}

/// The objective and its gradient at parameters `p = [e, α, a, b, κ, c]`.
pub fn objective(
    points: &[Endpoint],
    p: &[f64],
    grad: &mut [f64],
    delta: f64,
    scale: Scale,
    form: Form,
) -> f64 {
    objective_logs(&logs(points), p, grad, (delta, scale, form))
}

/// [`objective`] on prepared points, with the loss's `(delta, scale, form)`.
pub(crate) fn objective_logs(
    points: &[Logs],
    p: &[f64],
    grad: &mut [f64],
    (delta, scale, form): (f64, Scale, Form),
) -> f64 {
    grad.iter_mut().for_each(|g| *g = 0.0);
    let mut total = 0.0;
    for pt in points {
        let (w, z, pred) = terms(pt, p);
        let (h, dh) = huber(pred - pt.ll, delta);
        total += h;
        let (s0, s1, s2) = (dh * w[0] / z, dh * w[1] / z, dh * w[2] / z);
        grad[0] += s0;
        grad[1] += s1;
        grad[2] -= s1 * pt.lf;
        grad[3] += s1 * pt.ls;
        grad[4] += s2;
        grad[5] -= s2 * pt.ld;
    }
    if form == Form::Chinchilla {
        grad[3] = 0.0;
    }
    if scale == Scale::Mean {
        let n = points.len().max(1) as f64;
        total /= n;
        grad.iter_mut().for_each(|g| *g /= n);
    }
    total
}

/// [`objective_logs`] without the gradient: the same bits, for scoring a start.
pub(crate) fn value_logs(points: &[Logs], p: &[f64], (delta, scale, _): (f64, Scale, Form)) -> f64 {
    let mut total = 0.0;
    for pt in points {
        let (_, _, pred) = terms(pt, p);
        total += huber(pred - pt.ll, delta).0;
    }
    if scale == Scale::Mean {
        total /= points.len().max(1) as f64;
    }
    total
}

/// Loss-space RMSE of `surface` on `points`.
pub fn rmse(surface: &Surface, points: &[Endpoint]) -> f64 {
    let sse: f64 = points
        .iter()
        .map(|p| (surface.loss(p.f, p.s, p.d) - p.loss).powi(2))
        .sum();
    (sse / points.len().max(1) as f64).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The objective as first written: every exponential computed.
    fn reference(points: &[Logs], p: &[f64], delta: f64) -> f64 {
        let mut total = 0.0;
        for pt in points {
            let t = [
                p[0],
                p[1] + p[3] * pt.ls - p[2] * pt.lf,
                p[4] - p[5] * pt.ld,
            ];
            let m = t[0].max(t[1]).max(t[2]);
            let w = [(t[0] - m).exp(), (t[1] - m).exp(), (t[2] - m).exp()];
            let z = w[0] + w[1] + w[2];
            total += huber(m + z.ln() - pt.ll, delta).0;
        }
        total
    }

    #[test]
    fn skipping_exp_of_zero_and_the_gradient_changes_no_bit() {
        let pts: Vec<Endpoint> = (0..50)
            .map(|i| Endpoint {
                f: 1e8 * (1.0 + i as f64),
                s: 0.1 * (i % 5) as f64,
                d: 1e10 * (2.0 + i as f64),
                loss: 2.0 + 0.05 * (i % 7) as f64,
                cell: i.to_string(),
            })
            .collect();
        let prepared = logs(&pts);
        let mut g = [0.0; 6];
        for p in super::super::StartGrid::standard(Form::Surface).points() {
            let want = reference(&prepared, &p, 1e-3);
            let loss = (1e-3, Scale::Sum, Form::Surface);
            assert_eq!(
                objective_logs(&prepared, &p, &mut g, loss).to_bits(),
                want.to_bits()
            );
            assert_eq!(value_logs(&prepared, &p, loss).to_bits(), want.to_bits());
        }
    }
}

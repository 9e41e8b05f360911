//! A loss surface `L(F, S, D) = E + A·(1 - S)^b / F^a + K / D^c`, its compute-optimal
//! frontier and the compute-efficiency gain between two surfaces (see the [module
//! docs](super)).

use serde::Serialize;

/// The coefficients of a surface.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
#[allow(non_snake_case)]
pub struct Surface {
    /// Irreducible loss.
    pub E: f64,
    /// Compute-term scale.
    pub A: f64,
    /// Compute exponent.
    pub a: f64,
    /// Sparsity exponent.
    pub b: f64,
    /// Data-term scale.
    pub K: f64,
    /// Data exponent.
    pub c: f64,
}

impl Surface {
    pub(crate) fn from_params(p: &[f64]) -> Self {
        Self {
            E: p[0].exp(),
            A: p[1].exp(),
            a: p[2],
            b: p[3],
            K: p[4].exp(),
            c: p[5],
        }
    }

    /// The predicted loss.
    pub fn loss(&self, f: f64, s: f64, d: f64) -> f64 {
        self.E + self.A * (1.0 - s).powf(self.b) / f.powf(self.a) + self.K / d.powf(self.c)
    }

    /// `γ = a·c / (a + c)`, the frontier exponent.
    pub fn gamma(&self) -> f64 {
        self.a * self.c / (self.a + self.c)
    }

    /// Whether the surface has a compute-optimal frontier: `F*`, `L*` and the gain are
    /// defined only when both exponents `a` and `c` are positive and finite (otherwise more
    /// compute spent on `F` or on `D` does not lower the loss, and `F*` has no minimum).
    /// `None` when it has one; otherwise which exponent fails, in words.
    pub fn frontier_defect(&self) -> Option<String> {
        let bad = |x: f64| !(x.is_finite() && x > 0.0);
        let which: Vec<String> = [("a", self.a), ("c", self.c)]
            .into_iter()
            .filter(|(_, x)| bad(*x))
            .map(|(name, x)| format!("{name} = {x:.3}"))
            .collect();
        (!which.is_empty()).then(|| {
            format!(
                "the fitted exponent{} {} {} not positive, so the surface has no \
                 compute-optimal frontier (F*, L* and the gain are undefined)",
                if which.len() > 1 { "s" } else { "" },
                which.join(" and "),
                if which.len() > 1 { "are" } else { "is" },
            )
        })
    }

    /// Compute-optimal `F*` at compute `c_total = F·D` and sparsity `s`.
    pub fn f_star(&self, c_total: f64, s: f64) -> f64 {
        let a_s = self.A * (1.0 - s).powf(self.b);
        ((self.a * a_s * c_total.powf(self.c)) / (self.c * self.K)).powf(1.0 / (self.a + self.c))
    }

    /// The frontier loss `L*(C, S)`.
    pub fn l_star(&self, c_total: f64, s: f64) -> f64 {
        let f = self.f_star(c_total, s);
        self.loss(f, s, c_total / f)
    }

    /// Tokens per equivalent parameter on the frontier, `D* / (F*/6)`.
    pub fn tokens_per_parameter(&self, c_total: f64, s: f64) -> f64 {
        let f = self.f_star(c_total, s);
        (c_total / f) / (f / 6.0)
    }

    /// The compute at which this surface's frontier reaches `loss` at sparsity `s`, or
    /// `None` when `loss <= E` (never reached). Bisection on `log C`.
    pub fn compute_for_loss(&self, loss: f64, s: f64) -> Option<f64> {
        if loss.is_nan() || loss <= self.E {
            return None;
        }
        let g = |x: f64| self.l_star(x.exp(), s) - loss; // decreasing in x
        let (mut lo, mut hi) = (0.0f64, 50.0f64);
        while g(lo) < 0.0 {
            lo -= 50.0;
            if lo < -2000.0 {
                return None;
            }
        }
        while g(hi) > 0.0 {
            hi += 50.0;
            if hi > 2000.0 {
                return None;
            }
        }
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if g(mid) > 0.0 {
                lo = mid;
            } else {
                hi = mid;
            }
            if hi - lo < 1e-12 {
                break;
            }
        }
        Some((0.5 * (lo + hi)).exp())
    }
}

/// Compute-efficiency gain of `target` over `reference` at compute `c_total` and sparsity
/// `s`: `1 - C / C_ref` (module docs). `None` when the reference cannot reach the target's
/// frontier loss, or when either surface has no frontier ([`Surface::frontier_defect`]).
pub fn ce_gain(reference: &Surface, target: &Surface, c_total: f64, s: f64) -> Option<f64> {
    if reference.frontier_defect().is_some() || target.frontier_defect().is_some() {
        return None;
    }
    let loss = target.l_star(c_total, s);
    reference
        .compute_for_loss(loss, s)
        .map(|c_ref| 1.0 - c_total / c_ref)
}

/// The parameter vector `[e, α, a, b, κ, c]` of a surface (a warm start).
pub fn params_of(s: &Surface) -> [f64; 6] {
    [s.E.ln(), s.A.ln(), s.a, s.b, s.K.ln(), s.c]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_gammas() {
        // SMELT's published exponents (arXiv 2609.01343, Sec. 4).
        let base = Surface {
            E: 1.4439,
            A: 1.0,
            a: 0.3703,
            b: 0.15,
            K: 1.975e6,
            c: 0.6594,
        };
        let smelt = Surface {
            E: 1.4493,
            A: 1.0,
            a: 0.3892,
            b: 0.15,
            K: 5.264e6,
            c: 0.7011,
        };
        assert_eq!(format!("{:.3}", base.gamma()), "0.237");
        assert_eq!(format!("{:.3}", smelt.gamma()), "0.250");
    }

    #[test]
    fn frontier_is_optimal_and_gain_inverts() {
        let s = Surface {
            E: 1.5,
            A: 300.0,
            a: 0.35,
            b: 0.15,
            K: 2000.0,
            c: 0.4,
        };
        let c = 1e20;
        let f = s.f_star(c, 0.9);
        let best = s.l_star(c, 0.9);
        for k in [0.9, 0.99, 1.01, 1.1] {
            assert!(s.loss(f * k, 0.9, c / (f * k)) >= best - 1e-15);
        }
        let back = s.compute_for_loss(best, 0.9).unwrap();
        assert!((back / c - 1.0).abs() < 1e-9);
        assert_eq!(
            ce_gain(&s, &s, c, 0.9).map(|g| (g * 1e9).round()),
            Some(0.0)
        );
        assert!(s.compute_for_loss(1.4, 0.9).is_none());
    }
}

//! How the tokens of a batch are assigned to the routed experts: evenly, or skewed.

use serde::Serialize;

use crate::error::{Error, Result};

/// How tokens are assigned to routed experts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Routing {
    /// `T·k` assignments spread as evenly as possible.
    Balanced,
    /// Zipf-like: expert `e` (0-based) gets a share proportional to `1 / (e + 1)^s`, no
    /// expert more than `T` tokens.
    Skewed(f64),
}

impl std::str::FromStr for Routing {
    type Err = Error;

    /// `balanced`, or `skew=S` with `S` a non-negative number.
    fn from_str(s: &str) -> Result<Self> {
        let bad = |why: String| Error::invalid("routing", why);
        if s == "balanced" {
            return Ok(Routing::Balanced);
        }
        let Some(v) = s.strip_prefix("skew=") else {
            return Err(bad(format!("expected 'balanced' or 'skew=S' (got '{s}')")));
        };
        match v.parse::<f64>() {
            Ok(x) if x.is_finite() && x >= 0.0 => Ok(Routing::Skewed(x)),
            _ => Err(bad(format!(
                "the skew must be a non-negative number (got '{v}')"
            ))),
        }
    }
}

/// Tokens per expert: `Σ = tokens·top_k`, each at most `tokens`.
pub fn assign(tokens: u64, experts: u64, top_k: u64, routing: Routing) -> Result<Vec<u64>> {
    let total = tokens * top_k;
    let e = experts as usize;
    match routing {
        Routing::Balanced => {
            let (base, extra) = (total / experts, total % experts);
            Ok((0..experts).map(|i| base + u64::from(i < extra)).collect())
        }
        Routing::Skewed(s) => {
            if !(s.is_finite() && s >= 0.0) {
                return Err(Error::invalid(
                    "routing",
                    format!("skew must be a non-negative number (got {s})"),
                ));
            }
            let w: Vec<f64> = (0..e).map(|i| 1.0 / ((i + 1) as f64).powf(s)).collect();
            let sum: f64 = w.iter().sum();
            let mut counts = vec![0u64; e];
            let mut left = total;
            // Fill greedily by weight with the cap, then hand out the rest in weight order.
            for (c, wi) in counts.iter_mut().zip(&w) {
                let want = ((total as f64) * wi / sum).floor() as u64;
                *c = want.min(tokens).min(left);
                left -= *c;
            }
            while left > 0 {
                let before = left;
                for c in counts.iter_mut() {
                    if left == 0 {
                        break;
                    }
                    if *c < tokens {
                        *c += 1;
                        left -= 1;
                    }
                }
                if left == before {
                    return Err(Error::invalid("routing", "cannot place every assignment"));
                }
            }
            Ok(counts)
        }
    }
}

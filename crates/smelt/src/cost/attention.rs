//! Keys per query inside a document: the attention core's only workload dependence.
//!
//! Sequences of `context` tokens are packed from documents and a document (segment) mask
//! keeps attention inside each document. In a causal document of length `T` the `t`-th
//! token attends `t` keys, so the document costs `Σ t = T(T+1)/2` query-key pairs and the
//! mean per token is `(T+1)/2`; dense attention costs `T²` pairs, `T` per token.
//!
//! * `mean_doc_len = T`: `c̄ = (T+1)/2` (causal) or `T` (dense), the paper's shortcut.
//! * `doc_lengths = [[T, n], ...]`: the exact token-weighted mean
//!   `c̄ = Σ n·T(T+1)/2 / Σ n·T` (causal) or `Σ n·T² / Σ n·T` (dense). The report then also
//!   gives what the shortcut at the histogram's mean document length `Σ n·T / Σ n` says.
//!   Since `T(T+1)/2` is convex in `T`, the exact value is never below the shortcut.

use std::fmt;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::spec::{Attention, ModelSpec, Workload};
use crate::units::{Flops, relative};

/// The mean number of keys a query attends, as an exact fraction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeanKeys {
    /// Query-key pairs (numerator).
    pub pairs: u128,
    /// Queries (denominator).
    pub queries: u128,
}

/// What the mean-document-length shortcut would have said for a histogram workload.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Shortcut {
    /// The histogram's mean document length `Σ n·T / Σ n`.
    pub mean_doc_len: f64,
    /// `c̄` at that length.
    pub mean_keys_per_query: f64,
    /// Training FLOPs per token with that `c̄`.
    pub training_flops: f64,
    /// `shortcut / exact - 1` for the training FLOPs (never positive for causal or dense).
    pub relative_to_exact: f64,
}

const OVERFLOW: Error = Error::Overflow {
    what: "attention keys per query",
};

impl MeanKeys {
    /// The mean keys per query of a (validated) workload.
    pub fn of(workload: &Workload) -> Result<Self> {
        let causal = workload.attention == Attention::Causal;
        if let Some(t) = workload.mean_doc_len {
            let t = u128::from(t);
            return Ok(if causal {
                Self {
                    pairs: t + 1,
                    queries: 2,
                }
            } else {
                Self {
                    pairs: t,
                    queries: 1,
                }
            });
        }
        let hist = workload.doc_lengths.as_deref().unwrap_or_default();
        let (mut pairs, mut queries) = (0u128, 0u128);
        for &[len, count] in hist {
            let (t, n) = (u128::from(len), u128::from(count));
            let per_doc = if causal { t * (t + 1) / 2 } else { t * t };
            pairs = per_doc
                .checked_mul(n)
                .and_then(|p| pairs.checked_add(p))
                .ok_or(OVERFLOW)?;
            queries = t
                .checked_mul(n)
                .and_then(|q| queries.checked_add(q))
                .ok_or(OVERFLOW)?;
        }
        if queries == 0 {
            return Err(Error::invalid(
                "workload",
                "give mean_doc_len (tokens) or doc_lengths ([[length, count], ...])",
            ));
        }
        Ok(Self { pairs, queries })
    }

    /// `c̄` as a float.
    pub fn as_f64(self) -> f64 {
        self.pairs as f64 / self.queries as f64
    }

    /// Attention-core forward FLOPs per token of one layer execution with query width
    /// `q_width`: `2 FLOPs x 2 GEMMs (QKᵀ, PV) x q_width x c̄`.
    pub fn attention_flops(self, q_width: u64) -> Result<Flops> {
        let num = self
            .pairs
            .checked_mul(4)
            .and_then(|p| p.checked_mul(u128::from(q_width)))
            .ok_or(OVERFLOW)?;
        Flops::ratio(num, self.queries)
    }

    /// For a histogram workload, what the mean-length shortcut says (given the exact
    /// training FLOPs `exact` of `spec`); `None` for a `mean_doc_len` workload.
    pub(crate) fn shortcut(self, spec: &ModelSpec, exact: Flops) -> Result<Option<Shortcut>> {
        let Some(hist) = spec.workload.doc_lengths.as_deref() else {
            return Ok(None);
        };
        let docs: f64 = hist.iter().map(|&[_, n]| n as f64).sum();
        let mean = self.queries as f64 / docs;
        let keys = match spec.workload.attention {
            Attention::Causal => (mean + 1.0) / 2.0,
            Attention::Dense => mean,
        };
        // Only the attention core depends on c̄, linearly.
        let forward_core = super::forward_flops(&spec.model, &spec.workload, &spec.counting)?
            .attention_core
            .as_f64();
        let training_core = forward_core * super::TRAINING_OVER_FORWARD as f64;
        let training = exact.as_f64() - training_core + training_core * keys / self.as_f64();
        Ok(Some(Shortcut {
            mean_doc_len: mean,
            mean_keys_per_query: keys,
            training_flops: training,
            relative_to_exact: relative(training, exact.as_f64()),
        }))
    }
}

impl fmt::Display for MeanKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = Flops::ratio(self.pairs, self.queries).map_err(|_| fmt::Error)?;
        write!(f, "{r}")
    }
}

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
//!
//! A windowed layer ([`crate::model::Window`]) bounds the keys: with a sliding window `W`
//! the `t`-th token attends `min(t, W)` keys, a document `S(T) = T(T+1)/2` pairs for
//! `T <= W` and `W(W+1)/2 + (T-W)·W` beyond; with chunks of `C` tokens (starting at the
//! document's first token) it attends `((t-1) mod C) + 1`, a document `q·C(C+1)/2 +
//! r(r+1)/2` pairs for `T = q·C + r`. The mean over a histogram is token-weighted as above.
//! Under the `dense` convention a windowed layer costs what a full one does (`T` keys per
//! query): the convention counts the masked square, whatever the mask.
//!
//! A sparse attention indexer ([`crate::model::Indexer`]) lets the `t`-th token attend
//! `min(t, topk)` keys: the count of a sliding window of `topk` (only which keys differs),
//! so its mean is the sliding window's; the indexer itself scores all `t`.

use std::fmt;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::model::{Attention, Model, ModelSpec, WindowKind, Workload};
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
        Self::over(hist, |t| if causal { t * (t + 1) / 2 } else { t * t })
    }

    /// The token-weighted mean over the documents `hist` (`[[length, count], ...]`) whose
    /// query-key pairs a document of length `t` has: `pairs_in(t)`.
    fn over(hist: &[[u64; 2]], pairs_in: impl Fn(u128) -> u128) -> Result<Self> {
        let (mut pairs, mut queries) = (0u128, 0u128);
        for &[len, count] in hist {
            let (t, n) = (u128::from(len), u128::from(count));
            pairs = pairs_in(t)
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

    /// The mean keys per query of a windowed layer (module docs) on a (validated) workload.
    pub fn windowed(workload: &Workload, kind: WindowKind, size: u64) -> Result<Self> {
        if workload.attention == Attention::Dense {
            return Self::of(workload);
        }
        let w = u128::from(size);
        let hist: Vec<[u64; 2]> = match (workload.mean_doc_len, &workload.doc_lengths) {
            (Some(t), _) => vec![[t, 1]],
            (None, Some(h)) => h.clone(),
            (None, None) => Vec::new(),
        };
        Self::over(&hist, |t| match kind {
            WindowKind::Sliding if t <= w => t * (t + 1) / 2,
            WindowKind::Sliding => w * (w + 1) / 2 + (t - w) * w,
            WindowKind::Chunked => {
                let (q, r) = (t / w, t % w);
                q * (w * (w + 1) / 2) + r * (r + 1) / 2
            }
        })
    }

    /// `c̄` as a float.
    pub fn as_f64(self) -> f64 {
        self.pairs as f64 / self.queries as f64
    }

    /// Attention-core forward FLOPs per token of one layer execution whose query/key and
    /// value widths (over all heads) sum to `widths`: `2 FLOPs x (QKᵀ + PV) x c̄`.
    pub fn attention_flops(self, widths: u64) -> Result<Flops> {
        let num = self
            .pairs
            .checked_mul(2)
            .and_then(|p| p.checked_mul(u128::from(widths)))
            .ok_or(OVERFLOW)?;
        Flops::ratio(num, self.queries)
    }
}

/// Pairs of a (possibly fractional) document length `t` under `window` (`None`: full), for
/// the shortcut.
fn pairs_at(t: f64, attention: Attention, window: Option<(WindowKind, u64)>) -> f64 {
    match (attention, window) {
        (Attention::Dense, _) => t * t,
        (Attention::Causal, None) => t * (t + 1.0) / 2.0,
        (Attention::Causal, Some((WindowKind::Sliding, w))) => {
            let w = w as f64;
            if t <= w {
                t * (t + 1.0) / 2.0
            } else {
                w * (w + 1.0) / 2.0 + (t - w) * w
            }
        }
        (Attention::Causal, Some((WindowKind::Chunked, c))) => {
            let c = c as f64;
            let q = (t / c).floor();
            let r = t - q * c;
            q * c * (c + 1.0) / 2.0 + r * (r + 1.0) / 2.0
        }
    }
}

impl Keys {
    /// For a histogram workload, what the mean-length shortcut says (given the exact
    /// training FLOPs `exact` of `spec`); `None` for a `mean_doc_len` workload.
    pub(crate) fn shortcut(&self, spec: &ModelSpec, exact: Flops) -> Result<Option<Shortcut>> {
        let Some(hist) = spec.workload.doc_lengths.as_deref() else {
            return Ok(None);
        };
        let docs: f64 = hist.iter().map(|&[_, n]| n as f64).sum();
        let mean = self.full.queries as f64 / docs;
        let attention = spec.workload.attention;
        let keys = pairs_at(mean, attention, None) / mean;
        // Only the attention core (and an indexer's scores) depends on c̄, linearly, kind
        // by kind: full layers (and the counted MTP modules), then windowed ones; with an
        // indexer, every layer's core attends the selected keys and its scores the full ones.
        let m = &spec.model;
        let width = super::layer::attention(m)?.core_width as f64;
        let (full, windowed) = super::attention_split(m)?;
        let mtp = if spec.counting.mtp { m.mtp_layers } else { 0 };
        let per_token = |width: f64, c: f64, x: u64| {
            2.0 * width * c * x as f64 * super::TRAINING_OVER_FORWARD as f64
        };
        let full_change = keys - self.full.as_f64();
        let mut training = exact.as_f64();
        match (self.selected, super::layer::indexer(m)?) {
            (Some((topk, s)), Some(ix)) => {
                let short = pairs_at(mean, attention, Some((WindowKind::Sliding, topk))) / mean;
                training += per_token(width, short - s.as_f64(), full + mtp);
                training += per_token(ix.score_width as f64, full_change, full + mtp);
            }
            _ => training += per_token(width, full_change, full + mtp),
        }
        if let Some((kind, size, w)) = self.windowed {
            let short = pairs_at(mean, attention, Some((kind, size))) / mean;
            training += per_token(width, short - w.as_f64(), windowed);
        }
        Ok(Some(Shortcut {
            mean_doc_len: mean,
            mean_keys_per_query: keys,
            training_flops: training,
            relative_to_exact: relative(training, exact.as_f64()),
        }))
    }
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The mean keys per query of each kind of layer of a model on a workload: what the
/// attention core's FLOPs depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keys {
    /// Layers that attend every earlier key of the document.
    pub full: MeanKeys,
    /// The windowed layers' kind, size and mean keys, when the model has any.
    pub windowed: Option<(WindowKind, u64, MeanKeys)>,
    /// With a sparse attention indexer, its `topk` and the mean keys a query attends:
    /// `min(t, topk)` for the `t`-th token (the count of a sliding window of `topk`), while
    /// the indexer itself scores the `full` keys.
    pub selected: Option<(u64, MeanKeys)>,
}

impl Keys {
    /// The keys of `model`'s layers on `workload`.
    pub fn of(workload: &Workload, model: &Model) -> Result<Self> {
        Ok(Self {
            full: MeanKeys::of(workload)?,
            windowed: model
                .window
                .as_ref()
                .map(|w| {
                    Ok((
                        w.kind,
                        w.size,
                        MeanKeys::windowed(workload, w.kind, w.size)?,
                    ))
                })
                .transpose()?,
            selected: model
                .indexer
                .as_ref()
                .map(|ix| {
                    Ok((
                        ix.topk,
                        MeanKeys::windowed(workload, WindowKind::Sliding, ix.topk)?,
                    ))
                })
                .transpose()?,
        })
    }

    /// A common denominator of every FLOP count made with these keys (the queries).
    pub fn denominator(&self) -> u128 {
        let lcm = |a: u128, b: u128| a / gcd(a, b) * b;
        let q = self.full.queries;
        let q = self.windowed.map_or(q, |(_, _, w)| lcm(q, w.queries));
        self.selected.map_or(q, |(_, s)| lcm(q, s.queries))
    }

    /// An error unless these keys were made for `model`'s window.
    pub(crate) fn check(&self, model: &Model) -> Result<()> {
        let theirs = (
            model.window.as_ref().map(|w| (w.kind, w.size)),
            model.indexer.as_ref().map(|ix| ix.topk),
        );
        let ours = (
            self.windowed.map(|(k, s, _)| (k, s)),
            self.selected.map(|(k, _)| k),
        );
        if theirs != ours {
            return Err(Error::Internal {
                message: format!(
                    "attention keys computed for (window, top-k) {ours:?} used for a model \
                     with {theirs:?}"
                ),
            });
        }
        Ok(())
    }
}

impl fmt::Display for MeanKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = Flops::ratio(self.pairs, self.queries).map_err(|_| fmt::Error)?;
        write!(f, "{r}")
    }
}

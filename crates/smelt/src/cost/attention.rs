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
use crate::model::{Attention, AttentionWindow, Model, Stack, WindowKind, Workload};
use crate::units::Flops;

/// The mean number of keys a query attends, as an exact fraction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeanKeys {
    /// Query-key pairs (numerator).
    pub pairs: u128,
    /// Queries (denominator).
    pub queries: u128,
}

/// What the mean-document-length shortcut would have said for a histogram workload: the
/// cost model's exact count with the keys at the histogram's mean length
/// ([`Keys::at_mean_length`]), given as floats.
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

/// A workload without a single token.
fn no_documents() -> Error {
    Error::invalid(
        "workload",
        "give mean_doc_len (tokens) or doc_lengths ([[length, count], ...])",
    )
}

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
            return Err(no_documents());
        }
        Ok(Self { pairs, queries })
    }

    /// The token-weighted mean document length of a (validated) workload: what every
    /// query's row of the masked document square holds ([`Keys::rows`]).
    pub fn rows(workload: &Workload) -> Result<Self> {
        Self::of(&Workload {
            attention: Attention::Dense,
            ..workload.clone()
        })
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

impl Keys {
    /// For a histogram workload, its mean document length `Σ n·T / Σ n` and these keys for
    /// documents all of that (fractional) length: what the mean-length shortcut says, for
    /// the exact count to be run with. `None` for a `mean_doc_len` workload.
    pub fn at_mean_length(&self, workload: &Workload) -> Result<Option<(f64, Keys)>> {
        let Some(hist) = workload.doc_lengths.as_deref() else {
            return Ok(None);
        };
        let (mut tokens, mut docs) = (0u128, 0u128);
        for &[len, count] in hist {
            let n = u128::from(count);
            tokens = n
                .checked_mul(u128::from(len))
                .and_then(|q| tokens.checked_add(q))
                .ok_or(OVERFLOW)?;
            docs = docs.checked_add(n).ok_or(OVERFLOW)?;
        }
        if tokens == 0 {
            return Err(no_documents());
        }
        let at = |window| MeanKeys::at_length(tokens, docs, workload.attention, window);
        let keys = Keys {
            full: at(None)?,
            windowed: self
                .windowed
                .map(|(kind, size, _)| Ok((kind, size, at(Some((kind, size)))?)))
                .transpose()?,
            selected: self
                .selected
                .map(|(topk, _)| Ok((topk, at(Some((WindowKind::Sliding, topk)))?)))
                .transpose()?,
            rows: MeanKeys::at_length(tokens, docs, Attention::Dense, None)?,
            sequence: self.sequence,
        };
        Ok(Some((tokens as f64 / docs as f64, keys)))
    }
}

impl MeanKeys {
    /// The mean keys per query of documents all of the fractional length `t = tokens / docs`
    /// (positive), under `window` (`None`: full): the pairs of the module docs' `S(t)` over
    /// `t`, exactly. Causal: `(t + 1)/2`; sliding beyond the window `W`:
    /// `(W(W+1)/2 + (t - W)·W)/t`; chunked with `t = q·C + r`: `(q·C(C+1)/2 + r(r+1)/2)/t`;
    /// dense: `t`.
    fn at_length(
        tokens: u128,
        docs: u128,
        attention: Attention,
        window: Option<(WindowKind, u64)>,
    ) -> Result<Self> {
        let (q, d) = (tokens, docs);
        let mul = |a: u128, b: u128| a.checked_mul(b).ok_or(OVERFLOW);
        let add = |a: u128, b: u128| a.checked_add(b).ok_or(OVERFLOW);
        let (pairs, queries) = match (attention, window) {
            (Attention::Dense, _) => (q, d),
            (Attention::Causal, Some((WindowKind::Sliding, w))) if q > mul(u128::from(w), d)? => {
                // (W(W+1)·d + 2(q - W·d)·W) / 2q
                let w = u128::from(w);
                let inside = mul(mul(w, w + 1)?, d)?;
                let beyond = mul(mul(2, q - mul(w, d)?)?, w)?;
                (add(inside, beyond)?, mul(2, q)?)
            }
            (Attention::Causal, Some((WindowKind::Chunked, c))) => {
                // t = k·C + R/d with R = q - k·C·d: (k·C(C+1)·d² + R(R + d)) / 2dq
                let c = u128::from(c);
                let chunk = mul(c, d)?;
                if chunk == 0 {
                    return Err(Error::invalid("model.window.size", "must be positive"));
                }
                let (k, r) = (q / chunk, q % chunk);
                let whole = mul(mul(mul(k, c)?, c + 1)?, mul(d, d)?)?;
                (add(whole, mul(r, add(r, d)?)?)?, mul(mul(2, d)?, q)?)
            }
            (Attention::Causal, _) => (add(q, d)?, mul(2, d)?),
        };
        let g = gcd(pairs, queries);
        Ok(Self {
            pairs: pairs / g,
            queries: queries / g,
        })
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
    /// The token-weighted mean length of a token's document, `Σ n·T² / Σ n·T` (`T` for
    /// `mean_doc_len`): the row of attention probabilities an eager layer materialises per
    /// query, whatever the mask (the activation memory's, [`crate::cost::memory`]).
    pub rows: MeanKeys,
    /// With recurrent layers, the length of the sequence they run over: the workload's
    /// `context` (Transformers' torch path runs the convolution and the delta rule over the
    /// packed sequence, whatever its documents), which their per-token cost depends on.
    pub sequence: Option<u64>,
}

impl Keys {
    /// The keys of `model`'s layers on `workload`.
    pub fn of(workload: &Workload, model: &Model) -> Result<Self> {
        Self::of_stack(workload, &Stack::of(model)?)
    }

    /// The keys of `stack`'s layers on `workload`.
    pub fn of_stack(workload: &Workload, stack: &Stack) -> Result<Self> {
        Ok(Self {
            full: MeanKeys::of(workload)?,
            windowed: stack
                .window()
                .map(|w| {
                    Ok((
                        w.kind,
                        w.size,
                        MeanKeys::windowed(workload, w.kind, w.size)?,
                    ))
                })
                .transpose()?,
            selected: stack
                .indexer()
                .map(|ix| {
                    Ok((
                        ix.topk,
                        MeanKeys::windowed(workload, WindowKind::Sliding, ix.topk)?,
                    ))
                })
                .transpose()?,
            rows: MeanKeys::rows(workload)?,
            sequence: stack.recurrent().map(|_| workload.context),
        })
    }

    /// The keys a layer with `window` and an indexer (when `indexed`) attends: the
    /// windowed, selected or full ones.
    pub(crate) fn attended(&self, window: Option<AttentionWindow>, indexed: bool) -> MeanKeys {
        match (window, self.windowed, self.selected) {
            (Some(_), Some((_, _, w)), _) => w,
            (None, _, Some((_, s))) if indexed => s,
            _ => self.full,
        }
    }

    /// A common denominator of every FLOP count made with these keys (the queries).
    pub fn denominator(&self) -> u128 {
        let lcm = |a: u128, b: u128| a / gcd(a, b) * b;
        let q = lcm(self.full.queries, self.rows.queries);
        let q = self.windowed.map_or(q, |(_, _, w)| lcm(q, w.queries));
        let q = self.sequence.map_or(q, |t| lcm(q, u128::from(t)));
        self.selected.map_or(q, |(_, s)| lcm(q, s.queries))
    }

    /// An error unless these keys were made for `stack`'s window, indexer and recurrent
    /// layers.
    pub(crate) fn check(&self, stack: &Stack) -> Result<()> {
        let theirs = (
            stack.window().map(|w| (w.kind, w.size)),
            stack.indexer().map(|ix| ix.topk),
            stack.recurrent().is_some(),
        );
        let ours = (
            self.windowed.map(|(k, s, _)| (k, s)),
            self.selected.map(|(k, _)| k),
            self.sequence.is_some(),
        );
        if theirs != ours {
            return Err(Error::Internal {
                message: format!(
                    "attention keys computed for (window, top-k, recurrent) {ours:?} used for \
                     a model with {theirs:?}"
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

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(hist: &[[u64; 2]], attention: Attention) -> Workload {
        Workload {
            context: 8192,
            mean_doc_len: None,
            doc_lengths: Some(hist.to_vec()),
            attention,
            kv_dtype_bytes: 2,
        }
    }

    fn keys(hist: &[[u64; 2]], attention: Attention, window: Option<(WindowKind, u64)>) -> Keys {
        let w = workload(hist, attention);
        Keys {
            full: MeanKeys::of(&w).unwrap(),
            windowed: window.map(|(k, s)| (k, s, MeanKeys::windowed(&w, k, s).unwrap())),
            selected: Some((3, MeanKeys::windowed(&w, WindowKind::Sliding, 3).unwrap())),
            rows: MeanKeys::rows(&w).unwrap(),
            sequence: None,
        }
    }

    /// `pairs / queries` in lowest terms.
    fn reduced(m: MeanKeys) -> (u128, u128) {
        let g = gcd(m.pairs, m.queries);
        (m.pairs / g, m.queries / g)
    }

    /// The keys at a fractional mean length, exactly: causal `(t+1)/2`, sliding and chunked
    /// windows beyond their size, dense `t`, and the selected keys as a sliding window.
    #[test]
    fn keys_at_the_mean_length_are_exact_fractions() {
        let hist = [[100, 30], [4096, 2]];
        let k = keys(&hist, Attention::Causal, None);
        let (mean, at) = k
            .at_mean_length(&workload(&hist, Attention::Causal))
            .unwrap()
            .unwrap();
        // 11192 tokens in 32 documents: 349.75, and (349.75 + 1) / 2 = 1403/8.
        assert_eq!(mean, 349.75);
        assert_eq!(reduced(at.full), (1403, 8));
        // Beyond the top-k of 3: (3·4/2 + (349.75 - 3)·3) / 349.75 = 4185/1399.
        assert_eq!(reduced(at.selected.unwrap().1), (4185, 1399));
        // Mean 10.5 (documents of 10 and 11): chunks of 4 hold 2 whole chunks and 2.5
        // tokens, (2·10 + 2.5·3.5/2) / 10.5 = 65/28; a sliding window of 4,
        // (10 + 6.5·4) / 10.5 = 24/7.
        let hist = [[10, 1], [11, 1]];
        for (window, want) in [
            ((WindowKind::Chunked, 4), (65, 28)),
            ((WindowKind::Sliding, 4), (24, 7)),
            ((WindowKind::Sliding, 11), (23, 4)),
        ] {
            let k = keys(&hist, Attention::Causal, Some(window));
            let (_, at) = k
                .at_mean_length(&workload(&hist, Attention::Causal))
                .unwrap()
                .unwrap();
            assert_eq!(reduced(at.windowed.unwrap().2), want, "{window:?}");
        }
        let k = keys(&hist, Attention::Dense, Some((WindowKind::Chunked, 4)));
        let (_, at) = k
            .at_mean_length(&workload(&hist, Attention::Dense))
            .unwrap()
            .unwrap();
        assert_eq!(reduced(at.full), (21, 2));
        assert_eq!(reduced(at.windowed.unwrap().2), (21, 2));
    }

    /// Documents all of one length: the shortcut's keys are the exact ones, and a
    /// `mean_doc_len` workload has no shortcut.
    #[test]
    fn one_length_is_its_own_shortcut() {
        for attention in [Attention::Causal, Attention::Dense] {
            for window in [(WindowKind::Sliding, 5), (WindowKind::Chunked, 3)] {
                let hist = [[17, 4]];
                let k = keys(&hist, attention, Some(window));
                let (mean, at) = k
                    .at_mean_length(&workload(&hist, attention))
                    .unwrap()
                    .unwrap();
                assert_eq!(mean, 17.0);
                assert_eq!(reduced(at.full), reduced(k.full));
                assert_eq!(
                    reduced(at.windowed.unwrap().2),
                    reduced(k.windowed.unwrap().2)
                );
                assert_eq!(
                    reduced(at.selected.unwrap().1),
                    reduced(k.selected.unwrap().1)
                );
            }
        }
        let w = Workload {
            mean_doc_len: Some(17),
            doc_lengths: None,
            ..workload(&[], Attention::Causal)
        };
        let k = Keys {
            full: MeanKeys::of(&w).unwrap(),
            windowed: None,
            selected: None,
            rows: MeanKeys::rows(&w).unwrap(),
            sequence: None,
        };
        assert_eq!(k.at_mean_length(&w).unwrap(), None);
    }
}

//! The best candidates so far: the `top` best by the total order of the module docs, and
//! with them every candidate whose score is within [`MARGIN`] of the `top`-th, since a score
//! computed from the exact integer coefficients can differ from the cost model's in the last
//! bits. The finalists are then costed exactly and ranked on exact scores.

use std::cmp::Ordering;

use crate::spec::Model;

/// How far apart (absolute, in weighted residual) two scores must be for the solver to
/// trust their order before the exact re-costing: far above the few units in the last
/// place a float residual can be off by, far below any difference that matters.
pub(crate) const MARGIN: f64 = 1e-9;

/// A scored candidate.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub score: [f64; 3],
    pub model: Model,
}

/// Lexicographic order of scores, `Equal` when every component is within `margin`.
pub(crate) fn cmp_scores(a: &[f64; 3], b: &[f64; 3], margin: f64) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        if *x < *y - margin {
            return Ordering::Less;
        }
        if *x > *y + margin {
            return Ordering::Greater;
        }
    }
    Ordering::Equal
}

/// The kept candidates, best first.
#[derive(Debug, Clone)]
pub(crate) struct Kept {
    top: usize,
    margin: f64,
    base: Model,
    entries: Vec<Entry>,
}

impl Kept {
    pub fn new(top: usize, margin: f64, base: Model) -> Self {
        Self {
            top,
            margin,
            base,
            entries: Vec::new(),
        }
    }

    fn cmp(&self, a: &Entry, b: &Entry) -> Ordering {
        for (x, y) in a.score.iter().zip(&b.score) {
            match x.total_cmp(y) {
                Ordering::Equal => {}
                o => return o,
            }
        }
        super::rank_key(&a.model, &self.base).cmp(&super::rank_key(&b.model, &self.base))
    }

    /// The score a candidate must not exceed (by more than the margin) to be kept, once
    /// `top` are kept.
    pub fn bar(&self) -> Option<[f64; 3]> {
        (self.entries.len() >= self.top).then(|| self.entries[self.top - 1].score)
    }

    /// Whether a candidate scoring `score` could still be kept.
    pub fn admits(&self, score: &[f64; 3]) -> bool {
        self.bar()
            .is_none_or(|bar| cmp_scores(score, &bar, self.margin) != Ordering::Greater)
    }

    pub fn offer(&mut self, e: Entry) {
        if !self.admits(&e.score) {
            return;
        }
        let at = self
            .entries
            .partition_point(|k| self.cmp(k, &e) == Ordering::Less);
        if at < self.entries.len() && self.entries[at].model == e.model {
            return;
        }
        self.entries.insert(at, e);
        if let Some(bar) = self.bar() {
            let margin = self.margin;
            let rest: Vec<Entry> = self
                .entries
                .drain(self.top..)
                .filter(|e| cmp_scores(&e.score, &bar, margin) != Ordering::Greater)
                .collect();
            self.entries.extend(rest);
        }
    }

    pub fn merge(&mut self, other: Kept) {
        for e in other.entries {
            self.offer(e);
        }
    }

    pub fn into_entries(self) -> Vec<Entry> {
        self.entries
    }
}

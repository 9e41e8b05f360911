//! The best candidates so far: the `top` best by the total order of the module docs. The
//! search's scores are the cost model's bit for bit (module docs, step 5), so this order
//! is the final one and nothing below the `top`-th needs keeping.

use std::cmp::Ordering;

use crate::budget::Score;
use crate::model::Model;

/// The slack of the search's bounds (module docs, step 3), which compare floats computed
/// otherwise than the scores: far above the few units in the last place such a float can
/// be off by, far below any difference that matters.
pub(crate) const MARGIN: f64 = 1e-9;

/// A scored candidate.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub score: Score,
    pub model: Model,
}

/// The kept candidates, best first.
#[derive(Debug, Clone)]
pub(crate) struct Kept {
    top: usize,
    base: Model,
    entries: Vec<Entry>,
}

impl Kept {
    pub fn new(top: usize, base: Model) -> Self {
        Self {
            top,
            base,
            entries: Vec::new(),
        }
    }

    fn cmp(&self, a: &Entry, b: &Entry) -> Ordering {
        a.score.rank(&b.score).then_with(|| {
            super::rank_key(&a.model, &self.base).cmp(&super::rank_key(&b.model, &self.base))
        })
    }

    /// The score of the `top`-th kept, once `top` are kept: a candidate scoring worse
    /// cannot be kept.
    pub fn bar(&self) -> Option<Score> {
        (self.entries.len() >= self.top).then(|| self.entries[self.top - 1].score)
    }

    /// Whether a candidate scoring `score` could still be kept (a tie with the `top`-th
    /// can, on its shape).
    pub fn admits(&self, score: &Score) -> bool {
        self.bar()
            .is_none_or(|bar| score.rank(&bar) != Ordering::Greater)
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
        self.entries.truncate(self.top);
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

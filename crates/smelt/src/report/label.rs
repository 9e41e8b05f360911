//! How the reports name and show each budget: the one place a report names a budget. Every
//! per-budget row, column and phrase of the layouts iterates [`BudgetKind::ALL`] and asks
//! [`label`] for its words, so that a new budget appears in every report once it has an
//! arm here (in [`exact`] and in [`cost_row`]).

use super::cost::{activation_bytes, flops, int};
use crate::cost::{BudgetKind, Budgets, Term};
use crate::model::KvCount;

/// The words for one budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Label {
    /// The letter of a column (`F`, `N`, `KV`): `F ratio`, a residual's `F`.
    pub letter: &'static str,
    /// The budget in a sentence (`FLOPs`, `params`, `KV`).
    pub word: &'static str,
    /// The quantity matched, as a row of a match's budget table.
    pub quantity: &'static str,
    /// The title of the budget's panel in a picture.
    pub panel: &'static str,
    /// The budget in a picture's footnote.
    pub note: &'static str,
}

impl Label {
    /// The column of the ratio `looped / Baseline`, e.g. `F ratio`.
    pub fn ratio(self) -> String {
        format!("{} ratio", self.letter)
    }
}

/// The words for `kind`.
pub(crate) fn label(kind: BudgetKind) -> Label {
    match kind {
        BudgetKind::Flops => Label {
            letter: "F",
            word: "FLOPs",
            quantity: "FLOPs/token (training)",
            panel: "FLOPs",
            note: "FLOPs",
        },
        BudgetKind::Params => Label {
            letter: "N",
            word: "params",
            quantity: "params",
            panel: "parameters",
            note: "parameters",
        },
        BudgetKind::Kv => Label {
            letter: "KV",
            word: "KV",
            quantity: "KV elements/token",
            panel: "KV cache",
            note: "KV",
        },
        BudgetKind::Activations => Label {
            letter: "A",
            word: "activations",
            quantity: "activation bytes/token",
            panel: "activations",
            note: "activations",
        },
    }
}

/// The words for a term of the objective: a budget's ([`label`]), or the predicted time's
/// (its column letter `P`, as `grid --predict`'s `P ratio`).
pub(crate) fn term_label(term: Term) -> Label {
    match term {
        Term::Budget(kind) => label(kind),
        Term::Time => Label {
            letter: "P",
            word: "predicted time",
            quantity: "predicted time/token",
            panel: "predicted time",
            note: "predicted time",
        },
    }
}

/// The exact value of `kind` in `budgets`, digits grouped.
pub(crate) fn exact(budgets: &Budgets, kind: BudgetKind) -> String {
    match kind {
        BudgetKind::Flops => flops(budgets.flops),
        BudgetKind::Params => int(budgets.params.0),
        BudgetKind::Kv => int(budgets.kv.0),
        BudgetKind::Activations => activation_bytes(budgets.activations),
    }
}

/// The row of a cost table (`smelt cost`) that holds `kind`'s value, the KV cache's as
/// `kv` counts it.
pub(crate) fn cost_row(kind: BudgetKind, kv: KvCount) -> &'static str {
    match (kind, kv) {
        (BudgetKind::Flops, _) => "FLOPs/token training",
        (BudgetKind::Params, _) => "params total",
        (BudgetKind::Kv, KvCount::PerToken) => "KV cache/token (elements)",
        (BudgetKind::Kv, KvCount::AtContext) => "KV held at context (elements)",
        (BudgetKind::Activations, _) => "activations/token (bytes)",
    }
}

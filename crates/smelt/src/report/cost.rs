//! The layout of a cost (`smelt cost`) and of a model against its Baseline.

use super::{Document, Field, Report, Table, group_digits, percent, short};
use crate::cost::{Comparison, Cost};
use crate::model::KvCount;
use crate::units::Flops;

/// FLOPs with digit groups, and three decimals when not whole.
pub(crate) fn flops(f: Flops) -> String {
    match f.as_integer() {
        Some(n) => group_digits(u128::from(n)),
        None => {
            let whole = f.numer() / f.denom();
            let frac = f.as_f64() - whole as f64;
            format!("{}{}", group_digits(whole), &format!("{frac:.3}")[1..])
        }
    }
}

pub(crate) fn int(n: u64) -> String {
    group_digits(u128::from(n))
}

/// One row: label, exact value, short value (and the raw exact value).
struct Row {
    label: &'static str,
    exact: Field,
    approx: String,
}

/// Rows only some models have: dense FFNs, MTP modules, windowed layers.
#[derive(Clone, Copy)]
struct Extras {
    dense: bool,
    mtp: bool,
    windowed: bool,
    indexer: bool,
}

impl Extras {
    fn of(costs: &[&Cost]) -> Self {
        Self {
            dense: costs.iter().any(|c| c.params.breakdown.dense.0 > 0),
            mtp: costs.iter().any(|c| c.params.breakdown.mtp.0 > 0),
            windowed: costs.iter().any(|c| c.attention.windowed.is_some()),
            indexer: costs.iter().any(|c| c.params.breakdown.indexer.0 > 0),
        }
    }
}

/// The rows of one cost. `all` keeps rows that are zero (so two costs line up); `extras`
/// says which of the rows only some models have to show.
fn rows(c: &Cost, all: bool, extras: Extras) -> Vec<Row> {
    let mut r = Vec::new();
    let mut push = |label: &'static str, exact: Field, approx: String| {
        r.push(Row {
            label,
            exact,
            approx,
        });
    };
    let count = |n: u64| Field::shown(int(n), n);
    let fl = |f: Flops| Field::shown(flops(f), f.as_f64());
    push(
        "layers (physical / executions)",
        Field::text(format!("{} / {}", c.physical_layers, c.layer_executions)),
        String::new(),
    );
    let p = &c.params;
    push("params total", count(p.total.0), short(p.total.as_f64()));
    let b = &p.breakdown;
    for (label, v, optional) in [
        ("  attention", b.attention, false),
        ("  experts", b.experts, false),
        ("  router", b.router, false),
        ("  shared", b.shared, false),
        ("  dense FFN", b.dense, false),
        ("  norms", b.norms, false),
        ("  embeddings", b.embeddings, true),
        ("  lm_head", b.lm_head, true),
        ("  MTP modules", b.mtp, true),
        ("  indexer", b.indexer, true),
    ] {
        if (label == "  dense FFN" && !extras.dense)
            || (label == "  MTP modules" && !extras.mtp)
            || (label == "  indexer" && !extras.indexer)
        {
            continue;
        }
        if all || v.0 > 0 || !optional {
            push(label, count(v.0), short(v.as_f64()));
        }
    }
    push("params active", count(p.active.0), short(p.active.as_f64()));
    let f = &c.flops_per_token;
    push(
        "FLOPs/token training",
        fl(f.training),
        short(f.training.as_f64()),
    );
    push(
        "FLOPs/token forward",
        fl(f.forward),
        short(f.forward.as_f64()),
    );
    let fb = &f.forward_breakdown;
    for (label, v) in [
        ("  projections", fb.projections),
        ("  attention core", fb.attention_core),
        ("  router", fb.router),
        ("  experts", fb.experts),
        ("  shared", fb.shared),
        ("  dense FFN", fb.dense),
        ("  lm_head", fb.lm_head),
        ("  MTP modules", fb.mtp),
        ("  indexer", fb.indexer),
    ] {
        if (label == "  dense FFN" && !extras.dense)
            || (label == "  MTP modules" && !extras.mtp)
            || (label == "  indexer" && !extras.indexer)
        {
            continue;
        }
        let optional = matches!(label, "  lm_head" | "  MTP modules" | "  indexer");
        if all || v != Flops::ZERO || !optional {
            push(label, fl(v), short(v.as_f64()));
        }
    }
    let kv = &c.kv_cache_per_token;
    push(
        "KV cache/token (elements)",
        count(kv.elements.0),
        String::new(),
    );
    push("KV cache/token (bytes)", count(kv.bytes.0), String::new());
    let at = &kv.at_context;
    let marker = if kv.budget == KvCount::AtContext {
        ", the KV budget"
    } else {
        ""
    };
    push(
        "KV held at context (elements)",
        count(at.elements.0),
        format!("context {}{marker}", at.context),
    );
    push(
        "KV held at context (bytes)",
        count(at.bytes.0),
        String::new(),
    );
    push(
        "mean keys per query",
        Field::shown(
            c.attention.mean_keys_exact.clone(),
            c.attention.mean_keys_per_query,
        ),
        format!("{:.3}", c.attention.mean_keys_per_query),
    );
    if let Some(w) = &c.attention.windowed {
        push(
            "  in windowed layers",
            Field::shown(w.mean_keys_exact.clone(), w.mean_keys_per_query),
            format!("{} {}", w.kind.as_str(), w.size),
        );
    } else if all && extras.windowed {
        push("  in windowed layers", Field::text("-"), String::new());
    }
    if let Some(s) = &c.attention.selected {
        push(
            "  selected by the indexer",
            Field::shown(s.mean_keys_exact.clone(), s.mean_keys_per_query),
            format!("top {}", s.topk),
        );
    } else if all && extras.indexer {
        push("  selected by the indexer", Field::text("-"), String::new());
    }
    match &c.attention.mean_length_shortcut {
        Some(s) => push(
            "  shortcut at mean doc length",
            Field::shown(
                format!("{:.3} keys", s.mean_keys_per_query),
                s.mean_keys_per_query,
            ),
            format!("F {}", percent(s.relative_to_exact)),
        ),
        None if all => push(
            "  shortcut at mean doc length",
            Field::text("-"),
            String::new(),
        ),
        None => {}
    }
    let s = &c.sparsity;
    push(
        "sparsity S",
        Field::shown(format!("{:.2}%", s.s * 100.0), s.s),
        String::new(),
    );
    push(
        "  N_act_eq",
        Field::shown(group_digits(s.n_act_eq.round() as u128), s.n_act_eq),
        short(s.n_act_eq),
    );
    push(
        "  control F0",
        fl(s.control.flops_training),
        short(s.control.flops_training.as_f64()),
    );
    push(
        "  control N0",
        count(s.control.params.0),
        short(s.control.params.as_f64()),
    );
    r
}

impl Report for Cost {
    fn document(&self) -> Document {
        let mut doc = Document::titled(format!(
            "{} ({}, c̄ from {})",
            self.name.as_deref().unwrap_or("model"),
            self.conventions.attention.as_str(),
            self.conventions.attention_keys_from
        ));
        doc.line(format!("workload: {}", self.conventions.workload.summary()));
        let mut t = Table::new(["quantity", "exact", "approx"])
            .right_from(1)
            .data();
        for row in rows(self, false, Extras::of(&[self])) {
            t.rows.push(vec![
                Field::text(row.label),
                row.exact,
                Field::text(row.approx),
            ]);
        }
        doc.table(t);
        doc
    }
}

impl Report for Comparison {
    fn document(&self) -> Document {
        let extras = Extras::of(&[&self.baseline, &self.model]);
        let base_name = self.baseline.name.as_deref().unwrap_or("baseline");
        let model_name = self.model.name.as_deref().unwrap_or("model");
        let mut doc = Document::titled(format!(
            "{model_name} against {base_name} (sparsity of both against {base_name}'s control)"
        ));
        doc.line(format!(
            "workload: {}",
            self.baseline.conventions.workload.summary()
        ));
        for note in &self.harmonised {
            doc.line(format!("note: {note}"));
        }
        let mut t = Table::new(["quantity", base_name, model_name, "model / baseline - 1"])
            .right_from(1)
            .data();
        let r = &self.residuals;
        let kv_row = match self.baseline.kv_cache_per_token.budget {
            KvCount::PerToken => "KV cache/token (elements)",
            KvCount::AtContext => "KV held at context (elements)",
        };
        let base = rows(&self.baseline, true, extras);
        let model = rows(&self.model, true, extras);
        for (b, m) in base.into_iter().zip(model) {
            let residual = match b.label {
                "params total" => Field::percent(r.params),
                "FLOPs/token training" => Field::percent(r.flops),
                l if l == kv_row => Field::percent(r.kv),
                _ => Field::blank(),
            };
            t.rows
                .push(vec![Field::text(b.label), b.exact, m.exact, residual]);
        }
        doc.table(t);
        doc
    }
}

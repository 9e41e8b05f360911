//! The layout of a cost (`smelt cost`) and of a model against its Baseline.

use super::{Document, Field, Report, Table, cost_row, group_digits, percent, short};
use crate::cost::{BudgetKind, Comparison, Cost, TrainingMemory};
use crate::model::KvCount;
use crate::units::{ActivationBytes, Flops};

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

/// Activation bytes with digit groups, and three decimals when not whole.
pub(crate) fn activation_bytes(a: ActivationBytes) -> String {
    match a.as_integer() {
        Some(n) => group_digits(u128::from(n)),
        None => {
            let whole = a.numer() / a.denom();
            let frac = a.as_f64() - whole as f64;
            format!("{}{}", group_digits(whole), &format!("{frac:.3}")[1..])
        }
    }
}

pub(crate) fn int(n: u64) -> String {
    group_digits(u128::from(n))
}

/// The label of the per-GPU peak's row.
const PEAK: &str = "peak/GPU (bytes)";

/// One row: label, exact value, short value (and the raw exact value).
struct Row {
    label: String,
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
    recurrent: bool,
    latent: bool,
}

impl Extras {
    fn of(costs: &[&Cost]) -> Self {
        Self {
            dense: costs.iter().any(|c| c.params.breakdown.dense.0 > 0),
            mtp: costs.iter().any(|c| c.params.breakdown.mtp.0 > 0),
            windowed: costs.iter().any(|c| c.attention.windowed.is_some()),
            indexer: costs.iter().any(|c| c.params.breakdown.indexer.0 > 0),
            recurrent: costs.iter().any(|c| c.params.breakdown.recurrent.0 > 0),
            latent: (costs.iter()).any(|c| c.params.breakdown.latent_projections.0 > 0),
        }
    }
}

/// The rows of a cost table, section by section. `all` keeps rows that are zero (so two
/// costs line up); `extras` says which of the rows only some models have to show.
struct Rows {
    rows: Vec<Row>,
    all: bool,
    extras: Extras,
}

fn count(n: u64) -> Field {
    Field::shown(int(n), n)
}

fn fl(f: Flops) -> Field {
    Field::shown(flops(f), f.as_f64())
}

impl Rows {
    fn push(&mut self, label: impl Into<String>, exact: Field, approx: String) {
        self.rows.push(Row {
            label: label.into(),
            exact,
            approx,
        });
    }

    /// Whether a breakdown row only some models have is left out.
    fn skipped(&self, label: &str) -> bool {
        (label == "  dense FFN" && !self.extras.dense)
            || (label == "  MTP modules" && !self.extras.mtp)
            || (label == "  indexer" && !self.extras.indexer)
            || (label.starts_with("  recurrent") && !self.extras.recurrent)
            || (label == "  latent projections" && !self.extras.latent)
    }

    fn params(&mut self, c: &Cost) {
        let p = &c.params;
        self.push("params total", count(p.total.0), short(p.total.as_f64()));
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
            ("  recurrent mixers", b.recurrent, true),
            ("  latent projections", b.latent_projections, true),
        ] {
            if !self.skipped(label) && (self.all || v.0 > 0 || !optional) {
                self.push(label, count(v.0), short(v.as_f64()));
            }
        }
        self.push("params active", count(p.active.0), short(p.active.as_f64()));
    }

    fn flops(&mut self, c: &Cost) {
        let f = &c.flops_per_token;
        let training = f.training;
        self.push(
            "FLOPs/token training",
            fl(training),
            short(training.as_f64()),
        );
        self.push(
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
            ("  recurrent projections", fb.recurrent_projections),
            ("  recurrent conv + scan", fb.recurrent_core),
            ("  latent projections", fb.latent_projections),
        ] {
            let optional = matches!(
                label,
                "  lm_head" | "  MTP modules" | "  indexer" | "  latent projections"
            ) || label.starts_with("  recurrent");
            if !self.skipped(label) && (self.all || v != Flops::ZERO || !optional) {
                self.push(label, fl(v), short(v.as_f64()));
            }
        }
    }

    fn kv(&mut self, c: &Cost) {
        let kv = &c.kv_cache_per_token;
        self.push(
            "KV cache/token (elements)",
            count(kv.elements.0),
            String::new(),
        );
        self.push("KV cache/token (bytes)", count(kv.bytes.0), String::new());
        let at = &kv.at_context;
        let marker = if kv.budget == KvCount::AtContext {
            ", the KV budget"
        } else {
            ""
        };
        let window = at
            .held_per_windowed_layer
            .map_or(String::new(), |w| format!("; {w} keys per windowed layer"));
        self.push(
            "KV held at context (elements)",
            count(at.elements.0),
            format!("context {}{window}{marker}", at.context),
        );
        if let (Some(cache), Some(w)) = (at.elements_cache, at.held_per_windowed_layer) {
            let kind = c
                .attention
                .windowed
                .as_ref()
                .map_or("windowed", |w| w.kind.as_str());
            self.push(
                "  as Transformers' cache holds",
                count(cache.0),
                format!("{} keys per {kind} layer after prefill", w - 1),
            );
        }
        self.push(
            "KV held at context (bytes)",
            count(at.bytes.0),
            String::new(),
        );
        if let Some(s) = &kv.recurrent_state {
            self.push(
                "  of which recurrent state",
                count(s.elements.0),
                format!(
                    "{} x ({} conv + {} {}) per sequence",
                    s.executions,
                    s.conv_per_execution,
                    s.delta_per_execution,
                    s.state_word()
                ),
            );
            self.push(
                "  recurrent state (bytes)",
                count(s.bytes.0),
                format!(
                    "{} with an fp32 {} state",
                    int(s.bytes_fp32_delta.0),
                    s.state_word()
                ),
            );
        }
    }

    /// The activations budget's row, then every policy's bytes per token.
    fn activations(&mut self, c: &Cost) {
        let a = &c.activations;
        let field = |v: ActivationBytes| Field::shown(activation_bytes(v), v.as_f64());
        let budget = c.budgets().activations;
        if let Some(why) = &a.refused {
            // The refusal names its field first ("model.recurrent: ...").
            let field = why.split(':').next().unwrap_or_default();
            self.push(
                "activations/token (bytes)",
                Field::text("not counted"),
                format!("{} refuses {field}", a.budget.as_str()),
            );
        } else {
            self.push(
                "activations/token (bytes)",
                field(budget),
                format!("{}-byte", a.activation_bytes),
            );
        }
        for p in &a.policies {
            // The budget's row says so; megatron-selective's its modules.
            let (label, approx) = if p.policy != a.budget {
                (format!("  {}", p.policy), short(p.per_token.as_f64()))
            } else if p.policy == crate::model::ActivationPolicy::MegatronSelective {
                (
                    format!("  {} (budget)", p.policy),
                    format!("[{}]", a.recompute_modules.unwrap_or_default().names()),
                )
            } else {
                (
                    format!("  {} (budget)", p.policy),
                    short(p.per_token.as_f64()),
                )
            };
            self.push(label, field(p.per_token), approx);
        }
    }

    /// The static training memory, the layout, and each pipeline stage's bytes per GPU.
    fn training(&mut self, m: &TrainingMemory) {
        let t = &m.training;
        let field = |v: ActivationBytes| Field::shown(activation_bytes(v), v.as_f64());
        self.push(
            "training state/param (bytes)",
            count(m.bytes_per_param),
            format!(
                "{} weight + {} grad + {} master + {} optimizer",
                t.weight_bytes, t.grad_bytes, t.master_bytes, t.optimizer_bytes
            ),
        );
        self.push(
            "training params",
            count(m.params.0),
            format!("embedding {} (included)", short(m.embedding.as_f64())),
        );
        self.push(
            "training static (bytes)",
            count(m.static_bytes.0),
            short(m.static_bytes.as_f64()),
        );
        let vp = if t.vp > 1 {
            format!(" vp {}", t.vp)
        } else {
            String::new()
        };
        self.push(
            "layout (GPUs)",
            count(m.gpus),
            format!(
                "tp {} etp {} ep {} pp {}{vp} cp {} dp {}, ZeRO-{}, micro-batch {}",
                t.tp,
                t.etp(),
                t.ep,
                t.pp,
                t.cp,
                t.dp,
                t.zero,
                t.micro_batch
            ),
        );
        for st in &m.stages {
            self.stage(st, t.vp);
        }
        self.push(
            PEAK,
            field(m.peak),
            format!(
                "{}, stage {}, {}",
                short(m.peak.as_f64()),
                m.peak_stage,
                m.policy.as_str()
            ),
        );
    }

    /// One pipeline stage's rows.
    fn stage(&mut self, st: &crate::cost::StageMemory, vp: u64) {
        let field = |v: ActivationBytes| Field::shown(activation_bytes(v), v.as_f64());
        let s = st.stage;
        self.push(
            format!("  stage {s} static/GPU (bytes)"),
            count(st.static_bytes.0),
            format!("layers {}-{}", st.layers[0], st.layers[1]),
        );
        let flight = if vp > 1 {
            format!(
                "{} chunk forwards in flight ({}/micro-batch)",
                st.in_flight,
                short(st.activations_per_micro_batch.as_f64())
            )
        } else {
            format!(
                "{} x {} in flight",
                short(st.activations_per_micro_batch.as_f64()),
                st.in_flight
            )
        };
        self.push(
            format!("  stage {s} activations/GPU (bytes)"),
            field(st.activations),
            flight,
        );
        let transient = st
            .recompute_transient
            .checked_add(st.dispatch_transient)
            .ok();
        if let Some(tr) = transient.filter(|t| *t != ActivationBytes::ZERO) {
            self.push(
                format!("  stage {s} transients/GPU (bytes)"),
                field(tr),
                format!(
                    "recompute {} + dispatch {}",
                    short(st.recompute_transient.as_f64()),
                    short(st.dispatch_transient.as_f64())
                ),
            );
        }
        if st.optimizer_step.0 > 0 {
            self.push(
                format!("  stage {s} optimizer step/GPU (bytes)"),
                count(st.optimizer_step.0),
                "fp32 copy of the shard's gradients".to_owned(),
            );
        }
    }

    /// The verdict on a card and the knobs that would make it fit.
    fn fit(&mut self, f: &crate::cost::fit::FitReport) {
        let gb = |x: f64| format!("{:.2} GB", x / 1e9);
        let verdict = if f.fits { "fits" } else { "does not fit" };
        self.push(
            format!("fits {} ({})", f.card, gb(f.card_bytes)),
            Field::text(verdict),
            format!(
                "peak {} (stage {}), {} {}",
                gb(f.peak_bytes),
                f.peak_stage,
                gb(f.margin_bytes.abs()),
                if f.fits { "free" } else { "over" }
            ),
        );
        for k in &f.knobs {
            let verdict = if k.fits { "fits" } else { "too big" };
            self.push(
                format!("  {}: {verdict}", k.knob),
                count(k.peak_bytes as u64),
                k.setting.clone(),
            );
        }
    }

    fn attention(&mut self, c: &Cost) {
        let a = &c.attention;
        self.push(
            "mean keys per query",
            Field::shown(a.mean_keys_exact.clone(), a.mean_keys_per_query),
            format!("{:.3}", a.mean_keys_per_query),
        );
        if let Some(w) = &a.windowed {
            self.push(
                "  in windowed layers",
                Field::shown(w.mean_keys_exact.clone(), w.mean_keys_per_query),
                format!("{} {}", w.kind.as_str(), w.size),
            );
        } else if self.all && self.extras.windowed {
            self.push("  in windowed layers", Field::text("-"), String::new());
        }
        if let Some(s) = &a.selected {
            self.push(
                "  selected by the indexer",
                Field::shown(s.mean_keys_exact.clone(), s.mean_keys_per_query),
                format!("top {}", s.topk),
            );
        } else if self.all && self.extras.indexer {
            self.push("  selected by the indexer", Field::text("-"), String::new());
        }
        let shortcut = "  shortcut at mean doc length";
        match &a.mean_length_shortcut {
            Some(s) => self.push(
                shortcut,
                Field::shown(
                    format!("{:.3} keys", s.mean_keys_per_query),
                    s.mean_keys_per_query,
                ),
                format!("F {}", percent(s.relative_to_exact)),
            ),
            None if self.all => self.push(shortcut, Field::text("-"), String::new()),
            None => {}
        }
    }

    fn sparsity(&mut self, c: &Cost) {
        let s = &c.sparsity;
        self.push(
            "sparsity S",
            Field::shown(format!("{:.2}%", s.s * 100.0), s.s),
            String::new(),
        );
        self.push(
            "  N_act_eq",
            Field::shown(group_digits(s.n_act_eq.round() as u128), s.n_act_eq),
            short(s.n_act_eq),
        );
        let control = &s.control;
        self.push(
            "  control F0",
            fl(control.flops_training),
            short(control.flops_training.as_f64()),
        );
        self.push(
            "  control N0",
            count(control.params.0),
            short(control.params.as_f64()),
        );
    }
}

/// The rows of one cost. `all` keeps rows that are zero (so two costs line up); `extras`
/// says which of the rows only some models have to show.
fn rows(c: &Cost, all: bool, extras: Extras) -> Vec<Row> {
    let mut r = Rows {
        rows: Vec::new(),
        all,
        extras,
    };
    r.push(
        "layers (physical / executions)",
        Field::text(format!("{} / {}", c.physical_layers, c.layer_executions)),
        String::new(),
    );
    r.params(c);
    r.flops(c);
    r.kv(c);
    r.activations(c);
    if let Some(t) = &c.training {
        r.training(t);
    }
    if let Some(f) = &c.fit {
        r.fit(f);
    }
    r.attention(c);
    r.sparsity(c);
    r.rows
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
                Field::text(row.label.as_str()),
                row.exact,
                Field::text(row.approx),
            ]);
        }
        doc.table(t);
        pipeline_notes(&mut doc, &[self]);
        doc
    }
}

/// A line under the table for each cost whose loop crosses pipeline stages.
fn pipeline_notes(doc: &mut Document, costs: &[&Cost]) {
    for c in costs {
        if let Some(note) = c.training.as_ref().and_then(|t| t.pipeline_note.as_ref()) {
            let name = c.name.as_deref().unwrap_or("model");
            doc.line(format!("note ({name}): {note}"));
        }
    }
}

/// The rows of two costs side by side, matched by label (the `n`-th row of a label with the
/// `n`-th of the same label), in the first cost's order: a row only one cost has (the
/// recurrent state, an activation policy the other refuses, a pipeline stage) shows on its
/// side only, a row only the second has after the row it follows there.
fn aligned(base: Vec<Row>, model: Vec<Row>) -> Vec<(String, Option<Field>, Option<Field>)> {
    // Each row keyed by its label and its occurrence of that label.
    type Key = (String, usize);
    fn keyed(rows: Vec<Row>) -> Vec<(Key, Field)> {
        let mut seen: Vec<String> = Vec::new();
        rows.into_iter()
            .map(|r| {
                let n = seen.iter().filter(|l| **l == r.label).count();
                seen.push(r.label.clone());
                ((r.label, n), r.exact)
            })
            .collect()
    }
    let (base, model) = (keyed(base), keyed(model));
    let in_base = |k: &Key| base.iter().any(|(b, _)| b == k);
    // The second cost's own rows, each under the last shared row before it (None: first).
    let mut own: Vec<(Option<Key>, Key, Field)> = Vec::new();
    let mut anchor = None;
    let mut shared: Vec<(Key, Field)> = Vec::new();
    for (k, f) in model {
        if in_base(&k) {
            anchor = Some(k.clone());
            shared.push((k, f));
        } else {
            own.push((anchor.clone(), k, f));
        }
    }
    let mut out = Vec::new();
    let mut after = |out: &mut Vec<_>, at: Option<&Key>| {
        for (a, k, f) in own.iter_mut() {
            if a.as_ref() == at {
                out.push((
                    k.0.clone(),
                    None,
                    Some(std::mem::replace(f, Field::blank())),
                ));
            }
        }
    };
    after(&mut out, None);
    for (k, f) in base {
        let m = shared
            .iter()
            .position(|(s, _)| *s == k)
            .map(|i| shared.swap_remove(i).1);
        out.push((k.0.clone(), Some(f), m));
        after(&mut out, Some(&k));
    }
    out
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
        let kv_count = self.baseline.kv_cache_per_token.budget;
        let base = rows(&self.baseline, true, extras);
        let model = rows(&self.model, true, extras);
        for (label, b, m) in aligned(base, model) {
            let budget = self
                .residuals
                .iter()
                .find(|(k, _)| cost_row(*k, kv_count) == label);
            let both = b.is_some() && m.is_some();
            // A budget one side does not count has no residual.
            let refused = |c: &Cost| {
                c.activations.refused.is_some()
                    && budget.is_some_and(|(k, _)| k == BudgetKind::Activations)
            };
            let residual = match (budget, &self.baseline.training, &self.model.training) {
                _ if refused(&self.baseline) || refused(&self.model) => Field::blank(),
                (Some((_, r)), _, _) => Field::percent(*r),
                (None, Some(tb), Some(tm)) if both && label == PEAK => {
                    Field::percent(crate::units::relative(tm.peak.as_f64(), tb.peak.as_f64()))
                }
                _ => Field::blank(),
            };
            let absent = || Field::text("-");
            t.rows.push(vec![
                Field::text(label.as_str()),
                b.unwrap_or_else(absent),
                m.unwrap_or_else(absent),
                residual,
            ]);
        }
        doc.table(t);
        pipeline_notes(&mut doc, &[&self.baseline, &self.model]);
        doc
    }
}

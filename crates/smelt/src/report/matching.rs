//! The layout of a match (`smelt match`), and the matched model file.

use super::{
    Document, Field, Format, NOT_CHECKED, Report, SHAPE_COLUMNS, Table, exact, group_digits, label,
    percent, term_label,
};
use crate::cost::{BudgetKind, Residuals, Term};
use crate::error::Result;
use crate::model::{AttentionLayer, AttentionShape, Ffn, Layer, ModelSpec, Stack, TokenMixer};
use crate::search::MatchReport;

fn loop_text(stack: &Stack) -> String {
    match stack.looping() {
        None => "none".to_owned(),
        Some(lp) => format!(
            "layers {}-{} x{} (residual x{})",
            lp.first + 1,
            lp.first + lp.span,
            lp.repeats,
            lp.residual_scale
        ),
    }
}

impl MatchReport {
    /// The title, the workload and the budgets of both models with the residual of each.
    fn budget_table(&self, base_name: &str) -> Document {
        let name = self.name.as_deref().unwrap_or("budget");
        let mut doc = Document::titled(format!(
            "{name}: {} mode, {} lattice points, {} costed exactly",
            self.mode.as_str(),
            group_digits(self.lattice.lattice_points),
            group_digits(u128::from(self.lattice.evaluated))
        ));
        doc.line(format!("workload: {}", self.baseline.workload.summary()));
        let mut t = Table::new(["budget", base_name, "looped", "residual"])
            .right_from(1)
            .data();
        let (b, l) = (&self.budgets.baseline, &self.budgets.looped);
        let hybrid = self.baseline.model.knobs().mixer.is_some();
        let at_context = self.baseline.counting.kv == crate::model::KvCount::AtContext;
        for term in self.terms() {
            // A hybrid's rows say what they hold: the KV budget at the context includes the
            // recurrent state, and its activations are not counted.
            let quantity = match term {
                Term::Budget(BudgetKind::Kv) if hybrid && at_context => {
                    "KV + recurrent state at context"
                }
                Term::Budget(BudgetKind::Kv) if hybrid => "KV elements/token (attention layers)",
                Term::Budget(BudgetKind::Kv) if at_context => "KV elements at context",
                _ => term_label(term).quantity,
            };
            let values = match term {
                _ if !term.counted_for(&self.baseline.model, &self.baseline.counting) => None,
                Term::Budget(kind) => Some((exact(b, kind), exact(l, kind))),
                Term::Time => self.predicted_time.as_ref().map(|p| {
                    (
                        super::predict::seconds_text(p.baseline_seconds_per_token),
                        super::predict::seconds_text(p.looped_seconds_per_token),
                    )
                }),
            };
            let Some((base, looped)) = values else {
                t.push_texts([
                    quantity.to_owned(),
                    "not counted".to_owned(),
                    "not counted".to_owned(),
                    String::new(),
                ]);
                continue;
            };
            let residual = self.term_residual(term).map_or(String::new(), percent);
            t.push_texts([quantity.to_owned(), base, looped, residual]);
            if term == Term::Budget(BudgetKind::Kv) && hybrid && at_context {
                self.kv_parts(&mut t);
            }
        }
        t.push_texts([
            "sparsity S".to_owned(),
            format!("{:.2}%", self.sparsity.baseline * 100.0),
            format!("{:.2}%", self.sparsity.looped * 100.0),
            String::new(),
        ]);
        doc.table(t);
        doc
    }

    /// The two parts of a hybrid's cache at the context, each model's: the attention
    /// layers' KV and the recurrent state.
    fn kv_parts(&self, t: &mut Table) {
        // The two parts of the cache at the context, each model's.
        let kv = |spec: &ModelSpec| {
            crate::cost::kv_cache(&spec.model, &spec.workload, &spec.counting).ok()
        };
        if let (Some(kb), Some(kl)) = (kv(&self.baseline), kv(&self.looped))
            && let (Some(sb), Some(sl)) = (kb.recurrent_state, kl.recurrent_state)
        {
            let rel = |a: u64, b: u64| percent(b as f64 / a as f64 - 1.0);
            t.push_texts([
                "  KV/token, attention layers".to_owned(),
                group_digits(u128::from(kb.elements.0)),
                group_digits(u128::from(kl.elements.0)),
                rel(kb.elements.0, kl.elements.0),
            ]);
            t.push_texts([
                "  recurrent state/sequence".to_owned(),
                group_digits(u128::from(sb.elements.0)),
                group_digits(u128::from(sl.elements.0)),
                rel(sb.elements.0, sl.elements.0),
            ]);
        }
    }

    /// The terms this result shows: every budget, then the predicted time when it has one.
    fn terms(&self) -> impl Iterator<Item = Term> {
        Term::of(self.predicted_time.is_some())
    }

    /// The residual of `term` for the matched model.
    fn term_residual(&self, term: Term) -> Option<f64> {
        let time = self.predicted_time.as_ref().map(|p| p.residual);
        term.residual(Some(&self.residuals), time)
    }

    /// The shapes of both models.
    fn shape_table(&self, base_name: &str) -> Table {
        let (bm, lm) = (&self.baseline.model, &self.looped.model);
        let mut s = Table::new(["shape", base_name, "looped"]).right_from(1);
        for (label, a, b) in [
            ("layers", bm.layers, lm.layers),
            ("layer executions", bm.executions(), lm.executions()),
            ("hidden", bm.hidden, lm.hidden),
            ("experts", bm.moe.experts, lm.moe.experts),
            ("top_k", bm.moe.top_k, lm.moe.top_k),
            ("expert_ffn", bm.moe.expert_ffn, lm.moe.expert_ffn),
            ("heads", bm.heads, lm.heads),
            ("kv_heads", bm.kv_heads, lm.kv_heads),
            ("head_dim", bm.head_dim, lm.head_dim),
            ("q width", bm.q_width(), lm.q_width()),
        ] {
            s.push_texts([label.to_owned(), a.to_string(), b.to_string()]);
        }
        // LatentMoE's width is carried from the Baseline, not searched.
        if bm.moe.latent.is_some() || lm.moe.latent.is_some() {
            let shown = |l: Option<u64>| l.map_or_else(|| "-".to_owned(), |l| l.to_string());
            s.push_texts([
                "expert latent".to_owned(),
                shown(bm.moe.latent),
                format!("{} (carried)", shown(lm.moe.latent)),
            ]);
        }
        // Both are valid (matched) models: their stacks resolve.
        let (Ok(bs), Ok(ls)) = (Stack::of(bm), Stack::of(lm)) else {
            return s;
        };
        let rank = |s: &Stack| crate::budget::mla_of(s).map(|a| a.kv_lora_rank.to_string());
        if rank(&bs).is_some() || rank(&ls).is_some() {
            let shown = |s: &Stack| rank(s).unwrap_or_else(|| "-".to_owned());
            s.push_texts(["kv_lora_rank".to_owned(), shown(&bs), shown(&ls)]);
        }
        for (label, text) in [
            ("dense layers", dense_text as fn(&Stack) -> Option<String>),
            ("windowed layers", window_text),
            ("full-attention layers", full_attention_text),
            ("recurrent layers", recurrent_text),
            ("recurrent mixer", |s: &Stack| {
                s.recurrent().map(|m| m.shape_text())
            }),
        ] {
            if let (Some(a), Some(b)) = (text(&bs), text(&ls)) {
                s.push_texts([label.to_owned(), a, b]);
            }
        }
        s.push_texts(["loop".to_owned(), loop_text(&bs), loop_text(&ls)]);
        s
    }

    /// The lines under the tables: tolerances, measured time, the binding floor.
    fn notes(&self, doc: &mut Document) {
        let t = &self.tolerance;
        if t.iter().any(|(_, v)| v.is_some()) {
            // A budget reported but not matched by default, with no tolerance, says nothing.
            let limits: Vec<String> = t
                .iter()
                .filter(|(k, v)| v.is_some() || k.default_weight() > 0.0)
                .map(|(k, v)| {
                    let v = v.map_or("none".to_owned(), |v| format!("{:.2}%", v * 100.0));
                    format!("{} {v}", k.as_str())
                })
                .collect();
            doc.line(format!(
                "tolerance (|residual| <= {}): {}",
                limits.join(", "),
                if self.within_tolerance != Some(false) {
                    "met".to_owned()
                } else {
                    format!(
                        "NOT MET, best configuration shown; outside: {}",
                        self.broken
                            .iter()
                            .map(|k| k.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            ));
        }
        if let Some(t) = &self.time {
            doc.line(format!(
                "measured time per token: looped / Baseline = {:.3} [{:.3}, {:.3}]{} (FLOP \
                 ratio {:.3}), batch of {} tokens on {}, {} rounds",
                t.ratio,
                t.interval[0],
                t.interval[1],
                if t.noisy { ", noisy" } else { "" },
                self.ratios.flops,
                t.tokens,
                t.device,
                t.rounds
            ));
        }
        if let Some(p) = &self.predicted_time {
            let how = match p.weight > 0.0 {
                true => format!("weight {}, matched", p.weight),
                false => "weight 0, reported, not matched".to_owned(),
            };
            doc.line(format!(
                "time budget ({how}): looped / Baseline = {:.4}, {}",
                p.ratio,
                p.basis.summary()
            ));
            if let Some(w) = &p.warning {
                doc.line(format!("warning: {w}"));
            }
        }
        if let Some(f) = &self.floor {
            doc.line(format!("floor: {} binds: {}", f.budget.as_str(), f.why));
        }
    }

    /// The terms the tables of alternatives show: every one the model counts (not the
    /// activations of recurrent layers or Gemma 4's pieces), the predicted time with them.
    fn shown_terms(&self) -> Vec<Term> {
        (self.terms())
            .filter(|t| t.counted_for(&self.baseline.model, &self.baseline.counting))
            .collect()
    }

    /// The single-knob refinements of the lattice, with the residuals each gives.
    fn advice_table(&self) -> Table {
        let shown = self.shown_terms();
        let header = ["refinement".to_owned(), "change".to_owned()]
            .into_iter()
            .chain(shown.iter().map(|&t| term_label(t).letter.to_owned()))
            .chain(["in tolerance".to_owned()]);
        let mut a = Table::new(header);
        for r in &self.advice {
            let mut row = vec![Field::text(&r.knob), Field::text(&r.change)];
            row.extend(shown.iter().map(|&t| {
                (t.residual(r.residuals.as_ref(), r.time_residual))
                    .map_or(Field::blank(), Field::percent)
            }));
            row.push(Field::text(match (&r.not_tried, r.within_tolerance) {
                (Some(why), _) => format!("not tried: {why}"),
                (None, Some(true)) => "yes".to_owned(),
                (None, Some(false)) => "no".to_owned(),
                (None, None) => NOT_CHECKED.to_owned(),
            }));
            a.rows.push(row);
        }
        a
    }

    /// The best distinct configurations, ranked (a hybrid's with its mixer's shape; without
    /// the activations where they are not counted).
    fn ranked_table(&self) -> Table {
        let hybrid = self.baseline.model.knobs().mixer.is_some();
        let shown = self.shown_terms();
        let header = std::iter::once("rank".to_owned())
            .chain(SHAPE_COLUMNS.map(str::to_owned))
            .chain(hybrid.then(|| "recurrent".to_owned()))
            .chain(shown.iter().map(|&t| term_label(t).letter.to_owned()))
            .chain(["largest |r|".to_owned()]);
        let mut r = Table::new(header).right_from(0);
        for a in &self.ranked {
            let x = &a.model;
            let mut row = vec![Field::text(a.rank.to_string())];
            row.extend(
                [
                    x.hidden,
                    x.moe.experts,
                    x.moe.expert_ffn,
                    x.heads,
                    x.kv_heads,
                    x.head_dim,
                ]
                .map(|n| Field::text(n.to_string())),
            );
            if hybrid {
                row.push(Field::text(
                    x.knobs().mixer.map_or(String::new(), |m| m.shape_compact()),
                ));
            }
            row.extend(shown.iter().map(|&t| {
                (t.residual(Some(&a.residuals), a.time_residual))
                    .map_or(Field::blank(), Field::percent)
            }));
            row.push(Field::shown(
                format!("{:.3}%", a.score[0] * 100.0),
                a.score[0],
            ));
            r.rows.push(row);
        }
        r
    }
}

impl Report for MatchReport {
    fn document(&self) -> Document {
        let base_name = self.baseline.name.as_deref().unwrap_or("baseline");
        let mut doc = self.budget_table(base_name);
        doc.table(self.shape_table(base_name));
        if let Some(line) =
            super::rows::peak_line(self.peak_per_gpu.as_ref(), self.baseline.training.as_ref())
        {
            doc.line(line);
        }
        self.notes(&mut doc);
        if !self.advice.is_empty() {
            doc.table(self.advice_table());
        }
        if !self.ranked.is_empty() {
            doc.table(self.ranked_table());
        }
        doc
    }

    fn formats(&self) -> &'static [Format] {
        &[Format::Table, Format::Json, Format::Markdown]
    }
}

/// A model file whose first line is the comment `# {comment}` (control characters in the
/// comment escaped, so the file always reads back).
pub fn commented_model_file(comment: &str, spec: &ModelSpec) -> Result<String> {
    Ok(format!(
        "# {}\n{}",
        comment.escape_debug(),
        spec.to_toml_string()?
    ))
}

/// A `config.json` imported as a model file, its first line saying from where.
pub fn imported_model_file(source: &str, spec: &ModelSpec) -> Result<String> {
    commented_model_file(
        &format!("Imported by smelt from {source} (embedding and LM head counted)."),
        spec,
    )
}

/// The matched model file (valid input to `smelt cost`), its first line a comment with the
/// residuals.
pub fn model_file(m: &MatchReport) -> Result<String> {
    let how = format!("{} mode", m.mode.as_str());
    let mut comment = match_comment(m.baseline.name.as_deref(), &how, &m.residuals);
    if let Some(t) = &m.predicted_time {
        comment.push_str(&time_comment(t));
    }
    commented_model_file(&comment, &m.looped)
}

/// The predicted time's residual, for a model file's first line: `, predicted time +9.27%
/// on NVIDIA H200 SXM`.
fn time_comment(t: &crate::search::MatchTime) -> String {
    format!(
        ", predicted time {} on {}",
        percent(t.residual),
        t.basis.device.name
    )
}

/// The first line of a matched model file: to what it was matched, how (a mode, a sweep's
/// value) and each budget's residual.
pub fn match_comment(baseline: Option<&str>, how: &str, residuals: &Residuals) -> String {
    let residuals: Vec<String> = residuals
        .iter()
        .map(|(k, r)| format!("{} {}", label(k).word, percent(*r)))
        .collect();
    format!(
        "Matched by smelt to {} ({how}): {}",
        baseline.unwrap_or("the Baseline"),
        residuals.join(", ")
    )
}

/// The 1-based layers of `stack` that `is`.
fn layers_where(stack: &Stack, is: impl Fn(&Layer) -> bool) -> Vec<u64> {
    (stack.layers().enumerate())
        .filter(|(_, l)| is(l))
        .map(|(i, _)| i as u64 + 1)
        .collect()
}

/// The attention of `layer`, if its mixer is attention.
fn attention_of(layer: &Layer) -> Option<&AttentionLayer> {
    match &layer.mixer {
        Some(TokenMixer::Attention(a)) => Some(a),
        _ => None,
    }
}

/// The dense layers in words, when a model has any.
fn dense_text(m: &Stack) -> Option<String> {
    let width = m.layers().find_map(|l| match l.ffn {
        Some(Ffn::Dense { width, .. }) => Some(width),
        _ => None,
    })?;
    let layers = layers_where(m, |l| matches!(l.ffn, Some(Ffn::Dense { .. })));
    Some(format!("{} (ffn {width})", layer_list(&layers)))
}

/// The full-attention layers' own shape in words, when a model gives one (the rows above
/// describe the windowed layers): their queries `heads x head_dim`, keys and values
/// `kv_heads x head_dim`, and `k = v` without a value projection.
fn full_attention_text(m: &Stack) -> Option<String> {
    m.own_shapes().find_map(|a| match a.shape {
        AttentionShape::Gqa {
            heads,
            kv_heads,
            head_dim: d,
            k_eq_v,
        } => {
            let kv = if k_eq_v { ", k = v" } else { "" };
            Some(format!("queries {heads}x{d}, kv {kv_heads}x{d}{kv}"))
        }
        _ => None,
    })
}

/// The recurrent layers in words, when a model has any: how many, of what kind.
fn recurrent_text(m: &Stack) -> Option<String> {
    let mixer = m.recurrent()?;
    let n = layers_where(m, |l| matches!(l.mixer, Some(TokenMixer::Recurrent(_)))).len();
    Some(format!("{n} ({})", mixer.as_str()))
}

/// The windowed layers in words, when a model has any.
fn window_text(m: &Stack) -> Option<String> {
    let w = m.window()?;
    let layers = layers_where(m, |l| attention_of(l).is_some_and(|a| a.window.is_some()));
    Some(format!(
        "{} ({} {})",
        layer_list(&layers),
        w.kind.as_str(),
        w.size
    ))
}

/// 1-based layers, runs of consecutive ones (or every other one) shortened.
fn layer_list(layers: &[u64]) -> String {
    let every_other = layers.len() > 2 && layers.windows(2).all(|p| p[1] == p[0] + 2);
    let consecutive = layers.len() > 2 && layers.windows(2).all(|p| p[1] == p[0] + 1);
    match (layers.first(), layers.last()) {
        (Some(a), Some(b)) if consecutive => format!("{a}-{b}"),
        (Some(a), Some(b)) if every_other => format!("{a}, {}, ..., {b}", a + 2),
        _ => layers
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    }
}

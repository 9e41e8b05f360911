//! The layout of a match (`smelt match`), and the matched model file.

use super::cost::{flops, int};
use super::{Document, Field, Format, Report, SHAPE_COLUMNS, Table, group_digits, percent};
use crate::error::Result;
use crate::model::Model;
use crate::search::MatchReport;

fn loop_text(model: &Model) -> String {
    match &model.looping {
        None => "none".to_owned(),
        Some(lp) => format!(
            "layers {}-{} x{} (residual x{})",
            lp.first,
            lp.first + lp.span - 1,
            lp.repeats,
            lp.residual_scale()
        ),
    }
}

impl Report for MatchReport {
    fn document(&self) -> Document {
        let name = self.name.as_deref().unwrap_or("budget");
        let base_name = self.baseline.name.as_deref().unwrap_or("baseline");
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
        let (b, l, r) = (
            &self.budgets.baseline,
            &self.budgets.looped,
            &self.residuals,
        );
        t.push_texts([
            "FLOPs/token (training)".to_owned(),
            flops(b.flops),
            flops(l.flops),
            percent(r.flops),
        ]);
        t.push_texts([
            "params".to_owned(),
            int(b.params.0),
            int(l.params.0),
            percent(r.params),
        ]);
        t.push_texts([
            "KV elements/token".to_owned(),
            int(b.kv.0),
            int(l.kv.0),
            percent(r.kv),
        ]);
        t.push_texts([
            "sparsity S".to_owned(),
            format!("{:.2}%", self.sparsity.baseline * 100.0),
            format!("{:.2}%", self.sparsity.looped * 100.0),
            String::new(),
        ]);
        doc.table(t);

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
        if bm.mla.is_some() || lm.mla.is_some() {
            let rank = |m: &crate::model::Model| {
                m.mla
                    .as_ref()
                    .map_or("-".to_owned(), |a| a.kv_lora_rank.to_string())
            };
            s.push_texts(["kv_lora_rank".to_owned(), rank(bm), rank(lm)]);
        }
        for (label, text) in [
            (
                "dense layers",
                dense_text as fn(&crate::model::Model) -> Option<String>,
            ),
            ("windowed layers", window_text),
        ] {
            if let (Some(a), Some(b)) = (text(bm), text(lm)) {
                s.push_texts([label.to_owned(), a, b]);
            }
        }
        s.push_texts(["loop".to_owned(), loop_text(bm), loop_text(lm)]);
        doc.table(s);

        let t = &self.tolerance;
        if t.iter().any(|(_, v)| v.is_some()) {
            let lim =
                |x: Option<f64>| x.map_or("none".to_owned(), |v| format!("{:.2}%", v * 100.0));
            doc.line(format!(
                "tolerance (|residual| <= flops {}, params {}, kv {}): {}",
                lim(t.flops),
                lim(t.params),
                lim(t.kv),
                if self.within_tolerance {
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
                "measured time per token: looped / Baseline = {:.3} (FLOP ratio {:.3}), \
                 batch of {} tokens on {}",
                t.ratio, self.ratios.flops, t.tokens, t.device
            ));
        }
        if let Some(f) = &self.floor {
            doc.line(format!("floor: {} binds: {}", f.budget.as_str(), f.why));
        }
        if !self.advice.is_empty() {
            let mut a = Table::new(["refinement", "change", "F", "N", "KV", "in tolerance"]);
            for r in &self.advice {
                let pct = |k: crate::cost::BudgetKind| match &r.residuals {
                    Some(res) => Field::percent(*res.get(k)),
                    None => Field::blank(),
                };
                a.rows.push(vec![
                    Field::text(&r.knob),
                    Field::text(&r.change),
                    pct(crate::cost::BudgetKind::Flops),
                    pct(crate::cost::BudgetKind::Params),
                    pct(crate::cost::BudgetKind::Kv),
                    Field::text(match (&r.not_tried, r.within_tolerance) {
                        (Some(why), _) => format!("not tried: {why}"),
                        (None, true) => "yes".to_owned(),
                        (None, false) => "no".to_owned(),
                    }),
                ]);
            }
            doc.table(a);
        }
        if !self.ranked.is_empty() {
            let header =
                ["rank"]
                    .iter()
                    .chain(&SHAPE_COLUMNS)
                    .chain(&["F", "N", "KV", "largest |r|"]);
            let mut r = Table::new(header.copied()).right_from(0);
            for a in &self.ranked {
                let x = &a.model;
                r.rows.push(vec![
                    Field::text(a.rank.to_string()),
                    Field::text(x.hidden.to_string()),
                    Field::text(x.moe.experts.to_string()),
                    Field::text(x.moe.expert_ffn.to_string()),
                    Field::text(x.heads.to_string()),
                    Field::text(x.kv_heads.to_string()),
                    Field::text(x.head_dim.to_string()),
                    Field::percent(a.residuals.flops),
                    Field::percent(a.residuals.params),
                    Field::percent(a.residuals.kv),
                    Field::shown(format!("{:.3}%", a.score[0] * 100.0), a.score[0]),
                ]);
            }
            doc.table(r);
        }
        doc
    }

    fn formats(&self) -> &'static [Format] {
        &[Format::Table, Format::Json, Format::Markdown]
    }
}

/// A model file whose first line is the comment `# {comment}` (control characters in the
/// comment escaped, so the file always reads back).
pub fn commented_model_file(comment: &str, spec: &crate::model::ModelSpec) -> Result<String> {
    Ok(format!(
        "# {}\n{}",
        comment.escape_debug(),
        spec.to_toml_string()?
    ))
}

/// A `config.json` imported as a model file, its first line saying from where.
pub fn imported_model_file(source: &str, spec: &crate::model::ModelSpec) -> Result<String> {
    commented_model_file(
        &format!("Imported by smelt from {source} (embedding and LM head counted)."),
        spec,
    )
}

/// The matched model file (valid input to `smelt cost`), its first line a comment with the
/// residuals.
pub fn model_file(m: &MatchReport) -> Result<String> {
    let r = &m.residuals;
    let comment = format!(
        "Matched by smelt to {} ({} mode): FLOPs {}, params {}, KV {}",
        m.baseline.name.as_deref().unwrap_or("the Baseline"),
        m.mode.as_str(),
        percent(r.flops),
        percent(r.params),
        percent(r.kv),
    );
    commented_model_file(&comment, &m.looped)
}

/// The dense layers in words, when a model has any.
fn dense_text(m: &crate::model::Model) -> Option<String> {
    m.dense
        .as_ref()
        .map(|d| format!("{} (ffn {})", layer_list(&d.layers), d.ffn))
}

/// The windowed layers in words, when a model has any.
fn window_text(m: &crate::model::Model) -> Option<String> {
    m.window
        .as_ref()
        .map(|w| format!("{} ({} {})", layer_list(&w.layers), w.kind.as_str(), w.size))
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

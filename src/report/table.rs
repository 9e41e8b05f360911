//! Human-readable tables (comfy-table).

use comfy_table::{Cell, CellAlignment, Table, presets::UTF8_FULL_CONDENSED};

use super::{group_digits, percent, short};
use crate::cost::{Comparison, Cost};
use crate::units::Flops;

fn flops(f: Flops) -> String {
    match f.as_integer() {
        Some(n) => group_digits(u128::from(n)),
        None => {
            let whole = f.numer() / f.denom();
            let frac = f.as_f64() - whole as f64;
            format!("{}{}", group_digits(whole), &format!("{frac:.3}")[1..])
        }
    }
}

fn int(n: u64) -> String {
    group_digits(u128::from(n))
}

/// The rows of one cost: `(label, exact value, short value)`. `all` keeps rows that are
/// zero (so two costs line up); `dense` shows the dense-FFN rows.
fn rows(c: &Cost, all: bool, dense: bool) -> Vec<(String, String, String)> {
    let mut r = Vec::new();
    let mut push = |label: &str, exact: String, approx: String| {
        r.push((label.to_owned(), exact, approx));
    };
    push(
        "layers (physical / executions)",
        format!("{} / {}", c.physical_layers, c.layer_executions),
        String::new(),
    );
    let p = &c.params;
    push("params total", int(p.total.0), short(p.total.as_f64()));
    let b = &p.breakdown;
    for (label, v) in [
        ("  attention", b.attention),
        ("  experts", b.experts),
        ("  router", b.router),
        ("  shared", b.shared),
        ("  dense FFN", b.dense),
        ("  norms", b.norms),
        ("  embeddings", b.embeddings),
        ("  lm_head", b.lm_head),
    ] {
        let optional = label.contains("embeddings") || label.contains("lm_head");
        if label.contains("dense") && !dense {
            continue;
        }
        if all || v.0 > 0 || !optional {
            push(label, int(v.0), short(v.as_f64()));
        }
    }
    push("params active", int(p.active.0), short(p.active.as_f64()));
    let f = &c.flops_per_token;
    push(
        "FLOPs/token training",
        flops(f.training),
        short(f.training.as_f64()),
    );
    push(
        "FLOPs/token forward",
        flops(f.forward),
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
    ] {
        if label.contains("dense") && !dense {
            continue;
        }
        if all || v != Flops::ZERO || label != "  lm_head" {
            push(label, flops(v), short(v.as_f64()));
        }
    }
    let kv = &c.kv_cache_per_token;
    push(
        "KV cache/token (elements)",
        int(kv.elements.0),
        String::new(),
    );
    push("KV cache/token (bytes)", int(kv.bytes.0), String::new());
    push(
        "mean keys per query",
        c.attention.mean_keys_exact.clone(),
        format!("{:.3}", c.attention.mean_keys_per_query),
    );
    match &c.attention.mean_length_shortcut {
        Some(s) => push(
            "  shortcut at mean doc length",
            format!("{:.3} keys", s.mean_keys_per_query),
            format!("F {}", percent(s.relative_to_exact)),
        ),
        None if all => push("  shortcut at mean doc length", "-".into(), String::new()),
        None => {}
    }
    let s = &c.sparsity;
    push("sparsity S", format!("{:.2}%", s.s * 100.0), String::new());
    push(
        "  N_act_eq",
        group_digits(s.n_act_eq.round() as u128),
        short(s.n_act_eq),
    );
    push(
        "  control F0",
        flops(s.control.flops_training),
        short(s.control.flops_training.as_f64()),
    );
    push(
        "  control N0",
        int(s.control.params.0),
        short(s.control.params.as_f64()),
    );
    r
}

fn new_table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED).force_no_tty();
    t.set_header(header.iter().map(Cell::new));
    t
}

fn align_right(t: &mut Table, from: usize) {
    for i in from..t.column_count() {
        if let Some(col) = t.column_mut(i) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// One model's cost as a table.
pub fn cost_table(c: &Cost) -> String {
    let mut t = new_table(&["quantity", "exact", "approx"]);
    let dense = c.params.breakdown.dense.0 > 0;
    for (label, exact, approx) in rows(c, false, dense) {
        t.add_row(vec![label, exact, approx]);
    }
    align_right(&mut t, 1);
    let title = c.name.as_deref().unwrap_or("model");
    format!(
        "{title} ({}, c̄ from {})\n{t}\n",
        c.conventions.attention.as_str(),
        c.conventions.attention_keys_from
    )
}

/// A model beside its Baseline, with the residual of each budget.
pub fn comparison_table(cmp: &Comparison) -> String {
    let dense = cmp.baseline.params.breakdown.dense.0 > 0 || cmp.model.params.breakdown.dense.0 > 0;
    let base = rows(&cmp.baseline, true, dense);
    let model = rows(&cmp.model, true, dense);
    let base_name = cmp.baseline.name.as_deref().unwrap_or("baseline");
    let model_name = cmp.model.name.as_deref().unwrap_or("model");
    let mut t = new_table(&["quantity", base_name, model_name, "model / baseline - 1"]);
    let r = &cmp.residuals;
    for ((label, b, _), (_, m, _)) in base.into_iter().zip(model) {
        let residual = match label.as_str() {
            "params total" => percent(r.params),
            "FLOPs/token training" => percent(r.flops),
            "KV cache/token (elements)" => percent(r.kv),
            _ => String::new(),
        };
        t.add_row(vec![label, b, m, residual]);
    }
    align_right(&mut t, 1);
    format!(
        "{model_name} against {base_name} (sparsity of both against {base_name}'s control)\n{t}\n"
    )
}

/// A row-shaped report as a table, summary rows after a separator row.
pub fn table(t: &dyn super::Tabular) -> String {
    let header = t.header();
    let refs: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut tab = new_table(&refs);
    for row in t.rows() {
        tab.add_row(row.into_iter().map(|f| f.display).collect::<Vec<_>>());
    }
    let summary = t.summary();
    if !summary.is_empty() {
        tab.add_row(vec![String::new(); header.len()]);
        for row in summary {
            tab.add_row(row.into_iter().map(|f| f.display).collect::<Vec<_>>());
        }
    }
    align_right(&mut tab, 2);
    format!("{}\n{tab}\n", t.title())
}

/// A match: budgets, residuals, shape changes, search size and runners-up.
pub fn match_table(m: &crate::search::MatchReport) -> String {
    let name = m.name.as_deref().unwrap_or("budget");
    let base_name = m.baseline.name.as_deref().unwrap_or("baseline");
    let mut out = format!(
        "{name}: {} mode, {} lattice points, {} costed exactly\n",
        m.mode.as_str(),
        group_digits(m.lattice.lattice_points),
        group_digits(u128::from(m.lattice.evaluated))
    );
    let mut t = new_table(&["budget", base_name, "looped", "residual"]);
    let (b, l) = (&m.budgets.baseline, &m.budgets.looped);
    t.add_row(vec![
        "FLOPs/token (training)".to_owned(),
        flops(b.flops),
        flops(l.flops),
        percent(m.residuals.flops),
    ]);
    t.add_row(vec![
        "params".to_owned(),
        int(b.params.0),
        int(l.params.0),
        percent(m.residuals.params),
    ]);
    t.add_row(vec![
        "KV elements/token".to_owned(),
        int(b.kv.0),
        int(l.kv.0),
        percent(m.residuals.kv),
    ]);
    t.add_row(vec![
        "sparsity S".to_owned(),
        format!("{:.2}%", m.sparsity.baseline * 100.0),
        format!("{:.2}%", m.sparsity.looped * 100.0),
        String::new(),
    ]);
    align_right(&mut t, 1);
    out.push_str(&format!("{t}\n"));

    let (bm, lm) = (&m.baseline.model, &m.looped.model);
    let mut s = new_table(&["shape", base_name, "looped"]);
    let loop_text = |model: &crate::spec::Model| match &model.looping {
        None => "none".to_owned(),
        Some(lp) => format!(
            "layers {}-{} x{} (residual x{})",
            lp.first,
            lp.first + lp.span - 1,
            lp.repeats,
            lp.residual_scale()
        ),
    };
    for (label, a, b) in [
        ("layers", bm.layers.to_string(), lm.layers.to_string()),
        (
            "layer executions",
            bm.executions().to_string(),
            lm.executions().to_string(),
        ),
        ("hidden", bm.hidden.to_string(), lm.hidden.to_string()),
        (
            "experts",
            bm.moe.experts.to_string(),
            lm.moe.experts.to_string(),
        ),
        ("top_k", bm.moe.top_k.to_string(), lm.moe.top_k.to_string()),
        (
            "expert_ffn",
            bm.moe.expert_ffn.to_string(),
            lm.moe.expert_ffn.to_string(),
        ),
        ("heads", bm.heads.to_string(), lm.heads.to_string()),
        ("kv_heads", bm.kv_heads.to_string(), lm.kv_heads.to_string()),
        ("head_dim", bm.head_dim.to_string(), lm.head_dim.to_string()),
        (
            "q width",
            bm.q_width().to_string(),
            lm.q_width().to_string(),
        ),
        ("loop", loop_text(bm), loop_text(lm)),
    ] {
        s.add_row(vec![label.to_owned(), a, b]);
    }
    align_right(&mut s, 1);
    out.push_str(&format!("{s}\n"));

    let t = &m.tolerance;
    if t.flops.is_some() || t.params.is_some() || t.kv.is_some() {
        let lim = |x: Option<f64>| x.map_or("none".to_owned(), |v| format!("{:.2}%", v * 100.0));
        out.push_str(&format!(
            "tolerance (|residual| <= flops {}, params {}, kv {}): {}\n",
            lim(t.flops),
            lim(t.params),
            lim(t.kv),
            if m.within_tolerance {
                "met".to_owned()
            } else {
                format!(
                    "NOT MET, best configuration shown; outside: {}",
                    m.broken.join(", ")
                )
            }
        ));
    }
    if !m.ranked.is_empty() {
        let mut r = new_table(&[
            "rank",
            "hidden",
            "experts",
            "expert_ffn",
            "heads",
            "kv_heads",
            "head_dim",
            "F",
            "N",
            "KV",
            "largest |r|",
        ]);
        for a in &m.ranked {
            let x = &a.model;
            r.add_row(vec![
                a.rank.to_string(),
                x.hidden.to_string(),
                x.moe.experts.to_string(),
                x.moe.expert_ffn.to_string(),
                x.heads.to_string(),
                x.kv_heads.to_string(),
                x.head_dim.to_string(),
                percent(a.residuals.flops),
                percent(a.residuals.params),
                percent(a.residuals.kv),
                format!("{:.3}%", a.score[0] * 100.0),
            ]);
        }
        align_right(&mut r, 0);
        out.push_str(&format!("{r}\n"));
    }
    out
}

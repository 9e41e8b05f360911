//! The layouts of row-shaped reports: a grid (`smelt grid`) and a sweep (`smelt sweep`).

use super::{Document, Field, Report, SHAPE_COLUMNS, Table};
use crate::cost::Ratios;
use crate::model::Model;
use crate::search::{GridReport, SweepReport};

fn arrow(a: u64, b: u64) -> Field {
    if a == b {
        Field::text(a.to_string())
    } else {
        Field::shown(format!("{a}→{b}"), b)
    }
}

fn shape(base: &Model, looped: &Model) -> [Field; 6] {
    [
        arrow(base.hidden, looped.hidden),
        arrow(base.moe.experts, looped.moe.experts),
        arrow(base.moe.expert_ffn, looped.moe.expert_ffn),
        arrow(base.heads, looped.heads),
        arrow(base.kv_heads, looped.kv_heads),
        arrow(base.head_dim, looped.head_dim),
    ]
}

fn ratios(r: &Ratios) -> [Field; 3] {
    r.map(Field::ratio).into_array()
}

/// The data table of a row-shaped report: `first`, the shape columns, then `last`.
fn row_table(first: &[&str], last: [&str; 5]) -> Table {
    Table::new(first.iter().chain(&SHAPE_COLUMNS).chain(&last).copied())
        .right_from(2)
        .data()
}

impl Report for GridReport {
    fn document(&self) -> Document {
        let mut doc = Document::titled(format!(
            "{} ({} mode, {} cells, {} sparse)",
            self.name.as_deref().unwrap_or("grid"),
            self.mode.as_str(),
            self.cells.len(),
            self.summary.sparse_cells
        ));
        let mut workloads: Vec<String> = self
            .cells
            .iter()
            .map(|c| c.baseline.workload.summary())
            .collect();
        workloads.dedup();
        doc.line(match workloads.as_slice() {
            [one] => format!("workload: {one}"),
            _ => "workloads: the cells' own (each cell's baseline.workload in the JSON)".to_owned(),
        });
        let mut t = row_table(
            &["scale", "sparsity", "sparse", "S base", "S looped"],
            ["F ratio", "N ratio", "KV ratio", "max w|r|", "in tolerance"],
        );
        let timed = self.cells.iter().any(|c| c.time.is_some());
        if timed {
            t.header.push("T ratio".to_owned());
        }
        if let Some(tr) = &self.summary.time_ratio {
            doc.line(format!(
                "T ratio: measured looped / Baseline time per token of the layer stack, on {}",
                tr.device
            ));
        }
        for c in &self.cells {
            let mut r = vec![
                Field::text(&c.scale),
                Field::text(&c.sparsity_label),
                Field::text(c.sparse.to_string()),
                Field::share(c.sparsity.baseline),
                Field::share(c.sparsity.looped),
            ];
            r.extend(shape(&c.baseline.model, &c.looped.model));
            r.extend(ratios(&c.ratios));
            r.push(Field::shown(format!("{:.4}", c.score[0]), c.score[0]));
            r.push(Field::text(if c.within_tolerance {
                "yes".to_owned()
            } else {
                let broken: Vec<&str> = c.broken.iter().map(|k| k.as_str()).collect();
                format!("no: {}", broken.join(", "))
            }));
            if timed {
                r.push(
                    c.time
                        .as_ref()
                        .map_or(Field::text("-"), |t| Field::ratio(t.ratio)),
                );
            }
            t.rows.push(r);
        }
        let s = &self.summary;
        let row = |label: &str, values: [Field; 3]| {
            let mut r = vec![Field::text(label)];
            r.extend((0..4 + SHAPE_COLUMNS.len()).map(|_| Field::blank()));
            r.extend(values);
            r.extend([Field::blank(), Field::blank()]);
            if timed {
                r.push(Field::blank());
            }
            r
        };
        t.summary = vec![
            row(
                "max |residual|, sparse cells",
                s.max_abs_residual.map(Field::percent).into_array(),
            ),
            row(
                "mean residual, sparse cells",
                s.mean_residual.map(Field::percent).into_array(),
            ),
            row(
                "cells where looped gets more",
                s.looped_gets_more
                    .map(|n| Field::text(n.to_string()))
                    .into_array(),
            ),
        ];
        if let Some(tr) = &s.time_ratio {
            for (label, v) in [
                ("largest time ratio", tr.max_ratio),
                ("mean time ratio", tr.mean_ratio),
            ] {
                let mut r = row(label, [Field::blank(), Field::blank(), Field::blank()]);
                if let Some(last) = r.last_mut() {
                    *last = Field::ratio(v);
                }
                t.summary.push(r);
            }
        }
        doc.table(t);
        doc
    }
}

impl Report for SweepReport {
    fn document(&self) -> Document {
        let knob = self.knob.as_str();
        let mut doc = Document::titled(format!(
            "{}: sweep over {knob}, every candidate matched to {}",
            self.name.as_deref().unwrap_or("budget"),
            self.baseline.name.as_deref().unwrap_or("the Baseline")
        ));
        doc.line(format!("workload: {}", self.baseline.workload.summary()));
        let mut t = row_table(
            &[knob, "executions"],
            ["F ratio", "N ratio", "KV ratio", "S looped", "in tolerance"],
        );
        for r in &self.rows {
            let mut out = vec![
                Field::text(r.value.to_string()),
                Field::text(r.layer_executions.to_string()),
            ];
            out.extend(shape(&self.baseline.model, &r.looped.model));
            out.extend(ratios(&r.ratios));
            out.push(Field::share(r.sparsity.looped));
            out.push(Field::text(if r.within_tolerance { "yes" } else { "no" }));
            t.rows.push(out);
        }
        doc.table(t);
        doc
    }
}

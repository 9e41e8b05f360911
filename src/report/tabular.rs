//! Row-shaped reports (grids, sweeps) and the one trait their writers share.

use crate::search::{GridReport, SweepReport, knob_name};
use crate::spec::Model;

/// A cell: what a person reads, and what a CSV reader parses.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// Formatted for reading (percentages, arrows).
    pub display: String,
    /// Full precision for machines.
    pub raw: String,
}

impl Field {
    fn text(s: impl Into<String>) -> Self {
        let s = s.into();
        Self {
            display: s.clone(),
            raw: s,
        }
    }

    fn ratio(x: f64) -> Self {
        Self {
            display: format!("{x:.4}"),
            raw: format!("{x}"),
        }
    }

    fn percent(x: f64) -> Self {
        Self {
            display: super::percent(x),
            raw: format!("{x}"),
        }
    }

    fn share(x: f64) -> Self {
        Self {
            display: format!("{:.2}%", x * 100.0),
            raw: format!("{x}"),
        }
    }
}

/// A report made of a header, rows and summary rows.
pub trait Tabular {
    /// A one-line title.
    fn title(&self) -> String;
    /// Column names.
    fn header(&self) -> Vec<String>;
    /// One row per item.
    fn rows(&self) -> Vec<Vec<Field>>;
    /// Summary rows (may be empty); the table and Markdown writers print them, CSV does not.
    fn summary(&self) -> Vec<Vec<Field>>;
}

fn arrow(a: u64, b: u64) -> Field {
    if a == b {
        Field::text(a.to_string())
    } else {
        Field {
            display: format!("{a}→{b}"),
            raw: b.to_string(),
        }
    }
}

fn shape(base: &Model, looped: &Model) -> Vec<Field> {
    vec![
        arrow(base.hidden, looped.hidden),
        arrow(base.moe.experts, looped.moe.experts),
        arrow(base.moe.expert_ffn, looped.moe.expert_ffn),
        arrow(base.heads, looped.heads),
        arrow(base.kv_heads, looped.kv_heads),
        arrow(base.head_dim, looped.head_dim),
    ]
}

const SHAPE: [&str; 6] = [
    "hidden",
    "experts",
    "expert_ffn",
    "heads",
    "kv_heads",
    "head_dim",
];

impl Tabular for GridReport {
    fn title(&self) -> String {
        format!(
            "{} ({} mode, {} cells, {} sparse)",
            self.name.as_deref().unwrap_or("grid"),
            self.mode.as_str(),
            self.cells.len(),
            self.summary.sparse_cells
        )
    }

    fn header(&self) -> Vec<String> {
        let mut h: Vec<String> = ["scale", "sparsity", "sparse", "S base", "S looped"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        h.extend(SHAPE.iter().map(|s| s.to_string()));
        h.extend(
            ["F ratio", "N ratio", "KV ratio", "max w|r|", "in tolerance"]
                .iter()
                .map(|s| s.to_string()),
        );
        h
    }

    fn rows(&self) -> Vec<Vec<Field>> {
        self.cells
            .iter()
            .map(|c| {
                let mut r = vec![
                    Field::text(&c.scale),
                    Field::text(&c.sparsity_label),
                    Field::text(c.sparse.to_string()),
                    Field::share(c.sparsity.baseline),
                    Field::share(c.sparsity.looped),
                ];
                r.extend(shape(&c.baseline.model, &c.looped.model));
                r.extend([
                    Field::ratio(c.ratios.flops),
                    Field::ratio(c.ratios.params),
                    Field::ratio(c.ratios.kv),
                    Field {
                        display: format!("{:.4}", c.score[0]),
                        raw: format!("{}", c.score[0]),
                    },
                    Field::text(if c.within_tolerance {
                        "yes".to_owned()
                    } else {
                        format!("no: {}", c.broken.join(", "))
                    }),
                ]);
                r
            })
            .collect()
    }

    fn summary(&self) -> Vec<Vec<Field>> {
        let s = &self.summary;
        let blank = || Field::text("");
        let row = |label: &str, f: Field, n: Field, k: Field| {
            let mut r = vec![Field::text(label)];
            r.extend((0..4 + SHAPE.len()).map(|_| blank()));
            r.extend([f, n, k, blank(), blank()]);
            r
        };
        vec![
            row(
                "max |residual|, sparse cells",
                Field::percent(s.max_abs_residual.flops),
                Field::percent(s.max_abs_residual.params),
                Field::percent(s.max_abs_residual.kv),
            ),
            row(
                "mean residual, sparse cells",
                Field::percent(s.mean_residual.flops),
                Field::percent(s.mean_residual.params),
                Field::percent(s.mean_residual.kv),
            ),
            row(
                "cells where looped gets more",
                Field::text(s.looped_gets_more.flops.to_string()),
                Field::text(s.looped_gets_more.params.to_string()),
                Field::text(s.looped_gets_more.kv.to_string()),
            ),
        ]
    }
}

impl Tabular for SweepReport {
    fn title(&self) -> String {
        format!(
            "{}: sweep over {}, every candidate matched to {}",
            self.name.as_deref().unwrap_or("budget"),
            knob_name(self.knob),
            self.baseline.name.as_deref().unwrap_or("the Baseline")
        )
    }

    fn header(&self) -> Vec<String> {
        let mut h = vec![knob_name(self.knob).to_owned(), "executions".to_owned()];
        h.extend(SHAPE.iter().map(|s| s.to_string()));
        h.extend(
            ["F ratio", "N ratio", "KV ratio", "S looped", "in tolerance"]
                .iter()
                .map(|s| s.to_string()),
        );
        h
    }

    fn rows(&self) -> Vec<Vec<Field>> {
        self.rows
            .iter()
            .map(|r| {
                let mut out = vec![
                    Field::text(r.value.to_string()),
                    Field::text(r.layer_executions.to_string()),
                ];
                out.extend(shape(&self.baseline.model, &r.looped.model));
                out.extend([
                    Field::ratio(r.ratios.flops),
                    Field::ratio(r.ratios.params),
                    Field::ratio(r.ratios.kv),
                    Field::share(r.sparsity.looped),
                    Field::text(if r.within_tolerance { "yes" } else { "no" }),
                ]);
                out
            })
            .collect()
    }

    fn summary(&self) -> Vec<Vec<Field>> {
        Vec::new()
    }
}

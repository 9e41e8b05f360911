//! The layouts of scaling-law fits (`smelt fit`) and of a gain table (`smelt gain`).

use super::{Columns, Document, Field, Report, Table};
use crate::fit::{Fits, GainTable, Interval, Search};

fn sci(x: f64) -> Field {
    Field::shown(format!("{x:.4e}"), x)
}

fn fixed(x: f64, decimals: usize) -> Field {
    Field::shown(format!("{x:.decimals$}"), x)
}

/// How a fit's optimisation ended, in words.
fn convergence(f: &crate::fit::Fit) -> String {
    let c = &f.convergence;
    format!(
        "{}, {} iterations, max |gradient| {:.1e}",
        c.termination, c.iterations, c.grad_max
    )
}

/// How the start grid was searched and how many L-BFGS runs reached the best, in words.
fn search(f: &crate::fit::Fit) -> String {
    let c = &f.convergence;
    match c.search {
        Search::Exhaustive => format!("{}/{} starts at best", c.polished_at_best, c.starts),
        Search::Screened => match &c.subsample {
            None => format!(
                "{} starts scored, L-BFGS from the best {}, {} of them at best",
                c.starts, c.polished, c.polished_at_best
            ),
            Some(sub) => format!(
                "{} starts scored and L-BFGS from the best {} on a subsample of {} of the {} \
                 endpoints ({} of them at its best), then on all of them from its {} best \
                 distinct ends, {} of them at best",
                c.starts,
                sub.polished,
                sub.points,
                f.points,
                sub.polished_at_best,
                c.polished,
                c.polished_at_best
            ),
        },
    }
}

/// A line per warning of `f`, each followed by `then`.
fn warnings(doc: &mut Document, f: &crate::fit::Fit, then: &str) {
    for w in &f.warnings {
        doc.line(format!("warning ({}): {w}{then}", group(f)));
    }
}

fn group(f: &crate::fit::Fit) -> &str {
    if f.group.is_empty() { "-" } else { &f.group }
}

impl Fits {
    /// The fits' table, with the convergence column when `columns` is wide.
    fn table(&self, columns: Columns) -> Table {
        let mut t = Table::new([
            "group",
            "form",
            "E",
            "A",
            "a",
            "b",
            "K",
            "c",
            "gamma",
            "RMSE (nats)",
            "points",
            "cells",
            "converged",
        ])
        .data();
        for f in &self.fits {
            let s = &f.surface;
            t.rows.push(vec![
                Field::text(group(f)),
                Field::text(f.form.as_str()),
                fixed(s.E, 4),
                sci(s.A),
                fixed(s.a, 4),
                fixed(s.b, 4),
                sci(s.K),
                fixed(s.c, 4),
                fixed(f.gamma, 4),
                fixed(f.rmse, 5),
                Field::text(f.points.to_string()),
                Field::text(f.cells.to_string()),
                Field::text(format!("{}, {}", convergence(f), search(f))),
            ]);
        }
        if columns == Columns::Compact {
            t.header.pop();
            t.rows.iter_mut().for_each(|r| drop(r.pop()));
        }
        t
    }
}

impl Report for Fits {
    fn document(&self) -> Document {
        let mut doc = Document::default();
        doc.table(self.table(Columns::Wide));
        self.fits.iter().for_each(|f| warnings(&mut doc, f, ""));
        doc
    }

    /// The table without its convergence column, which follows as a line per fit.
    fn compact(&self) -> Document {
        let mut doc = Document::default();
        doc.table(self.table(Columns::Compact));
        for f in &self.fits {
            doc.line(format!("converged ({}): {}", group(f), convergence(f)));
            doc.line(format!("search ({}): {}", group(f), search(f)));
        }
        self.fits.iter().for_each(|f| warnings(&mut doc, f, ""));
        doc
    }
}

fn interval_text(i: &Option<Interval>) -> String {
    i.map_or(String::new(), |i| format!(" (95% {:.3}–{:.3})", i.lo, i.hi))
}

impl Report for GainTable {
    fn document(&self) -> Document {
        let mut doc = Document::default();
        let (r, t) = (&self.reference, &self.target);
        for f in [r, t] {
            warnings(&mut doc, f, "; the gains below rest on this fit");
        }
        doc.line(format!(
            "gamma: {} {:.3}{}, {} {:.3}{}",
            r.group,
            r.gamma,
            interval_text(&self.gamma_reference_interval),
            t.group,
            t.gamma,
            interval_text(&self.gamma_target_interval)
        ));
        if let Some(b) = self.bootstrap {
            doc.line(format!(
                "bootstrap: {} resamples of {} cells, seed {}",
                b.resamples, self.cells, b.seed
            ));
            if b.resamples < crate::fit::bootstrap::MIN_INTERVAL_RESAMPLES {
                doc.line(format!(
                    "warning: with fewer than {} resamples each interval's ends are the \
                     extreme resamples, not a 95% interval",
                    crate::fit::bootstrap::MIN_INTERVAL_RESAMPLES
                ));
            }
        }
        let mut tab = Table::new([
            "compute C".to_owned(),
            "S".to_owned(),
            "CE gain".to_owned(),
            "95% interval".to_owned(),
            format!("L* {}", r.group),
            format!("L* {}", t.group),
            format!("TPP {}", r.group),
            format!("TPP {}", t.group),
        ])
        .data();
        for row in &self.rows {
            tab.rows.push(vec![
                Field::shown(format!("{:.0e}", row.compute), row.compute),
                fixed(row.sparsity, 2),
                match row.gain {
                    Some(g) => Field::shown(format!("{:.1}%", g * 100.0), g),
                    None => Field::text("unreachable"),
                },
                match row.gain_interval {
                    Some(i) => Field::shown(
                        format!("{:.1}% – {:.1}%", i.lo * 100.0, i.hi * 100.0),
                        format!("{} {}", i.lo, i.hi),
                    ),
                    None => Field::text("-"),
                },
                fixed(row.loss_reference, 4),
                fixed(row.loss_target, 4),
                fixed(row.tpp_reference, 1),
                fixed(row.tpp_target, 1),
            ]);
        }
        doc.table(tab);
        doc
    }
}

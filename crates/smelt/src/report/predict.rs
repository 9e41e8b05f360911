//! The layout of a step-time prediction (`smelt predict`).

use super::{Document, Field, Report, Table};
use crate::time::{ModelPrediction, PredictReport};

fn seconds(s: f64) -> Field {
    Field::shown(seconds_text(s), s)
}

/// `s` seconds in the unit that suits it (`1.234 µs`).
pub(super) fn seconds_text(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else if s >= 1e-6 {
        format!("{:.3} µs", s * 1e6)
    } else {
        format!("{:.3} ns", s * 1e9)
    }
}

fn pct(x: f64) -> Field {
    Field::shown(format!("{:.1}%", x * 100.0), x)
}

impl PredictReport {
    fn model_table(m: &ModelPrediction) -> Table {
        let mut t = Table::new([
            "model",
            "component",
            if m.lower_bound {
                "seconds (lower bound)"
            } else {
                "seconds"
            },
            "time share",
            "compute-bound",
            "memory-bound",
            "launch",
        ])
        .right_from(2);
        for c in &m.components {
            let share = |x: f64| pct(if c.seconds > 0.0 { x / c.seconds } else { 0.0 });
            t.rows.push(vec![
                Field::text(&m.name),
                Field::text(c.component.as_str()),
                seconds(c.seconds),
                pct(c.time_share),
                share(c.bounds.compute),
                share(c.bounds.memory),
                share(c.bounds.launch),
            ]);
        }
        let total = m.bounds.total();
        t.rows.push(vec![
            Field::text(&m.name),
            Field::text("total"),
            seconds(m.seconds),
            pct(1.0),
            pct(m.bounds.compute / total),
            pct(m.bounds.memory / total),
            pct(m.bounds.launch / total),
        ]);
        t
    }
}

impl Report for PredictReport {
    fn document(&self) -> Document {
        let lower = self.models.iter().any(|m| m.lower_bound);
        let mut doc = Document::titled(if lower {
            "predicted step time of the layer stack: a lower bound (uncalibrated)"
        } else {
            "predicted step time of the layer stack"
        });
        doc.line(self.basis.summary());
        doc.line(format!("device figures: {}", self.basis.device.source));
        let mut t = Self::model_table(&self.models[0]);
        t.data = true;
        for m in &self.models[1..] {
            t.rows.extend(Self::model_table(m).rows);
        }
        doc.table(t);
        for m in &self.models {
            let (at, share) = if m.lower_bound {
                ("at least ", "at most ")
            } else {
                ("", "")
            };
            doc.line(format!(
                "{}: {} tokens, {} layer executions, {} launches: {at}{:.4e} s per token \
                 ({share}{:.1}% of the peak in the cost model's FLOPs; not an MFU under a \
                 launcher's convention)",
                m.name,
                m.tokens,
                m.layer_executions,
                m.launches,
                m.seconds_per_token,
                100.0 * m.cost_flops_share_of_peak
            ));
        }
        if let (Some(t), Some(f)) = (self.time_ratio, self.flop_ratio) {
            let of = if lower {
                "; a ratio of lower bounds"
            } else {
                ""
            };
            doc.line(format!(
                "predicted time ratio {t:.4} (FLOP ratio {f:.4}{of}): {} / {}",
                self.models[1].name, self.models[0].name
            ));
        }
        doc
    }
}

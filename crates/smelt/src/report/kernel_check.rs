//! The layout of `smelt validate-time --bench`: each measured GEMM shape beside the step
//! model's prediction ([`crate::time::step::kernel_check`]).

use super::predict::seconds_text;
use super::{Document, Field, Format, Report, Table};
use crate::time::step::kernel_check::{KernelCheck, KernelClass};

fn class_name(c: KernelClass) -> &'static str {
    match c {
        KernelClass::Gemm => "GEMM",
        KernelClass::Grouped => "experts (grouped curve)",
    }
}

fn error(x: f64) -> Field {
    Field::shown(format!("{:+.1}%", x * 100.0), x)
}

impl Report for KernelCheck {
    fn document(&self) -> Document {
        let mut doc = Document::titled(format!(
            "step model's kernel predictions on {} against {} (measured on {})",
            self.card, self.source, self.device
        ));
        doc.line(format!(
            "per launch F / (e x P) + launch: P {:.1} TFLOP/s (dense bf16), e {:.4} (best-shape \
             GEMM share; the routed experts' times the grouped curve at their rows per expert), \
             launch {}",
            self.peak_flops_per_second / 1e12,
            self.gemm_share,
            seconds_text(self.launch_seconds)
        ));
        let mut t = Table::new([
            "model",
            "component",
            "pass",
            "m x n x k",
            "batch",
            "launches",
            "measured",
            "predicted",
            "error",
        ])
        .right_from(3)
        .data();
        for r in &self.rows {
            let k = &r.kernel;
            t.rows.push(vec![
                Field::text(r.model.clone()),
                Field::text(format!("{:?}", k.component).to_lowercase()),
                Field::text(format!("{:?}", k.pass).to_lowercase()),
                Field::text(format!("{} x {} x {}", k.m, k.n, k.k)),
                Field::text(k.batch.to_string()),
                Field::text(k.count.to_string()),
                Field::shown(seconds_text(r.measured_seconds), r.measured_seconds),
                Field::shown(seconds_text(r.predicted_seconds), r.predicted_seconds),
                error(r.error),
            ]);
        }
        doc.table(t);
        let mut s = Table::new([
            "class",
            "shapes",
            "median |error|",
            "summed error",
            "measured",
        ])
        .right_from(1);
        for c in &self.classes {
            s.rows.push(vec![
                Field::text(class_name(c.class)),
                Field::text(c.kernels.to_string()),
                Field::shown(
                    format!("{:.1}%", c.median_abs_error * 100.0),
                    c.median_abs_error,
                ),
                error(c.total_error),
                Field::shown(seconds_text(c.measured_seconds), c.measured_seconds),
            ]);
        }
        doc.table(s);
        doc.line(format!(
            "not predicted: {} attention-core shapes (tiles and softmax; the step model costs \
             attention as one fused kernel), {:.1}% of the measured time",
            self.not_predicted,
            self.not_predicted_time_share * 100.0
        ));
        doc
    }

    fn formats(&self) -> &'static [Format] {
        &[Format::Table, Format::Json, Format::Csv, Format::Markdown]
    }
}

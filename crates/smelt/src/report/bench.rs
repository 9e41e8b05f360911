//! The layout of a kernel benchmark (`smelt bench`).

use super::{Document, Field, Format, Report, Table, group_digits, short};
use crate::bench::{Backend, BenchReport};
use crate::plan::TILE;

fn rate(x: f64) -> String {
    if x >= 1e12 {
        format!("{:.1} TFLOP/s", x / 1e12)
    } else {
        format!("{:.1} GFLOP/s", x / 1e9)
    }
}

fn seconds(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{:.3} µs", s * 1e6)
    }
}

fn flops_text(x: f64) -> String {
    if x.fract() == 0.0 && x < 1e18 {
        group_digits(x as u128)
    } else {
        format!("{x:.3}")
    }
}

fn pct(x: f64) -> Field {
    Field::shown(format!("{:.1}%", x * 100.0), x)
}

impl Report for BenchReport {
    fn document(&self) -> Document {
        let backend = match self.backend {
            Backend::Cpu => "CPU",
            Backend::Cuda => "CUDA",
        };
        let mut doc = Document::titled(format!("{backend} backend: {}", self.device));
        let names = self.models.iter().map(|m| m.name.as_str());
        match self.workloads.as_slice() {
            [one] => doc.line(format!("workload: {one}")),
            many => {
                for (name, w) in names.zip(many) {
                    doc.line(format!("workload of {name}: {w}"));
                }
            }
        }
        doc.line(format!(
            "ceiling (large square GEMM): {}, the median of {} (rounds spread {:.1}%){}",
            rate(self.ceiling_flops_per_second),
            crate::bench::rounds(self.ceiling_rounds.len()),
            100.0 * self.ceiling_spread,
            match (
                self.peak_flops_per_second,
                &self.peak_source,
                self.ceiling_of_peak
            ) {
                (Some(p), Some(src), Some(share)) => {
                    format!("; {:.1}% of the {} peak ({src})", 100.0 * share, rate(p))
                }
                _ => String::new(),
            }
        ));
        for m in &self.models {
            self.model_lines(&mut doc, m);
        }
        if let (Some(t), Some(fr)) = (self.time_ratio_stats, self.flop_ratio) {
            doc.line("");
            doc.line(self.ratio_line(&t, fr));
        }
        doc
    }

    fn formats(&self) -> &'static [Format] {
        &[Format::Table, Format::Json, Format::Markdown, Format::Toml]
    }
}

impl BenchReport {
    /// One model's lines: its batch, the FLOP check, the component table, the launch-bound
    /// shapes and the per-token figures.
    fn model_lines(&self, doc: &mut Document, m: &crate::bench::LayerBench) {
        doc.line("");
        doc.line(format!(
            "{}: {} layer executions; batch of {} tokens in {} documents; {} kernel shapes, {} launches per layer execution",
            m.name,
            m.layer_executions,
            group_digits(u128::from(m.tokens)),
            m.documents,
            m.kernel_shapes,
            group_digits(u128::from(m.launches))
        ));
        doc.line(format!(
            "FLOP check (training, per token, one layer execution): cost model {}, executed plan {}: {}",
            flops_text(m.analytic_flops_per_token),
            flops_text(m.plan_flops_per_token),
            if m.flops_exact { "equal, exactly" } else { "DIFFERENT" }
        ));
        let mut t = Table::new([
            "component",
            "FLOPs",
            "executed",
            "time",
            "achieved",
            "of ceiling",
            "time share",
            "FLOP share",
        ]);
        for c in &m.components {
            t.rows.push(vec![
                Field::text(c.component.as_str()),
                Field::shown(short(c.flops.as_f64()), c.flops.as_f64()),
                Field::shown(short(c.executed_flops.as_f64()), c.executed_flops.as_f64()),
                Field::shown(seconds(c.seconds), c.seconds),
                Field::shown(rate(c.flops_per_second), c.flops_per_second),
                pct(c.of_ceiling),
                pct(c.time_share),
                pct(c.flop_share),
            ]);
        }
        let total: f64 = m.components.iter().map(|c| c.flops.as_f64()).sum();
        let executed: f64 = m.components.iter().map(|c| c.executed_flops.as_f64()).sum();
        let achieved = executed / m.seconds_per_layer_execution;
        t.rows.push(vec![
            Field::text("layer execution"),
            Field::shown(short(total), total),
            Field::shown(short(executed), executed),
            Field::shown(
                seconds(m.seconds_per_layer_execution),
                m.seconds_per_layer_execution,
            ),
            Field::shown(rate(achieved), achieved),
            pct(achieved / self.ceiling_flops_per_second),
            Field::text("100%"),
            Field::text("100%"),
        ]);
        doc.table(t);
        doc.line(format!(
            "FLOPs: the cost model's (query-key pairs attended); executed: what the kernels \
             run, the attention core as a fused kernel's {TILE}x{TILE} tiles (those on the \
             diagonal computed whole) with its backward recomputing the scores; achieved \
             and of ceiling: executed FLOPs over time"
        ));
        if let Some(floor) = self.launch_floor_seconds {
            doc.line(format!(
                "launch-bound: {} of {} kernel shapes (time per launch under {}x a 1x1x1 \
                 GEMM's, {}), {:.1}% of the time",
                m.launch_bound_shapes,
                m.kernel_shapes,
                crate::bench::LAUNCH_BOUND_FACTOR,
                seconds(floor),
                100.0 * m.launch_bound_time_share
            ));
        }
        doc.line(format!(
            "per token, all {} layer executions: {} and {} training FLOPs (rounds spread {:.1}%)",
            m.layer_executions,
            seconds(m.seconds_per_token),
            short(m.flops_per_token),
            100.0 * m.rounds_spread
        ));
    }

    /// The pair's measured time ratio with its interval, beside the FLOP ratio.
    fn ratio_line(&self, t: &crate::bench::stats::RatioStats, flop_ratio: f64) -> String {
        format!(
            "{} / {}: measured time ratio {:.3} [{:.3}, {:.3}] (median of {} interleaved \
             rounds, 95% bootstrap interval{}), FLOP ratio {:.3}",
            self.models[1].name,
            self.models[0].name,
            t.median,
            t.interval[0],
            t.interval[1],
            t.rounds,
            if t.noisy {
                "; noisy: wider than 5%, not a figure to quote"
            } else {
                ""
            },
            flop_ratio
        )
    }
}

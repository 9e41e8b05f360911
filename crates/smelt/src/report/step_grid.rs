//! The layout of a grid's training-step predictions (`smelt grid --predict CARD
//! --global-batch N`): after the grid, a table of each cell's Baseline and looped step
//! times, their ratio and its drivers ([`crate::study::StepGrid`]).

use serde::Serialize;

use super::predict::seconds_text;
use super::{Block, Document, Field, Format, Report, Table};
use crate::model::Training;
use crate::study::{CellStep, LayoutSource, ModelStep, StepGrid, StepParts};
use crate::time::step::report::MemoryVerdict;

/// A report with, after it, a grid's step-time predictions: the JSON gains `step_time`,
/// the human formats a table, and CSV writes that table.
#[derive(Debug, Serialize)]
pub struct WithStepTimes<'a, R: Report> {
    /// The report.
    #[serde(flatten)]
    pub report: &'a R,
    /// The predictions.
    pub step_time: &'a StepGrid,
}

impl<'a, R: Report> WithStepTimes<'a, R> {
    /// `report` followed by `step_time`.
    pub fn new(report: &'a R, step_time: &'a StepGrid) -> Self {
        Self { report, step_time }
    }

    fn extend(&self, mut doc: Document, wide: bool) -> Document {
        for b in &mut doc.blocks {
            if let Block::Table(t) = b {
                t.data = false;
            }
        }
        section(self.step_time, wide, &mut doc);
        doc
    }
}

impl<R: Report> Report for WithStepTimes<'_, R> {
    fn document(&self) -> Document {
        self.extend(self.report.document(), true)
    }

    fn compact(&self) -> Document {
        self.extend(self.report.compact(), false)
    }

    fn formats(&self) -> &'static [Format] {
        &[Format::Table, Format::Json, Format::Csv, Format::Markdown]
    }
}

/// `tp 1 ep 8 pp 1 ...`: a layout in one line.
pub(crate) fn layout_text(t: &Training) -> String {
    format!(
        "tp {} ep {} pp {} vp {} cp {} dp {} ({} GPUs), zero {}, micro-batch {}",
        t.tp,
        t.ep,
        t.pp,
        t.vp,
        t.cp,
        t.dp,
        t.gpus(),
        t.zero,
        t.micro_batch
    )
}

fn head(g: &StepGrid, doc: &mut Document) {
    let b = &g.basis;
    doc.title(format!(
        "Training step on {} ({}): looped / Baseline step time, the same global batch",
        b.card, b.system.name
    ));
    let mut layouts: Vec<Training> = g.cells.iter().map(|c| c.baseline.training).collect();
    layouts.dedup();
    let from = match b.layout_source {
        LayoutSource::Flags => "the flags",
        LayoutSource::GridFile => "the grid file's [training]",
        LayoutSource::Defaults => "no layout given: the defaults",
    };
    doc.line(match layouts.as_slice() {
        [one] => format!("layout ({from}): {}", layout_text(one)),
        _ => format!("layout ({from}): each cell's own (step_time.cells[].baseline.training)"),
    });
    doc.line(format!(
        "global batch {} sequences, recompute {}, {}; a looped model's loop on one pipeline \
         stage",
        b.global_batch,
        serde_plain(&b.recompute),
        serde_plain(&b.framework)
    ));
    doc.line(
        "drivers: each part's change over the Baseline's step, adding up to ratio - 1: experts \
         (grouped GEMMs), all-to-all (EP dispatch and combine per MoE layer execution), host (launch time beyond \
         the GPU's), imbalance (the loop's uneven pipeline stages), other (the rest)",
    );
}

/// A serde enum's name (`megatron-core`, `selective`).
pub(super) fn serde_plain<T: Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn fits(m: &ModelStep) -> &'static str {
    match m.step.as_ref().map(|s| &s.memory) {
        Some(MemoryVerdict::Fits { .. }) => "yes",
        Some(MemoryVerdict::DoesNotFit { .. }) => "NO",
        Some(MemoryVerdict::NotChecked { .. }) => "?",
        None => "-",
    }
}

fn pair(c: &CellStep, f: impl Fn(&StepParts) -> f64, show: impl Fn(f64) -> String) -> Field {
    match (&c.baseline.parts, &c.looped.parts) {
        (Some(b), Some(l)) => Field::text(format!("{}→{}", show(f(b)), show(f(l)))),
        _ => Field::text("-"),
    }
}

fn raw(p: &Option<StepParts>, f: impl Fn(&StepParts) -> f64) -> Field {
    match p {
        Some(p) => Field::shown(format!("{}", f(p)), f(p)),
        None => Field::blank(),
    }
}

/// Seconds to three significant digits, shortest unit (`803 ms`, `1.20 s`).
fn short_seconds(s: f64) -> String {
    let (x, unit) = if s >= 1.0 {
        (s, "s")
    } else if s >= 1e-3 {
        (s * 1e3, "ms")
    } else {
        (s * 1e6, "µs")
    };
    let digits = if x >= 100.0 {
        0
    } else if x >= 10.0 {
        1
    } else {
        2
    };
    format!("{x:.digits$} {unit}")
}

fn step_field(m: &ModelStep, wide: bool) -> Field {
    match &m.step {
        Some(s) if wide => Field::shown(seconds_text(s.step_seconds), s.step_seconds),
        Some(s) => Field::shown(short_seconds(s.step_seconds), s.step_seconds),
        None => Field::text("refused"),
    }
}

/// A driver's entry: a signed percentage of the Baseline's step, one decimal to read.
fn driver(x: f64) -> Field {
    Field::shown(format!("{:+.1}%", x * 100.0), x)
}

fn section(g: &StepGrid, wide: bool, doc: &mut Document) {
    head(g, doc);
    let mut header: Vec<&str> = vec!["cell", "Baseline step", "looped step", "ratio"];
    if wide {
        header.extend([
            "Baseline rows/expert",
            "looped rows/expert",
            "Baseline eff",
            "looped eff",
        ]);
    } else {
        header.push("eff");
    }
    header.extend([
        "experts",
        "all-to-all",
        "host",
        "imbalance",
        "other",
        "fits",
    ]);
    let mut t = Table::new(header).right_from(1).data();
    for c in &g.cells {
        let mut row = vec![
            Field::text(format!("{} {}", c.scale, c.sparsity_label)),
            step_field(&c.baseline, wide),
            step_field(&c.looped, wide),
            c.ratio.map_or(Field::text("n/a"), Field::ratio),
        ];
        if wide {
            let (b, l) = (&c.baseline.parts, &c.looped.parts);
            row.extend([
                raw(b, |p| p.rows_per_expert.round()),
                raw(l, |p| p.rows_per_expert.round()),
                raw(b, |p| p.expert_efficiency),
                raw(l, |p| p.expert_efficiency),
            ]);
        } else {
            row.push(pair(c, |p| p.expert_efficiency, |x| format!("{x:.2}")));
        }
        match &c.drivers {
            Some(d) => {
                row.extend([d.experts, d.all_to_all, d.host, d.imbalance, d.other].map(driver))
            }
            None => row.extend((0..5).map(|_| Field::text("-"))),
        }
        row.push(Field::text(format!(
            "{}→{}",
            fits(&c.baseline),
            fits(&c.looped)
        )));
        t.rows.push(row);
    }
    doc.table(t);
    match (g.max_ratio, g.mean_ratio) {
        (Some(max), Some(mean)) => doc.line(format!(
            "largest step-time ratio {max:.4}, mean step-time ratio {mean:.4} ({} of {} cells \
             predicted)",
            g.predicted_cells,
            g.cells.len()
        )),
        _ => doc.line(format!("no cell predicted ({} cells)", g.cells.len())),
    }
    if !wide {
        doc.line("eff: the grouped GEMMs' efficiency at their rows per expert, Baseline→looped");
    }
    doc.line(
        "fits: the layout within each GPU's memory, Baseline→looped (training-memory model; ?: \
         not checked, the JSON says why)",
    );
    notes(g, doc);
}

/// The grid's notes below its table: looped models that do not fit, Baselines timed as a
/// mean stage, refusals.
fn notes(g: &StepGrid, doc: &mut Document) {
    let unfit: Vec<String> = (g.cells.iter())
        .filter(|c| c.looped_does_not_fit)
        .map(|c| format!("{} {}", c.scale, c.sparsity_label))
        .collect();
    if !unfit.is_empty() {
        doc.line(format!(
            "the looped model does not fit where its Baseline does: {} (its ratio is for a \
             layout it cannot train with; see the memory verdicts in the JSON)",
            unfit.join(", ")
        ));
    }
    let mean_stage: Vec<String> = (g.cells.iter())
        .filter(|c| (c.baseline.step.as_ref()).is_some_and(|r| r.step.mean_stage_layers.is_some()))
        .map(|c| format!("{} {}", c.scale, c.sparsity_label))
        .collect();
    if !mean_stage.is_empty() {
        doc.line(format!(
            "pp · vp does not divide the Baseline's layers in {}: timed as the mean stage, a \
             split Megatron-Core builds only as an uneven one (the JSON's \
             step.mean_stage_layers)",
            mean_stage.join(", ")
        ));
    }
    for c in &g.cells {
        for (who, m) in [("Baseline", &c.baseline), ("looped", &c.looped)] {
            if let Some(why) = &m.refused {
                doc.line(format!(
                    "{} {} {who}: refused: {why}",
                    c.scale, c.sparsity_label
                ));
            }
        }
    }
}

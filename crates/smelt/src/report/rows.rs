//! The layouts of row-shaped reports: a grid (`smelt grid`) and a sweep (`smelt sweep`).
//!
//! Every column ([`Report::document`]): the row's labels, the sparsities, the six shape
//! knobs (Baseline→looped) and, with a hybrid Baseline, the recurrent mixer's shape, one
//! ratio per budget, the verdict. Compact
//! ([`Report::compact`]): the row's label, only the shape knobs (and mixer) that change in some row
//! (a terminal too narrow for them leaves out the last ones first), the ratios under their
//! budget's letter, the verdict; a grid's summary rows move to a table of their own, so
//! that the label column stays narrow.

use super::short;
use super::{Document, Field, NOT_CHECKED, Report, SHAPE_COLUMNS, Table, label};
use crate::cost::{BudgetKind, PeakPair, PerBudget, Ratios};
use crate::model::{Model, ModelSpec};
use crate::study::{GridCell, GridReport, SweepReport};

fn arrow((a, b): (u64, u64)) -> Field {
    if a == b {
        Field::text(a.to_string())
    } else {
        Field::shown(format!("{a}→{b}"), b)
    }
}

/// The shape knobs of [`SHAPE_COLUMNS`], Baseline and looped.
fn knobs(base: &Model, looped: &Model) -> [(u64, u64); 6] {
    [
        (base.hidden, looped.hidden),
        (base.moe.experts, looped.moe.experts),
        (base.moe.expert_ffn, looped.moe.expert_ffn),
        (base.heads, looped.heads),
        (base.kv_heads, looped.kv_heads),
        (base.head_dim, looped.head_dim),
    ]
}

fn shape(base: &Model, looped: &Model) -> impl Iterator<Item = Field> {
    knobs(base, looped).into_iter().map(arrow)
}

/// The recurrent mixer's shape, Baseline→looped (blank without recurrent layers).
fn mixer_field(base: &Model, looped: &Model) -> Field {
    let text = |m: &Model| m.knobs().mixer.map(|x| x.shape_compact());
    match (text(base), text(looped)) {
        // Like the other knobs: Baseline→looped to read, the looped shape as data.
        (Some(a), Some(b)) if a != b => Field::shown(format!("{a}→{b}"), b),
        (_, Some(b)) => Field::text(b),
        _ => Field::blank(),
    }
}

/// Whether rows of `pairs` (Baseline, looped) show the recurrent mixer's column: some
/// Baseline has recurrent layers and, in a compact table (`compact`), some row changes
/// their mixer's shape.
fn mixer_shown<'a>(mut pairs: impl Iterator<Item = (&'a Model, &'a Model)>, compact: bool) -> bool {
    pairs.any(|(b, l)| {
        let (b, l) = (b.knobs().mixer, l.knobs().mixer);
        b.is_some() && (!compact || b != l)
    })
}

/// Which of the shape knobs change in some row, of `pairs` (Baseline, looped) per row.
fn changed<'a>(pairs: impl Iterator<Item = (&'a Model, &'a Model)>) -> [bool; 6] {
    let mut any = [false; 6];
    for (base, looped) in pairs {
        for (seen, (a, b)) in any.iter_mut().zip(knobs(base, looped)) {
            *seen |= a != b;
        }
    }
    any
}

/// The headers of the changed knobs.
fn changed_headers(changed: [bool; 6]) -> impl Iterator<Item = String> {
    SHAPE_COLUMNS
        .into_iter()
        .zip(changed)
        .filter(|(_, c)| *c)
        .map(|(h, _)| h.to_owned())
}

/// The columns of the changed knobs in a compact table (after its label column), the last
/// first: those a narrow terminal leaves out.
fn knob_columns(changed: [bool; 6]) -> impl Iterator<Item = usize> {
    let shown = changed.iter().filter(|c| **c).count();
    (1..=shown).rev()
}

/// The fields of the changed knobs of one row.
fn changed_shape(base: &Model, looped: &Model, changed: [bool; 6]) -> impl Iterator<Item = Field> {
    shape(base, looped)
        .zip(changed)
        .filter(|(_, c)| *c)
        .map(|(f, _)| f)
}

/// A column per budget, named by `name` from its label.
fn budget_columns(name: fn(label::Label) -> String) -> impl Iterator<Item = String> {
    BudgetKind::ALL.into_iter().map(move |k| name(label(k)))
}

/// The ratio per budget of a row whose Baseline is `base`: `n/a` for a budget the model
/// does not count (both values 0, their ratio meaningless).
fn ratios<'a>(r: &'a Ratios, base: &ModelSpec) -> impl Iterator<Item = Field> + 'a {
    let counted = PerBudget::from_fn(|k| k.counted_for(&base.model, &base.counting));
    r.iter().map(move |(k, x)| match counted[k] {
        false => Field::text("n/a"),
        true => Field::ratio(*x),
    })
}

/// What the compact tables' budget letters stand for.
fn letters_line() -> String {
    let letters: Vec<&str> = BudgetKind::ALL.iter().map(|&k| label(k).letter).collect();
    format!("{}: looped / Baseline", letters.join(", "))
}

/// A grid cell's verdict: `yes`, or `no:` and the budgets outside their tolerance, each
/// named by `name`; [`NOT_CHECKED`] when its budget sets no tolerance.
fn verdict(c: &GridCell, name: fn(BudgetKind) -> &'static str) -> Field {
    Field::text(match c.within_tolerance {
        Some(true) => "yes".to_owned(),
        Some(false) => {
            let broken: Vec<&str> = c.broken.iter().map(|&k| name(k)).collect();
            format!("no: {}", broken.join(", "))
        }
        None => NOT_CHECKED.to_owned(),
    })
}

/// The line under a table whose rows set no tolerance (`what`: the grid file or the
/// budget), so that the verdict column's [`NOT_CHECKED`] is not read as a pass.
fn unchecked_line(doc: &mut Document, verdicts: &[Option<bool>], what: &str) {
    if verdicts.iter().any(Option::is_none) {
        doc.line(format!(
            "in tolerance: {NOT_CHECKED} ({what} sets no [tolerance], so the residuals are \
             reported, not checked)"
        ));
    }
}

/// A row's per-GPU peak ratio (looped / Baseline), `n/a` when the layout does not split
/// the looped model.
fn peak_field(p: Option<&PeakPair>) -> Field {
    match p {
        Some(PeakPair {
            ratio: Some(r),
            note: Some(_),
            ..
        }) => Field::shown(format!("{r:.4}~"), *r),
        Some(PeakPair { ratio: Some(r), .. }) => Field::ratio(*r),
        Some(_) => Field::text("n/a"),
        None => Field::text("-"),
    }
}

/// The line under a grid or sweep that explains `~` in its `M` column, when a row has it.
pub(crate) fn peak_marks<'a>(
    pairs: impl IntoIterator<Item = Option<&'a PeakPair>>,
) -> Option<String> {
    pairs
        .into_iter()
        .flatten()
        .any(|p| p.ratio.is_some() && p.note.is_some())
        .then(|| {
            "M~: the loop crosses pipeline stages, a schedule the 1F1B count of micro-batches \
             in flight does not describe: that peak is not exact (the JSON's note says why)"
                .to_owned()
        })
}

/// The line under a match, grid or sweep that says what the per-GPU peak column is, or
/// `None` without a layout.
pub(crate) fn peak_line(
    p: Option<&PeakPair>,
    t: Option<&crate::model::Training>,
) -> Option<String> {
    let t = t?;
    let layout = format!(
        "tp {} ep {} pp {} dp {}, ZeRO-{}, micro-batch {}",
        t.tp, t.ep, t.pp, t.dp, t.zero, t.micro_batch
    );
    Some(match p {
        Some(PeakPair {
            ratio: Some(r),
            looped: Some(l),
            baseline,
            note,
            ..
        }) => format!(
            "training memory peak per GPU ({layout}): Baseline {} bytes, looped {} bytes, looped / Baseline {r:.4}{}",
            short(baseline.as_f64()),
            short(l.as_f64()),
            note.as_ref()
                .map(|n| format!("; not exact: {n}"))
                .unwrap_or_default()
        ),
        Some(PeakPair {
            refused: Some(why), ..
        }) => {
            format!("training memory peak per GPU ({layout}): not computed: {why}")
        }
        _ => format!(
            "M: training memory peak per GPU, looped / Baseline ({layout}; n/a: the layout does not split the looped model, the JSON says why)"
        ),
    })
}

/// A cell's time ratio with its interval (`*`: noisy, not a figure to quote), or why it
/// was not timed.
fn time_field(c: &GridCell) -> Field {
    match (&c.time, &c.time_failed) {
        (Some(t), _) => Field::text(format!(
            "{:.3} [{:.3}, {:.3}]{}",
            t.ratio,
            t.interval[0],
            t.interval[1],
            if t.noisy { "*" } else { "" }
        )),
        (None, Some(_)) => Field::text("failed"),
        (None, None) => Field::text("-"),
    }
}

/// A cell's predicted time ratio.
fn predicted_field(c: &GridCell) -> Field {
    match &c.predicted {
        Some(p) => Field::ratio(p.ratio),
        None => Field::text("-"),
    }
}

/// The summary of the time ratios in words.
fn time_summary_line(tr: &crate::study::TimeSummary) -> String {
    let figure = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.4}"));
    let mut line = format!(
        "largest time ratio {}, mean time ratio {} (over the cells quoted)",
        figure(tr.max_ratio),
        figure(tr.mean_ratio)
    );
    if tr.noisy_cells > 0 {
        line.push_str(&format!(
            "; {} noisy (*: interval wider than {:.0}% of the ratio, not quoted)",
            tr.noisy_cells,
            100.0 * crate::bench::stats::NOISY_WIDTH
        ));
    }
    if tr.failed_cells > 0 {
        line.push_str(&format!(
            "; {} not timed (time_failed in the JSON says why)",
            tr.failed_cells
        ));
    }
    line
}

/// The grid's summary rows: a label and a value per budget.
fn grid_summary(r: &GridReport) -> [(&'static str, PerBudget<Field>); 3] {
    let s = &r.summary;
    [
        (
            "max |residual|, sparse cells",
            s.max_abs_residual.map(Field::percent),
        ),
        (
            "mean residual, sparse cells",
            s.mean_residual.map(Field::percent),
        ),
        (
            "cells where looped gets more",
            s.looped_gets_more.map(|n| Field::text(n.to_string())),
        ),
    ]
}

impl GridReport {
    /// The line saying the verdict column checked nothing, when cells set no tolerance.
    fn unchecked_line(&self, doc: &mut Document) {
        let verdicts: Vec<_> = self.cells.iter().map(|c| c.within_tolerance).collect();
        unchecked_line(doc, &verdicts, "the grid file");
    }

    /// The title and the workload (and time) lines of both layouts.
    fn head(&self) -> Document {
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
        if let Some(tr) = &self.summary.time_ratio {
            doc.line(format!(
                "T ratio: measured looped / Baseline time per token of the layer stack, on {}",
                tr.device
            ));
        }
        if let Some(p) = &self.summary.predicted {
            doc.line(format!(
                "P ratio: predicted looped / Baseline time per token of the layer stack on one GPU \
                 (no layout, no communication; --global-batch predicts a training step), {}",
                p.basis.summary()
            ));
        }
        doc
    }

    fn timed(&self) -> bool {
        self.cells.iter().any(|c| c.time.is_some())
    }

    fn predicted(&self) -> bool {
        self.cells.iter().any(|c| c.predicted.is_some())
    }

    /// The line with the largest and mean predicted ratio.
    fn predicted_line(&self, doc: &mut Document) {
        if let Some(p) = &self.summary.predicted {
            doc.line(format!(
                "largest predicted time ratio {:.4}, mean predicted time ratio {:.4}",
                p.max_ratio, p.mean_ratio
            ));
        }
    }

    /// Whether a layout was given (the per-GPU peak column).
    fn peaked(&self) -> bool {
        self.cells.iter().any(|c| c.peak_per_gpu.is_some())
    }

    /// The line saying what `M` is, when a layout was given.
    fn peak_note(&self, doc: &mut Document) {
        let t = self.cells.iter().find_map(|c| c.baseline.training.as_ref());
        if self.peaked()
            && let Some(line) = peak_line(None, t)
        {
            doc.line(line);
            if let Some(marks) = peak_marks(self.cells.iter().map(|c| c.peak_per_gpu.as_ref())) {
                doc.line(marks);
            }
        }
    }
}

impl Report for GridReport {
    fn document(&self) -> Document {
        let mut doc = self.head();
        let timed = self.timed();
        let predicted = self.predicted();
        let peak = self.peaked();
        self.peak_note(&mut doc);
        let first = ["scale", "sparsity", "sparse", "S base", "S looped"];
        let mixer = mixer_shown(
            self.cells
                .iter()
                .map(|c| (&c.baseline.model, &c.looped.model)),
            false,
        );
        let header = first.iter().chain(&SHAPE_COLUMNS).map(|s| s.to_string());
        let header = header
            .chain(mixer.then(|| "recurrent".to_owned()))
            .chain(budget_columns(label::Label::ratio))
            .chain(peak.then(|| "M ratio".to_owned()))
            .chain(["max w|r|".to_owned(), "in tolerance".to_owned()])
            .chain(timed.then(|| "T ratio".to_owned()))
            .chain(predicted.then(|| "P ratio".to_owned()));
        let mut t = Table::new(header).right_from(2).data();
        for c in &self.cells {
            let mut r = vec![
                Field::text(&c.scale),
                Field::text(&c.sparsity_label),
                Field::text(c.sparse.to_string()),
                Field::share(c.sparsity.baseline),
                Field::share(c.sparsity.looped),
            ];
            r.extend(shape(&c.baseline.model, &c.looped.model));
            r.extend(mixer.then(|| mixer_field(&c.baseline.model, &c.looped.model)));
            r.extend(ratios(&c.ratios, &c.baseline));
            r.extend(peak.then(|| peak_field(c.peak_per_gpu.as_ref())));
            r.push(Field::shown(format!("{:.4}", c.score[0]), c.score[0]));
            r.push(verdict(c, BudgetKind::as_str));
            r.extend(timed.then(|| time_field(c)));
            r.extend(predicted.then(|| predicted_field(c)));
            t.rows.push(r);
        }
        // A summary row: its label, blanks to the ratios, a value per budget, blanks after.
        let row = |label: &str, values: Vec<Field>| {
            let mut r = vec![Field::text(label)];
            let shape = SHAPE_COLUMNS.len() + usize::from(mixer);
            r.extend((0..first.len() - 1 + shape).map(|_| Field::blank()));
            r.extend(values);
            let after = 2 + usize::from(timed) + usize::from(peak) + usize::from(predicted);
            r.extend((0..after).map(|_| Field::blank()));
            r
        };
        for (label, values) in grid_summary(self) {
            t.summary
                .push(row(label, values.iter().map(|(_, f)| f.clone()).collect()));
        }
        if let Some(tr) = &self.summary.time_ratio {
            for (label, v) in [
                ("largest time ratio", tr.max_ratio),
                ("mean time ratio", tr.mean_ratio),
            ] {
                let blanks = BudgetKind::ALL.iter().map(|_| Field::blank()).collect();
                let mut r = row(label, blanks);
                let at = r.len() - 1 - usize::from(predicted);
                r[at] = v.map_or(Field::text("-"), Field::ratio);
                t.summary.push(r);
            }
        }
        doc.table(t);
        self.unchecked_line(&mut doc);
        if let Some(tr) = &self.summary.time_ratio {
            doc.line(time_summary_line(tr));
        }
        self.predicted_line(&mut doc);
        doc
    }

    fn compact(&self) -> Document {
        let mut doc = self.head();
        doc.line(letters_line());
        let timed = self.timed();
        let predicted = self.predicted();
        let peak = self.peaked();
        self.peak_note(&mut doc);
        let pairs = || {
            self.cells
                .iter()
                .map(|c| (&c.baseline.model, &c.looped.model))
        };
        let changed = changed(pairs());
        let mixer = mixer_shown(pairs(), true);
        let header = std::iter::once("cell".to_owned())
            .chain(changed_headers(changed))
            .chain(mixer.then(|| "recurrent".to_owned()))
            .chain(budget_columns(|l| l.letter.to_owned()))
            .chain(peak.then(|| "M".to_owned()))
            .chain(["in tolerance".to_owned()])
            .chain(timed.then(|| "T ratio".to_owned()))
            .chain(predicted.then(|| "P ratio".to_owned()));
        let mut t = Table::new(header)
            .right_from(1)
            .droppable(knob_columns(changed));
        for c in &self.cells {
            let mut r = vec![Field::text(format!("{} {}", c.scale, c.sparsity_label))];
            r.extend(changed_shape(&c.baseline.model, &c.looped.model, changed));
            r.extend(mixer.then(|| mixer_field(&c.baseline.model, &c.looped.model)));
            r.extend(ratios(&c.ratios, &c.baseline));
            r.extend(peak.then(|| peak_field(c.peak_per_gpu.as_ref())));
            r.push(verdict(c, |k| label(k).letter));
            r.extend(timed.then(|| time_field(c)));
            r.extend(predicted.then(|| predicted_field(c)));
            t.rows.push(r);
        }
        doc.table(t);
        self.unchecked_line(&mut doc);
        let header =
            std::iter::once("summary".to_owned()).chain(budget_columns(|l| l.letter.to_owned()));
        let mut s = Table::new(header).right_from(1);
        for (label, values) in grid_summary(self) {
            let mut r = vec![Field::text(label)];
            r.extend(values.iter().map(|(_, f)| f.clone()));
            s.rows.push(r);
        }
        doc.table(s);
        if let Some(tr) = &self.summary.time_ratio {
            doc.line(time_summary_line(tr));
        }
        self.predicted_line(&mut doc);
        doc
    }
}

impl SweepReport {
    /// Whether a layout was given (the per-GPU peak column).
    fn peaked(&self) -> bool {
        self.rows.iter().any(|r| r.peak_per_gpu.is_some())
    }

    fn head(&self) -> Document {
        let mut doc = Document::titled(format!(
            "{}: sweep over {}, every candidate matched to {}",
            self.name.as_deref().unwrap_or("budget"),
            self.knob.as_str(),
            self.baseline.name.as_deref().unwrap_or("the Baseline")
        ));
        doc.line(format!("workload: {}", self.baseline.workload.summary()));
        if self.peaked()
            && let Some(line) = peak_line(None, self.baseline.training.as_ref())
        {
            doc.line(line);
            if let Some(marks) = peak_marks(self.rows.iter().map(|r| r.peak_per_gpu.as_ref())) {
                doc.line(marks);
            }
        }
        doc
    }
}

fn yes_no(within: Option<bool>) -> Field {
    Field::text(match within {
        Some(true) => "yes",
        Some(false) => "no",
        None => NOT_CHECKED,
    })
}

impl Report for SweepReport {
    fn document(&self) -> Document {
        let mut doc = self.head();
        let peak = self.peaked();
        let first = [self.knob.as_str(), "executions"];
        let base = &self.baseline.model;
        let mixer = mixer_shown(self.rows.iter().map(|r| (base, &r.looped.model)), false);
        let header = first.iter().chain(&SHAPE_COLUMNS).map(|s| s.to_string());
        let header = header
            .chain(mixer.then(|| "recurrent".to_owned()))
            .chain(budget_columns(label::Label::ratio))
            .chain(peak.then(|| "M ratio".to_owned()))
            .chain(["S looped".to_owned(), "in tolerance".to_owned()]);
        let mut t = Table::new(header).right_from(2).data();
        for r in &self.rows {
            let mut out = vec![
                Field::text(r.value.to_string()),
                Field::text(r.layer_executions.to_string()),
            ];
            out.extend(shape(base, &r.looped.model));
            out.extend(mixer.then(|| mixer_field(base, &r.looped.model)));
            out.extend(ratios(&r.ratios, &self.baseline));
            out.extend(peak.then(|| peak_field(r.peak_per_gpu.as_ref())));
            out.push(Field::share(r.sparsity.looped));
            out.push(yes_no(r.within_tolerance));
            t.rows.push(out);
        }
        doc.table(t);
        let verdicts: Vec<_> = self.rows.iter().map(|r| r.within_tolerance).collect();
        unchecked_line(&mut doc, &verdicts, "the budget");
        doc
    }

    fn compact(&self) -> Document {
        let mut doc = self.head();
        doc.line(letters_line());
        let peak = self.peaked();
        let base = &self.baseline.model;
        let changed = changed(self.rows.iter().map(|r| (base, &r.looped.model)));
        let mixer = mixer_shown(self.rows.iter().map(|r| (base, &r.looped.model)), true);
        let header = std::iter::once(self.knob.as_str().to_owned())
            .chain(changed_headers(changed))
            .chain(mixer.then(|| "recurrent".to_owned()))
            .chain(budget_columns(|l| l.letter.to_owned()))
            .chain(peak.then(|| "M".to_owned()))
            .chain(["in tolerance".to_owned()]);
        let mut t = Table::new(header)
            .right_from(1)
            .droppable(knob_columns(changed));
        for r in &self.rows {
            let mut out = vec![Field::text(r.value.to_string())];
            out.extend(changed_shape(base, &r.looped.model, changed));
            out.extend(mixer.then(|| mixer_field(base, &r.looped.model)));
            out.extend(ratios(&r.ratios, &self.baseline));
            out.extend(peak.then(|| peak_field(r.peak_per_gpu.as_ref())));
            out.push(yes_no(r.within_tolerance));
            t.rows.push(out);
        }
        doc.table(t);
        let verdicts: Vec<_> = self.rows.iter().map(|r| r.within_tolerance).collect();
        unchecked_line(&mut doc, &verdicts, "the budget");
        doc
    }
}

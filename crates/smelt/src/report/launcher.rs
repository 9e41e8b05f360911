//! The layouts of what launchers' logs say (`smelt cost --conventions`, `smelt mfu`, and
//! the `--conventions` section of `smelt match` and `smelt grid`).

use serde::Serialize;

use super::cost::flops;
use super::{Block, Document, Field, Format, Report, Table};
use crate::launcher_flops::{
    Convention, ConventionRefusal, Feature, LauncherFlops, LauncherPair, Mfu,
};

fn ignored(features: &[Feature]) -> String {
    let names: Vec<&str> = features.iter().map(|f| f.as_str()).collect();
    match names.is_empty() {
        true => "-".to_owned(),
        false => names.join(", "),
    }
}

/// A data-table row for each refused convention (`columns` cells, "refused" in the
/// second), and a line with its reason.
fn refusals(t: &mut Table, columns: usize, refused: &[ConventionRefusal]) -> Vec<String> {
    for r in refused {
        let mut row = vec![Field::text(r.convention.as_str()), Field::text("refused")];
        row.resize_with(columns, || Field::text(""));
        t.rows.push(row);
    }
    (refused.iter())
        .map(|r| format!("{} refused: {}", r.convention, r.reason))
        .collect()
}

fn sources(doc: &mut Document) {
    for &c in Convention::LAUNCHERS.iter() {
        doc.line(format!("{c}: {}", c.source()));
    }
}

impl Report for LauncherFlops {
    fn document(&self) -> Document {
        let mut doc = Document::titled(format!(
            "{}: per-token training FLOPs under launcher conventions",
            self.name.as_deref().unwrap_or("model")
        ));
        doc.line(format!(
            "sequence length {} (the workload's context); launchers count the {} physical \
             layers, the exact count the {} layer executions",
            self.sequence_length, self.physical_layers, self.layer_executions
        ));
        let mut t = Table::new([
            "convention",
            "ignores, of this model",
            "FLOPs/token",
            "/ exact",
        ])
        .right_from(2)
        .data();
        for c in &self.counts {
            t.rows.push(vec![
                Field::text(c.convention.as_str()),
                Field::text(ignored(&c.ignored_here)),
                Field::shown(flops(c.training_flops), c.training_flops.as_f64()),
                Field::ratio(c.ratio_to_exact),
            ]);
        }
        let reasons = refusals(&mut t, 4, &self.refused);
        doc.table(t);
        for line in reasons {
            doc.line(line);
        }
        sources(&mut doc);
        doc
    }
}

/// How the launcher section lays out its pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PairLayout {
    /// One pair, a row per convention (a match, a model against its Baseline).
    Rows,
    /// A row per pair, a column per convention (a grid).
    Cells,
}

/// A report with, after it, what each launcher convention says of its looped model(s)
/// against the Baseline: the JSON gains `launcher_flops`, the human formats a table, and
/// CSV writes that table.
#[derive(Debug, Serialize)]
pub struct WithConventions<'a, R: Report> {
    /// The report.
    #[serde(flatten)]
    pub report: &'a R,
    /// One entry per looped model (a grid's cells in order).
    pub launcher_flops: Vec<LauncherPair>,
    #[serde(skip)]
    layout: PairLayout,
}

impl<'a, R: Report> WithConventions<'a, R> {
    /// `report` (a match, a comparison) with its one pair.
    pub fn single(report: &'a R, pair: LauncherPair) -> Self {
        Self {
            report,
            launcher_flops: vec![pair],
            layout: PairLayout::Rows,
        }
    }

    /// `report` (a grid) with a pair per cell.
    pub fn cells(report: &'a R, pairs: Vec<LauncherPair>) -> Self {
        Self {
            report,
            launcher_flops: pairs,
            layout: PairLayout::Cells,
        }
    }

    /// `doc` with its tables no longer data, and the launcher section after them.
    fn extend(&self, mut doc: Document) -> Document {
        for b in &mut doc.blocks {
            if let Block::Table(t) = b {
                t.data = false;
            }
        }
        doc.title("Launcher FLOPs: what each convention's log says, looped / Baseline");
        doc.line("launchers count each physical layer once, the exact count every layer execution");
        doc.table(match self.layout {
            PairLayout::Rows => self.rows_table(),
            PairLayout::Cells => self.cells_table(),
        });
        doc
    }

    fn rows_table(&self) -> Table {
        let header = [
            "convention",
            "Baseline",
            "Baseline / exact",
            "looped",
            "looped / exact",
            "looped / Baseline",
        ];
        let mut t = Table::new(header).right_from(1).data();
        for p in &self.launcher_flops {
            let Some(exact) = p.counts.iter().find(|c| c.convention == Convention::Exact) else {
                continue;
            };
            for c in &p.counts {
                t.rows.push(vec![
                    Field::text(c.convention.as_str()),
                    Field::shown(flops(c.baseline), c.baseline.as_f64()),
                    Field::ratio(c.baseline.as_f64() / exact.baseline.as_f64()),
                    Field::shown(flops(c.looped), c.looped.as_f64()),
                    Field::ratio(c.looped.as_f64() / exact.looped.as_f64()),
                    Field::ratio(c.ratio),
                ]);
            }
        }
        t
    }

    fn cells_table(&self) -> Table {
        let header = std::iter::once("cell").chain(Convention::ALL.iter().map(|c| c.as_str()));
        let mut t = Table::new(header).right_from(1).data();
        for p in &self.launcher_flops {
            let mut row = vec![Field::text(&p.label)];
            row.extend(
                Convention::ALL
                    .iter()
                    .map(|&c| p.ratio(c).map_or_else(Field::blank, Field::ratio)),
            );
            t.rows.push(row);
        }
        t
    }
}

impl<R: Report> Report for WithConventions<'_, R> {
    fn document(&self) -> Document {
        self.extend(self.report.document())
    }

    fn compact(&self) -> Document {
        self.extend(self.report.compact())
    }

    fn formats(&self) -> &'static [Format] {
        &[Format::Table, Format::Json, Format::Csv, Format::Markdown]
    }
}

fn tflops(x: f64) -> Field {
    Field::shown(format!("{:.1}", x / 1e12), x)
}

impl Report for Mfu {
    fn document(&self) -> Document {
        let card = match self.card {
            Some(c) => c.spec().name.to_owned(),
            None => "GPUs".to_owned(),
        };
        let mut doc = Document::titled(format!(
            "{}: MFU at {} tokens/s on {} x {card}",
            self.name.as_deref().unwrap_or("model"),
            self.tokens_per_second,
            self.gpus
        ));
        doc.line(format!(
            "dense bf16 peak {:.1} TFLOP/s per GPU ({})",
            self.peak_flops_per_second / 1e12,
            self.peak_source
        ));
        let header = [
            "convention",
            "FLOPs/token",
            "TFLOP/s",
            "TFLOP/s per GPU",
            "MFU",
        ];
        let mut t = Table::new(header).right_from(1).data();
        for r in &self.rows {
            t.rows.push(vec![
                Field::text(r.convention.as_str()),
                Field::shown(flops(r.training_flops), r.training_flops.as_f64()),
                tflops(r.model_flops_per_second),
                tflops(r.per_gpu_flops_per_second),
                Field::share(r.mfu),
            ]);
        }
        let reasons = refusals(&mut t, 5, &self.refused);
        doc.table(t);
        for line in reasons {
            doc.line(line);
        }
        doc
    }
}

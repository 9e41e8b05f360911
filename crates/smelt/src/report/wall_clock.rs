//! The layout of `smelt gain --time-ratio`: the gain table, then each row's wall-clock gain
//! beside its compute gain ([`crate::fit::wall_clock`]).

use serde::Serialize;

use super::{Block, Document, Field, Format, Report, Table};
use crate::fit::GainTable;
use crate::fit::wall_clock::{TimeRatios, WallClock, WallClockRow};

/// A gain table with its wall-clock gains: the JSON gains `wall_clock`, the human formats
/// a table and a sentence per row, and CSV writes that table.
#[derive(Debug, Serialize)]
pub struct WithWallClock<'a> {
    /// The gain table.
    #[serde(flatten)]
    pub table: &'a GainTable,
    /// The wall-clock gains.
    pub wall_clock: &'a WallClock,
}

fn pct(x: f64) -> Field {
    Field::shown(format!("{:.1}%", x * 100.0), x)
}

/// `saves 9.8% of the FLOPs ... : gains 1.8% of the time`, for one row.
fn sentence(r: &WallClockRow, reference: &str) -> String {
    let at = format!(
        "C {:.0e}, S {:.2}{}",
        r.compute,
        r.sparsity,
        r.cell
            .as_ref()
            .map_or(String::new(), |c| format!(" (cell {c})"))
    );
    let (Some(g), Some(w)) = (r.compute_gain, r.wall_clock_gain) else {
        return format!("{at}: the {reference} never reaches the target's loss: no gain");
    };
    let saves = if g >= 0.0 { "saves" } else { "spends" };
    let gains = if w >= 0.0 { "gains" } else { "loses" };
    let per_token = r
        .step_ratio
        .map_or(String::new(), |s| format!(" ({s:.3}x per token)"));
    let memory = match r.fits {
        Some(false) => " (the layout does not fit that cell in the card's memory)",
        _ => "",
    };
    format!(
        "{at}: {saves} {:.1}% {} FLOPs to reach the loss but runs {:.3}x the {reference}'s \
         time per FLOP{per_token}: {gains} {:.1}% of the time{memory}",
        g.abs() * 100.0,
        if g >= 0.0 { "of the" } else { "more" },
        r.time_per_flop_ratio,
        w.abs() * 100.0
    )
}

impl WithWallClock<'_> {
    fn extend(&self, mut doc: Document) -> Document {
        for b in &mut doc.blocks {
            if let Block::Table(t) = b {
                t.data = false;
            }
        }
        let reference = self.table.reference.group.as_str();
        doc.title(format!(
            "Wall-clock gain: 1 - (1 - CE gain) x time per FLOP ({} / {reference})",
            self.table.target.group
        ));
        doc.line(match &self.wall_clock.time_ratios {
            TimeRatios::Given { ratio } => {
                format!("time per FLOP ratio {ratio} (given), every row")
            }
            TimeRatios::Grid {
                source,
                card,
                cells,
            } => format!(
                "time per FLOP ratios from {source} ({} cells predicted on {card}): each row \
                 takes the cell nearest the {reference}'s compute-optimal model (in ln F and \
                 ln(1 - S)); a cell's ratio is its step-time ratio over its FLOP ratio",
                cells.len()
            ),
        });
        let mut t = Table::new([
            "compute C",
            "S",
            "CE gain",
            "cell",
            "time/FLOP ratio",
            "wall-clock gain",
            "fits",
        ])
        .data();
        for r in &self.wall_clock.rows {
            t.rows.push(vec![
                Field::shown(format!("{:.0e}", r.compute), r.compute),
                Field::shown(format!("{:.2}", r.sparsity), r.sparsity),
                r.compute_gain.map_or(Field::text("unreachable"), pct),
                Field::text(r.cell.clone().unwrap_or_else(|| "-".to_owned())),
                Field::shown(
                    format!("{:.4}", r.time_per_flop_ratio),
                    r.time_per_flop_ratio,
                ),
                r.wall_clock_gain.map_or(Field::text("-"), pct),
                Field::text(match r.fits {
                    Some(true) => "yes",
                    Some(false) => "NO",
                    None => "-",
                }),
            ]);
        }
        doc.table(t);
        for r in &self.wall_clock.rows {
            doc.line(sentence(r, reference));
        }
        doc
    }
}

impl Report for WithWallClock<'_> {
    fn document(&self) -> Document {
        self.extend(self.table.document())
    }

    fn compact(&self) -> Document {
        self.extend(self.table.compact())
    }

    fn formats(&self) -> &'static [Format] {
        &[Format::Table, Format::Json, Format::Csv, Format::Markdown]
    }
}

//! Pictures, as SVG (plotters' SVG backend; text is SVG `<text>`, so no font files are
//! needed to draw, and the output is the same bytes for the same input).
//!
//! * [`residual_heatmap`]: the signed residuals of a grid, one panel per budget matched by
//!   default (a budget reported but not matched unless weighed, the activations, is in
//!   the tables, not here), scales down and sparsities across, on a diverging scale symmetric about 0 (blue: the
//!   looped model gets less; red: more) spanning the sparse cells' residuals. A grid
//!   with predicted times (`smelt grid --predict CARD`) gets one more panel, the predicted
//!   time ratio less 1 per cell, on a scale of its own (its range is the cells' own, not
//!   the budgets').
//! * [`frontiers`]: the fitted compute-optimal frontiers `L*(C)` of two architectures at
//!   each sparsity, compute on a log axis.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::label;
use crate::cost::BudgetKind;
use crate::error::{Error, Result};
use crate::fit::GainTable;
use crate::study::GridReport;

fn plot_error(e: impl std::fmt::Display) -> Error {
    Error::Plot {
        message: e.to_string(),
    }
}

/// White at 0, blue at -1, red at +1.
fn diverging(t: f64) -> RGBColor {
    let t = t.clamp(-1.0, 1.0);
    let mix = |a: f64, b: f64, s: f64| (a + (b - a) * s).round() as u8;
    if t < 0.0 {
        let s = -t;
        RGBColor(
            mix(255.0, 33.0, s),
            mix(255.0, 102.0, s),
            mix(255.0, 172.0, s),
        )
    } else {
        RGBColor(
            mix(255.0, 178.0, t),
            mix(255.0, 24.0, t),
            mix(255.0, 43.0, t),
        )
    }
}

fn unique(values: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for v in values {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

/// The geometry of a residual heatmap, in pixels.
struct Heatmap<'a> {
    report: &'a GridReport,
    scales: Vec<String>,
    sparsities: Vec<String>,
    /// The largest |residual| the colours span.
    max: f64,
    /// With predicted times: the largest |ratio − 1| the time panel's colours span.
    time_max: Option<f64>,
    any_sparse: bool,
    cell: (i32, i32),
    left: i32,
    top: i32,
    gap: i32,
    panel_w: i32,
}

type Area<'b> = DrawingArea<SVGBackend<'b>, plotters::coord::Shift>;

fn centered(size: i32) -> TextStyle<'static> {
    TextStyle::from(("sans-serif", size).into_font()).pos(Pos::new(HPos::Center, VPos::Center))
}

/// A panel of the heatmap: a budget's residuals, or the predicted time ratios less 1.
#[derive(Clone, Copy)]
enum Panel {
    Budget(BudgetKind),
    Time,
}

/// The budgets the heatmap draws: those matched by default.
fn plotted() -> impl Iterator<Item = BudgetKind> {
    BudgetKind::ALL
        .into_iter()
        .filter(|k| k.default_weight() > 0.0)
}

impl<'a> Heatmap<'a> {
    fn new(report: &'a GridReport) -> Self {
        let scales = unique(report.cells.iter().map(|c| c.scale.clone()));
        let sparsities = unique(report.cells.iter().map(|c| c.sparsity_label.clone()));
        // The colour scale spans the sparse cells' residuals (all cells' if none is sparse);
        // larger residuals (dense cells, usually) saturate.
        let any_sparse = report.cells.iter().any(|c| c.sparse);
        let max = report
            .cells
            .iter()
            .filter(|c| c.sparse || !any_sparse)
            .flat_map(|c| plotted().map(|k| c.residuals[k]).collect::<Vec<_>>())
            .fold(0.005f64, |m, r| m.max(r.abs()));
        let cell = (84i32, 44i32);
        let panel_w = cell.0 * sparsities.len() as i32;
        let time_max = report.summary.predicted.as_ref().map(|_| {
            (report.cells.iter())
                .filter_map(|c| c.predicted.map(|p| p.ratio - 1.0))
                .fold(0.005f64, |m, r| m.max(r.abs()))
        });
        Self {
            report,
            scales,
            sparsities,
            max,
            time_max,
            any_sparse,
            cell,
            left: 70,
            top: 80,
            gap: 40,
            panel_w,
        }
    }

    /// The panels drawn, left to right.
    fn panels(&self) -> Vec<Panel> {
        plotted()
            .map(Panel::Budget)
            .chain(self.time_max.map(|_| Panel::Time))
            .collect()
    }

    fn size(&self) -> (i32, i32) {
        let panels = self.panels().len() as i32;
        let width = self.left + panels * self.panel_w + (panels - 1) * self.gap + 30;
        let height = self.top + self.cell.1 * self.scales.len() as i32 + 70;
        (width, height)
    }

    fn title(&self, root: &Area) -> Result<()> {
        let title = format!(
            "{}: looped / Baseline − 1 per budget ({} mode; colours span ±{:.2}%{})",
            self.report.name.as_deref().unwrap_or("grid"),
            self.report.mode.as_str(),
            self.max * 100.0,
            if self.any_sparse {
                ", the sparse cells' range"
            } else {
                ""
            }
        );
        let font = ("sans-serif", 17).into_font();
        root.draw(&Text::new(title, (self.left, 18), font))
            .map_err(plot_error)
    }

    /// Panel number `p`: its name, the sparsities across, the cells.
    fn panel(&self, root: &Area, p: usize, panel: Panel) -> Result<()> {
        let (cell_w, cell_h) = self.cell;
        let (left, top) = (self.left, self.top);
        let x0 = left + p as i32 * (self.panel_w + self.gap);
        let name = match panel {
            Panel::Budget(kind) => label(kind).panel.to_string(),
            Panel::Time => format!(
                "predicted time (±{:.1}%)",
                self.time_max.unwrap_or_default() * 100.0
            ),
        };
        root.draw(&Text::new(
            name,
            (x0 + self.panel_w / 2, top - 32),
            centered(15),
        ))
        .map_err(plot_error)?;
        for (j, sp) in self.sparsities.iter().enumerate() {
            let at = (x0 + j as i32 * cell_w + cell_w / 2, top - 12);
            root.draw(&Text::new(sp.clone(), at, centered(12)))
                .map_err(plot_error)?;
        }
        for (i, sc) in self.scales.iter().enumerate() {
            if p == 0 {
                let at = (left - 34, top + i as i32 * cell_h + cell_h / 2);
                root.draw(&Text::new(sc.clone(), at, centered(12)))
                    .map_err(plot_error)?;
            }
            for (j, sp) in self.sparsities.iter().enumerate() {
                let at = (x0 + j as i32 * cell_w, top + i as i32 * cell_h);
                self.cell(root, at, sc, sp, panel)?;
            }
        }
        Ok(())
    }

    /// One cell of a panel at `(x, y)`: its colour and its residual, or grey if the grid
    /// has no such cell (or, in the time panel, no prediction for it).
    fn cell(
        &self,
        root: &Area,
        (x, y): (i32, i32),
        sc: &str,
        sp: &str,
        panel: Panel,
    ) -> Result<()> {
        let (cell_w, cell_h) = self.cell;
        let corners = [(x, y), (x + cell_w, y + cell_h)];
        let cells = &self.report.cells;
        let value = cells
            .iter()
            .find(|c| c.scale == sc && c.sparsity_label == sp)
            .and_then(|cell| match panel {
                Panel::Budget(kind) => Some((*cell.residuals.get(kind), self.max)),
                Panel::Time => cell
                    .predicted
                    .zip(self.time_max)
                    .map(|(p, max)| (p.ratio - 1.0, max)),
            });
        let Some((r, max)) = value else {
            let grey = RGBColor(230, 230, 230).filled();
            return root
                .draw(&Rectangle::new(corners, grey))
                .map_err(plot_error);
        };
        let fill = diverging(r / max).filled();
        root.draw(&Rectangle::new(corners, fill))
            .map_err(plot_error)?;
        root.draw(&Rectangle::new(corners, WHITE.stroke_width(1)))
            .map_err(plot_error)?;
        let text = format!("{:+.2}%", r * 100.0);
        let ink = if (r / max).abs() > 0.6 { WHITE } else { BLACK };
        let at = (x + cell_w / 2, y + cell_h / 2);
        root.draw(&Text::new(text, at, centered(13).color(&ink)))
            .map_err(plot_error)
    }

    fn footnote(&self, root: &Area, height: i32) -> Result<()> {
        let s = &self.report.summary;
        let values: Vec<String> = plotted()
            .map(|k| format!("{} {:.2}%", label(k).note, s.max_abs_residual[k] * 100.0))
            .collect();
        let mut foot = format!(
            "max |residual| over {} sparse cells: {}",
            s.sparse_cells,
            values.join(", ")
        );
        if let Some(p) = &s.predicted {
            foot.push_str(&format!(
                "; predicted time ratio on {} ({}): max {:.3}, mean {:.3}",
                p.basis.device.name,
                if p.basis.calibrated {
                    "calibrated"
                } else {
                    "uncalibrated roofline"
                },
                p.max_ratio,
                p.mean_ratio
            ));
        }
        let font = ("sans-serif", 13).into_font();
        root.draw(&Text::new(foot, (self.left, height - 30), font))
            .map_err(plot_error)
    }
}

/// The grid's residuals as a heatmap (see the module docs).
pub fn residual_heatmap(report: &GridReport) -> Result<String> {
    let map = Heatmap::new(report);
    let (width, height) = map.size();
    let mut svg = String::new();
    {
        let root =
            SVGBackend::with_string(&mut svg, (width as u32, height as u32)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        map.title(&root)?;
        for (p, panel) in map.panels().into_iter().enumerate() {
            map.panel(&root, p, panel)?;
        }
        map.footnote(&root, height)?;
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

/// The two fitted frontiers of a gain table (see the module docs), over compute from a
/// tenth of the smallest to ten times the largest compute in the table.
pub fn frontiers(table: &GainTable) -> Result<String> {
    let (rs, ts) = (table.reference.surface, table.target.surface);
    let mut computes: Vec<f64> = table.rows.iter().map(|r| r.compute).collect();
    computes.sort_by(f64::total_cmp);
    let mut sparsities: Vec<f64> = table.rows.iter().map(|r| r.sparsity).collect();
    sparsities.sort_by(f64::total_cmp);
    sparsities.dedup();
    let (c0, c1) = match (computes.first(), computes.last()) {
        (Some(a), Some(b)) => (a / 10.0, b * 10.0),
        _ => return Err(plot_error("the gain table has no rows")),
    };
    let xs: Vec<f64> = (0..=120)
        .map(|i| (c0.ln() + (c1.ln() - c0.ln()) * f64::from(i) / 120.0).exp())
        .collect();
    let curve = |s: &crate::fit::Surface, sp: f64| -> Vec<(f64, f64)> {
        xs.iter().map(|&c| (c, s.l_star(c, sp))).collect()
    };
    let all: Vec<f64> = sparsities
        .iter()
        .flat_map(|&sp| [curve(&rs, sp), curve(&ts, sp)])
        .flatten()
        .map(|(_, l)| l)
        .filter(|l| l.is_finite())
        .collect();
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = all.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !(lo.is_finite() && hi.is_finite()) {
        return Err(plot_error(
            "the frontiers are not finite over this compute range",
        ));
    }
    let pad = (hi - lo).max(1e-3) * 0.05;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (820, 520)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!(
                    "Compute-optimal frontiers: {} (dashed) vs {} (solid)",
                    table.reference.group, table.target.group
                ),
                ("sans-serif", 18),
            )
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(60)
            .build_cartesian_2d((c0..c1).log_scale(), (lo - pad)..(hi + pad))
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .x_desc("training compute C = F·D (FLOPs)")
            .y_desc("frontier loss L* (nats)")
            .x_label_formatter(&|x| format!("{x:.0e}"))
            .y_label_formatter(&|y| format!("{y:.2}"))
            .draw()
            .map_err(plot_error)?;
        let palette = [
            RGBColor(31, 119, 180),
            RGBColor(214, 39, 40),
            RGBColor(44, 160, 44),
            RGBColor(148, 103, 189),
            RGBColor(255, 127, 14),
        ];
        for (i, &sp) in sparsities.iter().enumerate() {
            let color = palette[i % palette.len()];
            chart
                .draw_series(DashedLineSeries::new(
                    curve(&rs, sp),
                    6,
                    4,
                    color.stroke_width(2),
                ))
                .map_err(plot_error)?;
            chart
                .draw_series(LineSeries::new(curve(&ts, sp), color.stroke_width(2)))
                .map_err(plot_error)?
                .label(format!("S = {sp:.2}"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(plot_error)?;
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

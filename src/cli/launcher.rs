//! `--conventions` on `match` and `grid`: what each launcher's FLOP formula says of the
//! looped model against its Baseline, after the report.

use smelt::launcher_flops::pair;
use smelt::report::{Format, Layout, WithConventions, WithStepTimes, render_with};
use smelt::search::MatchReport;
use smelt::study::{GridReport, StepGrid};

/// `--conventions`.
#[derive(Debug, clap::Args)]
pub struct ConventionsFlag {
    /// Also show what launchers' FLOP formulas (megatron, torchtitan, 6n, 6n-attn) say of
    /// the looped model against the Baseline, beside the exact ratio: the FLOP ratio a
    /// training log would show. The launchers count physical layers, not loop visits. With
    /// it, CSV writes that table.
    #[arg(long)]
    conventions: bool,
}

impl ConventionsFlag {
    /// Whether `--conventions` is given.
    pub fn asked(&self) -> bool {
        self.conventions
    }
}

/// The match in `format`, with the launcher section when the flag asks for it.
pub fn render_match(
    m: &MatchReport,
    format: Format,
    layout: Layout,
    flag: &ConventionsFlag,
) -> anyhow::Result<String> {
    if !flag.conventions {
        return Ok(render_with(m, format, layout)?);
    }
    let label = m.baseline.name.as_deref().unwrap_or("baseline");
    let with = WithConventions::single(m, pair(label, &m.baseline, &m.looped)?);
    Ok(render_with(&with, format, layout)?)
}

/// The grid in `format`, with the launcher section (a row per cell) when the flag asks,
/// and the cells' training steps after it when predicted (`--global-batch`).
pub fn render_grid(
    r: &GridReport,
    format: Format,
    layout: Layout,
    flag: &ConventionsFlag,
    steps: Option<&StepGrid>,
) -> anyhow::Result<String> {
    if !flag.conventions {
        return Ok(match steps {
            Some(s) => render_with(&WithStepTimes::new(r, s), format, layout)?,
            None => render_with(r, format, layout)?,
        });
    }
    let pairs = r
        .cells
        .iter()
        .map(|c| {
            let label = format!("{} {}", c.scale, c.sparsity_label);
            pair(&label, &c.baseline, &c.looped)
        })
        .collect::<smelt::Result<Vec<_>>>()?;
    let with = WithConventions::cells(r, pairs);
    Ok(match steps {
        Some(s) => render_with(&WithStepTimes::new(&with, s), format, layout)?,
        None => render_with(&with, format, layout)?,
    })
}

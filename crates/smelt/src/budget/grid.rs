//! Grid files: many Baselines matched under one recipe, lattice and objective.
//!
//! ```toml
//! name = "smelt-grid"
//! template = "base-{scale}-{sparsity}.toml"   # relative to this file
//! scales = ["100m", "200m", "600m", "1.6b"]
//! sparsities = ["s0", "s85", "s95", "s97"]
//! # or explicit cells:
//! # [[cells]]
//! # scale = "200m"
//! # sparsity = "s95"
//! # baseline = "base-200m-s95.toml"          # or an inline table
//! [recipe]
//! # ... as in a budget file, and so are mode, [workload], [lattice], [objective], [tolerance]
//! ```

use std::path::Path;

use super::Budget;
use super::file::{self, PlanFile};
use crate::error::{Error, Result};

/// One cell of a grid: a scale, a sparsity label and its resolved budget.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Scale label, e.g. `200m`.
    pub scale: String,
    /// Sparsity label, e.g. `s95`.
    pub sparsity: String,
    /// The budget of this cell.
    pub budget: Budget,
}

/// A resolved grid.
#[derive(Debug, Clone, PartialEq)]
pub struct GridSpec {
    /// Display name.
    pub name: Option<String>,
    /// The cells, in file order (scales outer, sparsities inner for a template).
    pub cells: Vec<Cell>,
}

/// Whether the TOML `text` of a budget or grid file is a budget file (it names a
/// `baseline`) rather than a grid file; `source` names it in a parse error.
pub fn is_budget_text(text: &str, source: &str) -> Result<bool> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let table: toml::Table = toml::from_str(text)
        .map_err(|e| Error::parse(format!("{source}: not a TOML budget or grid file: {e}")))?;
    Ok(table.contains_key("baseline"))
}

impl GridSpec {
    super::file::plan_loaders!("a grid file", crate::strict_toml::FileKind::Grid);

    fn from_file(mut f: PlanFile, dir: &Path) -> Result<Self> {
        use crate::strict_toml::FileKind;
        if f.baseline.is_some() || f.hf_baseline.is_some() {
            return Err(FileKind::Budget.misplaced("baseline", FileKind::Grid));
        }
        let mut raw: Vec<(String, String, toml::Value)> = Vec::new();
        match (
            f.template.take(),
            f.scales.take(),
            f.sparsities.take(),
            f.cells.take(),
        ) {
            (Some(t), Some(scales), Some(sparsities), None) => {
                if !t.contains("{scale}") || !t.contains("{sparsity}") {
                    return Err(Error::invalid(
                        "template",
                        format!("must contain {{scale}} and {{sparsity}} (got \"{t}\")"),
                    ));
                }
                for scale in &scales {
                    for sparsity in &sparsities {
                        let path = t.replace("{scale}", scale).replace("{sparsity}", sparsity);
                        raw.push((scale.clone(), sparsity.clone(), toml::Value::String(path)));
                    }
                }
            }
            (None, None, None, Some(cells)) => {
                raw.extend(cells.into_iter().map(|c| (c.scale, c.sparsity, c.baseline)));
            }
            _ => {
                return Err(Error::invalid(
                    "cells",
                    "give either template + scales + sparsities, or [[cells]], not both",
                ));
            }
        }
        if raw.is_empty() {
            return Err(Error::invalid("cells", "the grid has no cells"));
        }
        if f.objective.has_time() {
            return Err(Error::invalid(
                "objective.time",
                "belongs in a budget file (smelt match): a grid does not match the predicted \
                 time; smelt grid --predict CARD reports each cell's predicted time ratio",
            ));
        }
        if let Some(n) = &f.name {
            crate::model::validate::check_name("name", n)?;
        }
        let mut cells = Vec::with_capacity(raw.len());
        for (i, (scale, sparsity, baseline)) in raw.into_iter().enumerate() {
            crate::model::validate::check_name(&format!("cells[{i}].scale"), &scale)?;
            crate::model::validate::check_name(&format!("cells[{i}].sparsity"), &sparsity)?;
            let field = format!("cells[{i}] ({scale}, {sparsity})");
            let (baseline, source) = file::baseline_from(&baseline, dir, &field)?;
            let budget = f
                .budget(Some(format!("{scale}-{sparsity}")), baseline, source, dir)
                .map_err(|e| Error::invalid(field.clone(), e.to_string()))?;
            cells.push(Cell {
                scale,
                sparsity,
                budget,
            });
        }
        Ok(Self {
            name: f.name.clone(),
            cells,
        })
    }
}

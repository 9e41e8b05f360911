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

use serde::Deserialize;

use super::{
    Budget, LatticeFile, Mode, ObjectiveFile, RecipeFile, Shared, Tolerance, baseline_from,
    parse_error, read,
};
use crate::error::{Error, Result};
use crate::spec::Workload;

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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CellFile {
    scale: String,
    sparsity: String,
    baseline: toml::Value,
}

/// A grid file as written. The shared keys are repeated from the budget file's struct
/// rather than `#[serde(flatten)]`-ed, because serde cannot combine `flatten` with
/// `deny_unknown_fields`, and a typo must fail loudly.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GridFile {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    template: Option<String>,
    #[serde(default)]
    scales: Option<Vec<String>>,
    #[serde(default)]
    sparsities: Option<Vec<String>>,
    #[serde(default)]
    cells: Option<Vec<CellFile>>,
    #[serde(default)]
    mode: Mode,
    #[serde(default)]
    recipe: RecipeFile,
    #[serde(default)]
    workload: Option<Workload>,
    #[serde(default)]
    lattice: LatticeFile,
    #[serde(default)]
    objective: ObjectiveFile,
    #[serde(default)]
    tolerance: Tolerance,
}

impl GridSpec {
    /// Parses a grid file's text; relative paths are taken from `dir`.
    pub fn from_toml_str(text: &str, dir: &Path) -> Result<Self> {
        let f: GridFile = toml::from_str(text).map_err(parse_error)?;
        let shared = Shared {
            mode: f.mode,
            recipe: f.recipe,
            workload: f.workload,
            lattice: f.lattice,
            objective: f.objective,
            tolerance: f.tolerance,
        };
        let mut raw: Vec<(String, String, toml::Value)> = Vec::new();
        match (f.template, f.scales, f.sparsities, f.cells) {
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
        let mut cells = Vec::with_capacity(raw.len());
        for (i, (scale, sparsity, baseline)) in raw.into_iter().enumerate() {
            let field = format!("cells[{i}] ({scale}, {sparsity})");
            let baseline = baseline_from(baseline, dir, &field)?;
            let budget = shared
                .resolve(Some(format!("{scale}-{sparsity}")), baseline)
                .map_err(|e| Error::invalid(field.clone(), e.to_string()))?;
            cells.push(Cell {
                scale,
                sparsity,
                budget,
            });
        }
        Ok(Self {
            name: f.name,
            cells,
        })
    }

    /// Parses a grid given as JSON (the grid file's structure); relative paths are taken
    /// from `dir`.
    pub fn from_json_str(text: &str, dir: &Path) -> Result<Self> {
        Self::from_toml_str(&super::json_to_toml(text)?, dir)
    }

    /// Reads and parses a grid file.
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let dir = path.parent().unwrap_or(Path::new("."));
        Self::from_toml_str(&read(path)?, dir)
    }
}

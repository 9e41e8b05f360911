//! The loop recipe: which layers of the looped model loop, and how often.

use crate::error::{Error, Result};
use crate::model::{Loop, MAX_COUNT, MAX_REPEATS};

/// How many layers are looped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Span {
    /// `floor(layers / 2)`.
    Half,
    /// An explicit number of layers (0: no loop).
    Layers(u64),
}

/// Where the looped block sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// `floor((layers - span) / 2)` layers before the block (SMELT).
    Middle,
    /// The block starts at this 1-based layer.
    First(u64),
}

/// The loop recipe: which layers loop, how often, and the looped model's depth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recipe {
    /// Looped layers.
    pub span: Span,
    /// Position of the block.
    pub placement: Placement,
    /// Executions of the block.
    pub repeats: u64,
    /// Physical layers of the looped model (`None`: the Baseline's).
    pub layers: Option<u64>,
}

impl Default for Recipe {
    /// SMELT's recipe: the middle half of the Baseline's layers, looped twice.
    fn default() -> Self {
        Self {
            span: Span::Half,
            placement: Placement::Middle,
            repeats: 2,
            layers: None,
        }
    }
}

impl Recipe {
    /// Checks the recipe's own limits.
    pub fn validate(&self) -> Result<()> {
        if !(1..=MAX_REPEATS).contains(&self.repeats) {
            return Err(Error::invalid(
                "recipe.repeats",
                format!("must be between 1 and {MAX_REPEATS} (got {})", self.repeats),
            ));
        }
        if let Some(l) = self.layers
            && !(1..=MAX_COUNT).contains(&l)
        {
            return Err(Error::invalid(
                "recipe.layers",
                format!("must be between 1 and {MAX_COUNT} (got {l})"),
            ));
        }
        Ok(())
    }

    /// Physical layers of the looped model of a Baseline with `baseline_layers`.
    pub fn layers(&self, baseline_layers: u64) -> u64 {
        self.layers.unwrap_or(baseline_layers)
    }

    /// The loop for a model of `layers` physical layers (`None` when nothing loops).
    pub fn resolve(&self, layers: u64) -> Result<Option<Loop>> {
        let span = match self.span {
            Span::Half => layers / 2,
            Span::Layers(s) => s,
        };
        if span == 0 {
            return Ok(None);
        }
        if span > layers {
            return Err(Error::invalid(
                "recipe.span",
                format!("{span} looped layers do not fit in {layers} layers"),
            ));
        }
        if self.repeats == 0 {
            return Err(Error::invalid("recipe.repeats", "must be at least 1"));
        }
        let first = match self.placement {
            Placement::Middle => (layers - span) / 2 + 1,
            Placement::First(f) => f,
        };
        if first == 0 || first.saturating_add(span - 1) > layers {
            return Err(Error::invalid(
                "recipe.first",
                format!(
                    "a block of {span} layers starting at layer {first} does not fit in {layers} layers"
                ),
            ));
        }
        Ok(Some(Loop {
            first,
            span,
            repeats: self.repeats,
            residual_scale: Some(1.0 / self.repeats as f64),
        }))
    }
}

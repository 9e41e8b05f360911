//! A model against its Baseline: both costs and the signed residual of each budget, always
//! under one convention.
//!
//! Budgets counted under different conventions do not compare: a `config.json` counts the
//! embedding and LM head and is costed at the default workload, a paper-style model file
//! counts neither at its own workload. So the model is costed under the Baseline's
//! convention (its `[counting]` and `[workload]`), and [`Comparison::harmonised`] says, in
//! words, what of the model's own was set aside.

use serde::Serialize;

use super::{Cost, Residuals, cost, cost_against};
use crate::error::Result;
use crate::model::{Counting, ModelSpec};

/// A model and its Baseline, side by side (`smelt cost MODEL --against BASELINE`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// The Baseline's cost (sparsity against its own control).
    pub baseline: Cost,
    /// The model's cost under the Baseline's convention (sparsity against the Baseline's
    /// control).
    pub model: Cost,
    /// `model / baseline - 1` per budget.
    pub residuals: Residuals,
    /// What of the model's own convention was replaced by the Baseline's (empty when they
    /// agree).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub harmonised: Vec<String>,
}

fn counting_words(c: &Counting) -> String {
    let vocab = match (c.embeddings, c.lm_head) {
        (false, false) => "neither embeddings nor LM head counted",
        (true, false) => "embeddings counted",
        (false, true) => "LM head counted",
        (true, true) => "embeddings and LM head counted",
    };
    if c.activations == Counting::default().activations
        && c.activation_bytes == Counting::default().activation_bytes
    {
        vocab.to_owned()
    } else {
        format!(
            "{vocab}, activations {} at {} bytes",
            c.activations.as_str(),
            c.activation_bytes
        )
    }
}

/// Costs `model` against `baseline`, under the Baseline's convention.
pub fn compare(baseline: &ModelSpec, model: &ModelSpec) -> Result<Comparison> {
    let mut harmonised = Vec::new();
    let mut under = model.clone();
    if model.counting != baseline.counting {
        harmonised.push(format!(
            "the model's [counting] ({}) is replaced by the Baseline's ({})",
            counting_words(&model.counting),
            counting_words(&baseline.counting)
        ));
        under.counting = baseline.counting;
    }
    if model.workload != baseline.workload {
        harmonised.push(format!(
            "the model's workload ({}) is replaced by the Baseline's ({})",
            model.workload.summary(),
            baseline.workload.summary()
        ));
        under.workload = baseline.workload.clone();
    }
    if model.training != baseline.training {
        harmonised.push(
            "the model's [training] is replaced by the Baseline's (one recipe and layout for both)"
                .to_owned(),
        );
        under.training = baseline.training;
    }
    let base = cost(baseline)?;
    let looped = cost_against(&under, baseline)?;
    let residuals = looped.budgets().residuals_against(&base.budgets());
    Ok(Comparison {
        baseline: base,
        model: looped,
        residuals,
        harmonised,
    })
}

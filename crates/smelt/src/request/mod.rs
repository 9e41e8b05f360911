//! One request per operation: what a caller asks of `cost`, `match`, `grid`, `sweep`,
//! `predict` (and a step of a parallel layout), `mfu`, the launcher formulas, `bench`, `fit`, `gain`, `import`, `calibrate`,
//! `merge`, the exports, `plan` and `collect`, as one serde structure each, read and validated here once.
//!
//! The Python module hands each call's arguments over as one object (its keywords) and gets
//! back the library's own results; the command line builds the same structures from its
//! flags where they share a shape ([`crate::time::PredictSpec`], the device of a prediction,
//! is one type for `smelt predict`, a budget's `[objective.time]` and Python's `predict`).
//!
//! A request read from JSON ([`from_json`]) names the field an error is about as written
//! (`top`, `device.card`, `budget.objective.weights.time`), never a position in the text.
//!
//! Sources: a model is a path (a model file, a `config.json`, a model directory smelt
//! exported), a model file's structure (an object with `model`), or a Hugging Face
//! `config.json` (an object with `model_type` and no `model`). A budget or grid is a path or
//! its file's structure; a budget's `baseline` may be a Hugging Face `config.json` inline.

mod export;
mod ops;
mod source;
mod step;
mod study;

pub use export::{ExportReply, ExportRequest, ExportSource};
pub use ops::{
    BenchRequest, CalibrateRequest, CostReply, CostRequest, FitRequest, GainRequest, GridRequest,
    ImportRequest, LauncherReply, LauncherRequest, MatchRequest, MergeRequest, MfuRequest,
    ModelPair, PairReply, PredictRequest, SweepRequest, Values,
};
pub use source::{BudgetSource, DocLengths, JsonOrPath, ModelSource, WorkloadRequest};
pub use step::{Layout, MAX_DEGREE, MAX_GLOBAL_BATCH, StepPredictRequest};
pub use study::{CollectReply, CollectRequest, PlanReply, PlanRequest};

use serde::de::DeserializeOwned;

use crate::error::Result;
use crate::progress::Progress;
use crate::search::Verdict;

/// An operation asked for: run, it gives its output (a result of the library's own types).
pub trait Request: DeserializeOwned {
    /// What the operation returns.
    type Output: serde::Serialize;

    /// Runs the request; long work reports to `progress` and stops when it asks
    /// ([`Progress::cancelled`], then [`crate::Error::Interrupted`]).
    fn run(&self, progress: &dyn Progress) -> Result<Self::Output>;
}

/// Reads a request from JSON text (e.g. a Python call's keywords): every error names the
/// field as written, with the rule it breaks.
pub fn from_json<T: DeserializeOwned>(text: &str) -> Result<T> {
    crate::strict_toml::from_json(text)
}

/// What a command line says on standard error for each tolerance `result` breaks (prefixed
/// `smelt: ` there), and what Python's `ToleranceError` says: one line each, the same words.
pub fn tolerance_lines(result: &impl Verdict) -> Vec<String> {
    (result.broken_tolerances().iter())
        .map(|b| format!("tolerance not met: {b}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_names_the_field_not_a_position() {
        let e = from_json::<MatchRequest>(r#"{"budget": "b.toml", "top": "x"}"#).unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("top: must be a whole number"), "{text}");
        assert!(!text.contains("line 1"), "{text}");
        let e = from_json::<MatchRequest>(r#"{"budget": "b.toml", "force": "yes"}"#).unwrap_err();
        assert!(
            e.to_string().starts_with("force: must be true or false"),
            "{e}"
        );
        let e = from_json::<MatchRequest>(r#"{"budget": "b.toml", "tops": 2}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field `tops`"), "{e}");
    }

    #[test]
    fn a_budget_dicts_own_field_is_named_under_it() {
        let text = r#"{"budget": {"baseline": "x.toml", "objective": {"weights": {"time": "a"}}}}"#;
        let r: MatchRequest = from_json(text).unwrap();
        let e = r.run(&crate::progress::Silent).unwrap_err().to_string();
        assert!(e.starts_with("objective.weights.time: invalid type"), "{e}");
    }
}

//! # smelt
//!
//! Compute-matched comparisons of *looped* Mixture-of-Experts Transformers (a block of
//! layers executed more than once with shared weights) against ordinary ones.
//!
//! A fair comparison gives both models the same per-token training FLOPs, the same
//! non-embedding parameters and the same KV cache. This crate computes those three budgets
//! exactly from an analytic cost model ([`cost`](mod@cost), where the conventions are
//! documented), finds by exact integer search the looped configuration that matches a
//! Baseline on a declared lattice ([`search`], driven by [`budget`] files), reports the
//! residual mismatch, runs grids and sweeps of matches ([`study`]), fits the scaling-law
//! surfaces matched models are compared with ([`fit`]), times the GEMMs a layer really
//! issues ([`mod@bench`]) and predicts them on a card ([`time`]), both from one kernel plan
//! ([`plan`]), and reads and writes Hugging Face `config.json` files ([`hf`]).
//!
//! Costing a model:
//!
//! ```
//! use smelt::{ModelSpec, cost};
//!
//! let baseline = ModelSpec::from_toml_str(r#"
//!     [model]
//!     layers = 12
//!     hidden = 1280
//!     heads = 16
//!     kv_heads = 2
//!     head_dim = 80
//!     [model.moe]
//!     experts = 192
//!     top_k = 8
//!     expert_ffn = 432
//!     [workload]
//!     context = 4096
//!     mean_doc_len = 991
//! "#)?;
//! let c = cost(&baseline)?;
//! assert_eq!(c.flops_per_token.training.as_integer(), Some(1_330_053_120));
//! assert_eq!(c.params.total.0, 3_869_277_440);
//! assert_eq!(c.kv_cache_per_token.elements.0, 3_840);
//! assert!((c.sparsity.s - 0.9467).abs() < 1e-4);
//! # Ok::<_, smelt::Error>(())
//! ```
//!
//! Matching a Baseline, as a training launcher would (a budget file names its Baseline by
//! path; here it is inline):
//!
//! ```
//! use smelt::budget::Budget;
//!
//! let budget = Budget::from_toml_str(r#"
//!     name = "smelt-200m-s95"
//!     [baseline.model]
//!     layers = 12
//!     hidden = 1280
//!     heads = 16
//!     kv_heads = 2
//!     head_dim = 80
//!     [baseline.model.moe]
//!     experts = 192
//!     top_k = 8
//!     expert_ffn = 432
//!     [baseline.workload]
//!     context = 4096
//!     mean_doc_len = 991
//!     [lattice]
//!     expert_ffn = { ratio = "1/3", multiple = 16 }
//!     heads = { max = 64 }
//!     kv_heads = { max = 16 }
//!     gqa = { max = 16 }
//!     q_width = { min = 0.75, max = 1.25 }
//! "#, std::path::Path::new("."))?;
//! let report = smelt::search::match_budget(&budget, 1)?;
//! let looped = &report.looped; // a ModelSpec: write it with `to_toml_string`
//! assert_eq!((looped.model.hidden, looped.model.moe.experts), (1056, 288));
//! let r = &report.residuals; // the activations' too, reported but not matched by default
//! assert!([r.flops, r.params, r.kv].iter().all(|x| x.abs() < 0.03));
//! // The `smelt match --format json` contract; any report renders the same way.
//! let json = smelt::report::render(&report, smelt::report::Format::Json)?;
//! # let _ = json;
//! # Ok::<_, smelt::Error>(())
//! ```
#![deny(missing_docs)]

pub mod bench;
pub mod budget;
pub mod cost;
pub mod error;
pub mod export;
pub mod fit;
pub mod hf;
#[doc(hidden)] // not public API: the CLI's and the Python module's file handling
pub mod io;
pub mod launcher_flops;
pub mod model;
#[doc(hidden)] // not public API: the named enums' machinery
pub mod names;
mod par;
pub mod plan;
pub mod progress;
pub mod report;
pub mod request;
#[doc(hidden)] // not public API: the seeded streams of the fit and the tests
pub mod rng;
pub mod search;
mod strict_toml;
pub mod study;
pub mod time;
pub mod units;

pub use budget::{Budget, GridSpec, Mode};
pub use cost::{
    BudgetKind, Budgets, Comparison, Cost, PerBudget, Residuals, TrainingMemory, budgets, compare,
    cost, cost_against, training_memory,
};
pub use error::{Error, Result};
pub use model::{
    ActivationPolicy, Attention, AttentionBias, Blocks, Counting, Dense, ExpertActivation,
    FullAttention, GatedDeltaNet, Indexer, KvCount, Loop, Mamba2, Mixer, Mla, Model, ModelSpec,
    Moe, Nope, QkNorm, RecomputeModule, RecomputeModules, Recurrent, Router, Training, Window,
    WindowKind, Workload,
};
pub use search::{MatchReport, match_budget, solve};
pub use study::{match_grid, sweep};
pub use units::{ActivationBytes, Bytes, Flops, KvElements, Params};

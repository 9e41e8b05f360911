//! Studies over many cells: a grid of budgets matched cell by cell ([`match_grid`]), a
//! recipe knob swept ([`sweep`]), each cell's time ratio predicted ([`predict_cells`]) or
//! measured ([`time_cells`]), and a grid's benchmark spread over shards and merged back
//! ([`Shard`], [`merge`]).
//!
//! # Shards
//!
//! A grid's benchmark is spread over many GPUs: `smelt grid --bench cuda --shard K/N` times
//! the cells whose position `i` (from 0) has `i mod N = K - 1`, and `smelt merge` joins the
//! shards' JSON into the grid's.
//!
//! Every shard matches the whole grid (matching is cheap and deterministic) and writes it
//! with its `shard`: `K`, `N` and a digest of what was matched (each cell's labels,
//! Baseline, matched model and search size, which the grid, its lattices and its workloads
//! determine) and of the benchmark's settings. The merge refuses shards whose digests or
//! `N` differ, a shard given twice, and a missing one; it takes each cell's time from the
//! shard that timed it and recomputes the summary: the measured time ratios from the
//! merged cells' times and, with `--predict`, the predicted ratios' largest and mean from
//! the merged cells' predictions (every shard predicts every cell, alike).
//!
//! # Where it stands
//!
//! This is orchestration: it sits above the solver ([`crate::search`]), the benchmark
//! ([`mod@crate::bench`]) and the time model ([`crate::time`]) and imports them; nothing
//! below imports it. Its files import each other one way only (a test keeps it so):
//! `shard.rs` (which share of the cells a process times) under `grid.rs` (the grid's report
//! and its cells matched), under `timing.rs` (their time ratios), `step_time.rs` (their
//! training steps under a parallel layout, [`predict_steps`]) and `merge.rs` (shards
//! joined); `sweep.rs` stands alone, and so do `isoflop.rs` (an IsoFLOP study's run
//! matrix over matched cells) and `collect.rs` (its runs' results checked against it and
//! written as endpoints), which imports it.
//!
//! # An IsoFLOP study
//!
//! [`plan`] lays out the runs: per cell, its Baseline and looped model at each compute
//! level, trained for whole optimizer steps by the exact per-token count; [`collect`] turns
//! the runs' results into the endpoints [`crate::fit`] reads, refusing a result that is not
//! the run planned.

mod collect;
mod grid;
mod isoflop;
mod merge;
mod shard;
mod step_time;
mod sweep;
mod timing;

pub use collect::{Collected, CollectedRun, RunResult, collect, parse_manifest, parse_results};
pub use grid::{
    GridCell, GridReport, GridSummary, PredictSummary, TimeSummary, match_grid, match_grid_with,
};
pub use isoflop::{
    Arch, ConventionPlan, IsoflopPlan, MAX_COMPUTES, PlanCell, PlanOptions, PlannedModel, Run,
    compute_label, manifest_lines, parse_flops, plan, plan_grid, plan_match, reached,
};
pub use merge::merge;
pub use shard::{Shard, ShardInfo};
pub use step_time::{
    CellStep, Drivers, LayoutSource, ModelStep, StepBasis, StepGrid, StepParts, predict_steps,
};
pub use sweep::{
    Knob, MAX_SWEEP_VALUES, SweepReport, SweepRow, check_values, parse_values, sweep, sweep_with,
};
pub use timing::{digest, mark, predict_cells, time_cells, time_shard};

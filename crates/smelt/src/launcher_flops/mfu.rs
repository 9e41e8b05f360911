//! Model FLOP utilisation: the model FLOP/s a measured throughput implies, under the exact
//! count and each launcher convention, over the card's dense peak.
//!
//! `MFU = tokens_per_second × F / (gpus × peak)`, with `tokens_per_second` the whole run's
//! throughput (every GPU together; a per-GPU throughput, as torchtitan logs `tps`, is the
//! same with `gpus = 1`), `F` the per-token training FLOPs of the convention and `peak` the
//! card's dense bf16 peak from the table of cards, or one given ([`Peak`], resolved where
//! every card is: [`crate::time`]). Recomputation (activation checkpointing) is not
//! counted, as MFU never counts it.

use serde::Serialize;

use super::Convention;
use crate::error::{Error, Result};
use crate::model::ModelSpec;
use crate::time::{Card, Peak};
use crate::units::Flops;

/// One convention's MFU.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MfuRow {
    /// The convention.
    pub convention: Convention,
    /// Per-token training FLOPs under it.
    pub training_flops: Flops,
    /// Model FLOP/s of the whole run.
    pub model_flops_per_second: f64,
    /// Model FLOP/s per GPU.
    pub per_gpu_flops_per_second: f64,
    /// Per GPU over the peak.
    pub mfu: f64,
}

/// The MFU of a run under every convention (`smelt mfu`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mfu {
    /// The model's name, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Tokens per second, the whole run.
    pub tokens_per_second: f64,
    /// GPUs of the run.
    pub gpus: u64,
    /// The card, when the peak is the table's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub card: Option<Card>,
    /// Dense bf16 peak per GPU, FLOP/s.
    pub peak_flops_per_second: f64,
    /// Where the peak comes from.
    pub peak_source: String,
    /// One row per convention that counts the model, the exact count first.
    pub rows: Vec<MfuRow>,
    /// The launcher conventions whose formula cannot count the model, with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<super::ConventionRefusal>,
}

/// The throughputs a run may be given, tokens per second (the whole run): from one token
/// in 1,000 s to 10^12 tokens/s (a thousand times today's largest clusters), so that every
/// FLOP/s and MFU derived from it is a finite, printable number.
pub const TOKENS_PER_SECOND: std::ops::RangeInclusive<f64> = 1e-3..=1e12;

/// The most GPUs a run may be given (2^24).
pub const MAX_GPUS: u64 = 1 << 24;

/// The MFU of `spec` trained at `tokens_per_second` (the whole run) on `gpus` GPUs of
/// `peak`. Errors name the input: a throughput outside `TOKENS_PER_SECOND` (1e-3 to 1e12), no GPUs or
/// more than `MAX_GPUS` (2^24), a given peak outside [`crate::time::PEAK_FLOPS`].
pub fn mfu(spec: &ModelSpec, tokens_per_second: f64, gpus: u64, peak: Peak) -> Result<Mfu> {
    if !TOKENS_PER_SECOND.contains(&tokens_per_second) {
        return Err(Error::invalid(
            "tokens_per_second",
            format!(
                "must be between {:e} and {:e} tokens per second (the whole run's); got \
                 {tokens_per_second:e}",
                TOKENS_PER_SECOND.start(),
                TOKENS_PER_SECOND.end()
            ),
        ));
    }
    if gpus == 0 {
        return Err(Error::invalid("gpus", "must be at least 1"));
    }
    if gpus > MAX_GPUS {
        return Err(Error::invalid(
            "gpus",
            format!("must be at most {MAX_GPUS}; got {gpus}"),
        ));
    }
    let (peak_flops, source) = peak.resolve()?;
    let (counts, refused) = super::counts_or_refusals(spec)?;
    let rows = (counts.into_iter())
        .map(|(c, f)| {
            let total = tokens_per_second * f.as_f64();
            let per_gpu = total / gpus as f64;
            MfuRow {
                convention: c,
                training_flops: f,
                model_flops_per_second: total,
                per_gpu_flops_per_second: per_gpu,
                mfu: per_gpu / peak_flops,
            }
        })
        .collect();
    Ok(Mfu {
        name: spec.name.clone(),
        tokens_per_second,
        gpus,
        card: peak.card(),
        peak_flops_per_second: peak_flops,
        peak_source: source,
        rows,
        refused,
    })
}

//! Model FLOP utilisation: the model FLOP/s a measured throughput implies, under the exact
//! count and each launcher convention, over the card's dense peak.
//!
//! `MFU = tokens_per_second × F / (gpus × peak)`, with `tokens_per_second` the whole run's
//! throughput (every GPU together; a per-GPU throughput, as torchtitan logs `tps`, is the
//! same with `gpus = 1`), `F` the per-token training FLOPs of the convention and `peak` the
//! card's dense bf16 peak from [`crate::card`] (or one given). Recomputation (activation
//! checkpointing) is not counted, as MFU never counts it.

use serde::Serialize;

use super::{Convention, training_flops};
use crate::card::Card;
use crate::error::{Error, Result};
use crate::model::ModelSpec;
use crate::units::Flops;

/// The peak MFU divides by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Peak {
    /// A card of the table.
    Card(Card),
    /// A dense peak in FLOP/s per GPU, for a card the table does not have.
    Given(f64),
}

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
    /// One row per convention, the exact count first.
    pub rows: Vec<MfuRow>,
}

/// The MFU of `spec` trained at `tokens_per_second` (the whole run) on `gpus` GPUs of
/// `peak`. Errors name the input: a throughput or peak that is not a positive finite
/// number, no GPUs.
pub fn mfu(spec: &ModelSpec, tokens_per_second: f64, gpus: u64, peak: Peak) -> Result<Mfu> {
    if !(tokens_per_second.is_finite() && tokens_per_second > 0.0) {
        return Err(Error::invalid(
            "tokens_per_second",
            format!(
                "must be a positive finite number of tokens per second (got {tokens_per_second})"
            ),
        ));
    }
    if gpus == 0 {
        return Err(Error::invalid("gpus", "must be at least 1"));
    }
    let (card, peak_flops, source) = match peak {
        Peak::Card(c) => {
            let s = c.spec();
            (Some(c), s.peak_flops_per_second, s.source.to_owned())
        }
        Peak::Given(p) if p.is_finite() && p > 0.0 => (None, p, "--peak".to_owned()),
        Peak::Given(p) => {
            return Err(Error::invalid(
                "peak",
                format!("must be a positive finite number of FLOP/s (got {p})"),
            ));
        }
    };
    let rows = Convention::ALL
        .iter()
        .map(|&c| {
            let f = training_flops(c, spec)?;
            let total = tokens_per_second * f.as_f64();
            let per_gpu = total / gpus as f64;
            Ok(MfuRow {
                convention: c,
                training_flops: f,
                model_flops_per_second: total,
                per_gpu_flops_per_second: per_gpu,
                mfu: per_gpu / peak_flops,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Mfu {
        name: spec.name.clone(),
        tokens_per_second,
        gpus,
        card,
        peak_flops_per_second: peak_flops,
        peak_source: source,
        rows,
    })
}

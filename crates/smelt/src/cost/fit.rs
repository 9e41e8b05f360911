//! Does a layout fit a card? Each GPU's peak ([`super::training`]) against the card's
//! memory, by how much, and which single knob would make it fit, found by re-evaluating
//! the training memory with that knob changed (never by guessing):
//!
//! * **recompute**: under `megatron` or `megatron-selective`, Megatron's modules added to
//!   those already recomputed (`moe_act`, then `layernorm`, `mlp`, `mla_up_proj`, then the
//!   whole `moe` block), then `megatron-full`; under an unfused policy `unfused-selective`
//!   and `unfused-full`;
//! * **micro-batch**: halved, down to 1;
//! * **pp**: doubled (the layers permitting), `dp` halved to keep the GPUs when it is even;
//! * **ep**: doubled, the experts and the expert groups permitting;
//! * **ZeRO stage**: each higher stage.
//!
//! For each knob the first value that fits is given (or, when none does, the value with the
//! lowest peak), with its peak. The card's memory is the table's (`memory_capacity_bytes`,
//! the datasheet's GB, `1e9` bytes): what a process can allocate is less by the CUDA
//! context and the allocator's fragmentation, which are not counted.

use serde::Serialize;

use super::training::training_memory;
use crate::error::Result;
use crate::model::{ActivationPolicy, ModelSpec, RecomputeModule as M, RecomputeModules, Training};

/// One stage's peak against the card.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageFit {
    /// The stage, 1-based.
    pub stage: u64,
    /// Its peak per GPU, bytes.
    pub peak_bytes: f64,
    /// `card − peak`: negative when it does not fit.
    pub margin_bytes: f64,
    /// Whether the peak is within the card's memory.
    pub fits: bool,
}

/// One knob changed, re-evaluated.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Knob {
    /// Which knob: `recompute`, `micro_batch`, `pp`, `ep` or `zero`.
    pub knob: String,
    /// Its new setting, in words (`megatron-full`, `pp 32, dp 32`, ...).
    pub setting: String,
    /// The largest peak per GPU with it, bytes.
    pub peak_bytes: f64,
    /// Whether that peak fits the card.
    pub fits: bool,
}

/// The verdict of a layout on a card.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FitReport {
    /// The card's id.
    pub card: String,
    /// The card's memory, bytes.
    pub card_bytes: f64,
    /// The largest peak per GPU, bytes.
    pub peak_bytes: f64,
    /// The stage of that peak.
    pub peak_stage: u64,
    /// `card − peak`: negative when it does not fit.
    pub margin_bytes: f64,
    /// Whether every GPU's peak is within the card's memory.
    pub fits: bool,
    /// Every stage's peak against the card.
    pub stages: Vec<StageFit>,
    /// Each knob's first setting that fits (or its lowest peak when none does), tried one
    /// at a time from the layout; empty when it fits.
    pub knobs: Vec<Knob>,
}

/// The recompute settings tried after `policy` (with `modules` for `megatron-selective`):
/// Megatron's modules added to the ones already recomputed, the cheapest to recompute
/// first, then full recomputation.
fn recompute_steps(
    policy: ActivationPolicy,
    modules: RecomputeModules,
    mla: bool,
) -> Vec<(ActivationPolicy, RecomputeModules)> {
    use ActivationPolicy as P;
    let none = RecomputeModules::NONE;
    match policy {
        P::Megatron | P::MegatronSelective => {
            let base = match policy {
                P::MegatronSelective => modules.modules(),
                _ => Vec::new(),
            };
            let mut steps = vec![
                vec![M::MoeAct],
                vec![M::MoeAct, M::Layernorm],
                vec![M::MoeAct, M::Layernorm, M::Mlp],
            ];
            if mla {
                steps.push(vec![M::MoeAct, M::Layernorm, M::Mlp, M::MlaUpProj]);
                steps.push(vec![M::Moe, M::Mlp, M::MlaUpProj, M::Layernorm]);
            } else {
                steps.push(vec![M::Moe, M::Mlp]);
            }
            let mut out: Vec<(ActivationPolicy, RecomputeModules)> = Vec::new();
            for step in steps {
                let set = RecomputeModules::of(&[base.clone(), step].concat());
                let current = policy == P::MegatronSelective && set == modules;
                if !current && !out.iter().any(|(_, s)| *s == set) {
                    out.push((P::MegatronSelective, set));
                }
            }
            out.push((P::MegatronFull, none));
            out
        }
        P::Eager | P::Flash => vec![(P::Selective, none), (P::Full, none)],
        P::Selective => vec![(P::Full, none)],
        _ => Vec::new(),
    }
}

/// The largest peak of `spec` under `t`, or `None` when the layout does not split it.
fn peak_of(spec: &ModelSpec, t: &Training) -> Option<f64> {
    training_memory(spec, t).ok().map(|m| m.peak.as_f64())
}

/// The knob candidates of `spec` under `t`: `(knob, setting, spec, layout)`.
fn candidates(spec: &ModelSpec, t: &Training) -> Vec<(String, String, ModelSpec, Training)> {
    let mut out = Vec::new();
    let c = spec.counting;
    let mla = spec.model.mla.is_some();
    for (policy, modules) in recompute_steps(c.activations, c.recompute_modules, mla) {
        let mut s = spec.clone();
        s.counting.activations = policy;
        s.counting.recompute_modules = modules;
        let setting = match policy {
            ActivationPolicy::MegatronSelective => format!("{policy} [{}]", modules.names()),
            _ => policy.to_string(),
        };
        out.push(("recompute".to_owned(), setting, s, *t));
    }
    let mut mb = t.micro_batch / 2;
    while mb >= 1 {
        let tt = Training {
            micro_batch: mb,
            ..*t
        };
        out.push((
            "micro_batch".to_owned(),
            format!("micro_batch {mb}"),
            spec.clone(),
            tt,
        ));
        mb /= 2;
    }
    for f in [2, 4, 8] {
        let pp = t.pp.saturating_mul(f);
        let (dp, words) = if t.dp.is_multiple_of(f) {
            (t.dp / f, format!("pp {pp}, dp {} (same GPUs)", t.dp / f))
        } else {
            (t.dp, format!("pp {pp} ({}x the GPUs)", f))
        };
        let tt = Training { pp, dp, ..*t };
        out.push(("pp".to_owned(), words, spec.clone(), tt));
    }
    for f in [2, 4, 8] {
        let ep = t.ep.saturating_mul(f);
        let tt = Training { ep, ..*t };
        out.push(("ep".to_owned(), format!("ep {ep}"), spec.clone(), tt));
    }
    for zero in t.zero + 1..=3 {
        let tt = Training { zero, ..*t };
        out.push(("zero".to_owned(), format!("ZeRO-{zero}"), spec.clone(), tt));
    }
    out
}

/// The verdict of `spec` under `training` on a card of `card_bytes` (named `card`).
pub fn fit(
    spec: &ModelSpec,
    training: &Training,
    card: &str,
    card_bytes: f64,
) -> Result<FitReport> {
    let m = training_memory(spec, training)?;
    let peak = m.peak.as_f64();
    let stages = m
        .stages
        .iter()
        .map(|st| {
            let p = st.peak.as_f64();
            StageFit {
                stage: st.stage,
                peak_bytes: p,
                margin_bytes: card_bytes - p,
                fits: p <= card_bytes,
            }
        })
        .collect();
    let fits = peak <= card_bytes;
    let mut knobs: Vec<Knob> = Vec::new();
    if !fits {
        for (knob, setting, s, t) in candidates(spec, training) {
            let Some(p) = peak_of(&s, &t) else { continue };
            let found = knobs.iter().position(|k| k.knob == knob);
            let candidate = Knob {
                knob,
                setting,
                peak_bytes: p,
                fits: p <= card_bytes,
            };
            match found {
                // Keep the first that fits; before one does, the lowest peak.
                Some(i) if !knobs[i].fits && (candidate.fits || p < knobs[i].peak_bytes) => {
                    knobs[i] = candidate;
                }
                Some(_) => {}
                None => knobs.push(candidate),
            }
        }
    }
    Ok(FitReport {
        card: card.to_owned(),
        card_bytes,
        peak_bytes: peak,
        peak_stage: m.peak_stage,
        margin_bytes: card_bytes - peak,
        fits,
        stages,
        knobs,
    })
}

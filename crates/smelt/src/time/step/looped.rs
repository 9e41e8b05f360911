//! A looped model's training step: where its layers sit in the pipeline, and what the
//! loop's second visits cost.
//!
//! # Placement
//!
//! A 1F1B pipeline (Megatron-Core's schedule; Narayanan et al., arXiv:2104.04473, §2.2)
//! passes each micro-batch through its stages once, in order, forward, and once back. A
//! loop whose block spans a stage boundary would send every micro-batch back to an earlier
//! stage after its first visit, which that schedule does not run; and the loop's shared
//! weights must sit where each of its visits runs. So the step model keeps **the whole
//! loop on one stage**:
//!
//! * the stages are contiguous runs of physical layers, and the looped block lies inside
//!   one of them, which runs every visit of it;
//! * among those splits, the one with the fewest layer executions on its largest stage (a
//!   looped layer counts once per visit), filling the stages from the first: an uneven
//!   split, which Megatron-Core runs with `--decoder-first-pipeline-num-layers` /
//!   `--decoder-last-pipeline-num-layers` or `--pipeline-model-parallel-layout`;
//! * the shared weights live once, on that stage: parameters, gradients, optimizer state
//!   and the data-parallel reduce-scatter and all-gather count each physical layer once
//!   (at the mean stage's share, as for an unlooped model);
//! * interleaved virtual stages (`vp > 1`) are refused: the loop would have to sit inside
//!   one model chunk of `L / (pp · vp)` layers, and the chunks' interleaving with uneven
//!   chunks is not modelled.
//!
//! The alternative, the executions laid out in their unrolled order so that a later visit
//! runs on a later stage, needs the looped weights on every stage that runs a visit of
//! them and their gradients all-reduced between those stages (as Megatron-Core does for a
//! tied embedding between the first and last stage, and for no other weight): it is not
//! modelled.
//!
//! # Time
//!
//! The mean stage (the model's `E` layer executions spread evenly, `E / pp` per stage) is
//! the unlooped model's micro-batch ([`super::predict_step_host`]) with every count per
//! layer taken on the model [`unrolled`] (each visit a layer of its own: it runs its GEMMs,
//! grouped GEMMs, attention or recurrent mixer, memory-bound kernels, TP collectives and EP
//! dispatch and combine, and the host issues it), while its parameters (the optimizer step,
//! the data-parallel traffic, ZeRO 3's per-micro-batch gathers) are the model's own. Stage
//! `s`, with `x_s` executions, takes that micro-batch with its per-execution work scaled by
//! `x_s / (E / pp)`, except what only some layers run: the dense FFNs' GEMMs scale by the
//! stage's dense-FFN layer executions over the mean stage's, and the MoE layers' router and
//! shared-expert GEMMs, grouped GEMMs and all-to-alls by its MoE layer executions over the
//! mean stage's (DeepSeek-V3's first stage, three dense layers and one MoE layer, is
//! lighter in all-to-alls than a stage of four MoE layers); the LM head, the cross-entropy,
//! the MTP modules, the p2p and ZeRO 3's gathers stay charged to every stage, as in the
//! unlooped model (whose stage is its last; a split the layout gives charges the head and
//! the MTP modules to its last stage alone). Recomputation follows the scaled work. A
//! stage's micro-batch takes the longest of its GPU, host and ZeRO 3 times (`t_s`); the
//! step is
//!
//! ```text
//! m · max t_s + (Σ t_s − max t_s) / vp + optimizer + exposed DP communication
//! ```
//!
//! which is the unlooped model's `m · t + (pp − 1) · t / vp + ...` when the stages are
//! equal. The **pipeline imbalance** is what the step loses to the uneven stages: the step's
//! pipeline part less the same with every stage at the mean stage's time.

use serde::Serialize;

use super::{MicroBatch, Recompute, recompute_seconds};
use crate::error::{Error, Result};
use crate::model::{Model, ModelSpec, Training};

/// Where a looped model's layers sit in the pipeline (or an unlooped model's, split
/// unevenly as its layout says), and what its stages take.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pipeline {
    /// Physical layers per stage, in order.
    pub stage_layers: Vec<u64>,
    /// Layer executions per stage (a looped layer counted once per visit).
    pub stage_executions: Vec<u64>,
    /// The stage (1-based) that runs the loop; absent for a model without a loop (an
    /// uneven split given by `first_stage_layers` / `last_stage_layers`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loop_stage: Option<u64>,
    /// Whether the split is the even one (`L / pp` physical layers per stage).
    pub even: bool,
    /// Seconds of one micro-batch per stage (GPU and host overlapped).
    pub stage_seconds: Vec<f64>,
    /// The slowest stage (1-based; the first of equals), whose micro-batch the prediction
    /// reports.
    pub bottleneck: u64,
    /// The mean stage's micro-batch: the layer executions spread evenly over the stages.
    pub balanced: MicroBatch,
    /// Seconds the uneven stages add to the step (module docs).
    pub imbalance: f64,
}

/// The stages of `m` under `t` (module docs): `(physical layers, executions)` per stage;
/// without a loop that runs its block more than once, the split `t`'s
/// `first_stage_layers` / `last_stage_layers` give ([`Training::stage_chunks`]), or `None`
/// when they are not given (every stage the mean stage).
pub fn place(m: &Model, t: &Training) -> Result<Option<Vec<(u64, u64)>>> {
    let uneven = t.first_stage_layers.is_some() || t.last_stage_layers.is_some();
    let Some(l) = m.looping.as_ref().filter(|l| l.repeats > 1) else {
        if !uneven {
            return Ok(None);
        }
        let stages = t.stage_layers(m.layers)?;
        return Ok(Some(stages.into_iter().map(|l| (l, l)).collect()));
    };
    if uneven {
        return Err(Error::invalid(
            if t.first_stage_layers.is_some() {
                "training.first_stage_layers"
            } else {
                "training.last_stage_layers"
            },
            "a looped model's pipeline split is the step model's own (it keeps the whole loop \
             on one stage); give no first or last stage layers",
        ));
    }
    if t.vp > 1 {
        return Err(Error::invalid(
            "training.vp",
            format!(
                "a looped model's step is modelled with its loop on one pipeline stage and \
                 without interleaved virtual stages (vp = 1); got vp = {}",
                t.vp
            ),
        ));
    }
    let loop_w = l.span.saturating_mul(l.repeats);
    // The units a stage boundary may fall between: each layer outside the loop, and the
    // loop's block as one, as (physical layers, executions).
    let before = l.first - 1;
    let after = m.layers - before - l.span;
    let units = before + 1 + after;
    if t.pp > units {
        return Err(Error::invalid(
            "training.pp",
            format!(
                "the loop (layers {}-{}) must sit on one pipeline stage, which leaves at most \
                 {units} stages ({} layers outside it, and the loop); got pp = {}",
                l.first,
                l.first + l.span - 1,
                before + after,
                t.pp
            ),
        ));
    }
    let unit = |i: u64| {
        if i == before {
            (l.span, loop_w)
        } else {
            (1, 1)
        }
    };
    let total = m.executions();
    let fits = |w: u64| stages(units, t.pp, w, unit).is_some();
    let (mut lo, mut hi) = (loop_w.max(total.div_ceil(t.pp)), total);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Ok(stages(units, t.pp, lo, unit))
}

/// The stages of `units` (each `(layers, weight)` from `unit`), filled from the first with
/// no stage over `w` and every one of the `pp` stages non-empty; `None` when that cannot be.
fn stages(
    units: u64,
    pp: u64,
    w: u64,
    unit: impl Fn(u64) -> (u64, u64),
) -> Option<Vec<(u64, u64)>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < units {
        let left = pp.checked_sub(out.len() as u64 + 1)?;
        let (mut layers, mut weight) = unit(i);
        if weight > w {
            return None;
        }
        i += 1;
        // Take the next unit while it fits and leaves a unit for every stage still to come.
        while i < units && units - i > left {
            let (l, x) = unit(i);
            if weight + x > w {
                break;
            }
            layers += l;
            weight += x;
            i += 1;
        }
        out.push((layers, weight));
    }
    (out.len() as u64 == pp).then_some(out)
}

/// The micro-batch of a stage whose per-execution work is `k` times the mean stage's
/// (`mean`), before its recomputation ([`StageKinds::adjust`] adds it); `head` holds the
/// seconds of the mean stage's work that does not scale (the LM head, the cross-entropy,
/// the MTP modules: [`super::predict_step_host`]), which a stage without the head (`on`
/// false: one before the last of a split the layout gives) does not run.
fn scaled(mean: &MicroBatch, k: f64, head: &MicroBatch, on: bool) -> MicroBatch {
    let part = |all: f64, fixed: f64| (all - fixed) * k + if on { fixed } else { 0.0 };
    MicroBatch {
        gemm: part(mean.gemm, head.gemm),
        experts: part(mean.experts, head.experts),
        attention: part(mean.attention, head.attention),
        recurrent: mean.recurrent * k,
        memory_bound: part(mean.memory_bound, head.memory_bound),
        recompute: 0.0,
        tp_comm: part(mean.tp_comm, head.tp_comm),
        ep_comm: part(mean.ep_comm, head.ep_comm),
        pp_comm: mean.pp_comm,
        fsdp_comm: mean.fsdp_comm,
        fsdp_copies: mean.fsdp_copies * k,
        gpu: 0.0,
        host: part(mean.host, head.host),
    }
}

/// What the stages take: a looped model's pipeline, and the bottleneck stage's
/// micro-batch, its seconds and the bubble.
pub(super) struct Staged {
    /// A looped model's placement and its times.
    pub pipeline: Option<Pipeline>,
    /// The bottleneck stage's micro-batch.
    pub micro_batch: MicroBatch,
    /// Its seconds (GPU and host overlapped).
    pub micro: f64,
    /// The bubble: `(Σ t_s − max t_s) / vp`.
    pub bubble: f64,
}

/// The micro-batch of the step's slowest stage, its seconds and the bubble, from the mean
/// stage's micro-batch `mean`: every stage alike without a loop (`(pp − 1) / vp` of a
/// micro-batch of bubble), or a looped model's stages ([`place`], [`staged`]).
pub(super) fn stages_of(
    m: &Model,
    t: &Training,
    mean: MicroBatch,
    fixed: (&MicroBatch, Recompute),
    kinds: KindGemms,
    micro_batches: u64,
) -> Result<Staged> {
    if let Some(stages) = place(m, t)? {
        let k = StageKinds::of(m, &stages, kinds);
        return Ok(staged(m, t, &stages, mean, fixed, &k, micro_batches));
    }
    let micro = seconds(&mean);
    let bubble = if t.pp > 1 {
        (t.pp as f64 - 1.0) / t.vp as f64 * micro
    } else {
        0.0
    };
    Ok(Staged {
        pipeline: None,
        micro_batch: mean,
        micro,
        bubble,
    })
}

/// The mean stage's seconds of the GEMMs only dense-FFN layers run (`dense`) and of those
/// only MoE layers run (`moe`: the router and the shared experts).
#[derive(Debug, Clone, Copy)]
pub(super) struct KindGemms {
    /// The dense FFNs' GEMMs.
    pub dense: f64,
    /// The routers' and the shared experts' GEMMs.
    pub moe: f64,
}

/// Per stage, its dense-FFN and MoE layer executions against the mean stage's.
struct StageKinds {
    gemms: KindGemms,
    /// `(dense, moe)` executions of each stage over the mean stage's (1 where the model has
    /// none of that kind).
    ratios: Vec<(f64, f64)>,
}

impl StageKinds {
    fn of(m: &Model, stages: &[(u64, u64)], gemms: KindGemms) -> Self {
        let dense: Vec<u64> = m.dense.as_ref().map_or_else(Vec::new, |d| d.layers.clone());
        let mixer_only = m.mixer_only();
        let mut first = 1u64;
        let counts: Vec<(u64, u64)> = (stages.iter())
            .map(|&(layers, x)| {
                let range = first..first + layers;
                first += layers;
                let of = |list: &[u64]| {
                    let inside: Vec<u64> =
                        list.iter().copied().filter(|l| range.contains(l)).collect();
                    m.executions_of(&inside)
                };
                let d = of(&dense);
                (d, x.saturating_sub(d).saturating_sub(of(mixer_only)))
            })
            .collect();
        let pp = stages.len() as f64;
        let total = |f: fn(&(u64, u64)) -> u64| counts.iter().map(f).sum::<u64>() as f64 / pp;
        let (dense_mean, moe_mean) = (total(|c| c.0), total(|c| c.1));
        let ratio = |n: u64, mean: f64| if mean > 0.0 { n as f64 / mean } else { 1.0 };
        let ratios = (counts.iter())
            .map(|&(d, e)| (ratio(d, dense_mean), ratio(e, moe_mean)))
            .collect();
        Self { gemms, ratios }
    }

    /// `batch`, stage `i`'s micro-batch with every per-execution term scaled by `k`, with
    /// the dense FFNs' GEMMs, the MoE layers' GEMMs, grouped GEMMs and all-to-alls scaled
    /// by the stage's own executions of those layers instead, and the recomputation of
    /// what results.
    fn adjust(
        &self,
        i: usize,
        batch: MicroBatch,
        mean: &MicroBatch,
        k: f64,
        (head, on): (&MicroBatch, bool),
        recompute: Recompute,
    ) -> MicroBatch {
        let (kd, ke) = self.ratios[i];
        let gemm = batch.gemm + self.gemms.dense * (kd - k) + self.gemms.moe * (ke - k);
        let fixed = |f: f64| if on { f } else { 0.0 };
        let (experts, ep_comm) = (
            (mean.experts - head.experts) * ke + fixed(head.experts),
            (mean.ep_comm - head.ep_comm) * ke + fixed(head.ep_comm),
        );
        MicroBatch {
            gemm,
            experts,
            ep_comm,
            recompute: recompute_seconds(
                recompute,
                [gemm, experts, batch.attention, batch.recurrent],
                batch.memory_bound,
            ),
            ..batch
        }
        .summed()
    }
}

/// The times of `stages` (`(physical layers, executions)` each) from the mean stage's
/// micro-batch `mean` (module docs); `micro_batches` per step, `vp` virtual stages.
fn staged(
    m: &Model,
    t: &Training,
    stages: &[(u64, u64)],
    mean: MicroBatch,
    (head, recompute): (&MicroBatch, Recompute),
    kinds: &StageKinds,
    micro_batches: u64,
) -> Staged {
    let pp = stages.len() as f64;
    let per_stage = m.executions() as f64 / pp;
    let micro_of = seconds;
    // A looped model's stages are each charged the LM head and the cross-entropy, as the
    // mean stage is (module docs); a split the layout gives (no loop) puts them on the
    // last stage alone, where Megatron-Core runs them.
    let unlooped = m.looping.as_ref().is_none_or(|l| l.repeats <= 1);
    let last = stages.len() - 1;
    let batches: Vec<MicroBatch> = (stages.iter().enumerate())
        .map(|(i, &(layers, x))| {
            let k = x as f64 / per_stage;
            let on = !unlooped || i == last;
            // FSDP2's copies follow the stage's layer executions under ZeRO 3 (each gathers
            // again), its physical layers below (gathered once per step).
            let physical = layers as f64 / (m.layers as f64 / pp);
            let copies = if t.zero >= 3 { k } else { physical };
            let batch = MicroBatch {
                fsdp_copies: mean.fsdp_copies * copies,
                ..scaled(&mean, k, head, on)
            };
            kinds.adjust(i, batch, &mean, k, (head, on), recompute)
        })
        .collect();
    let stage_seconds: Vec<f64> = batches.iter().map(micro_of).collect();
    let (slow, micro) =
        (stage_seconds.iter().enumerate()).fold((0, f64::NEG_INFINITY), |(j, a), (i, &s)| {
            if s > a { (i, s) } else { (j, a) }
        });
    let vp = t.vp as f64;
    let sum: f64 = stage_seconds.iter().sum();
    let bubble = if stages.len() > 1 {
        (sum - micro) / vp
    } else {
        0.0
    };
    // The balanced stage: the mean stage's micro-batch; for a split the layout gives (the
    // LM head on the last stage alone), the mean of the stages' times.
    let mean_micro = if unlooped { sum / pp } else { micro_of(&mean) };
    let steps = micro_batches as f64;
    let balanced_bubble = (pp - 1.0) / vp * mean_micro;
    let imbalance = (steps * micro + bubble - steps * mean_micro - balanced_bubble).max(0.0);
    let looped = m.looping.as_ref().filter(|l| l.repeats > 1);
    let mut first = 1;
    let mut loop_stage = None;
    for (i, &(layers, _)) in stages.iter().enumerate() {
        if looped.is_some_and(|l| (first..first + layers).contains(&l.first)) {
            loop_stage = Some(i as u64 + 1);
        }
        first += layers;
    }
    let even = (stages.iter()).all(|&(layers, _)| layers * t.pp == m.layers);
    Staged {
        pipeline: Some(Pipeline {
            stage_layers: stages.iter().map(|s| s.0).collect(),
            stage_executions: stages.iter().map(|s| s.1).collect(),
            loop_stage,
            even,
            stage_seconds,
            bottleneck: slow as u64 + 1,
            balanced: mean,
            imbalance,
        }),
        micro_batch: batches[slow],
        micro,
        bubble,
    }
}

/// A micro-batch's seconds: the longest of its GPU work, its host's launches and ZeRO 3's
/// gathers (they overlap).
fn seconds(b: &MicroBatch) -> f64 {
    b.gpu.max(b.host).max(b.fsdp_comm)
}

/// `spec` with its layers as they execute: a loop's block repeated in place, each visit a
/// layer of its own, and every list of layers (windowed, dense, recurrent, one-block)
/// holding each visit of the layers it lists; a model without a loop that runs more than
/// once is returned as it is. Counts per layer on it are counts per layer execution.
pub fn unrolled(spec: &ModelSpec) -> ModelSpec {
    let m = &spec.model;
    if m.looping.as_ref().is_none_or(|l| l.repeats <= 1) {
        return spec.clone();
    }
    let order = m.execution_order();
    // The 1-based positions at which the listed 1-based physical layers execute.
    let visits = |layers: &[u64]| -> Vec<u64> {
        let mut listed = vec![false; m.layers as usize];
        for &l in layers {
            if let Some(x) = listed.get_mut((l as usize).wrapping_sub(1)) {
                *x = true;
            }
        }
        (order.iter().enumerate())
            .filter(|(_, l)| listed.get(**l as usize).copied().unwrap_or(false))
            .map(|(i, _)| i as u64 + 1)
            .collect()
    };
    let mut u = spec.clone();
    let model = &mut u.model;
    model.layers = order.len() as u64;
    model.looping = None;
    if let Some(w) = model.window.as_mut() {
        w.layers = visits(&w.layers);
    }
    if let Some(d) = model.dense.as_mut() {
        d.layers = visits(&d.layers);
    }
    if let Some(r) = model.recurrent.as_mut() {
        r.layers = visits(&r.layers);
    }
    if let Some(b) = model.blocks.as_mut() {
        b.mixer_only = visits(&b.mixer_only);
        b.ffn_only = visits(&b.ffn_only);
    }
    u
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Loop, ModelSpec};

    fn looped(layers: u64, first: u64, span: u64, repeats: u64) -> Model {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../budgets/base-600m-s95.toml"
        ))
        .unwrap();
        let mut m = ModelSpec::from_toml_str(&text).unwrap().model;
        m.layers = layers;
        m.looping = Some(Loop {
            first,
            span,
            repeats,
            residual_scale: None,
        });
        m
    }

    fn layout(pp: u64) -> Training {
        Training {
            pp,
            ..Training::default()
        }
    }

    /// The loop stays on one stage, and the split has the fewest executions on its largest
    /// stage: by brute force over every split that keeps the loop whole.
    #[test]
    fn the_split_is_the_best_that_keeps_the_loop_whole() {
        for (layers, first, span, repeats) in
            [(20, 6, 10, 2), (12, 1, 3, 2), (12, 4, 6, 3), (9, 9, 1, 4)]
        {
            let m = looped(layers, first, span, repeats);
            for pp in 1..=layers {
                let got = place(&m, &layout(pp));
                let units = layers - span + 1;
                if pp > units {
                    assert!(got.is_err(), "pp {pp}");
                    continue;
                }
                let got = got.unwrap().unwrap();
                assert_eq!(got.len() as u64, pp);
                assert_eq!(got.iter().map(|s| s.0).sum::<u64>(), layers);
                assert_eq!(got.iter().map(|s| s.1).sum::<u64>(), m.executions());
                let best = brute(layers, first, span, repeats, pp);
                assert_eq!(
                    got.iter().map(|s| s.1).max().unwrap(),
                    best,
                    "{layers} {first} {span} pp {pp}"
                );
                // Each stage's executions are its layers' visits, the loop inside one.
                let mut at = 1;
                for &(l, x) in &got {
                    let visits: u64 = (at..at + l).map(|i| m.visits(i)).sum();
                    assert_eq!(visits, x);
                    let inside = (at..at + l).filter(|&i| m.visits(i) > 1).count() as u64;
                    assert!(inside == 0 || inside == span);
                    at += l;
                }
            }
        }
    }

    /// The smallest largest stage over every split into `pp` stages with the loop whole.
    fn brute(layers: u64, first: u64, span: u64, repeats: u64, pp: u64) -> u64 {
        let visits = |i: u64| {
            if (first..first + span).contains(&i) {
                repeats
            } else {
                1
            }
        };
        let mut best = u64::MAX;
        // Boundaries: a subset of the gaps after layer 1..layers-1, of size pp-1.
        let gaps: Vec<u64> = (1..layers)
            .filter(|&g| !(first..first + span - 1).contains(&g))
            .collect();
        let n = gaps.len();
        for mask in 0u64..(1 << n) {
            if mask.count_ones() as u64 != pp - 1 {
                continue;
            }
            let cuts: Vec<u64> = (0..n)
                .filter(|b| mask >> b & 1 == 1)
                .map(|b| gaps[b])
                .collect();
            let mut start = 1;
            let mut worst = 0;
            for end in cuts.iter().copied().chain([layers]) {
                worst = worst.max((start..=end).map(visits).sum());
                start = end + 1;
            }
            best = best.min(worst);
        }
        best
    }

    /// A loop run once, or no loop, has no placement of its own; vp > 1 is refused.
    #[test]
    fn only_a_real_loop_is_placed() {
        assert_eq!(place(&looped(20, 6, 10, 1), &layout(4)).unwrap(), None);
        let vp = Training {
            pp: 2,
            vp: 2,
            ..Training::default()
        };
        let e = place(&looped(20, 6, 10, 2), &vp).unwrap_err().to_string();
        assert!(e.contains("training.vp") && e.contains("vp = 2"), "{e}");
    }
}

//! The parameter, FLOP and KV counts of a model: each a sum over the kinds of layer of its
//! [`crate::model::Stack`] ([`StackCost`]), parameters per physical layer, FLOPs and the KV
//! cache per execution (module docs of [`crate::cost`]).

use super::Keys;
use super::layer::{FfnCost, KindCost, StackCost};
use super::types::{FlopBreakdown, ParamBreakdown};
use crate::error::Result;
use crate::model::{Counting, Layer, LayerKind, MixerBudget as Budget, MixerWords, Model};
use crate::units::{Flops, KvElements, Params, add, product};

/// What else a recurrent count over the layers grows with, for its refusal.
const OVER_LAYERS: &str = "the recurrent layers (model.recurrent.layers, [model.loop] repeats)";

/// The embedding and LM-head matrices counted: `(embeddings, lm_head)`.
pub(super) fn vocab_matrices(model: &Model, counting: &Counting) -> Result<(Params, Params)> {
    let matrix = Params(product(&[model.vocab, model.hidden], "params.embeddings")?);
    let embeddings = if counting.embeddings {
        matrix
    } else {
        Params::ZERO
    };
    let lm_head = if counting.lm_head && !(model.tie_embeddings && counting.embeddings) {
        matrix
    } else {
        Params::ZERO
    };
    let bias = Params(if counting.lm_head && model.lm_head_bias {
        model.vocab
    } else {
        0
    });
    Ok((embeddings, lm_head.checked_add(bias)?))
}

/// Parameters of the layers of `kinds` (each times its physical layers), by component:
/// `(total, active)`, without the final norm, the vocabulary matrices and MTP modules.
pub(super) fn layer_params(kinds: &[KindCost]) -> Result<(ParamBreakdown, ParamBreakdown)> {
    let mut total = ParamBreakdown::default();
    let mut active_experts = Params::ZERO;
    for k in kinds {
        let n = k.physical;
        let times = |x: u64| Params(x).checked_mul(n);
        if let Some(a) = &k.attention {
            total.attention = total.attention.checked_add(times(a.block.params)?)?;
            let ix = a.indexer.map_or(0, |ix| ix.params);
            total.indexer = total.indexer.checked_add(times(ix)?)?;
        }
        total.norms = total.norms.checked_add(times(k.norms)?)?;
        if let Some(r) = &k.recurrent {
            total.recurrent = (times(r.params).and_then(|p| total.recurrent.checked_add(p)))
                .map_err(|e| {
                    r.kind.overflow(
                        e,
                        Budget::Params,
                        "params.recurrent (the weights over the layers)",
                        Some("model.recurrent.layers"),
                    )
                })?;
        }
        match &k.ffn {
            Some(FfnCost::Moe(f)) => {
                total.experts = total.experts.checked_add(times(f.experts)?)?;
                active_experts = active_experts.checked_add(times(f.active_experts)?)?;
                total.router = total.router.checked_add(times(f.router)?)?;
                total.shared = total.shared.checked_add(times(f.shared)?)?;
                total.latent_projections =
                    (total.latent_projections).checked_add(times(f.latent)?)?;
            }
            Some(FfnCost::Dense { weights }) => {
                total.dense = total.dense.checked_add(times(*weights)?)?;
            }
            None => {}
        }
    }
    let active = ParamBreakdown {
        experts: active_experts,
        ..total
    };
    Ok((total, active))
}

/// One layer of the stack on a residual stream of width `hidden`, with the workload's
/// `keys`: its parameters (total, by component) and its forward FLOPs per token of one
/// execution (by component). The cost model's counts are these summed over the stack: the
/// parameters over the physical layers, the FLOPs over the executions (with the final norm,
/// the vocabulary matrices and MTP modules besides).
pub fn layer_cost(
    hidden: u64,
    layer: &Layer,
    keys: &Keys,
) -> Result<(ParamBreakdown, FlopBreakdown)> {
    let one = KindCost::of(
        hidden,
        &LayerKind {
            layer: layer.clone(),
            physical: 1,
            executions: 1,
        },
    )?;
    let one = std::slice::from_ref(&one);
    Ok((layer_params(one)?.0, Macs::of(one, keys)?.flops(keys)?))
}

/// Parameters of the multi-token-prediction modules when counted: `(total, active)`.
fn mtp_params(model: &Model, cost: &StackCost, counting: &Counting) -> Result<(Params, Params)> {
    let Some(block) = cost.mtp.as_ref().filter(|_| counting.mtp) else {
        return Ok((Params::ZERO, Params::ZERO));
    };
    let h = model.hidden;
    let (embeddings, lm_head) = vocab_matrices(model, counting)?;
    // One module: its block (attention with its indexer, MoE, two norms), the projection of
    // [norm(h); norm(embedding)] (2H x H), three norms (enorm, hnorm, the head's norm) and
    // its own embedding and head, as the checkpoint stores them.
    let one = KindCost {
        physical: 1,
        ..block.clone()
    };
    let (layer, active_layer) = layer_params(std::slice::from_ref(&one))?;
    let common = Params::sum(&[
        Params(product(&[3, cost.norm], "params.mtp")?),
        Params(product(&[2, h, h], "params.mtp")?),
        embeddings,
        lm_head,
    ])?;
    let total = common.checked_add(layer.total()?)?;
    let active = common.checked_add(active_layer.total()?)?;
    Ok((
        total.checked_mul(block.physical)?,
        active.checked_mul(block.physical)?,
    ))
}

/// Parameters of `model`, whose layers cost `cost`: `(total, active)` breakdowns.
pub(super) fn params_of(
    model: &Model,
    cost: &StackCost,
    counting: &Counting,
) -> Result<(ParamBreakdown, ParamBreakdown)> {
    let (layers, active_layers) = layer_params(&cost.kinds)?;
    let (embeddings, lm_head) = vocab_matrices(model, counting)?;
    let (mtp, active_mtp) = mtp_params(model, cost, counting)?;
    let total = ParamBreakdown {
        // The final norm.
        norms: layers.norms.checked_add(Params(cost.norm))?,
        embeddings,
        lm_head,
        mtp,
        ..layers
    };
    let active = ParamBreakdown {
        experts: active_layers.experts,
        mtp: active_mtp,
        ..total
    };
    Ok((total, active))
}

/// Forward multiply-adds per token of the layers of `kinds`, each kind times its
/// executions, by component; and the attention cores and indexer scores, whose FLOPs are
/// fractions, as `(keys, width, executions)`.
#[derive(Debug, Default)]
struct Macs {
    projections: u64,
    router: u64,
    experts: u64,
    shared: u64,
    dense: u64,
    indexer: u64,
    recurrent: u64,
    /// LatentMoE's projections.
    latent: u64,
    /// Multiply-adds of the recurrent convolution and scan over one `sequence` of tokens.
    recurrent_sequence: u64,
    /// The recurrent mixer (one kind per model), if any.
    recurrent_kind: Option<MixerWords>,
    /// `(keys attended, core width, executions)`, one entry per distinct keys and width.
    cores: Vec<(super::MeanKeys, u64, u64)>,
    /// `(score width, executions)` of the indexers, which score the full keys.
    scores: Vec<(u64, u64)>,
}

impl Macs {
    /// The multiply-adds of `kinds` on `keys`.
    fn of(kinds: &[KindCost], keys: &Keys) -> Result<Self> {
        let mut m = Macs::default();
        let sum = |acc: &mut u64, x: u64, n: u64, what| {
            *acc = add(*acc, product(&[x, n], what)?, what)?;
            Ok::<_, crate::Error>(())
        };
        for k in kinds {
            let x = k.executions;
            if let Some(a) = &k.attention {
                sum(&mut m.projections, a.block.macs, x, "flops.projections")?;
                let attended = keys.attended(a.window, a.indexer.is_some());
                let width = a.block.core_width;
                match m.cores.iter_mut().find(|c| (c.0, c.1) == (attended, width)) {
                    Some(c) => c.2 = add(c.2, x, "flops.attention_core")?,
                    None => m.cores.push((attended, width, x)),
                }
                if let Some(ix) = a.indexer {
                    sum(&mut m.indexer, ix.macs, x, "flops.indexer")?;
                    m.scores.push((ix.score_width, x));
                }
            }
            if let (Some(r), Some(t)) = (k.recurrent, keys.sequence) {
                m.recurrent_kind = Some(r.kind);
                let over = |e, what| r.kind.overflow(e, Budget::Flops, what, Some(OVER_LAYERS));
                sum(&mut m.recurrent, r.macs, x, "flops.recurrent")
                    .map_err(|e| over(e, "flops.recurrent (the projections)"))?;
                sum(
                    &mut m.recurrent_sequence,
                    r.sequence_macs(t)?,
                    x,
                    "flops.recurrent",
                )
                .map_err(|e| over(e, "flops.recurrent (the convolutions and scans)"))?;
            }
            match &k.ffn {
                Some(FfnCost::Moe(f)) => {
                    sum(&mut m.router, f.router_macs, x, "flops.router")?;
                    sum(&mut m.experts, f.expert_macs, x, "flops.experts")?;
                    sum(&mut m.shared, f.shared_macs, x, "flops.shared")?;
                    sum(&mut m.latent, f.latent, x, "flops.latent_projections")?;
                }
                Some(FfnCost::Dense { weights }) => sum(&mut m.dense, *weights, x, "flops.dense")?,
                None => {}
            }
        }
        Ok(m)
    }

    /// Their forward FLOPs per token, by component (the LM head and MTP modules zero).
    fn flops(&self, keys: &Keys) -> Result<FlopBreakdown> {
        let flops =
            |macs: u64, what| Ok::<_, crate::Error>(Flops::from_int(product(&[2, macs], what)?));
        let mut attention_core = Flops::ZERO;
        for &(attended, width, x) in &self.cores {
            attention_core =
                attention_core.checked_add(attended.attention_flops(width)?.checked_mul(x)?)?;
        }
        let mut indexer = flops(self.indexer, "flops.indexer")?;
        for &(width, x) in &self.scores {
            indexer = indexer.checked_add(keys.full.attention_flops(width)?.checked_mul(x)?)?;
        }
        // The convolution and the scan run over the `context`-token sequence: per token of it.
        let over = |e, what| match self.recurrent_kind {
            Some(kind) => kind.overflow(e, Budget::Flops, what, Some(OVER_LAYERS)),
            None => e,
        };
        let recurrent_core = match keys.sequence {
            Some(t) => product(&[2, self.recurrent_sequence], "flops.recurrent")
                .and_then(|macs| Flops::ratio(u128::from(macs), u128::from(t)))
                .map_err(|e| over(e, "flops.recurrent (the convolutions and scans)"))?,
            None => Flops::ZERO,
        };
        let recurrent_projections = flops(self.recurrent, "flops.recurrent")
            .map_err(|e| over(e, "flops.recurrent (the projections)"))?;
        Ok(FlopBreakdown {
            projections: flops(self.projections, "flops.projections")?,
            attention_core,
            router: flops(self.router, "flops.router")?,
            experts: flops(self.experts, "flops.experts")?,
            shared: flops(self.shared, "flops.shared")?,
            dense: flops(self.dense, "flops.dense")?,
            lm_head: Flops::ZERO,
            mtp: Flops::ZERO,
            indexer,
            recurrent_projections,
            recurrent_core,
            latent_projections: flops(self.latent, "flops.latent_projections")?,
        })
    }
}

/// Forward FLOPs per token of `model`, whose layers cost `cost`, with `keys` (checked
/// against it by the caller), by component.
pub(super) fn forward_of(
    model: &Model,
    cost: &StackCost,
    keys: &Keys,
    counting: &Counting,
) -> Result<FlopBreakdown> {
    let h = model.hidden;
    let lm_head_macs = product(&[h, model.vocab], "flops.lm_head")?;
    let head = |on: bool, times: u64| {
        let macs = if on { lm_head_macs } else { 0 };
        Ok::<_, crate::Error>(Flops::from_int(product(
            &[2, macs, times],
            "flops.lm_head",
        )?))
    };
    let mtp = match cost.mtp.as_ref().filter(|_| counting.mtp) {
        Some(block) => {
            // Per module: the projection of [norm(h); norm(embedding)], the block (full
            // attention with its indexer, the MoE), and the head when it is counted.
            let n = block.executions;
            let extra = Flops::from_int(product(&[2, 2, h, h, n], "flops.mtp")?);
            Macs::of(std::slice::from_ref(block), keys)?
                .flops(keys)?
                .total()?
                .checked_add(extra)?
                .checked_add(head(counting.lm_head, n)?)?
        }
        None => Flops::ZERO,
    };
    Ok(FlopBreakdown {
        lm_head: head(counting.lm_head, 1)?,
        mtp,
        ..Macs::of(&cost.kinds, keys)?.flops(keys)?
    })
}

/// Forward FLOPs per token of the MTP modules of `model`, whose layers cost `cost`, by
/// component: each module's block (full attention, the MoE) and its projection of
/// `[norm(h); norm(embedding)]` (`2·2H·H`, in `projections`), without its LM head; zero
/// without MTP modules. Counted whatever `[counting] mtp` says (a step runs them).
pub(super) fn mtp_forward_of(
    model: &Model,
    cost: &StackCost,
    keys: &Keys,
) -> Result<FlopBreakdown> {
    let Some(block) = cost.mtp.as_ref() else {
        return Ok(FlopBreakdown::default());
    };
    let h = model.hidden;
    let extra = Flops::from_int(product(&[2, 2, h, h, block.executions], "flops.mtp")?);
    let b = Macs::of(std::slice::from_ref(block), keys)?.flops(keys)?;
    Ok(FlopBreakdown {
        projections: b.projections.checked_add(extra)?,
        ..b
    })
}

/// KV-cache elements of the attention layers of `cost`: per token (`None`), or one
/// sequence of `context` tokens holds at its end (`Some((context, held))`: `context`
/// entries per full layer execution, `held` per windowed one), and the recurrent layers'
/// state `(conv, delta)` elements over their executions.
pub(super) fn kv_elements(
    cost: &StackCost,
    at: Option<(u64, u64)>,
) -> Result<(KvElements, (u64, u64))> {
    const WHAT: &str = "kv_cache.elements";
    const HELD: &str = "kv_cache.at_context";
    const STATE: &str = "kv_cache.state";
    let (mut kv, mut conv, mut delta) = (0u64, 0u64, 0u64);
    for k in &cost.kinds {
        let x = k.executions;
        if let Some(a) = &k.attention {
            let entries = match (at, a.window) {
                (None, _) => product(&[a.block.kv, x], WHAT)?,
                (Some((context, _)), None) => product(&[a.block.kv, x, context], HELD)?,
                (Some((_, held)), Some(_)) => product(&[a.block.kv, x, held], HELD)?,
            };
            kv = add(kv, entries, if at.is_some() { HELD } else { WHAT })?;
        }
        if let Some(r) = &k.recurrent {
            let held = |acc: u64, per: u64| add(acc, product(&[per, x], STATE)?, STATE);
            (conv, delta) = held(conv, r.conv_state)
                .and_then(|c| Ok((c, held(delta, r.delta_state)?)))
                .map_err(|e| {
                    r.kind.overflow(
                        e,
                        Budget::Kv,
                        "kv_cache.state (the state one sequence holds)",
                        Some(OVER_LAYERS),
                    )
                })?;
        }
    }
    Ok((KvElements(kv), (conv, delta)))
}

/// KV-cache elements one sequence of `context` tokens holds at its end, `held` (at most
/// the window) per windowed layer execution, with the recurrent layers' state.
pub(super) fn kv_held(cost: &StackCost, context: u64, held: u64) -> Result<KvElements> {
    const WHAT: &str = "kv_cache.at_context";
    let (kv, (conv, delta)) = kv_elements(cost, Some((context, held)))?;
    Ok(KvElements(add(kv.0, add(conv, delta, WHAT)?, WHAT)?))
}

//! The `[training]` table: a mixed-precision recipe and a parallel layout, for the static
//! and per-GPU training memory ([`crate::cost::training`]).
//!
//! ```toml
//! [training]            # every key optional; the defaults below
//! tp = 1                # tensor parallelism (Megatron, with sequence parallelism)
//! ep = 1                # expert parallelism (routed experts only)
//! etp = 1               # expert tensor parallelism (Megatron's expert_tensor_parallel_size)
//! pp = 1                # pipeline stages (1F1B schedule)
//! first_stage_layers = 4  # optional: layers of the first stage (uneven pipeline)
//! last_stage_layers = 1   # optional: layers of the last stage (uneven pipeline)
//! dp = 1                # data parallelism
//! cp = 1                # context parallelism (the sequence split across cp GPUs)
//! vp = 1                # virtual pipeline stages per GPU (interleaved 1F1B when > 1)
//! zero = 0              # ZeRO stage 0-3 over data parallelism
//! micro_batch = 1       # sequences of workload.context tokens per micro-batch
//! weight_bytes = 2      # bf16 weights
//! grad_bytes = 2        # bf16 gradients (4: fp32 gradient accumulation, as Megatron's)
//! master_bytes = 4      # fp32 master weights (0: none)
//! optimizer_bytes = 8   # two fp32 Adam moments (0: SGD without momentum)
//! ```
//!
//! The layout follows Megatron-Core's rules (megatron/core/parallel_state.py and
//! transformer_config.py at the commit [`crate::cost::megatron`] pins): the GPUs of one
//! pipeline stage, `tp · cp · dp`, are also cut as `etp · ep · edp` for the routed experts
//! (`etp · ep` must divide `tp · cp · dp`; `edp` is the expert data-parallel group the
//! distributed optimizer shards the expert parameters over). `etp` defaults to 1, as the
//! Megatron-MoE model zoo's recipes set `--expert-tensor-parallel-size 1` (Megatron's own
//! default, when the flag is absent, is `tp`: write `etp = tp` for it).
//!
//! Without `first_stage_layers` / `last_stage_layers` the layers are split evenly, `pp`
//! dividing them; with either (Megatron's `decoder_first_pipeline_num_layers` /
//! `decoder_last_pipeline_num_layers`) the first or last stage holds that many and the
//! stages between split the rest evenly. With `vp > 1` each stage's layers are cut into
//! `vp` equal chunks, interleaved across the stages as Megatron places them
//! (`get_transformer_layer_offset`).
//!
//! The default recipe keeps `2 + 2 + 4 + 8 = 16` bytes per parameter, the count of
//! Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter
//! Models" (arXiv:1910.02054, §3.1: `2Ψ + 2Ψ + 12Ψ` for mixed-precision Adam).

use serde::{Deserialize, Serialize};

use super::validate::positive;
use super::{MAX_COUNT, Model};
use crate::error::{Error, Result};

/// A mixed-precision recipe and a parallel layout (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Training {
    /// Tensor-parallel degree (with Megatron's sequence parallelism).
    #[serde(default = "one")]
    pub tp: u64,
    /// Expert-parallel degree: the routed experts of a layer are split across `ep` GPUs
    /// (`etp · ep` must divide `tp · cp · dp`).
    #[serde(default = "one")]
    pub ep: u64,
    /// Expert tensor-parallel degree: each routed expert's width split across `etp` GPUs
    /// (Megatron's `expert_tensor_parallel_size`); 1 when not given. Written only when
    /// given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etp: Option<u64>,
    /// Pipeline stages: the physical layers are split evenly, or as `first_stage_layers` /
    /// `last_stage_layers` say.
    #[serde(default = "one")]
    pub pp: u64,
    /// Layers of the first pipeline stage (Megatron's `decoder_first_pipeline_num_layers`);
    /// the stages between the first and the last split the others evenly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_stage_layers: Option<u64>,
    /// Layers of the last pipeline stage (Megatron's `decoder_last_pipeline_num_layers`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_stage_layers: Option<u64>,
    /// Data-parallel degree.
    #[serde(default = "one")]
    pub dp: u64,
    /// Context-parallel degree: every sequence is split across `cp` GPUs (Megatron-Core's
    /// context parallelism); the distributed optimizer and the expert-parallel group span
    /// `dp · cp` GPUs, as in Megatron-Core. Written only when not 1.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub cp: u64,
    /// Virtual pipeline stages (model chunks) per GPU: the interleaved 1F1B schedule of
    /// Narayanan et al. (arXiv:2104.04473, §2.2) when above 1. Written only when not 1.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub vp: u64,
    /// ZeRO stage: 0 replicates, 1 shards the optimizer states (master weights and
    /// moments), 2 also the gradients, 3 also the weights, across data parallelism.
    #[serde(default)]
    pub zero: u64,
    /// Sequences of `workload.context` tokens per micro-batch.
    #[serde(default = "one")]
    pub micro_batch: u64,
    /// Bytes per weight (2: bf16).
    #[serde(default = "two")]
    pub weight_bytes: u64,
    /// Bytes per gradient (2: bf16; 4: fp32 accumulation).
    #[serde(default = "two")]
    pub grad_bytes: u64,
    /// Bytes per master weight (4: fp32; 0: none).
    #[serde(default = "four")]
    pub master_bytes: u64,
    /// Bytes of optimizer state per parameter (8: Adam's two fp32 moments).
    #[serde(default = "eight")]
    pub optimizer_bytes: u64,
}

fn one() -> u64 {
    1
}
fn is_one(v: &u64) -> bool {
    *v == 1
}
fn two() -> u64 {
    2
}
fn four() -> u64 {
    4
}
fn eight() -> u64 {
    8
}

impl Default for Training {
    fn default() -> Self {
        Self {
            tp: 1,
            ep: 1,
            etp: None,
            pp: 1,
            first_stage_layers: None,
            last_stage_layers: None,
            dp: 1,
            cp: 1,
            vp: 1,
            zero: 0,
            micro_batch: 1,
            weight_bytes: 2,
            grad_bytes: 2,
            master_bytes: 4,
            optimizer_bytes: 8,
        }
    }
}

/// Largest accepted bytes per weight, gradient or master weight.
const MAX_ELEMENT_BYTES: u64 = 8;
/// Largest accepted optimizer bytes per parameter.
const MAX_OPTIMIZER_BYTES: u64 = 64;

fn bytes_in(field: &str, value: u64, lo: u64, hi: u64) -> Result<()> {
    if (lo..=hi).contains(&value) {
        Ok(())
    } else {
        Err(Error::invalid(
            field,
            format!("must be {lo} to {hi} bytes per parameter; got {value}"),
        ))
    }
}

/// `field` (a degree) divides the model's `what` (`value`), or the error naming both.
fn divides(field: &str, degree: u64, what: &str, value: u64) -> Result<()> {
    if value.is_multiple_of(degree) {
        Ok(())
    } else {
        Err(Error::invalid(
            field,
            format!("must divide {what} ({value}); got {degree}"),
        ))
    }
}

impl Training {
    /// Bytes of state per parameter: weight + gradient + master + optimizer.
    pub fn bytes_per_param(&self) -> u64 {
        self.weight_bytes + self.grad_bytes + self.master_bytes + self.optimizer_bytes
    }

    /// GPUs of the layout: `tp · cp · pp · dp` (expert parallelism is carved out of a
    /// stage's `tp · dp · cp`).
    pub fn gpus(&self) -> u64 {
        self.tp
            .saturating_mul(self.cp)
            .saturating_mul(self.pp)
            .saturating_mul(self.dp)
    }

    /// The data-parallel group of the distributed optimizer, `dp · cp` GPUs.
    pub fn dp_cp(&self) -> u64 {
        self.dp.saturating_mul(self.cp)
    }

    /// The expert tensor-parallel degree (1 when not given).
    pub fn etp(&self) -> u64 {
        self.etp.unwrap_or(1)
    }

    /// The expert data-parallel group the distributed optimizer shards the routed experts'
    /// parameters over: `tp · cp · dp / (etp · ep)` GPUs.
    pub fn edp(&self) -> u64 {
        let pool = self.tp.saturating_mul(self.dp_cp());
        pool / self.etp().saturating_mul(self.ep).max(1)
    }

    /// Checks every field on its own.
    pub fn validate(&self) -> Result<()> {
        positive("training.tp", self.tp, MAX_COUNT)?;
        positive("training.ep", self.ep, MAX_COUNT)?;
        positive("training.pp", self.pp, MAX_COUNT)?;
        positive("training.dp", self.dp, MAX_COUNT)?;
        positive("training.cp", self.cp, MAX_COUNT)?;
        positive("training.vp", self.vp, MAX_COUNT)?;
        if self.vp > 1 && self.pp == 1 {
            return Err(Error::invalid(
                "training.vp",
                format!(
                    "virtual pipeline stages need pipeline parallelism (pp > 1); got vp = {} with pp = 1",
                    self.vp
                ),
            ));
        }
        positive("training.micro_batch", self.micro_batch, MAX_COUNT)?;
        if self.zero > 3 {
            return Err(Error::invalid(
                "training.zero",
                format!("must be a ZeRO stage, 0 to 3; got {}", self.zero),
            ));
        }
        if let Some(etp) = self.etp {
            positive("training.etp", etp, MAX_COUNT)?;
        }
        let pool = self.tp.saturating_mul(self.dp_cp());
        let experts = self.etp().saturating_mul(self.ep);
        if !pool.is_multiple_of(experts) {
            return Err(Error::invalid(
                "training.ep",
                format!(
                    "training.etp · training.ep ({} · {} = {experts}) must divide training.tp · \
                     training.dp · training.cp ({pool}): Megatron-Core cuts a stage's GPUs into \
                     expert tensor-, expert- and expert data-parallel groups \
                     (parallel_state.initialize_model_parallel)",
                    self.etp(),
                    self.ep
                ),
            ));
        }
        for (field, v) in [
            ("training.first_stage_layers", self.first_stage_layers),
            ("training.last_stage_layers", self.last_stage_layers),
        ] {
            if let Some(v) = v {
                positive(field, v, MAX_COUNT)?;
                if self.pp == 1 {
                    return Err(Error::invalid(
                        field,
                        format!("an uneven pipeline needs pp > 1; got {v} layers with pp = 1"),
                    ));
                }
            }
        }
        bytes_in(
            "training.weight_bytes",
            self.weight_bytes,
            1,
            MAX_ELEMENT_BYTES,
        )?;
        bytes_in("training.grad_bytes", self.grad_bytes, 1, MAX_ELEMENT_BYTES)?;
        bytes_in(
            "training.master_bytes",
            self.master_bytes,
            0,
            MAX_ELEMENT_BYTES,
        )?;
        bytes_in(
            "training.optimizer_bytes",
            self.optimizer_bytes,
            0,
            MAX_OPTIMIZER_BYTES,
        )
    }

    /// Checks that the layout splits `model`: `tp` divides the heads, key/value heads, the
    /// shared and dense FFN widths (and the vocabulary when the model has one), `etp` the
    /// expert width, `ep` the routed experts, and the pipeline its physical layers
    /// ([`Training::stage_chunks`]).
    pub fn validate_for(&self, model: &Model) -> Result<()> {
        self.validate()?;
        divides("training.tp", self.tp, "model.heads", model.heads)?;
        divides("training.tp", self.tp, "model.kv_heads", model.kv_heads)?;
        divides(
            "training.etp",
            self.etp(),
            "model.moe.expert_ffn",
            model.moe.expert_ffn,
        )?;
        divides(
            "training.tp",
            self.tp,
            "model.moe.shared_ffn",
            model.moe.shared_ffn,
        )?;
        if let Some(d) = &model.dense {
            divides("training.tp", self.tp, "model.dense.ffn", d.ffn)?;
        }
        divides("training.tp", self.tp, "model.vocab", model.vocab)?;
        divides(
            "training.ep",
            self.ep,
            "model.moe.experts",
            model.moe.experts,
        )?;
        self.stage_chunks(model.layers).map(|_| ())
    }

    /// The physical layers of each pipeline stage, as Megatron-Core places them: per stage,
    /// its `vp` model chunks in order, each a range `[first, last]` of 1-based layers
    /// (`get_transformer_layer_offset`). Even: `L / (pp · vp)` layers per chunk, chunk `c` of
    /// stage `s` (0-based) starting after `c · L / vp + s · L / (pp · vp)` layers. Uneven:
    /// the first and last stages hold `first_stage_layers` / `last_stage_layers`, the `m`
    /// stages between split the other `M` layers evenly, and chunk `c` of stage `s > 0`
    /// starts after `c · (f + M + l) / vp + f / vp + (s − 1) · M / (vp · m)` layers
    /// (`f`, `l` 0 when not given). The rules are Megatron's (`TransformerConfig`): each
    /// stage's layer count a multiple of `vp`, the middle layers a multiple of the middle
    /// stages, and middle layers only with middle stages.
    pub fn stage_chunks(&self, layers: u64) -> Result<Vec<Vec<[u64; 2]>>> {
        let (pp, vp) = (self.pp, self.vp);
        let (first, last) = (self.first_stage_layers, self.last_stage_layers);
        let uneven = first.is_some() || last.is_some();
        let (f, l) = (first.unwrap_or(0), last.unwrap_or(0));
        positive("training.pp", pp, MAX_COUNT)?;
        positive("training.vp", vp, MAX_COUNT)?;
        if uneven && pp < 2 {
            return Err(Error::invalid(
                "training.pp",
                format!("an uneven pipeline needs pp > 1; got {pp}"),
            ));
        }
        if !uneven {
            divides("training.pp", pp, "model.layers", layers)?;
            divides(
                "training.vp",
                vp,
                "the layers per pipeline stage",
                layers / pp,
            )?;
        } else {
            let middle_stages =
                pp.saturating_sub(u64::from(first.is_some()) + u64::from(last.is_some()));
            let middle = layers.checked_sub(f + l).ok_or_else(|| {
                Error::invalid(
                    "training.first_stage_layers",
                    format!(
                        "the first and last stages' layers ({f} + {l}) exceed model.layers ({layers})"
                    ),
                )
            })?;
            if (middle == 0) != (middle_stages == 0) {
                return Err(Error::invalid(
                    "training.pp",
                    format!(
                        "{middle} layers are left for {middle_stages} stages between the first and \
                         the last: Megatron needs middle layers exactly when there are middle stages"
                    ),
                ));
            }
            if middle_stages > 0 && !middle.is_multiple_of(middle_stages) {
                return Err(Error::invalid(
                    "training.pp",
                    format!(
                        "the {middle_stages} stages between the first and the last must split the \
                         other {middle} layers evenly (model.layers {layers} − {f} first − {l} last)"
                    ),
                ));
            }
            for (field, n) in [
                ("training.first_stage_layers", first),
                ("training.last_stage_layers", last),
            ] {
                if let Some(n) = n {
                    divides("training.vp", vp, field, n)?;
                }
            }
            if let Some(per) = middle.checked_div(middle_stages) {
                divides("training.vp", vp, "the layers per middle stage", per)?;
            }
        }
        let middle_stages =
            pp.saturating_sub(u64::from(first.is_some()) + u64::from(last.is_some()));
        let per_middle = if uneven {
            (layers - f - l).checked_div(middle_stages).unwrap_or(0)
        } else {
            layers / pp
        };
        // Layers of stage `s` (0-based) and where its chunk `c` starts.
        let count = |s: u64| match (first, last) {
            (Some(f), _) if s == 0 => f,
            (_, Some(l)) if s == pp - 1 => l,
            _ => per_middle,
        };
        let start = |s: u64, c: u64| {
            let all = c * (layers / vp);
            if !uneven {
                all + s * count(s) / vp
            } else if s == 0 {
                all
            } else {
                let middle_rank = if first.is_some() { s - 1 } else { s };
                all + f / vp + middle_rank * per_middle / vp
            }
        };
        Ok((0..pp)
            .map(|s| {
                (0..vp)
                    .map(|c| [start(s, c) + 1, start(s, c) + count(s) / vp])
                    .collect()
            })
            .collect())
    }

    /// The physical layers of each pipeline stage ([`Training::stage_chunks`] summed).
    pub fn stage_layers(&self, layers: u64) -> Result<Vec<u64>> {
        Ok((self.stage_chunks(layers)?.iter())
            .map(|chunks| chunks.iter().map(|[a, b]| b + 1 - a).sum())
            .collect())
    }

    /// An uneven split of `layers` over this layout's `pp` stages of `vp` chunks that
    /// [`Training::stage_chunks`] builds, for a layout whose stages cannot split them evenly:
    /// `(first_stage_layers, last_stage_layers)` (`None`: not given) with the fewest layers on
    /// the fullest stage, then on the last stage (it holds the LM head), then the fewest
    /// settings; with the fullest stage's layers. `None` when no such split builds (e.g.
    /// `pp · vp`'s stages all hold a multiple of `vp` layers, and `vp` does not divide
    /// `layers`).
    pub fn suggested_split(&self, layers: u64) -> Option<(Split, u64)> {
        let (pp, vp) = (self.pp, self.vp.max(1));
        if pp < 2 || layers > MAX_SPLIT_SEARCH {
            return None;
        }
        let ends = || std::iter::once(None).chain((vp..=layers).step_by(vp as usize).map(Some));
        let mut best: Option<((u64, u64, u8), Split)> = None;
        for first in ends() {
            for last in ends() {
                if first.is_none() && last.is_none() {
                    continue;
                }
                let t = Training {
                    first_stage_layers: first,
                    last_stage_layers: last,
                    ..*self
                };
                let Ok(stages) = t.stage_layers(layers) else {
                    continue;
                };
                let fullest = stages.iter().copied().max().unwrap_or(0);
                let on_last = stages.last().copied().unwrap_or(0);
                let key = (
                    fullest,
                    on_last,
                    u8::from(first.is_some()) + u8::from(last.is_some()),
                );
                if best.is_none_or(|(k, _)| key < k) {
                    best = Some((key, (first, last)));
                }
            }
        }
        best.map(|((fullest, _, _), split)| (split, fullest))
    }
}

/// `(first_stage_layers, last_stage_layers)` of an uneven pipeline split (`None`: not given).
pub type Split = (Option<u64>, Option<u64>);

/// The most layers [`Training::suggested_split`] searches splits of (a search over pairs).
pub const MAX_SPLIT_SEARCH: u64 = 512;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_suggested_split_builds_and_fills_the_fullest_stage_least() {
        let t = |pp, vp| Training {
            pp,
            vp,
            ..Training::default()
        };
        // 94 layers over 8 stages: seven of 12 and one of 10, the 10 on the last stage.
        assert_eq!(t(8, 1).suggested_split(94), Some(((None, Some(10)), 12)));
        // Over 8 stages of 2 chunks: every stage holds an even count; 94 = 6 · 12 + 22.
        let ((f, l), fullest) = t(8, 2).suggested_split(94).unwrap();
        let built = Training {
            first_stage_layers: f,
            last_stage_layers: l,
            ..t(8, 2)
        };
        let counts = built.stage_layers(94).unwrap();
        assert_eq!(counts.iter().sum::<u64>(), 94);
        assert!(counts.iter().all(|c| c % 2 == 0), "{counts:?}");
        assert_eq!(
            (counts.iter().max(), fullest),
            (Some(&12), 12),
            "{counts:?}"
        );
        // Every stage a multiple of 4 cannot hold 94 layers.
        assert_eq!(t(8, 4).suggested_split(94), None);
        // DeepSeek-V3's 61 over 16 stages: fifteen of 4 and one of 1 (on the last stage).
        assert_eq!(t(16, 1).suggested_split(61), Some(((None, Some(1)), 4)));
    }

    #[test]
    fn defaults_are_zero_s_sixteen_bytes() {
        let t: Training = crate::strict_toml::from_toml("").unwrap();
        assert_eq!(t, Training::default());
        assert_eq!(t.bytes_per_param(), 16);
    }

    #[test]
    fn every_field_is_checked() {
        for (text, field) in [
            ("tp = 0", "training.tp"),
            ("zero = 4", "training.zero"),
            ("dp = 4\nep = 3", "training.ep"),
            ("weight_bytes = 0", "training.weight_bytes"),
            ("grad_bytes = 9", "training.grad_bytes"),
            ("master_bytes = 9", "training.master_bytes"),
            ("optimizer_bytes = 65", "training.optimizer_bytes"),
            ("micro_batch = 0", "training.micro_batch"),
        ] {
            let t: Training = crate::strict_toml::from_toml(text).unwrap();
            let err = t.validate().unwrap_err().to_string();
            assert!(err.contains(field), "{text}: {err}");
        }
        assert!(crate::strict_toml::from_toml::<Training>("tpp = 2").is_err());
    }
}

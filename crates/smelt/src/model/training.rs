//! The `[training]` table: a mixed-precision recipe and a parallel layout, for the static
//! and per-GPU training memory ([`crate::cost::training`]).
//!
//! ```toml
//! [training]            # every key optional; the defaults below
//! tp = 1                # tensor parallelism (Megatron, with sequence parallelism)
//! ep = 1                # expert parallelism (routed experts only; divides dp)
//! pp = 1                # pipeline stages (layers split evenly; 1F1B schedule)
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
    /// Expert-parallel degree: the routed experts of a layer are split across `ep` GPUs of
    /// the data-parallel group (it must divide `dp`).
    #[serde(default = "one")]
    pub ep: u64,
    /// Pipeline stages: the physical layers are split evenly.
    #[serde(default = "one")]
    pub pp: u64,
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
            pp: 1,
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

    /// GPUs of the layout: `tp · cp · pp · dp` (expert parallelism is carved out of
    /// `dp · cp`).
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
        if !self.dp_cp().is_multiple_of(self.ep) {
            return Err(Error::invalid(
                "training.ep",
                format!(
                    "must divide training.dp · training.cp ({}); got {}",
                    self.dp_cp(),
                    self.ep
                ),
            ));
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

    /// Checks that the layout splits `model`: `tp` divides the heads, key/value heads and
    /// every FFN width (and the vocabulary when the model has one), `ep` the routed experts,
    /// `pp` the physical layers.
    pub fn validate_for(&self, model: &Model) -> Result<()> {
        self.validate()?;
        divides("training.tp", self.tp, "model.heads", model.heads)?;
        divides("training.tp", self.tp, "model.kv_heads", model.kv_heads)?;
        divides(
            "training.tp",
            self.tp,
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
        divides("training.pp", self.pp, "model.layers", model.layers)?;
        divides(
            "training.vp",
            self.vp,
            "the layers per pipeline stage",
            model.layers / self.pp,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

//! `smelt predict --global-batch N`: one training step of a parallel layout (the step
//! model, [`crate::time::step`]), as the command line's flags and Python's `predict_step`
//! give it.

use serde::{Deserialize, Serialize};

use super::{ModelSource, Request, WorkloadRequest};
use crate::error::{Error, Result};
use crate::launcher_flops::{Convention, training_flops};
use crate::model::Training;
use crate::progress::Progress;
use crate::study::{LayoutSource, StepBasis};
use crate::time::Card;
use crate::time::step::report::{StepReport, step_report};
use crate::time::step::{Dispatcher, Framework, Recompute};

/// The largest parallel degree, GPU count or micro-batch a layout takes (the step model's
/// own bound on each degree and on their product).
pub const MAX_DEGREE: u64 = 1 << 20;

/// The largest global batch, in sequences.
pub const MAX_GLOBAL_BATCH: u64 = 1 << 32;

/// A parallel layout and the step's options; each left out is 1 (ZeRO 1, no recompute,
/// Megatron-Core, the all-to-all dispatcher), `dp` is `gpus / (tp · pp · cp)` when only
/// `gpus` is given.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Layout {
    /// Tensor parallelism (with sequence parallelism).
    #[serde(default)]
    pub tp: Option<u64>,
    /// Expert parallelism (divides `tp · dp · cp`).
    #[serde(default)]
    pub ep: Option<u64>,
    /// Pipeline stages (1F1B).
    #[serde(default)]
    pub pp: Option<u64>,
    /// Virtual pipeline stages per GPU (interleaved 1F1B).
    #[serde(default)]
    pub vp: Option<u64>,
    /// Layers of the first pipeline stage (Megatron's `--decoder-first-pipeline-num-layers`).
    #[serde(default)]
    pub first_stage_layers: Option<u64>,
    /// Layers of the last pipeline stage (Megatron's `--decoder-last-pipeline-num-layers`).
    #[serde(default)]
    pub last_stage_layers: Option<u64>,
    /// Context parallelism.
    #[serde(default)]
    pub cp: Option<u64>,
    /// Data parallelism.
    #[serde(default)]
    pub dp: Option<u64>,
    /// GPUs in all (`tp · pp · cp · dp` when both are given).
    #[serde(default)]
    pub gpus: Option<u64>,
    /// ZeRO stage, 0 to 3.
    #[serde(default)]
    pub zero: Option<u64>,
    /// Sequences per micro-batch.
    #[serde(default)]
    pub micro_batch: Option<u64>,
    /// Activation recomputation: `none`, `selective` (norms and activations) or `full`.
    #[serde(default)]
    pub recompute: Option<String>,
    /// The framework: `megatron-core`, or `fsdp2` (PyTorch FSDP2 with Transformers modules:
    /// its own host cost, its parameter and gradient copies, no MTP modules).
    #[serde(default)]
    pub framework: Option<String>,
    /// How the routed experts' tokens cross nodes: `alltoall` or `deepep`.
    #[serde(default)]
    pub dispatcher: Option<String>,
}

/// `value` of `field` checked to lie in `1..=max` (absent: 1).
fn degree(field: &str, value: Option<u64>, max: u64) -> Result<u64> {
    match value {
        None => Ok(1),
        Some(v) if (1..=max).contains(&v) => Ok(v),
        Some(v) => Err(Error::invalid(
            field,
            format!("must be between 1 and {max}; got {v}"),
        )),
    }
}

/// The one of `names` that `value` of `field` is (absent: the first), as its variant.
fn named<T: Copy>(field: &str, value: Option<&str>, names: &[(&str, T)]) -> Result<T> {
    let Some(v) = value else {
        return Ok(names[0].1);
    };
    (names.iter().find(|(n, _)| *n == v).map(|(_, t)| *t)).ok_or_else(|| {
        let all: Vec<&str> = names.iter().map(|(n, _)| *n).collect();
        Error::invalid(
            field,
            format!("must be one of {}; got '{v}'", all.join(", ")),
        )
    })
}

impl Layout {
    /// The layout as a [`Training`] table, each degree checked.
    pub fn training(&self) -> Result<Training> {
        let d = |field, v| degree(field, v, MAX_DEGREE);
        let (tp, pp, cp) = (d("tp", self.tp)?, d("pp", self.pp)?, d("cp", self.cp)?);
        // Each degree is at most 2^20, so these products fit in 128 bits.
        let model_parallel = u128::from(tp) * u128::from(pp) * u128::from(cp);
        let gpus = self.gpus.map(|g| d("gpus", Some(g))).transpose()?;
        let dp = match (self.dp.map(|v| d("dp", Some(v))).transpose()?, gpus) {
            (Some(dp), Some(g)) if u128::from(dp) * model_parallel != u128::from(g) => {
                return Err(Error::invalid(
                    "gpus",
                    format!(
                        "must equal tp · pp · cp · dp ({}); got {g}",
                        u128::from(dp) * model_parallel
                    ),
                ));
            }
            (Some(dp), _) => dp,
            (None, Some(g)) if u128::from(g) % model_parallel == 0 => {
                (u128::from(g) / model_parallel) as u64
            }
            (None, Some(g)) => {
                return Err(Error::invalid(
                    "gpus",
                    format!("must be a multiple of tp · pp · cp ({model_parallel}); got {g}"),
                ));
            }
            (None, None) => 1,
        };
        let zero = match self.zero {
            None => 1,
            Some(z) if z <= 3 => z,
            Some(z) => {
                return Err(Error::invalid(
                    "zero",
                    format!("must be a ZeRO stage, 0 to 3; got {z}"),
                ));
            }
        };
        let stage = |field, v: Option<u64>| v.map(|l| d(field, Some(l))).transpose();
        Ok(Training {
            tp,
            ep: d("ep", self.ep)?,
            pp,
            dp,
            cp,
            vp: d("vp", self.vp)?,
            first_stage_layers: stage("first_stage_layers", self.first_stage_layers)?,
            last_stage_layers: stage("last_stage_layers", self.last_stage_layers)?,
            zero,
            micro_batch: d("micro_batch", self.micro_batch)?,
            ..Training::default()
        })
    }

    /// Whether any degree (not an option) is given.
    pub fn degrees_given(&self) -> bool {
        [
            self.tp,
            self.ep,
            self.pp,
            self.vp,
            self.first_stage_layers,
            self.last_stage_layers,
            self.cp,
            self.dp,
            self.gpus,
            self.zero,
            self.micro_batch,
        ]
        .iter()
        .any(Option::is_some)
    }

    /// `recompute` (default none).
    pub fn recompute(&self) -> Result<Recompute> {
        named(
            "recompute",
            self.recompute.as_deref(),
            &[
                ("none", Recompute::None),
                ("selective", Recompute::Selective),
                ("full", Recompute::Full),
            ],
        )
    }

    /// `framework` (default megatron-core).
    pub fn framework(&self) -> Result<Framework> {
        named(
            "framework",
            self.framework.as_deref(),
            &[
                ("megatron-core", Framework::MegatronCore),
                ("fsdp2", Framework::Fsdp2),
            ],
        )
    }

    /// `dispatcher` (default alltoall).
    pub fn dispatcher(&self) -> Result<Dispatcher> {
        named(
            "dispatcher",
            self.dispatcher.as_deref(),
            &[
                ("alltoall", Dispatcher::AllToAll),
                ("deepep", Dispatcher::DeepEp),
            ],
        )
    }

    /// The basis of a step of `global_batch` sequences on `card` under these options, the
    /// layout from `source` (`training`: `None` for each model's own `[training]`).
    pub fn basis(
        &self,
        card: Card,
        layout: (Option<Training>, LayoutSource),
        global_batch: u64,
    ) -> Result<StepBasis> {
        if !(1..=MAX_GLOBAL_BATCH).contains(&global_batch) {
            return Err(Error::invalid(
                "global_batch",
                format!("must be between 1 and {MAX_GLOBAL_BATCH}; got {global_batch}"),
            ));
        }
        StepBasis::new(
            card,
            layout,
            global_batch,
            self.recompute()?,
            self.framework()?,
            self.dispatcher()?,
        )
    }

    /// The step of `spec`, `global_batch` sequences per optimizer step on `card`, under
    /// this layout: its report (with the model TFLOP/s under Megatron-LM's FLOP convention
    /// where that formula counts the model).
    pub fn report(
        &self,
        spec: &crate::model::ModelSpec,
        card: Card,
        global_batch: u64,
    ) -> Result<StepReport> {
        let basis = self.basis(card, (None, LayoutSource::Flags), global_batch)?;
        let req = basis.request(spec, self.training()?);
        // Megatron-LM counts the MTP modules a run trains (`--mtp-num-layers`): those the
        // step times.
        let mtp = req.framework == Framework::MegatronCore && spec.model.mtp_layers > 0;
        let mut counted = spec.clone();
        counted.counting.mtp = mtp;
        let mut without_mtp = spec.clone();
        without_mtp.counting.mtp = false;
        let count = |s: &crate::model::ModelSpec| {
            training_flops(Convention::Megatron, s)
                .map(|f| f.as_f64())
                .map_err(|e| e.to_string())
        };
        let megatron = match count(&counted) {
            Err(_) if mtp && count(&without_mtp).is_ok() => Err(format!(
                "the step runs the model's {} MTP module(s), as Megatron-Core does, and \
                 Megatron-LM's formula counts them as layers of its layer pattern, whose \
                 mixer for them this model does not give (a model file with mtp_layers = 0 \
                 describes a run without them)",
                spec.model.mtp_layers
            )),
            other => other,
        };
        step_report(spec, &req, megatron)
    }
}

/// `smelt predict --card CARD --global-batch N` with a layout: one training step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepPredictRequest {
    /// The model.
    pub model: ModelSource,
    /// The card: an id of the table or a driver's name for it.
    pub card: String,
    /// Sequences per optimizer step.
    pub global_batch: u64,
    /// The layout and the step's options.
    #[serde(default)]
    pub layout: Layout,
    /// Workload changes.
    #[serde(default)]
    pub workload: WorkloadRequest,
}

impl Request for StepPredictRequest {
    type Output = StepReport;

    fn run(&self, _: &dyn Progress) -> Result<StepReport> {
        let card = Card::parse(&self.card)?;
        let spec = self.model.load(&self.workload.changes()?)?;
        self.layout.report(&spec, card, self.global_batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(e: Error) -> String {
        match e {
            Error::InvalidSpec { field, .. } => field,
            other => panic!("{other}"),
        }
    }

    #[test]
    fn dp_is_what_the_gpus_leave_and_each_option_its_default() {
        let layout = Layout {
            tp: Some(2),
            pp: Some(4),
            gpus: Some(64),
            ..Layout::default()
        };
        let t = layout.training().unwrap();
        assert_eq!((t.tp, t.pp, t.cp, t.dp, t.ep, t.vp), (2, 4, 1, 8, 1, 1));
        assert_eq!((t.zero, t.micro_batch), (1, 1));
        assert_eq!(layout.recompute().unwrap(), Recompute::None);
        assert_eq!(layout.framework().unwrap(), Framework::MegatronCore);
        assert_eq!(layout.dispatcher().unwrap(), Dispatcher::AllToAll);
        assert!(layout.degrees_given() && !Layout::default().degrees_given());
    }

    #[test]
    fn a_bad_layout_names_its_field() {
        let bad = |l: Layout| field(l.training().unwrap_err());
        let gpus = Some(12);
        assert_eq!(
            bad(Layout {
                gpus,
                pp: Some(8),
                ..Layout::default()
            }),
            "gpus"
        );
        assert_eq!(
            bad(Layout {
                gpus,
                dp: Some(5),
                ..Layout::default()
            }),
            "gpus"
        );
        assert_eq!(
            bad(Layout {
                zero: Some(4),
                ..Layout::default()
            }),
            "zero"
        );
        assert_eq!(
            bad(Layout {
                ep: Some(0),
                ..Layout::default()
            }),
            "ep"
        );
        let huge = Some(MAX_DEGREE + 1);
        assert_eq!(
            bad(Layout {
                micro_batch: huge,
                ..Layout::default()
            }),
            "micro_batch"
        );
        let named = Layout {
            recompute: Some("some".into()),
            framework: Some("deepspeed".into()),
            dispatcher: Some("nccl".into()),
            ..Layout::default()
        };
        assert_eq!(field(named.recompute().unwrap_err()), "recompute");
        assert_eq!(field(named.framework().unwrap_err()), "framework");
        assert_eq!(field(named.dispatcher().unwrap_err()), "dispatcher");
    }
}

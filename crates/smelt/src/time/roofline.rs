//! The roofline: a device with its efficiencies, walked over a kernel plan kernel by kernel
//! (the model, with its defaults, is in the docs of [`crate::time`]).

use std::collections::BTreeMap;

use serde::Serialize;

use super::calibration::{Calibration, Traffic};
use super::device::Device;
use super::efficiency::{ShapeClass, interpolate, rate, work};
use crate::model::{AttentionLayer, AttentionShape, Ffn, Model, Stack};
use crate::names::named_enum;
use crate::plan::{Component, Kernel, Op, Plan};

named_enum! {
    /// How the attention core's tiles are costed (module docs).
    pub enum AttentionData: "attention" {
        /// As a fused kernel: scores on chip, each token's tensors through memory once.
        Fused = "fused",
        /// Each tile kernel as the bench launches it, the scores through memory.
        Unfused = "unfused",
    }
}

named_enum! {
    /// How the routed experts' GEMMs are launched (module docs).
    pub enum ExpertLaunch: "experts" {
        /// One grouped GEMM per weight matrix and pass for all the experts of a layer
        /// (nine launches per MoE layer execution), each expert's GEMM at its own shape.
        Grouped = "grouped",
        /// One GEMM launch per expert, as the bench launches them.
        PerExpert = "per-expert",
    }
}

/// Launches of a grouped expert GEMM per MoE layer execution: gate, up and down, each
/// forward, data gradient and weight gradient.
pub const GROUPED_LAUNCHES: u64 = 9;

/// A device with its efficiencies: what a prediction walks a plan with.
#[derive(Debug, Clone, PartialEq)]
pub struct Roofline {
    /// The device.
    pub device: Device,
    /// The efficiencies (`None`: 1 everywhere, uncalibrated).
    pub calibration: Option<Calibration>,
    /// How the attention core is costed.
    pub attention: AttentionData,
    /// How the routed experts' GEMMs are launched.
    pub experts: ExpertLaunch,
}

/// What bounds a kernel's time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Bounds {
    /// Seconds spent where arithmetic bounds the time.
    pub compute: f64,
    /// Seconds spent where memory traffic bounds the time.
    pub memory: f64,
    /// Seconds of launch overhead.
    pub launch: f64,
}

impl Bounds {
    /// The total seconds.
    pub fn total(&self) -> f64 {
        self.compute + self.memory + self.launch
    }

    pub(super) fn add(&mut self, o: Bounds) {
        self.compute += o.compute;
        self.memory += o.memory;
        self.launch += o.launch;
    }

    fn scaled(self, n: f64) -> Bounds {
        Bounds {
            compute: self.compute * n,
            memory: self.memory * n,
            launch: self.launch * n,
        }
    }
}

impl Roofline {
    /// The efficiency of `class` at `work` per launch.
    pub fn efficiency(&self, class: ShapeClass, work: f64) -> f64 {
        let Some(c) = &self.calibration else {
            return 1.0;
        };
        std::iter::once(class)
            .chain(class.fallbacks().iter().copied())
            .find_map(|c2| c.curves.get(&c2))
            .map_or(1.0, |curve| interpolate(curve, work.log2()))
    }

    /// The calibration's operand-traffic fit, when it applies: a calibration that kept one,
    /// on its own device (the same device and peak; module docs).
    pub fn traffic(&self) -> Option<&Traffic> {
        let c = self.calibration.as_ref()?;
        let own = c.device.name == self.device.name
            && c.device.peak_flops_per_second == self.device.peak_flops_per_second
            && c.device.element_bytes == self.device.element_bytes;
        c.traffic.as_ref().filter(|_| own)
    }

    /// Seconds of the arithmetic of one launch of `k` (its FLOPs, or a softmax's
    /// exponentials), at its efficiency (a GEMM's at the traffic fit's seconds per FLOP,
    /// where it applies).
    pub fn compute_seconds(&self, k: &Kernel) -> f64 {
        let class = ShapeClass::of(k);
        let w = work(k);
        if let (Some(t), Op::Gemm) = (self.traffic(), k.op) {
            return w * t.seconds_per_flop;
        }
        w / (rate(class, self.device.peak_flops_per_second) * self.efficiency(class, w))
    }

    /// Bytes one launch of `k` moves: its operands once.
    pub fn bytes(&self, k: &Kernel) -> f64 {
        let (a, b, c) = k.operands();
        (a + b + c) as f64 * self.device.element_bytes as f64
    }

    /// The time of all launches of `k`, as the roofline costs a kernel on its own
    /// (`max(compute, memory) + launch` per launch).
    pub fn kernel(&self, k: &Kernel) -> Bounds {
        let compute = self.compute_seconds(k);
        if let (Some(t), Op::Gemm) = (self.traffic(), k.op) {
            // Arithmetic and operand traffic added (module docs).
            return Bounds {
                compute,
                memory: self.bytes(k) * t.seconds_per_byte,
                launch: self.device.launch_seconds,
            }
            .scaled(k.count as f64);
        }
        let memory = self
            .device
            .memory_bytes_per_second
            .map_or(0.0, |w| self.bytes(k) / w);
        let one = match memory > compute {
            true => Bounds {
                memory,
                launch: self.device.launch_seconds,
                ..Bounds::default()
            },
            false => Bounds {
                compute,
                launch: self.device.launch_seconds,
                ..Bounds::default()
            },
        };
        one.scaled(k.count as f64)
    }

    /// The launches the prediction counts for `plan`: the plan's, with a fused attention
    /// kernel's two per layer execution for its tiles and a grouped GEMM's
    /// [`GROUPED_LAUNCHES`] per MoE layer execution for the experts'.
    pub fn launches(&self, model: &Model, plan: &Plan) -> u64 {
        let of = |c: Component| -> u64 {
            (plan.kernels.iter())
                .filter(|k| k.component == c)
                .map(|k| k.count)
                .sum()
        };
        let mut n: u64 = plan.kernels.iter().map(|k| k.count).sum();
        let tiles = of(Component::AttentionCore);
        if self.attention == AttentionData::Fused && tiles > 0 {
            n = n - tiles + 2 * plan.executions;
        }
        let experts = of(Component::Experts);
        if self.experts == ExpertLaunch::Grouped && experts > 0 {
            n = n - experts + GROUPED_LAUNCHES * moe_executions(model);
        }
        n
    }

    /// The predicted time of `plan` for `model`, by component.
    pub fn plan(&self, model: &Model, plan: &Plan) -> BTreeMap<Component, Bounds> {
        let mut out: BTreeMap<Component, Bounds> = BTreeMap::new();
        let mut fused = 0.0;
        let grouped = self.experts == ExpertLaunch::Grouped;
        for k in &plan.kernels {
            if self.attention == AttentionData::Fused && k.component == Component::AttentionCore {
                fused += self.compute_seconds(k) * k.count as f64;
                continue;
            }
            let mut b = self.kernel(k);
            if grouped && k.component == Component::Experts {
                b.launch = 0.0;
            }
            out.entry(k.component).or_default().add(b);
        }
        if grouped && let Some(e) = out.get_mut(&Component::Experts) {
            e.launch +=
                (GROUPED_LAUNCHES * moe_executions(model)) as f64 * self.device.launch_seconds;
        }
        if self.attention == AttentionData::Fused && fused > 0.0 {
            let io = fused_io_bytes(
                model,
                plan.tokens,
                plan.executions,
                self.device.element_bytes,
            );
            let memory = self.device.memory_bytes_per_second.map_or(0.0, |w| io / w);
            let launch = 2.0 * plan.executions as f64 * self.device.launch_seconds;
            let b = match memory > fused {
                true => Bounds {
                    memory,
                    launch,
                    ..Bounds::default()
                },
                false => Bounds {
                    compute: fused,
                    launch,
                    ..Bounds::default()
                },
            };
            out.entry(Component::AttentionCore).or_default().add(b);
        }
        out
    }
}

/// Executions of MoE layers per forward pass (a looped layer once per visit).
fn moe_executions(model: &Model) -> u64 {
    let stack = Stack::of(model);
    (stack.iter().flat_map(|s| s.kinds()))
        .filter(|k| matches!(k.layer.ffn, Some(Ffn::Moe(_))))
        .map(|k| k.executions)
        .sum()
}

/// Bytes a fused attention kernel moves over a training step of `executions` layer
/// executions of `tokens` tokens (module docs): per token, forward `Q, K, V` in and `O` out,
/// backward `Q, K, V, O, dO` in and `dQ, dK, dV` out.
pub fn fused_io_bytes(model: &Model, tokens: u64, executions: u64, element_bytes: u64) -> f64 {
    let stack = Stack::of(model).ok();
    let (q_heads, kv_heads, dk, dv) = match stack.as_ref().and_then(Stack::model_attention) {
        // MLA's keys and values are per query head once up-projected.
        Some(AttentionLayer {
            shape: AttentionShape::Mla { heads, mla },
            ..
        }) => (
            *heads,
            *heads,
            mla.qk_nope_head_dim + mla.qk_rope_head_dim,
            mla.v_head_dim,
        ),
        _ => (model.heads, model.kv_heads, model.head_dim, model.head_dim),
    };
    let (q, kv, o) = (q_heads * dk, kv_heads * (dk + dv), q_heads * dv);
    let forward = q + kv + o;
    let backward = (q + kv + 2 * o) + (q + kv);
    (forward + backward) as f64 * (tokens * executions * element_bytes) as f64
}

/// An uncalibrated roofline on [`test_device`](super::device::test_device), attention
/// unfused and experts launched one by one, for the tests of this module's files.
#[cfg(test)]
pub(super) fn test_roofline(bandwidth: Option<f64>, launch: f64) -> Roofline {
    Roofline {
        device: super::device::test_device(bandwidth, launch),
        calibration: None,
        attention: AttentionData::Unfused,
        experts: ExpertLaunch::PerExpert,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Pass;

    #[test]
    fn a_kernel_whose_bytes_dominate_is_bandwidth_bound() {
        let r = test_roofline(Some(1e9), 0.0);
        // 1 x 4096 x 4096: 2·16.8M FLOPs (33.5 µs at 1 TFLOP/s), 2·(4096 + 16.8M + 4096)
        // bytes (33.6 ms at 1 GB/s).
        let thin = Kernel::gemm(Component::Projections, Pass::Forward, [1, 4096, 4096], 1);
        let b = r.kernel(&thin);
        assert_eq!(b.compute, 0.0);
        let bytes = 2.0 * (4096.0 + 4096.0 * 4096.0 + 4096.0);
        assert!((b.memory - bytes / 1e9).abs() < 1e-12, "{b:?}");
        // A square one is compute-bound: 2·4096³ FLOPs against 3·2·4096² bytes.
        let square = Kernel::gemm(Component::Projections, Pass::Forward, [4096; 3], 1);
        let b = r.kernel(&square);
        assert_eq!(b.memory, 0.0);
        assert!((b.compute - 2.0 * 4096f64.powi(3) / 1e12).abs() < 1e-12);
    }

    #[test]
    fn time_is_additive_over_launches() {
        let r = test_roofline(Some(1e11), 3e-6);
        let one = Kernel::gemm(Component::Experts, Pass::Forward, [64, 432, 1280], 1);
        let many = Kernel { count: 7, ..one };
        let (a, b) = (r.kernel(&one).total(), r.kernel(&many).total());
        assert!((b - 7.0 * a).abs() < 1e-15 * b.max(1.0), "{a} {b}");
        assert!((r.kernel(&many).launch - 7.0 * 3e-6).abs() < 1e-18);
    }
}

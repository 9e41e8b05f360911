//! The communication of a training step on one GPU, and the optimizer step: the step
//! model's collectives ([`super`] module docs give the whole model).
//!
//! * **Placement** (Megatron-Core's rank order `tp-cp-ep-dp-pp`, with expert tensor
//!   parallelism 1; PyTorch FSDP2 with expert parallelism likewise): a TP group is `tp`
//!   consecutive GPUs; the `ep` ranks of an EP group are consecutive GPUs (Megatron-Core's
//!   expert layout folds EP over the tensor-, context- and data-parallel ranks), so EP 8 on
//!   8-GPU nodes stays inside a node and EP 32 spans four; the expert data-parallel
//!   group's ranks are `ep` apart; adjacent
//!   pipeline stages are `tp · cp · dp` apart. The dense data-parallel group spans the
//!   context-parallel ranks too (`dp · cp` GPUs `tp` apart: Megatron-Core's distributed
//!   optimizer, FSDP2's sharding over data and context parallelism).
//! * **TP** (sequence parallelism): 4 all-gathers and reduce-scatters of `T · H` bf16 per
//!   block (a token mixer or an FFN) forward and backward, over the TP group.
//! * **EP**: a dispatch and a combine per MoE layer forward, and again backward, each
//!   moving the `T / tp` tokens of this GPU (at the experts' width: LatentMoE dispatches
//!   the latent, Nemotron 3 Super's reason for it) to their `top_k` experts (balanced routing, as
//!   the published MoE rows force). Inside an NVLink domain at NVLink's speed. Across
//!   domains, the copies to GPUs of other domains go through one NIC port of this GPU
//!   ([`crate::time::SystemSpec::network_port_bytes_per_second`]) while the others use
//!   NVLink, and the slower of the two sets the time. DeepEP's internode kernels send a
//!   token once to each other node that holds one of its experts and forward it there over
//!   NVLink (<https://github.com/deepseek-ai/DeepEP>, "internode" kernels): the network
//!   then carries `T / tp` tokens times the expected number of other nodes a token's
//!   `top_k` experts fall in (experts drawn uniformly, `experts / nodes` per node), instead
//!   of `top_k` copies.
//! * **PP**: per micro-batch each GPU sends `vp` activations and receives `vp` gradients of
//!   `T · H / tp` bf16 (interleaved 1F1B runs every micro-batch through `vp` stages per GPU),
//!   over one NIC port when the neighbour is outside the NVLink domain.
//! * **Data parallelism**: gradients are reduce-scattered in fp32 (Megatron-Core's default
//!   for bf16 training, and FSDP2 with an fp32 reduce type) and parameters all-gathered in
//!   bf16, as ring collectives ([`crate::time::SystemSpec::ring_bytes_per_second`]) over
//!   the dense data-parallel group (dense parameters) and the expert data-parallel group
//!   (routed experts). With the distributed optimizer (ZeRO 1 or 2) once per step, the part
//!   longer than one micro-batch exposed (the rest overlaps the last backward and the first
//!   forward); with ZeRO 3 (FSDP) every micro-batch all-gathers the parameters twice
//!   (forward, backward) and reduce-scatters the gradients, overlapped with the micro-batch's
//!   work, which then takes the longer of the two.
//! * **Optimizer**: 30 bytes per parameter of the GPU's shard through HBM (bf16 weight and
//!   gradient, fp32 master weight and two moments, read and written).

use serde::Serialize;

use crate::model::{Model, Training};
use crate::time::system::SystemSpec;

/// How the routed experts' tokens are exchanged, named in JSON as `--dispatcher` names it (`alltoall`, `deepep`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Dispatcher {
    /// An all-to-all of every token copy (NCCL; Megatron-Core's `alltoall` dispatcher).
    #[serde(rename = "alltoall")]
    AllToAll,
    /// DeepEP: across nodes, one copy per node, forwarded inside it (module docs).
    #[serde(rename = "deepep")]
    DeepEp,
}

/// Bytes per parameter a gradient is reduced in.
pub const GRAD_REDUCE_BYTES: f64 = 4.0;
/// Bytes per parameter a weight is gathered in.
pub const WEIGHT_BYTES: f64 = 2.0;

/// Expected number of nodes other than a token's own that hold at least one of its `k`
/// experts, `experts` spread evenly over `nodes` nodes and drawn uniformly without
/// replacement.
pub fn remote_nodes(experts: f64, k: f64, nodes: f64) -> f64 {
    if nodes <= 1.0 || experts <= 0.0 {
        return 0.0;
    }
    let per_node = experts / nodes;
    let mut miss = 1.0;
    let mut i = 0.0;
    while i < k {
        miss *= ((experts - per_node - i) / (experts - i)).max(0.0);
        i += 1.0;
    }
    (nodes - 1.0) * (1.0 - miss)
}

/// Seconds of one micro-batch's TP, EP and PP communication on one GPU: `tokens` the
/// micro-batch's tokens per GPU of a TP group, `blocks` and `moe_layers` those of one
/// pipeline stage.
pub fn collectives(
    m: &Model,
    t: &Training,
    sys: &SystemSpec,
    dispatcher: Dispatcher,
    tokens: f64,
    blocks: f64,
    moe_layers: f64,
) -> (f64, f64, f64) {
    let (tp, ep) = (t.tp as f64, t.ep as f64);
    let (h, e, k) = (m.hidden as f64, m.moe.experts as f64, m.moe.top_k as f64);
    // Tokens are dispatched at the experts' width (LatentMoE's latent, else the hidden).
    let w = m.moe.expert_width(m.hidden) as f64;
    let nvlink = sys.nvlink_bytes_per_second_each_way();
    let port = sys.network_port_bytes_per_second;
    let tp_comm = if t.tp > 1 {
        4.0 * blocks * tokens * h * 2.0 * (tp - 1.0) / tp / sys.group_bytes_per_second(t.tp, 1)
    } else {
        0.0
    };
    let ep_comm = if t.ep > 1 && e > 0.0 && moe_layers > 0.0 {
        let copies = tokens / tp * k * w * 2.0;
        let each = if sys.fits_domain(t.ep, 1) {
            copies * (ep - 1.0) / ep / nvlink
        } else {
            let domain = sys.gpus_per_nvlink_domain as f64;
            let nodes = (ep / domain).ceil();
            let inside = ep / nodes;
            let cross = match dispatcher {
                Dispatcher::AllToAll => copies * (1.0 - inside / ep),
                Dispatcher::DeepEp => tokens / tp * remote_nodes(e, k, nodes) * w * 2.0,
            };
            let local = copies * (inside - 1.0) / ep;
            (cross / port).max(local / nvlink)
        };
        4.0 * moe_layers * each
    } else {
        0.0
    };
    let pp_comm = if t.pp > 1 {
        let apart = t.tp.saturating_mul(t.cp).saturating_mul(t.dp);
        let bw = if apart < sys.gpus_per_nvlink_domain {
            nvlink
        } else {
            port
        };
        2.0 * t.vp as f64 * tokens * h * 2.0 / tp / bw
    } else {
        0.0
    };
    (tp_comm, ep_comm, pp_comm)
}

/// The data-parallel side of a step: `(optimizer, fsdp_per_micro_batch, dp_step)` seconds,
/// the optimizer step, ZeRO 3's per-micro-batch traffic (0 otherwise) and the distributed
/// optimizer's once-per-step traffic (0 under ZeRO 3), for `dense` and `experts` parameters
/// of the whole model.
pub fn data_parallel(
    t: &Training,
    sys: &SystemSpec,
    hbm: f64,
    dense: f64,
    experts: f64,
) -> (f64, f64, f64) {
    let (tp, pp, ep) = (t.tp as f64, t.pp as f64, t.ep as f64);
    let dense_gpu = dense / (tp * pp);
    let expert_gpu = experts / (ep * pp);
    let dp_dense = t.dp.saturating_mul(t.cp);
    let dp_expert = (dp_dense.saturating_mul(t.tp) / t.ep.max(1)).max(1);
    let optimizer = 30.0 * (dense_gpu / dp_dense as f64 + expert_gpu / dp_expert as f64) / hbm;
    let ring = |n: u64| {
        if n > 1 {
            (n - 1) as f64 / n as f64
        } else {
            0.0
        }
    };
    let per_byte = dense_gpu * ring(dp_dense) / sys.ring_bytes_per_second(dp_dense, t.tp)
        + expert_gpu * ring(dp_expert) / sys.ring_bytes_per_second(dp_expert, t.ep);
    if t.zero >= 3 {
        (
            optimizer,
            (2.0 * WEIGHT_BYTES + GRAD_REDUCE_BYTES) * per_byte,
            0.0,
        )
    } else {
        (
            optimizer,
            0.0,
            (WEIGHT_BYTES + GRAD_REDUCE_BYTES) * per_byte,
        )
    }
}

/// Seconds per micro-batch of FSDP2's copies on the compute stream (torch.distributed.fsdp,
/// `_fully_shard/_fsdp_collectives.py`), at `hbm` bytes per second: each parameter of the
/// GPU's unsharded layers ([`data_parallel`]'s `dense / (tp · pp) + experts / (ep · pp)`)
/// read from the all-gather buffer and written to the parameter (`WEIGHT_BYTES` each way),
/// and each gradient read (`WEIGHT_BYTES`) and written to the reduce-scatter buffer in the
/// reduce dtype (`GRAD_REDUCE_BYTES`). FSDP2 copies even for a group of one GPU (then from
/// the parameter itself: parameters kept in bf16 are assumed, as gathered). Under ZeRO 3
/// every micro-batch gathers twice (the forward, and the backward: it reshards after the
/// forward) and reduce-scatters once, 14 bytes per parameter; below it the step model
/// gathers and reduce-scatters once per step ([`data_parallel`]), and so copies once per
/// step: 10 bytes per parameter over the step's `micro_batches`.
pub fn fsdp2_copies(
    t: &Training,
    hbm: f64,
    (dense, experts): (f64, f64),
    micro_batches: u64,
) -> f64 {
    let (tp, pp, ep) = (t.tp as f64, t.pp as f64, t.ep as f64);
    let params = dense / (tp * pp) + experts / (ep * pp);
    let (gathers, per) = match t.zero >= 3 {
        true => (2.0, 1.0),
        false => (1.0, micro_batches.max(1) as f64),
    };
    let bytes = gathers * 2.0 * WEIGHT_BYTES + WEIGHT_BYTES + GRAD_REDUCE_BYTES;
    bytes * params / hbm / per
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deepep_sends_one_copy_per_other_node() {
        // Eight experts per node on four nodes, one expert per token: it lands on another
        // node three times in four.
        assert!((remote_nodes(32.0, 1.0, 4.0) - 0.75).abs() < 1e-12);
        // Every expert of the token on other nodes at most once per node.
        let r = remote_nodes(128.0, 8.0, 4.0);
        assert!(r < 3.0 && r > 2.5, "{r}");
        assert_eq!(remote_nodes(128.0, 8.0, 1.0), 0.0);
    }
}

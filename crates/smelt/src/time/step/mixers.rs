//! The recurrent token mixers of hybrid models (Mamba-2, Gated DeltaNet) as the step model
//! times them: their projections are GEMMs (the cost model's `recurrent_projections`, timed
//! with the other GEMMs); this module times the rest of a mixer block on one GPU.
//!
//! * **The chunked scan** (Mamba-2's SSD, `mamba_chunk_scan_combined`; Gated DeltaNet's
//!   chunked delta rule, flash-linear-attention's `chunk_gated_delta_rule`): a roofline of
//!   its FLOPs (the cost model's `recurrent_core`, 3 x forward for training) at the card's
//!   best-shape GEMM share of the peak (its contractions are tensor-core matmuls of chunk
//!   tiles) against the bytes its kernels move through HBM at the fitted share of the
//!   memory bandwidth. The bytes per token per layer, forward and backward together, are
//!   counted from the kernels' inputs and outputs: the per-chunk state (`n_h·d·N` for
//!   Mamba-2, `n_v·d_k·d_v` for Gated DeltaNet, fp32) written and read `12` (Mamba-2: chunk
//!   state, state passing and chunk scan forward, twice as many backward) or `6` (Gated
//!   DeltaNet: the states written and read forward, recomputed and their gradients
//!   backward) times per chunk of `C` tokens (the config's chunk, 64 for Gated DeltaNet),
//!   and the scan's bf16 inputs and output (Mamba-2: `x`, `B`, `C`, `dt` and `y`; Gated
//!   DeltaNet: `q`, `k`, `v`, the gates and `o`) 9 times (3 passes forward, 6 backward).
//! * **Memory-bound kernels** of the block, bf16 bytes per token per layer: the causal
//!   convolution over its `c` channels 5 times (forward in and out, backward in, its
//!   gradient in and out), the gated RMSNorm over the inner width with its gate 8 times,
//!   and Gated DeltaNet's l2 norms of `q` and `k` 4 times.
//!
//! These byte counts are this module's reading of the kernels' interfaces, not
//! measurements; no constant here is fitted.

use crate::model::{Mixer, Model};

/// Bytes per token per recurrent layer, forward and backward: `(scan, other)` (module docs).
pub fn layer_bytes(mixer: &Mixer) -> (f64, f64) {
    match mixer {
        Mixer::Mamba2(m) => {
            let (heads, d, n) = (m.heads as f64, m.head_dim as f64, m.state as f64);
            let inner = heads * d;
            let bc = 2.0 * (m.groups as f64) * n;
            let chunk = (m.chunk as f64).max(1.0);
            let states = 12.0 * 4.0 * heads * d * n / chunk;
            let io = 9.0 * 2.0 * (2.0 * inner + bc + heads);
            let conv = 5.0 * 2.0 * (inner + bc);
            let norm = 8.0 * 2.0 * inner;
            (states + io, conv + norm)
        }
        Mixer::GatedDeltanet(g) => {
            let (k, v) = (g.key_width() as f64, g.value_width() as f64);
            let chunk = crate::model::DELTA_RULE_CHUNK as f64;
            let states =
                6.0 * 4.0 * (g.value_heads * g.key_head_dim * g.value_head_dim) as f64 / chunk;
            let io = 9.0 * 2.0 * (2.0 * k + 2.0 * v);
            let conv = 5.0 * 2.0 * (2.0 * k + v);
            let l2 = 4.0 * 2.0 * 2.0 * k;
            let norm = 8.0 * 2.0 * v;
            (states + io, conv + l2 + norm)
        }
    }
}

/// Seconds of one micro-batch's recurrent mixers (scan and memory-bound kernels) on one GPU:
/// `core_flops` the scan's training FLOPs on this GPU, `tokens` the tokens each of its
/// recurrent layers runs, `layers` its recurrent layers, `gemm_rate` and `hbm` the card's
/// FLOP/s and bytes/s.
pub fn seconds(
    m: &Model,
    core_flops: f64,
    tokens: f64,
    layers: f64,
    gemm_rate: f64,
    hbm: f64,
) -> f64 {
    let Some(r) = m.recurrent.as_ref() else {
        return 0.0;
    };
    let (scan, other) = layer_bytes(&r.mixer);
    let scan_seconds = (core_flops / gemm_rate).max(scan * tokens * layers / hbm);
    scan_seconds + other * tokens * layers / hbm
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{GatedDeltaNet, Mamba2};

    #[test]
    fn the_state_traffic_scales_with_the_state_and_not_the_chunk_count() {
        let m = Mamba2 {
            heads: 64,
            head_dim: 64,
            state: 128,
            groups: 8,
            conv_kernel: 4,
            chunk: 128,
            conv_bias: true,
            proj_bias: false,
        };
        let (scan, other) = layer_bytes(&Mixer::Mamba2(m));
        // 12 passes of 4-byte states of 64·64·128 per 128-token chunk, plus 9 of the inputs.
        let states = 12.0 * 4.0 * 64.0 * 64.0;
        assert_eq!(scan, states + 18.0 * (2.0 * 4096.0 + 2048.0 + 64.0));
        assert_eq!(other, 10.0 * (4096.0 + 2048.0) + 16.0 * 4096.0);
        let doubled = layer_bytes(&Mixer::Mamba2(Mamba2 { state: 256, ..m })).0;
        assert!(doubled > scan);
        let g = GatedDeltaNet {
            key_heads: 16,
            value_heads: 32,
            key_head_dim: 128,
            value_head_dim: 128,
            conv_kernel: 4,
        };
        let (scan, _) = layer_bytes(&Mixer::GatedDeltanet(g));
        assert_eq!(
            scan,
            24.0 * 32.0 * 128.0 * 128.0 / 64.0 + 18.0 * (4096.0 + 8192.0)
        );
    }
}

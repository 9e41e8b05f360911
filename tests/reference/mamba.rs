//! Mamba-2 as Transformers' torch path runs it (`NemotronHMamba2Mixer` with the torch
//! fallbacks `causal_conv1d_fn` and `mamba2_chunk_scan`), counting its multiply-adds: the
//! projections, the depthwise convolution over every output `Conv1d` computes (`T + w - 1`
//! per channel, the last `w - 1` dropped), and the SSD scan's contractions (the five
//! einsums) on the sequence padded to the chunk: per chunk and head `C·Bᵀ`, the masked
//! scores times `x`, the chunk's state `Σ B·x` and its read-out `C·state`, and across
//! chunks the `Z x Z` decay matrix applied to the `Z = chunks + 1` states (a zero initial
//! state first). The elementwise products (by `dt`, the decays, `D`), softplus, cumulative
//! sums, exponentials, masks and the gated norm are real and not counted.
//!
//! It reads only the spec's fields.

use smelt::{Mamba2, Model};

use super::delta::{DeltaMacs, per_sequence, softplus};
use super::parts::{Rng, matmul, silu};

pub struct MambaMixer {
    x: Mamba2,
    in_proj: Vec<f64>,
    in_bias: Vec<f64>,
    /// `channels x taps`, depthwise.
    conv: Vec<f64>,
    conv_bias: Vec<f64>,
    a_log: Vec<f64>,
    d: Vec<f64>,
    dt_bias: Vec<f64>,
    norm: Vec<f64>,
    out: Vec<f64>,
    out_bias: Vec<f64>,
}

/// `NemotronHConfig`'s `time_step_min`, the lower clamp of `dt`.
const DT_MIN: f64 = 0.001;

impl MambaMixer {
    pub fn new(m: &Model, x: &Mamba2, rng: &mut Rng) -> Self {
        let h = m.hidden as usize;
        let (inner, heads) = (x.inner() as usize, x.heads as usize);
        let channels = x.conv_channels() as usize;
        let in_width = inner + channels + heads;
        let bias = |on: bool, n: usize| if on { n } else { 0 };
        Self {
            x: *x,
            in_proj: rng.tensor(h * in_width),
            in_bias: rng.tensor(bias(x.proj_bias, in_width)),
            conv: rng.tensor(channels * x.conv_kernel as usize),
            conv_bias: rng.tensor(bias(x.conv_bias, channels)),
            a_log: rng.tensor(heads),
            d: rng.tensor(heads),
            dt_bias: rng.tensor(heads),
            norm: rng.tensor(inner),
            out: rng.tensor(inner * h),
            out_bias: rng.tensor(bias(x.proj_bias, h)),
        }
    }

    pub fn params(&self) -> usize {
        [
            &self.in_proj,
            &self.in_bias,
            &self.conv,
            &self.conv_bias,
            &self.a_log,
            &self.d,
            &self.dt_bias,
            &self.norm,
            &self.out,
            &self.out_bias,
        ]
        .iter()
        .map(|v| v.len())
        .sum()
    }

    /// The state one sequence keeps per execution: the convolution's last `w` inputs per
    /// channel and the SSM state `heads x head_dim x state`.
    pub fn state(&self) -> usize {
        let x = &self.x;
        (x.conv_channels() * x.conv_kernel + x.heads * x.head_dim * x.state) as usize
    }

    /// The mixer on `hn` (tokens x hidden, normed), a packed batch cut into sequences of
    /// `sequence` tokens (the last may be shorter); returns its output (tokens x hidden).
    pub fn forward(&self, h: usize, hn: &[f64], sequence: usize, macs: &mut DeltaMacs) -> Vec<f64> {
        per_sequence(h, hn, sequence, |seq| self.sequence(h, seq, macs))
    }

    // Index loops, to read as the torch code's tensor indices.
    #[allow(clippy::needless_range_loop)]
    fn sequence(&self, h: usize, hn: &[f64], macs: &mut DeltaMacs) -> Vec<f64> {
        let x = &self.x;
        let t = hn.len() / h;
        let (heads, d, n, g) = (
            x.heads as usize,
            x.head_dim as usize,
            x.state as usize,
            x.groups as usize,
        );
        let inner = heads * d;
        let channels = inner + 2 * g * n;
        let width = inner + channels + heads;
        let w = x.conv_kernel as usize;
        let chunk = x.chunk as usize;
        let mut zxbcdt = matmul(hn, &self.in_proj, t, h, width, &mut macs.projections);
        super::parts::add_bias(&mut zxbcdt, &self.in_bias);
        let row = |i: usize| &zxbcdt[i * width..][..width];
        // The depthwise causal convolution over x, B, C: `padding = w - 1` on both sides,
        // `t + w - 1` outputs per channel computed, the first `t` kept, then SiLU.
        let mut xbc = vec![vec![0.0; channels]; t];
        for c in 0..channels {
            let input = |p: isize| {
                if p < 0 || p as usize >= t {
                    0.0
                } else {
                    row(p as usize)[inner + c]
                }
            };
            for o in 0..t + w - 1 {
                let mut acc = self.conv_bias.get(c).copied().unwrap_or(0.0);
                for j in 0..w {
                    acc += self.conv[c * w + j] * input(o as isize + j as isize - (w as isize - 1));
                    macs.core += 1;
                }
                if o < t {
                    xbc[o][c] = silu(acc);
                }
            }
        }
        let chunks = t.div_ceil(chunk);
        let padded = chunks * chunk;
        let slots = chunks + 1;
        let per_group = heads / g;
        let mut y = vec![0.0; t * inner];
        for hh in 0..heads {
            let gg = hh / per_group;
            let a = -self.a_log[hh].exp();
            // Per token of the padded sequence (zeros past `t`): x scaled by dt, A·dt, B, C.
            let mut xs = vec![vec![0.0; d]; padded];
            let mut ad = vec![0.0; padded];
            let mut bm = vec![vec![0.0; n]; padded];
            let mut cm = vec![vec![0.0; n]; padded];
            for i in 0..t {
                let dt = softplus(row(i)[inner + channels + hh] + self.dt_bias[hh]).max(DT_MIN);
                for p in 0..d {
                    xs[i][p] = xbc[i][hh * d + p] * dt;
                }
                ad[i] = a * dt;
                bm[i].copy_from_slice(&xbc[i][inner + gg * n..][..n]);
                cm[i].copy_from_slice(&xbc[i][inner + g * n + gg * n..][..n]);
            }
            // Within each chunk: the cumulative decay, the diagonal block's output, and the
            // chunk's state (`head_dim x state`).
            let mut cums = Vec::with_capacity(chunks);
            let mut y_diag = vec![vec![0.0; d]; padded];
            let mut states = vec![vec![vec![0.0; n]; d]; slots];
            for c in 0..chunks {
                let c0 = c * chunk;
                let mut cum = vec![0.0; chunk];
                let mut acc = 0.0;
                for l in 0..chunk {
                    acc += ad[c0 + l];
                    cum[l] = acc;
                }
                // G = C·Bᵀ over the state, for every (l, s) pair of the chunk; M = G ∘ L.
                let mut mm = vec![vec![0.0; chunk]; chunk];
                for l in 0..chunk {
                    for s in 0..chunk {
                        let mut gsum = 0.0;
                        for k in 0..n {
                            gsum += cm[c0 + l][k] * bm[c0 + s][k];
                            macs.core += 1;
                        }
                        let decay = if s <= l { (cum[l] - cum[s]).exp() } else { 0.0 };
                        mm[l][s] = gsum * decay;
                    }
                }
                for l in 0..chunk {
                    for p in 0..d {
                        let mut acc = 0.0;
                        for s in 0..chunk {
                            acc += mm[l][s] * xs[c0 + s][p];
                            macs.core += 1;
                        }
                        y_diag[c0 + l][p] = acc;
                    }
                }
                let last = cum[chunk - 1];
                for p in 0..d {
                    for k in 0..n {
                        let mut acc = 0.0;
                        for l in 0..chunk {
                            acc += bm[c0 + l][k] * (last - cum[l]).exp() * xs[c0 + l][p];
                            macs.core += 1;
                        }
                        states[c + 1][p][k] = acc;
                    }
                }
                cums.push(cum);
            }
            // Across chunks: the decay matrix over the Z slots (slot 0 the zero initial
            // state), applied to every pair of slots.
            let mut ends = vec![0.0; slots];
            for c in 0..chunks {
                ends[c + 1] = cums[c][chunk - 1];
            }
            let mut new_states = vec![vec![vec![0.0; n]; d]; slots];
            for i in 0..slots {
                for p in 0..d {
                    for k in 0..n {
                        let mut acc = 0.0;
                        for j in 0..slots {
                            let decay = if j <= i {
                                ends[j + 1..=i].iter().sum::<f64>().exp()
                            } else {
                                0.0
                            };
                            acc += decay * states[j][p][k];
                            macs.core += 1;
                        }
                        new_states[i][p][k] = acc;
                    }
                }
            }
            // The state at each chunk's start read out by C, decayed; plus the D skip.
            for c in 0..chunks {
                let c0 = c * chunk;
                for l in 0..chunk {
                    let i = c0 + l;
                    for p in 0..d {
                        let mut acc = 0.0;
                        for k in 0..n {
                            acc += cm[i][k] * new_states[c][p][k];
                            macs.core += 1;
                        }
                        if i < t {
                            y[i * inner + hh * d + p] = y_diag[i][p]
                                + acc * cums[c][l].exp()
                                + self.d[hh] * xbc[i][hh * d + p];
                        }
                    }
                }
            }
        }
        // The gated RMSNorm: y·silu(z), normalised per group of `inner / groups`.
        let size = inner / g;
        let mut normed = vec![0.0; t * inner];
        for i in 0..t {
            for c in 0..inner {
                normed[i * inner + c] = y[i * inner + c] * silu(row(i)[c]);
            }
            for grp in normed[i * inner..(i + 1) * inner].chunks_mut(size) {
                let ms = grp.iter().map(|v| v * v).sum::<f64>() / size as f64;
                let inv = 1.0 / (ms + 1e-5).sqrt();
                grp.iter_mut().for_each(|v| *v *= inv);
            }
            for (v, wgt) in normed[i * inner..(i + 1) * inner]
                .iter_mut()
                .zip(&self.norm)
            {
                *v *= wgt;
            }
        }
        let mut out = matmul(&normed, &self.out, t, inner, h, &mut macs.projections);
        super::parts::add_bias(&mut out, &self.out_bias);
        assert!(out.iter().all(|v| v.is_finite()));
        out
    }
}

//! Gated DeltaNet as Transformers' torch path runs it (`Qwen3NextGatedDeltaNet` with
//! `causal_conv1d_fn` and `torch_chunk_gated_delta_rule`), counting its multiply-adds: the
//! projections, the depthwise convolution over every output `Conv1d` computes (`T + w - 1`
//! per channel, the last `w - 1` dropped), and the chunked delta rule's matmuls on the
//! sequence padded to the chunk. The triangular solves are real (forward substitution) and
//! not counted, like the cumulative sums, exponentials, l2 norms and the gated norm.
//!
//! It reads only the spec's fields; the chunk length is the torch function's default (64).

use smelt::{GatedDeltaNet, Model};

use super::parts::{Rng, matmul, rmsnorm, silu};

/// `torch_chunk_gated_delta_rule`'s `chunk_size` default.
pub const CHUNK: usize = 64;

/// Multiply-adds of the recurrent mixers.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DeltaMacs {
    pub projections: u64,
    pub core: u64,
}

pub struct DeltaNet {
    g: GatedDeltaNet,
    in_qkvz: Vec<f64>,
    in_ba: Vec<f64>,
    /// `channels x taps`, depthwise.
    conv: Vec<f64>,
    a_log: Vec<f64>,
    dt_bias: Vec<f64>,
    norm: Vec<f64>,
    out: Vec<f64>,
}

/// `mixer` run on each sequence of a packed batch `hn` (tokens x `h`) cut into sequences of
/// `sequence` tokens (the last may be shorter), the outputs concatenated: a recurrent state
/// starts anew with each sequence.
pub fn per_sequence(
    h: usize,
    hn: &[f64],
    sequence: usize,
    mut mixer: impl FnMut(&[f64]) -> Vec<f64>,
) -> Vec<f64> {
    let t = hn.len() / h;
    let mut out = Vec::with_capacity(t * h);
    let mut start = 0;
    while start < t {
        let len = sequence.min(t - start);
        out.extend(mixer(&hn[start * h..(start + len) * h]));
        start += len;
    }
    out
}

/// `ln(1 + e^x)`.
pub fn softplus(x: f64) -> f64 {
    (1.0 + x.exp()).ln()
}

fn l2norm(x: &mut [f64]) {
    let inv = 1.0 / (x.iter().map(|v| v * v).sum::<f64>() + 1e-6).sqrt();
    x.iter_mut().for_each(|v| *v *= inv);
}

/// `a (n x k) · b (k x m)`, counting each multiply-add.
fn mm(a: &[Vec<f64>], b: &[Vec<f64>], counter: &mut u64) -> Vec<Vec<f64>> {
    let (n, k, m) = (a.len(), b.len(), b.first().map_or(0, Vec::len));
    let mut out = vec![vec![0.0; m]; n];
    for i in 0..n {
        assert_eq!(a[i].len(), k);
        for j in 0..m {
            let mut acc = 0.0;
            for p in 0..k {
                acc += a[i][p] * b[p][j];
                *counter += 1;
            }
            out[i][j] = acc;
        }
    }
    out
}

fn transpose(a: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let m = a.first().map_or(0, Vec::len);
    (0..m).map(|j| a.iter().map(|r| r[j]).collect()).collect()
}

/// Solves `L·X = B` for `L` unit lower triangular (its strictly lower part is `l`'s; the
/// diagonal and above are ignored, as `solve_triangular(..., unitriangular=True)`), by
/// forward substitution: not counted.
fn solve_unit_lower(l: &[Vec<f64>], b: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let mut x: Vec<Vec<f64>> = Vec::with_capacity(b.len());
    for i in 0..b.len() {
        let mut row = b[i].clone();
        for (j, xj) in x.iter().enumerate().take(i) {
            for (r, v) in row.iter_mut().zip(xj) {
                *r -= l[i][j] * v;
            }
        }
        x.push(row);
    }
    x
}

impl DeltaNet {
    pub fn new(m: &Model, g: &GatedDeltaNet, rng: &mut Rng) -> Self {
        let h = m.hidden as usize;
        let (k, v, nv) = (
            g.key_width() as usize,
            g.value_width() as usize,
            g.value_heads as usize,
        );
        let channels = 2 * k + v;
        Self {
            g: *g,
            in_qkvz: rng.tensor(h * (2 * k + 2 * v)),
            in_ba: rng.tensor(h * 2 * nv),
            conv: rng.tensor(channels * g.conv_kernel as usize),
            a_log: rng.tensor(nv),
            dt_bias: rng.tensor(nv),
            norm: rng.tensor(g.value_head_dim as usize),
            out: rng.tensor(v * h),
        }
    }

    pub fn params(&self) -> usize {
        [
            &self.in_qkvz,
            &self.in_ba,
            &self.conv,
            &self.a_log,
            &self.dt_bias,
            &self.norm,
            &self.out,
        ]
        .iter()
        .map(|v| v.len())
        .sum()
    }

    /// The state one sequence keeps per execution: the convolution's last `w` inputs per
    /// channel and the delta rule's `value_heads x key_head_dim x value_head_dim`.
    pub fn state(&self) -> usize {
        let g = &self.g;
        let channels = 2 * g.key_width() + g.value_width();
        (channels * g.conv_kernel + g.value_heads * g.key_head_dim * g.value_head_dim) as usize
    }

    /// The mixer on `hn` (tokens x hidden, normed), a packed batch cut into sequences of
    /// `sequence` tokens (the last may be shorter); returns its output (tokens x hidden).
    pub fn forward(&self, h: usize, hn: &[f64], sequence: usize, macs: &mut DeltaMacs) -> Vec<f64> {
        per_sequence(h, hn, sequence, |seq| self.sequence(h, seq, macs))
    }

    // Index loops, to read as the torch code's tensor indices.
    #[allow(clippy::needless_range_loop)]
    fn sequence(&self, h: usize, hn: &[f64], macs: &mut DeltaMacs) -> Vec<f64> {
        let g = &self.g;
        let t = hn.len() / h;
        let (nk, nv) = (g.key_heads as usize, g.value_heads as usize);
        let (dk, dv) = (g.key_head_dim as usize, g.value_head_dim as usize);
        let (k, v) = (nk * dk, nv * dv);
        let w = g.conv_kernel as usize;
        let qkvz = matmul(
            hn,
            &self.in_qkvz,
            t,
            h,
            2 * k + 2 * v,
            &mut macs.projections,
        );
        let ba = matmul(hn, &self.in_ba, t, h, 2 * nv, &mut macs.projections);
        let row = |i: usize| &qkvz[i * (2 * k + 2 * v)..][..2 * k + 2 * v];
        // The depthwise causal convolution over q, k, v: `padding = w - 1` on both sides,
        // `t + w - 1` outputs per channel computed, the first `t` kept, then SiLU.
        let channels = 2 * k + v;
        let mut mixed = vec![vec![0.0; channels]; t];
        for c in 0..channels {
            let x = |p: isize| {
                if p < 0 || p as usize >= t {
                    0.0
                } else {
                    row(p as usize)[c]
                }
            };
            for o in 0..t + w - 1 {
                let mut acc = 0.0;
                for j in 0..w {
                    acc += self.conv[c * w + j] * x(o as isize + j as isize - (w as isize - 1));
                    macs.core += 1;
                }
                if o < t {
                    mixed[o][c] = silu(acc);
                }
            }
        }
        let group = nv / nk;
        let padded = t.div_ceil(CHUNK) * CHUNK;
        let mut core = vec![0.0; t * v];
        for hv in 0..nv {
            let hk = hv / group;
            // Per token of the padded sequence: q, k (l2-normed, q scaled), v, β, decay.
            let mut q = vec![vec![0.0; dk]; padded];
            let mut kk = vec![vec![0.0; dk]; padded];
            let mut vv = vec![vec![0.0; dv]; padded];
            let mut beta = vec![0.0; padded];
            let mut decay = vec![0.0; padded];
            for i in 0..t {
                q[i].copy_from_slice(&mixed[i][hk * dk..][..dk]);
                kk[i].copy_from_slice(&mixed[i][k + hk * dk..][..dk]);
                vv[i].copy_from_slice(&mixed[i][2 * k + hv * dv..][..dv]);
                l2norm(&mut q[i]);
                l2norm(&mut kk[i]);
                q[i].iter_mut().for_each(|x| *x /= (dk as f64).sqrt());
                let (b, a) = (ba[i * 2 * nv + hv], ba[i * 2 * nv + nv + hv]);
                beta[i] = 1.0 / (1.0 + (-b).exp());
                decay[i] = -self.a_log[hv].exp() * softplus(a + self.dt_bias[hv]);
            }
            let mut state = vec![vec![0.0; dv]; dk];
            for c0 in (0..padded).step_by(CHUNK) {
                let idx = c0..c0 + CHUNK;
                let mut cum = vec![0.0; CHUNK];
                let mut acc = 0.0;
                for (p, i) in idx.clone().enumerate() {
                    acc += decay[i];
                    cum[p] = acc;
                }
                let pair = |i: usize, j: usize| {
                    if j > i { 0.0 } else { (cum[i] - cum[j]).exp() }
                };
                let kc: Vec<Vec<f64>> = idx.clone().map(|i| kk[i].clone()).collect();
                let k_beta: Vec<Vec<f64>> = idx
                    .clone()
                    .map(|i| kk[i].iter().map(|x| x * beta[i]).collect())
                    .collect();
                let v_beta: Vec<Vec<f64>> = idx
                    .clone()
                    .map(|i| vv[i].iter().map(|x| x * beta[i]).collect())
                    .collect();
                let qc: Vec<Vec<f64>> = idx.clone().map(|i| q[i].clone()).collect();
                let kt = transpose(&kc);
                let mut ut = mm(&k_beta, &kt, &mut macs.core);
                let mut intra = mm(&qc, &kt, &mut macs.core);
                for i in 0..CHUNK {
                    for j in 0..CHUNK {
                        ut[i][j] *= pair(i, j);
                        intra[i][j] *= pair(i, j);
                    }
                }
                let decayed: Vec<Vec<f64>> = k_beta
                    .iter()
                    .zip(&cum)
                    .map(|(r, c)| r.iter().map(|x| x * c.exp()).collect())
                    .collect();
                let new_values = solve_unit_lower(&ut, &v_beta);
                let k_cumdecay = solve_unit_lower(&ut, &decayed);
                let last = cum[CHUNK - 1];
                let qd: Vec<Vec<f64>> = qc
                    .iter()
                    .zip(&cum)
                    .map(|(r, c)| r.iter().map(|x| x * c.exp()).collect())
                    .collect();
                let kd: Vec<Vec<f64>> = kc
                    .iter()
                    .zip(&cum)
                    .map(|(r, c)| r.iter().map(|x| x * (last - c).exp()).collect())
                    .collect();
                let read = mm(&k_cumdecay, &state, &mut macs.core);
                let v_new: Vec<Vec<f64>> = new_values
                    .iter()
                    .zip(&read)
                    .map(|(a, b)| a.iter().zip(b).map(|(x, y)| x - y).collect())
                    .collect();
                let inter = mm(&qd, &state, &mut macs.core);
                let local = mm(&intra, &v_new, &mut macs.core);
                let write = mm(&transpose(&kd), &v_new, &mut macs.core);
                for (p, i) in idx.enumerate() {
                    if i < t {
                        for c in 0..dv {
                            core[i * v + hv * dv + c] = inter[p][c] + local[p][c];
                        }
                    }
                }
                for (s, wr) in state.iter_mut().zip(&write) {
                    for (x, y) in s.iter_mut().zip(wr) {
                        *x = *x * last.exp() + y;
                    }
                }
            }
        }
        // The gated RMSNorm per value head, then the output projection.
        let mut normed = rmsnorm(&core, &self.norm, dv);
        for i in 0..t {
            for c in 0..v {
                normed[i * v + c] *= silu(row(i)[2 * k + v + c]);
            }
        }
        let y = matmul(&normed, &self.out, t, v, h, &mut macs.projections);
        assert!(y.iter().all(|x| x.is_finite()));
        y
    }
}

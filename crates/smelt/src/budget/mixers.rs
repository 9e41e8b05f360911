//! The recurrent mixer shapes a lattice searches, kind by kind: those `[lattice.recurrent]`
//! lists around the Baseline's mixer ([`recurrent_mixers`]), and a finer set around one
//! shape ([`mixers_around`], what `--advise` proposes). The one place that knows each mixer
//! kind's knobs (Gated DeltaNet's heads and head widths, Mamba-2's heads, head width and
//! state) and the rules between them.

use serde::Deserialize;

use super::lattice_file::values_list;
use crate::error::{Error, Result};
use crate::model::{GatedDeltaNet, MAX_COUNT, MAX_WIDTH, Mamba2, Mixer, Stack};

/// `[lattice.recurrent]` as written: a list of values per knob of the Baseline's recurrent
/// mixer kind (Gated DeltaNet: `key_heads`, `value_heads`, `key_head_dim`, `value_head_dim`;
/// Mamba-2: `heads`, `head_dim`, `state`), each the Baseline's alone when absent.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RecurrentFile {
    key_heads: Option<Vec<u64>>,
    value_heads: Option<Vec<u64>>,
    key_head_dim: Option<Vec<u64>>,
    value_head_dim: Option<Vec<u64>>,
    heads: Option<Vec<u64>>,
    head_dim: Option<Vec<u64>>,
    state: Option<Vec<u64>>,
}

/// The most recurrent mixer shapes a lattice takes (each is searched like a lattice of its
/// own).
const MAX_MIXERS: usize = 4096;

impl RecurrentFile {
    /// Every knob by name, whether the file sets it, and the mixer kind it belongs to.
    fn set_knobs(&self) -> [(&'static str, bool, &'static str); 7] {
        const GDN: &str = "gated_deltanet";
        const MAMBA: &str = "mamba2";
        [
            ("key_heads", self.key_heads.is_some(), GDN),
            ("value_heads", self.value_heads.is_some(), GDN),
            ("key_head_dim", self.key_head_dim.is_some(), GDN),
            ("value_head_dim", self.value_head_dim.is_some(), GDN),
            ("heads", self.heads.is_some(), MAMBA),
            ("head_dim", self.head_dim.is_some(), MAMBA),
            ("state", self.state.is_some(), MAMBA),
        ]
    }

    /// Every valid mixer of the Baseline's kind whose knobs are on the lists (a knob the
    /// file leaves out keeps the Baseline's value).
    fn resolve(&self, base: Mixer) -> Result<Vec<Mixer>> {
        let kind = base.as_str();
        if let Some((knob, _, _)) = self
            .set_knobs()
            .into_iter()
            .find(|&(_, set, of)| set && of != kind)
        {
            return Err(Error::invalid(
                format!("lattice.recurrent.{knob}"),
                format!(
                    "is not a knob of the Baseline's {kind} layers; their knobs are {}",
                    self.set_knobs()
                        .iter()
                        .filter(|(_, _, of)| *of == kind)
                        .map(|(k, _, _)| *k)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        let mixers = match base {
            Mixer::GatedDeltanet(g) => self.gated_deltanets(g)?,
            Mixer::Mamba2(m) => self.mamba2s(m)?,
        };
        if mixers.len() > MAX_MIXERS {
            return Err(Error::invalid(
                "lattice.recurrent",
                format!(
                    "gives {} mixer shapes, over the limit of {MAX_MIXERS}: shorten its lists",
                    mixers.len()
                ),
            ));
        }
        Ok(mixers)
    }

    /// Every valid Gated DeltaNet shape on the lists, around the Baseline's `g`.
    fn gated_deltanets(&self, g: GatedDeltaNet) -> Result<Vec<Mixer>> {
        let nk = knob_list("key_heads", &self.key_heads, g.key_heads, MAX_COUNT)?;
        let nv = knob_list("value_heads", &self.value_heads, g.value_heads, MAX_COUNT)?;
        let dk = knob_list(
            "key_head_dim",
            &self.key_head_dim,
            g.key_head_dim,
            MAX_WIDTH,
        )?;
        let dv = knob_list(
            "value_head_dim",
            &self.value_head_dim,
            g.value_head_dim,
            MAX_WIDTH,
        )?;
        // Every listed value must serve in some shape (none is dropped unsaid).
        if let Some(k) = nk
            .iter()
            .find(|&&k| !nv.iter().any(|v| v.is_multiple_of(k)))
        {
            return Err(Error::invalid(
                "lattice.recurrent.key_heads",
                format!(
                    "{k} divides none of the value_heads {nv:?}{}: each query/key head serves \
                     value_heads / key_heads value heads",
                    baseline_note(self.value_heads.is_none())
                ),
            ));
        }
        if let Some(v) = nv
            .iter()
            .find(|&&v| !nk.iter().any(|&k| v.is_multiple_of(k)))
        {
            return Err(Error::invalid(
                "lattice.recurrent.value_heads",
                format!(
                    "{v} is a multiple of none of the key_heads {nk:?}{}: each query/key head \
                     serves value_heads / key_heads value heads",
                    baseline_note(self.key_heads.is_none())
                ),
            ));
        }
        let mut out = Vec::new();
        for &key_heads in &nk {
            for &value_heads in nv.iter().filter(|v| v.is_multiple_of(key_heads)) {
                for &key_head_dim in &dk {
                    for &value_head_dim in &dv {
                        out.push(Mixer::GatedDeltanet(GatedDeltaNet {
                            key_heads,
                            value_heads,
                            key_head_dim,
                            value_head_dim,
                            ..g
                        }));
                    }
                }
            }
        }
        Ok(out)
    }

    /// Every valid Mamba-2 shape on the lists, around the Baseline's `m`.
    fn mamba2s(&self, m: Mamba2) -> Result<Vec<Mixer>> {
        let heads = knob_list("heads", &self.heads, m.heads, MAX_COUNT)?;
        let head_dim = knob_list("head_dim", &self.head_dim, m.head_dim, MAX_WIDTH)?;
        let state = knob_list("state", &self.state, m.state, MAX_WIDTH)?;
        if let Some(h) = heads.iter().find(|h| !h.is_multiple_of(m.groups)) {
            return Err(Error::invalid(
                "lattice.recurrent.heads",
                format!(
                    "{h} is not a multiple of the Baseline's groups ({}): each group's B and C \
                     serve heads / groups heads",
                    m.groups
                ),
            ));
        }
        let mut out = Vec::new();
        for &h in &heads {
            for &d in &head_dim {
                for &n in &state {
                    out.push(Mixer::Mamba2(Mamba2 {
                        heads: h,
                        head_dim: d,
                        state: n,
                        ..m
                    }));
                }
            }
        }
        Ok(out)
    }
}

/// `" (the Baseline's: the list is not given)"` when `baseline`, for an error about a list.
fn baseline_note(baseline: bool) -> &'static str {
    if baseline {
        " (the Baseline's: the list is not given)"
    } else {
        ""
    }
}

/// The list of `lattice.recurrent.<knob>` (the Baseline's value alone when absent).
fn knob_list(knob: &str, values: &Option<Vec<u64>>, baseline: u64, max: u64) -> Result<Vec<u64>> {
    values_list(
        &format!("lattice.recurrent.{knob}"),
        values.as_deref(),
        baseline,
        max,
    )
}

/// The recurrent mixer shapes of the lattice: `[lattice.recurrent]` resolved against the
/// Baseline's mixer (none without recurrent layers, where the table is refused), whose
/// stack is `base`.
pub(super) fn recurrent_mixers(file: Option<&RecurrentFile>, base: &Stack) -> Result<Vec<Mixer>> {
    match (base.recurrent(), file) {
        (None, None) => Ok(Vec::new()),
        (None, Some(_)) => Err(Error::invalid(
            "lattice.recurrent",
            "sets the knobs of recurrent layers; this Baseline has no [model.recurrent]",
        )),
        (Some(r), None) => Ok(vec![r]),
        (Some(r), Some(f)) => f.resolve(r),
    }
}

/// Head counts tried around a Baseline's, as fractions of it.
const HEAD_FRACTIONS: [(u64, u64); 5] = [(1, 2), (3, 4), (1, 1), (5, 4), (3, 2)];

/// Head widths (and Mamba-2 states) tried around a Baseline's, as fractions of it.
const WIDTH_FRACTIONS: [(u64, u64); 3] = [(1, 2), (3, 4), (1, 1)];

/// `value` times each fraction, rounded half up to a multiple of `multiple` (at least one
/// multiple, at most `max`); the value itself exactly at 1/1. Sorted, deduplicated.
fn around(value: u64, fractions: &[(u64, u64)], multiple: u64, max: u64) -> Vec<u64> {
    let mut out: Vec<u64> = fractions
        .iter()
        .map(|&(n, d)| {
            if n == d {
                return value;
            }
            let x = u128::from(value) * u128::from(n);
            let m = u128::from(d) * u128::from(multiple);
            let rounded = (2 * x + m) / (2 * m) * u128::from(multiple);
            u64::try_from(rounded)
                .unwrap_or(u64::MAX)
                .clamp(multiple.min(max), max)
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The recurrent mixer shapes around `m` (the one a lattice holds): each head count (Gated
/// DeltaNet's value heads, Mamba-2's heads, kept multiples of the key heads or groups) at
/// 1/2 to 3/2 of it, each head width (and Mamba-2's state) at 1/2 to 1 (multiples of 8), the
/// query/key heads, convolution, groups and chunk kept; and the change in words.
pub(crate) fn mixers_around(m: Mixer) -> (String, Vec<Mixer>) {
    let widths = |w: u64| around(w, &WIDTH_FRACTIONS, 8, MAX_WIDTH);
    let mut out = Vec::new();
    match m {
        Mixer::GatedDeltanet(g) => {
            for value_heads in around(g.value_heads, &HEAD_FRACTIONS, g.key_heads, MAX_COUNT) {
                for key_head_dim in widths(g.key_head_dim) {
                    for value_head_dim in widths(g.value_head_dim) {
                        out.push(Mixer::GatedDeltanet(GatedDeltaNet {
                            value_heads,
                            key_head_dim,
                            value_head_dim,
                            ..g
                        }));
                    }
                }
            }
        }
        Mixer::Mamba2(s) => {
            for heads in around(s.heads, &HEAD_FRACTIONS, s.groups, MAX_COUNT) {
                for head_dim in widths(s.head_dim) {
                    for state in around(s.state, &[(1, 2), (1, 1)], 8, MAX_WIDTH) {
                        out.push(Mixer::Mamba2(Mamba2 {
                            heads,
                            head_dim,
                            state,
                            ..s
                        }));
                    }
                }
            }
        }
    }
    let what = match m {
        Mixer::GatedDeltanet(_) => {
            "value heads x1/2, x3/4, x1, x5/4, x3/2 (multiples of key heads), key and value \
             head widths x1/2, x3/4, x1"
        }
        Mixer::Mamba2(_) => {
            "heads x1/2, x3/4, x1, x5/4, x3/2 (multiples of groups), head width x1/2, x3/4, x1, \
             state x1/2, x1"
        }
    };
    (format!("{} {what}: {} shapes", m.as_str(), out.len()), out)
}

//! `[lattice]` as written, resolved against the Baseline into a [`Lattice`].

use serde::Deserialize;

use super::{FfnRule, HeadsRule, Lattice, Steps};
use crate::error::{Error, Result};
use crate::model::{
    GatedDeltaNet, MAX_COUNT, MAX_EXPERTS, MAX_WIDTH, Mamba2, Mixer, ModelSpec, Recurrent,
};

/// A `{ step, min, max }` knob as written; every part optional.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RangeFile {
    step: Option<u64>,
    min: Option<u64>,
    max: Option<u64>,
}

impl RangeFile {
    /// The progression, with `max` at most `limit` (checked before anything is built).
    fn resolve(&self, field: &str, default: (u64, u64, u64), limit: u64) -> Result<Steps> {
        let (min, max, step) = default;
        let max = self.max.unwrap_or(max.min(limit));
        at_most(&format!("{field}.max"), max, limit)?;
        Steps::new(
            field,
            self.min.unwrap_or(min),
            max,
            self.step.unwrap_or(step),
        )
    }

    fn is_set(&self) -> bool {
        self.step.or(self.min).or(self.max).is_some()
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FfnFile {
    ratio: Option<toml::Value>,
    multiple: Option<u64>,
    step: Option<u64>,
    min: Option<u64>,
    max: Option<u64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HeadDimFile {
    values: Option<Vec<u64>>,
    step: Option<u64>,
    min: Option<u64>,
    max: Option<u64>,
}

/// The `{ step, min, max }` part of a knob that also takes other keys.
macro_rules! range_of {
    ($file:expr) => {
        RangeFile {
            step: $file.step,
            min: $file.min,
            max: $file.max,
        }
    };
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HeadsFile {
    #[serde(default)]
    tied: bool,
    min: Option<u64>,
    max: Option<u64>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RatioRangeFile {
    min: Option<f64>,
    max: Option<f64>,
}

/// `[lattice]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LatticeFile {
    #[serde(default)]
    hidden: RangeFile,
    #[serde(default)]
    experts: RangeFile,
    #[serde(default)]
    expert_ffn: FfnFile,
    #[serde(default)]
    head_dim: HeadDimFile,
    #[serde(default)]
    heads: HeadsFile,
    #[serde(default)]
    kv_heads: RangeFile,
    #[serde(default)]
    gqa: RangeFile,
    #[serde(default)]
    q_width: RatioRangeFile,
    #[serde(default)]
    kv_lora_rank: RangeFile,
    /// MLA per-head query/key widths without RoPE, a list.
    #[serde(default)]
    qk_nope_head_dim: Option<Vec<u64>>,
    /// MLA per-head value widths, a list.
    #[serde(default)]
    v_head_dim: Option<Vec<u64>>,
    /// The recurrent mixer's shapes (a hybrid Baseline).
    #[serde(default)]
    recurrent: Option<RecurrentFile>,
}

/// `[lattice.recurrent]` as written: a list of values per knob of the Baseline's recurrent
/// mixer kind (Gated DeltaNet: `key_heads`, `value_heads`, `key_head_dim`, `value_head_dim`;
/// Mamba-2: `heads`, `head_dim`, `state`), each the Baseline's alone when absent.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RecurrentFile {
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
    fn resolve(&self, base: &Recurrent) -> Result<Vec<Mixer>> {
        let kind = base.mixer.as_str();
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
        let mixers = match base.mixer {
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
/// Baseline's mixer (none without recurrent layers, where the table is refused).
fn recurrent_mixers(file: Option<&RecurrentFile>, base: &ModelSpec) -> Result<Vec<Mixer>> {
    match (&base.model.recurrent, file) {
        (None, None) => Ok(Vec::new()),
        (None, Some(_)) => Err(Error::invalid(
            "lattice.recurrent",
            "sets the knobs of recurrent layers; this Baseline has no [model.recurrent]",
        )),
        (Some(r), None) => Ok(vec![r.mixer]),
        (Some(r), Some(f)) => f.resolve(r),
    }
}

/// Parses `"a/b"`, `"baseline"` or a number into a ratio `num/den`.
fn parse_ratio(value: &toml::Value, base: &ModelSpec) -> Result<(u64, u64)> {
    let bad = |why: String| Error::invalid("lattice.expert_ffn.ratio", why);
    match value {
        toml::Value::String(s) if s == "baseline" => {
            Ok((base.model.moe.expert_ffn, base.model.hidden))
        }
        toml::Value::String(s) => {
            let (a, b) = s.split_once('/').ok_or_else(|| {
                bad(format!(
                    "must be \"a/b\", \"baseline\" or a number (got \"{s}\")"
                ))
            })?;
            let part = |p: &str, what: &str| -> Result<u64> {
                p.trim()
                    .parse()
                    .map_err(|_| bad(format!("bad {what} in \"{s}\"")))
            };
            let (a, b) = (part(a, "numerator")?, part(b, "denominator")?);
            if a == 0 || b == 0 || a > 1 << 20 || b > 1 << 20 {
                return Err(bad(format!(
                    "numerator and denominator must be between 1 and 2^20 (got \"{s}\")"
                )));
            }
            Ok((a, b))
        }
        toml::Value::Float(x) if x.is_finite() && *x > 0.0 && *x <= 64.0 => {
            // A decimal ratio, kept to 6 decimal places.
            Ok(((x * 1e6).round() as u64, 1_000_000))
        }
        toml::Value::Integer(n) if (1..=64).contains(n) => Ok((*n as u64, 1)),
        other => Err(bad(format!(
            "must be \"a/b\", \"baseline\" or a positive number up to 64 (got {other})"
        ))),
    }
}

fn at_most(field: &str, value: u64, max: u64) -> Result<()> {
    if value > max {
        return Err(Error::invalid(field, format!("must be at most {max}")));
    }
    Ok(())
}

impl FfnFile {
    fn resolve(&self, base: &ModelSpec) -> Result<FfnRule> {
        let m = &base.model;
        let range = range_of!(self);
        match (&self.ratio, range.is_set()) {
            (Some(_), true) => Err(Error::invalid(
                "lattice.expert_ffn",
                "give either ratio (+ multiple) or step/min/max, not both",
            )),
            (None, true) => {
                if self.multiple.is_some() {
                    return Err(Error::invalid(
                        "lattice.expert_ffn.multiple",
                        "only applies with ratio",
                    ));
                }
                Ok(FfnRule::Free(range.resolve(
                    "lattice.expert_ffn",
                    (16, m.moe.expert_ffn.saturating_mul(2), 16),
                    MAX_WIDTH,
                )?))
            }
            (ratio, false) => {
                let (num, den) = match ratio {
                    Some(r) => parse_ratio(r, base)?,
                    None => (m.moe.expert_ffn, m.hidden),
                };
                let multiple = self.multiple.unwrap_or(16);
                if !(1..=1 << 20).contains(&multiple) {
                    return Err(Error::invalid(
                        "lattice.expert_ffn.multiple",
                        "must be between 1 and 2^20",
                    ));
                }
                Ok(FfnRule::Tied { num, den, multiple })
            }
        }
    }
}

impl HeadDimFile {
    fn resolve(&self) -> Result<Vec<u64>> {
        let range = range_of!(self);
        let values = match (&self.values, range.is_set()) {
            (Some(_), true) => {
                return Err(Error::invalid(
                    "lattice.head_dim",
                    "give either values or step/min/max, not both",
                ));
            }
            (Some(v), false) => {
                if v.is_empty() || v.contains(&0) {
                    return Err(Error::invalid(
                        "lattice.head_dim.values",
                        "must list at least one positive head width",
                    ));
                }
                let mut v = v.clone();
                v.sort_unstable();
                v.dedup();
                v
            }
            (None, _) => range
                .resolve("lattice.head_dim", (32, 256, 8), MAX_WIDTH)?
                .values()
                .collect(),
        };
        if values.iter().any(|&v| v > MAX_WIDTH) {
            return Err(Error::invalid(
                "lattice.head_dim.values",
                format!("must be at most {MAX_WIDTH}"),
            ));
        }
        Ok(values)
    }
}

impl HeadsFile {
    fn resolve(&self) -> Result<HeadsRule> {
        if self.tied {
            if self.min.is_some() || self.max.is_some() {
                return Err(Error::invalid(
                    "lattice.heads",
                    "give either tied = true or min/max, not both",
                ));
            }
            return Ok(HeadsRule::Tied);
        }
        let max = self.max.unwrap_or(256);
        at_most("lattice.heads.max", max, MAX_COUNT)?;
        let s = Steps::new("lattice.heads", self.min.unwrap_or(1), max, 1)?;
        Ok(HeadsRule::Free {
            min: s.min,
            max: s.max,
        })
    }
}

impl LatticeFile {
    pub(super) fn resolve(&self, base: &ModelSpec) -> Result<Lattice> {
        let m = &base.model;
        let hidden = self.hidden.resolve(
            "lattice.hidden",
            ((m.hidden / 2).max(1), m.hidden.saturating_mul(2), 32),
            MAX_WIDTH,
        )?;
        let experts = self.experts.resolve(
            "lattice.experts",
            (m.moe.top_k, m.moe.experts.saturating_mul(4), 8),
            MAX_EXPERTS,
        )?;
        if experts.max < m.moe.top_k {
            return Err(Error::invalid(
                "lattice.experts",
                format!(
                    "max ({}) is below the Baseline's top_k ({}): no lattice point can route",
                    experts.max, m.moe.top_k
                ),
            ));
        }
        let expert_ffn = self.expert_ffn.resolve(base)?;
        widths_fit(&expert_ffn, base, hidden.last())?;
        let mixers = recurrent_mixers(self.recurrent.as_ref(), base)?;
        if let Some(mla) = &m.mla {
            return Ok(Lattice {
                mixers,
                ..self.resolve_mla(mla, hidden, experts, expert_ffn)?
            });
        }
        for (knob, set) in [
            ("kv_lora_rank", self.kv_lora_rank.is_set()),
            ("qk_nope_head_dim", self.qk_nope_head_dim.is_some()),
            ("v_head_dim", self.v_head_dim.is_some()),
        ] {
            if set {
                return Err(Error::invalid(
                    format!("lattice.{knob}"),
                    "is a knob of an MLA Baseline; this Baseline has no [model.mla]",
                ));
            }
        }
        let head_dim = self.head_dim.resolve()?;
        let heads = self.heads.resolve()?;
        let kv_heads = self
            .kv_heads
            .resolve("lattice.kv_heads", (1, 64, 1), MAX_COUNT)?;
        let gqa = self.gqa.resolve("lattice.gqa", (1, 64, 1), MAX_COUNT)?;
        if self.gqa.step.is_some() {
            return Err(Error::invalid(
                "lattice.gqa.step",
                "is not a knob: gqa takes min and max",
            ));
        }
        let q = self.q_width;
        let q_width = (q.min.unwrap_or(0.5), q.max.unwrap_or(2.0));
        if !(q_width.0.is_finite()
            && q_width.1.is_finite()
            && q_width.0 > 0.0
            && q_width.0 <= q_width.1)
        {
            return Err(Error::invalid(
                "lattice.q_width",
                format!(
                    "needs 0 < min <= max (got min = {}, max = {})",
                    q_width.0, q_width.1
                ),
            ));
        }
        Ok(Lattice {
            hidden,
            experts,
            expert_ffn,
            head_dim,
            heads,
            kv_heads,
            gqa: (gqa.min, gqa.max),
            q_width,
            kv_lora_rank: None,
            mla_widths: Vec::new(),
            mixers,
            heads_multiple: m.full_attention.as_ref().map_or(1, |f| f.kv_heads),
        })
    }

    /// The lattice of an MLA Baseline: heads, the latent rank and the per-head widths
    /// (`qk_nope_head_dim` and `v_head_dim` lists, the Baseline's by default) are the
    /// attention knobs; the RoPE width and the query rank stay the Baseline's.
    fn resolve_mla(
        &self,
        mla: &crate::model::Mla,
        hidden: Steps,
        experts: Steps,
        expert_ffn: FfnRule,
    ) -> Result<Lattice> {
        let fixed = |knob: &str, set: bool| {
            if set {
                Err(Error::invalid(
                    format!("lattice.{knob}"),
                    "does not apply to an MLA Baseline (kv_heads = heads); its knobs are heads, \
                     kv_lora_rank, qk_nope_head_dim and v_head_dim",
                ))
            } else {
                Ok(())
            }
        };
        let h = &self.head_dim;
        fixed("head_dim", h.values.is_some() || range_of!(h).is_set())?;
        fixed("kv_heads", self.kv_heads.is_set())?;
        fixed("gqa", self.gqa.is_set())?;
        fixed(
            "q_width",
            self.q_width.min.is_some() || self.q_width.max.is_some(),
        )?;
        fixed("heads.tied", self.heads.tied)?;
        let heads = self.heads.resolve()?;
        let rank = mla.kv_lora_rank;
        let kv_lora_rank = self.kv_lora_rank.resolve(
            "lattice.kv_lora_rank",
            (32, rank.saturating_mul(2).max(32), 32),
            MAX_WIDTH,
        )?;
        let rope = mla.qk_rope_head_dim;
        let nope = widths_list(
            "lattice.qk_nope_head_dim",
            self.qk_nope_head_dim.as_deref(),
            mla.qk_nope_head_dim,
            u64::from(rope == 0),
        )?;
        let v = widths_list(
            "lattice.v_head_dim",
            self.v_head_dim.as_deref(),
            mla.v_head_dim,
            1,
        )?;
        let mla_widths: Vec<(u64, u64)> = nope
            .iter()
            .flat_map(|&n| v.iter().map(move |&v| (n, v)))
            .collect();
        Ok(Lattice {
            hidden,
            experts,
            expert_ffn,
            head_dim: nope.iter().map(|n| n + rope).collect(),
            heads,
            kv_heads: Steps::new("lattice.kv_heads", 1, 1, 1)?,
            gqa: (1, 1),
            q_width: (0.0, f64::INFINITY),
            kv_lora_rank: Some(kv_lora_rank),
            mla_widths,
            mixers: Vec::new(),
            heads_multiple: 1,
        })
    }
}

/// A list of knob values (`vec![baseline]` when absent), sorted and deduplicated, each in
/// `1..=max`.
fn values_list(field: &str, list: Option<&[u64]>, baseline: u64, max: u64) -> Result<Vec<u64>> {
    let Some(list) = list else {
        return Ok(vec![baseline]);
    };
    if list.is_empty() || list.len() > MAX_WIDTHS {
        return Err(Error::invalid(
            field,
            format!("must list 1 to {MAX_WIDTHS} values (got {})", list.len()),
        ));
    }
    if let Some(&v) = list.iter().find(|&&v| v == 0 || v > max) {
        return Err(Error::invalid(
            field,
            format!("values must be between 1 and {max} (got {v})"),
        ));
    }
    let mut out = list.to_vec();
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// The most values a per-head width list of an MLA lattice takes.
const MAX_WIDTHS: usize = 64;

/// A list of MLA per-head widths (`default` when absent), sorted and deduplicated, each in
/// `min..=MAX_WIDTH`.
fn widths_list(field: &str, list: Option<&[u64]>, default: u64, min: u64) -> Result<Vec<u64>> {
    let Some(list) = list else {
        return Ok(vec![default]);
    };
    if list.is_empty() || list.len() > MAX_WIDTHS {
        return Err(Error::invalid(
            field,
            format!("must list 1 to {MAX_WIDTHS} widths (got {})", list.len()),
        ));
    }
    if let Some(&w) = list.iter().find(|&&w| w < min || w > MAX_WIDTH) {
        return Err(Error::invalid(
            field,
            format!("widths must be between {min} and {MAX_WIDTH} (got {w})"),
        ));
    }
    let mut out = list.to_vec();
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// The widths tied to `hidden` (the expert width, and the Baseline's shared and dense FFN
/// widths scaled alike) stay within the model limits at the largest hidden size, so that
/// every lattice point is a valid model; the error names the lattice knob.
fn widths_fit(rule: &FfnRule, base: &ModelSpec, hidden_max: u64) -> Result<()> {
    let m = &base.model;
    let too_wide = |what: &str, width: u64| {
        Error::invalid(
            "lattice.expert_ffn",
            format!(
                "at lattice.hidden.max ({hidden_max}) gives {what} {width}, above the limit of \
                 {MAX_WIDTH}; lower the ratio or lattice.hidden.max"
            ),
        )
    };
    if let FfnRule::Tied { .. } = rule {
        let widest = rule.values(hidden_max).into_iter().max().unwrap_or(0);
        if widest > MAX_WIDTH {
            return Err(too_wide("an expert width of", widest));
        }
    }
    let shared = rule.shared_width(m.moe.shared_ffn, m.hidden, hidden_max);
    if shared > MAX_WIDTH {
        return Err(too_wide("a shared-expert width of", shared));
    }
    if let Some(d) = &m.dense {
        let dense = rule.shared_width(d.ffn, m.hidden, hidden_max);
        if dense > MAX_WIDTH {
            return Err(too_wide("a dense FFN width of", dense));
        }
    }
    Ok(())
}

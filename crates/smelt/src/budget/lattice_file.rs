//! `[lattice]` as written, resolved against the Baseline into a [`Lattice`].

use serde::Deserialize;

use super::mixers::{RecurrentFile, recurrent_mixers};
use super::{FfnRule, HeadsRule, Lattice, Steps};
use crate::error::{Error, Result};
use crate::model::{MAX_COUNT, MAX_EXPERTS, MAX_WIDTH, ModelSpec, Stack};

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
        let stack = Stack::of(m)?;
        let mixers = recurrent_mixers(self.recurrent.as_ref(), &stack)?;
        if let Some(mla) = super::mla_of(&stack) {
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
        let mut head_dim = self.head_dim.resolve()?;
        // A partial RoPE rotates the Baseline's `rope_dim` dimensions of every head: no head
        // of the lattice is narrower.
        if let Some(r) = m.rope_dim {
            head_dim.retain(|&d| d >= r);
            if head_dim.is_empty() {
                return Err(Error::invalid(
                    "lattice.head_dim",
                    format!(
                        "every value is below the Baseline's model.rope_dim ({r}), the \
                         dimensions RoPE rotates in each head: allow head widths of at least {r}"
                    ),
                ));
            }
        }
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
            heads_multiple: stack.heads_multiple(),
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
pub(super) fn values_list(
    field: &str,
    list: Option<&[u64]>,
    baseline: u64,
    max: u64,
) -> Result<Vec<u64>> {
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
    let dense = rule.shared_width(m.knobs().dense_ffn, m.hidden, hidden_max);
    if dense > MAX_WIDTH {
        return Err(too_wide("a dense FFN width of", dense));
    }
    Ok(())
}

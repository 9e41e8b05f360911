//! Megatron-Core's selective recomputation: the submodules `recompute_modules` names
//! (`[counting] recompute_modules`, read by the `megatron-selective` activation policy,
//! [`crate::cost::megatron`]).
//!
//! The names and their meaning are Megatron-Core's (`TransformerConfig.recompute_modules`,
//! megatron/core/transformer/transformer_config.py at the commit the policy pins); the
//! default is Megatron's, `["core_attn"]`. Megatron's other modules (`gdn_norm_out`,
//! `gdp_in_proj`, `gdp_qkv`, `mhc`) recompute parts of layers smelt's activation memory does
//! not count (recurrent mixers, hyper-connections) and are refused by name.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, Result};
use crate::names::{Named, named_enum};

named_enum! {
    /// A submodule Megatron-Core recomputes under `recompute_granularity = "selective"`.
    pub enum RecomputeModule: "recompute module" {
        /// The core attention (`q`, `k`, `v` in, the attention's output out).
        CoreAttn = "core_attn",
        /// The routed experts' activation function (output discarded and recomputed).
        MoeAct = "moe_act",
        /// The norms that are modules of their own (`TENorm`): MLA's input norm and a MoE
        /// layer's pre-FFN norm (output discarded and recomputed); the norms fused into a
        /// linear layer are not recomputed.
        Layernorm = "layernorm",
        /// MLA's up-projections and RoPE (outputs discarded and recomputed).
        MlaUpProj = "mla_up_proj",
        /// A dense layer's whole MLP.
        Mlp = "mlp",
        /// A MoE layer's whole MoE block (router, dispatch, experts, shared experts).
        Moe = "moe",
        /// The shared experts.
        SharedExperts = "shared_experts",
    }
}

/// A set of [`RecomputeModule`]s (Megatron's default: `core_attn` alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecomputeModules(u8);

impl RecomputeModules {
    /// No module.
    pub const NONE: Self = Self(0);

    fn bit(m: RecomputeModule) -> u8 {
        let i = RecomputeModule::ALL
            .iter()
            .position(|&x| x == m)
            .unwrap_or_default();
        1 << i
    }

    /// The set of `modules`.
    pub fn of(modules: &[RecomputeModule]) -> Self {
        Self(modules.iter().fold(0, |acc, &m| acc | Self::bit(m)))
    }

    /// Whether `m` is in the set.
    pub fn has(self, m: RecomputeModule) -> bool {
        self.0 & Self::bit(m) != 0
    }

    /// The modules, in [`RecomputeModule::ALL`]'s order.
    pub fn modules(self) -> Vec<RecomputeModule> {
        RecomputeModule::ALL
            .iter()
            .copied()
            .filter(|&m| self.has(m))
            .collect()
    }

    /// The modules' names joined by `,` (`none` for the empty set).
    pub fn names(self) -> String {
        let v: Vec<&str> = self.modules().into_iter().map(|m| m.as_str()).collect();
        if v.is_empty() {
            "none".to_owned()
        } else {
            v.join(",")
        }
    }

    /// Whether the set is Megatron's default, `core_attn` alone.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// Parses `a,b,c` (names of [`RecomputeModule`]; `none` or an empty string for no
    /// module), naming a module smelt does not count.
    pub fn parse_list(text: &str) -> Result<Self> {
        let text = text.trim();
        if text.is_empty() || text == "none" {
            return Ok(Self::NONE);
        }
        let modules = text
            .split(',')
            .map(|s| parse_module(s.trim()))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self::of(&modules))
    }
}

impl Default for RecomputeModules {
    fn default() -> Self {
        Self::of(&[RecomputeModule::CoreAttn])
    }
}

/// Megatron's modules that recompute what smelt does not count.
const NOT_COUNTED: [&str; 4] = ["gdn_norm_out", "gdp_in_proj", "gdp_qkv", "mhc"];

fn parse_module(s: &str) -> Result<RecomputeModule> {
    if NOT_COUNTED.contains(&s) {
        return Err(Error::invalid(
            "counting.recompute_modules",
            format!(
                "'{s}' recomputes a part of a layer (a recurrent mixer or hyper-connections) the \
                 activation memory does not count; one of {}",
                RecomputeModule::names()
            ),
        ));
    }
    RecomputeModule::parse_name(s).map_err(|_| {
        Error::invalid(
            "counting.recompute_modules",
            format!(
                "'{s}' is not one of Megatron-Core's recompute modules smelt counts: {}",
                RecomputeModule::names()
            ),
        )
    })
}

impl Serialize for RecomputeModules {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let names: Vec<&str> = self.modules().into_iter().map(|m| m.as_str()).collect();
        names.serialize(s)
    }
}

impl<'de> Deserialize<'de> for RecomputeModules {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        use serde::de::Error as _;
        let names: Vec<String> = Vec::deserialize(d)?;
        let modules = names
            .iter()
            .map(|s| parse_module(s).map_err(|e| D::Error::custom(e.to_string())))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(Self::of(&modules))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_and_print_in_order() {
        let m = RecomputeModules::parse_list("moe_act, core_attn").unwrap();
        assert!(m.has(RecomputeModule::CoreAttn) && m.has(RecomputeModule::MoeAct));
        assert!(!m.has(RecomputeModule::Mlp));
        assert_eq!(m.names(), "core_attn,moe_act");
        assert_eq!(
            RecomputeModules::parse_list("none").unwrap().names(),
            "none"
        );
        assert!(RecomputeModules::default().is_default());
        for bad in ["mhc", "attn", "core_attn,,mlp"] {
            let e = RecomputeModules::parse_list(bad).unwrap_err().to_string();
            assert!(e.contains("counting.recompute_modules"), "{bad}: {e}");
        }
    }
}

//! Which architecture features each consumer of the [`Stack`] handles, and the one way a
//! consumer refuses a model that holds a feature it does not.
//!
//! A [`Feature`] is a piece of architecture beyond GQA attention before a routed SwiGLU
//! MoE (or a dense SwiGLU FFN) with two RMSNorms per layer, named by the model file's
//! field that sets it ([`Feature::field`]). A [`Consumer`] is a part of smelt that reads
//! the stack: the cost model (parameters, FLOPs, KV cache), the activation memory, the
//! training memory, the kernel plan, the launchers' FLOP formulas and the Hugging Face
//! export. [`Consumer::handles`] is the table; [`Consumer::check`] refuses a stack holding
//! a feature its consumer does not handle, with [`refusal`]'s one wording:
//!
//! `<field>: <consumer> does not model <feature>: <what follows>`
//!
//! The table (generated from [`Consumer::handles`] by [`markdown`]; a test keeps this copy,
//! the cost model's (`crate::cost`'s module docs) and so `docs/conventions.md`'s equal to
//! it):
//!
//! <!-- capabilities:begin -->
//! | feature (model field) | FLOPs, params, KV | activations | training memory | kernel plan | launcher FLOP formulas | HF export |
//! |---|---|---|---|---|---|---|
//! | multi-head latent attention (`[model.mla]`) | yes | yes | yes | yes | yes | yes |
//! | sliding-window layers (`[model.window]`) | yes | yes | yes | yes | yes | yes |
//! | chunked-attention layers (`[model.window]`) | yes | yes | yes | yes | yes | yes |
//! | attention sinks (`model.attention_sinks`) | yes | yes | yes | yes | yes | yes |
//! | a router bias (`model.moe.router_bias`) | yes | yes | yes | yes | yes | yes |
//! | biases in the experts (`model.moe.expert_bias`) | yes | yes | yes | yes | yes | yes |
//! | gpt-oss's clamped SwiGLU (`model.moe.activation`) | yes | yes | yes | yes | yes | yes |
//! | MTP modules (`model.mtp_layers`) | yes | yes | no | yes | yes | yes |
//! | LayerNorms with a bias (`model.norm_bias`) | yes | yes | yes | yes | yes | yes |
//! | a bias on the LM head (`model.lm_head_bias`) | yes | yes | yes | yes | yes | yes |
//! | a sparse attention indexer (`[model.indexer]`) | yes | yes | yes | yes | yes | yes |
//! | the MoE's input noise (`model.moe.jitter`) | yes | yes | yes | yes | yes | yes |
//! | gated_deltanet layers (`[model.recurrent]`) | yes | no | no | no | yes | yes |
//! | mamba2 layers (`[model.recurrent]`) | yes | no | no | no | yes | yes |
//! | an attention output gate (`model.attention_gate`) | yes | no | no | no | yes | yes |
//! | layers with one block (`[model.blocks]`) | yes | no | no | no | yes | yes |
//! | the ungated relu2 MLP (`model.moe.activation`) | yes | no | no | no | yes | yes |
//! | full-attention layers of their own shape (`[model.full_attention]`) | yes | no | no | no | no | yes |
//! | a norm on the values (`model.v_norm`) | yes | no | no | no | yes | yes |
//! | post-attention and post-FFN norms (`model.post_norms`) | yes | no | no | no | yes | yes |
//! | norms around the MoE branches (`model.moe.branch_norms`) | yes | no | no | no | yes | yes |
//! | the router's learned scales (`model.moe.router_scale`) | yes | no | no | no | yes | yes |
//! | Gemma's GeGLU (`model.moe.activation`) | yes | no | no | no | yes | yes |
//! | LatentMoE's latent experts (`model.moe.latent`) | yes | no | no | no | no | yes |
//! <!-- capabilities:end -->
//!
//! Notes: the activation memory and the kernel plan describe the decoder layers only, so
//! MTP modules are outside them, not refused; the training memory refuses MTP modules only
//! when `[counting] mtp` counts them. The HF export builds each feature in the families
//! whose code has it (the families table says which), and refuses it in the others.
//! The activations column is the unfused counts' and the Megatron-Core policies': the
//! Transformers policies (`transformers-eager`, `transformers-sdpa`) also count Gemma 4's
//! pieces — full-attention layers of their own shape, the value norm, the post norms, the
//! branch norms, the router's scales and the GeGLU — in Gemma 4's classes, and Gated
//! DeltaNet layers and the attention output gate in Qwen3-Next's and Qwen3.5's
//! ([`TRANSFORMERS_ONLY`]; `crate::cost::transformers`), and Nemotron-H's — Mamba-2 layers,
//! one-block layers, the relu2 MLP and LatentMoE's latent experts — in Nemotron-H's classes
//! ([`TRANSFORMERS_NEMOTRON_H`]), where the others refuse them.
//! The MoE's input noise costs no counted FLOPs; the Transformers policies count each
//! noise tensor a step saves, the Megatron-Core policies none (Megatron-Core draws it only
//! where `moe_input_jitter_eps` is set, which its recipes leave unset), the unfused counts
//! none (a step can draw it again from the generator's state); the kernel plan times its
//! draw and product as memory-bound kernels.

use super::stack::{AttentionShape, Ffn, Layer, Stack, TokenMixer};
use super::{ActivationPolicy, ExpertActivation, Mixer, WindowKind};
use crate::error::{Error, Result};

/// Gemma 4's pieces and the Gated DeltaNet hybrids' (Qwen3-Next's, Qwen3.5's), which the
/// Transformers activation policies count in those families' classes
/// (`crate::cost::transformers`) while the table's activations column, the unfused counts
/// and the Megatron-Core policies refuse them (module docs' notes).
pub const TRANSFORMERS_ONLY: [Feature; 8] = [
    Feature::GatedDeltanet,
    Feature::AttentionGate,
    Feature::FullAttention,
    Feature::VNorm,
    Feature::PostNorms,
    Feature::BranchNorms,
    Feature::RouterScale,
    Feature::GeluTanh,
];

/// Nemotron-H's pieces, which the Transformers activation policies count in Nemotron-H's
/// classes (`crate::cost::transformers`) while the table's activations column, the unfused
/// counts and the Megatron-Core policies refuse them (module docs' notes).
pub const TRANSFORMERS_NEMOTRON_H: [Feature; 4] = [
    Feature::Mamba2,
    Feature::Blocks,
    Feature::Relu2,
    Feature::LatentExperts,
];

/// An architecture feature (module docs), in the order a refusal looks for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Feature {
    /// Multi-head latent attention.
    Mla,
    /// Sliding-window layers.
    Sliding,
    /// Chunked-attention layers.
    Chunked,
    /// Attention sinks.
    Sinks,
    /// A router bias.
    RouterBias,
    /// Biases in the routed experts.
    ExpertBias,
    /// gpt-oss's clamped SwiGLU.
    ClampedSwiglu,
    /// Multi-token-prediction modules.
    Mtp,
    /// LayerNorms with a bias.
    NormBias,
    /// A bias on the LM head.
    LmHeadBias,
    /// A sparse attention indexer.
    Indexer,
    /// Training-time noise on the MoE's input.
    Jitter,
    /// Gated DeltaNet layers.
    GatedDeltanet,
    /// Mamba-2 layers.
    Mamba2,
    /// An output gate on the attention.
    AttentionGate,
    /// Layers with one block (a mixer or an FFN alone).
    Blocks,
    /// The ungated relu2 MLP.
    Relu2,
    /// Full-attention layers with their own attention shape.
    FullAttention,
    /// A norm on the values.
    VNorm,
    /// Norms on the attention's and the FFN's outputs.
    PostNorms,
    /// Norms around the MoE block's two branches.
    BranchNorms,
    /// The router's learned scales.
    RouterScale,
    /// Gemma's GeGLU (tanh approximation).
    GeluTanh,
    /// LatentMoE: routed experts at a latent width of their own.
    LatentExperts,
}

impl Feature {
    /// Every feature, in the order a refusal looks for them.
    pub const ALL: [Feature; 24] = [
        Feature::Mla,
        Feature::Sliding,
        Feature::Chunked,
        Feature::Sinks,
        Feature::RouterBias,
        Feature::ExpertBias,
        Feature::ClampedSwiglu,
        Feature::Mtp,
        Feature::NormBias,
        Feature::LmHeadBias,
        Feature::Indexer,
        Feature::Jitter,
        Feature::GatedDeltanet,
        Feature::Mamba2,
        Feature::AttentionGate,
        Feature::Blocks,
        Feature::Relu2,
        Feature::FullAttention,
        Feature::VNorm,
        Feature::PostNorms,
        Feature::BranchNorms,
        Feature::RouterScale,
        Feature::GeluTanh,
        Feature::LatentExperts,
    ];

    /// The model file's field that sets the feature.
    pub fn field(self) -> &'static str {
        match self {
            Feature::Mla => "model.mla",
            Feature::Sliding | Feature::Chunked => "model.window",
            Feature::Sinks => "model.attention_sinks",
            Feature::RouterBias => "model.moe.router_bias",
            Feature::ExpertBias => "model.moe.expert_bias",
            Feature::ClampedSwiglu | Feature::Relu2 | Feature::GeluTanh => "model.moe.activation",
            Feature::Mtp => "model.mtp_layers",
            Feature::NormBias => "model.norm_bias",
            Feature::LmHeadBias => "model.lm_head_bias",
            Feature::Indexer => "model.indexer",
            Feature::Jitter => "model.moe.jitter",
            Feature::GatedDeltanet | Feature::Mamba2 => "model.recurrent",
            Feature::AttentionGate => "model.attention_gate",
            Feature::Blocks => "model.blocks",
            Feature::FullAttention => "model.full_attention",
            Feature::VNorm => "model.v_norm",
            Feature::PostNorms => "model.post_norms",
            Feature::BranchNorms => "model.moe.branch_norms",
            Feature::RouterScale => "model.moe.router_scale",
            Feature::LatentExperts => "model.moe.latent",
        }
    }

    /// The feature in words, with how the model file sets it.
    pub fn words(self) -> &'static str {
        match self {
            Feature::Mla => "multi-head latent attention ([model.mla])",
            Feature::Sliding => "sliding-window layers ([model.window] kind = \"sliding\")",
            Feature::Chunked => "chunked-attention layers ([model.window] kind = \"chunked\")",
            Feature::Sinks => "attention sinks (model.attention_sinks)",
            Feature::RouterBias => "a router bias (model.moe.router_bias)",
            Feature::ExpertBias => "biases in the experts (model.moe.expert_bias)",
            Feature::ClampedSwiglu => {
                "gpt-oss's clamped SwiGLU (model.moe.activation = \"clamped_swiglu\")"
            }
            Feature::Mtp => "MTP modules (model.mtp_layers)",
            Feature::NormBias => "LayerNorms with a bias (model.norm_bias)",
            Feature::LmHeadBias => "a bias on the LM head (model.lm_head_bias)",
            Feature::Indexer => "a sparse attention indexer ([model.indexer])",
            Feature::Jitter => "the MoE's input noise (model.moe.jitter)",
            Feature::GatedDeltanet => {
                "gated_deltanet layers (Gated DeltaNet, [model.recurrent] mixer gated_deltanet)"
            }
            Feature::Mamba2 => "mamba2 layers (Mamba-2, [model.recurrent] mixer mamba2)",
            Feature::AttentionGate => "an attention output gate (model.attention_gate)",
            Feature::Blocks => "layers with one block ([model.blocks])",
            Feature::Relu2 => "the ungated relu2 MLP (model.moe.activation = \"relu2\")",
            Feature::FullAttention => {
                "full-attention layers of their own shape ([model.full_attention])"
            }
            Feature::VNorm => "a norm on the values (model.v_norm)",
            Feature::PostNorms => "post-attention and post-FFN norms (model.post_norms)",
            Feature::BranchNorms => "norms around the MoE branches (model.moe.branch_norms)",
            Feature::RouterScale => "the router's learned scales (model.moe.router_scale)",
            Feature::GeluTanh => "Gemma's GeGLU (model.moe.activation = \"gelu_tanh\")",
            Feature::LatentExperts => "LatentMoE's latent experts (model.moe.latent)",
        }
    }

    /// The feature's words without the model file's spelling (a table's first column).
    fn short(self) -> &'static str {
        let w = self.words();
        w.find(" (").map_or(w, |i| &w[..i])
    }

    /// Whether `layer` holds the feature (every feature but the MTP modules and the LM
    /// head's bias, which are outside the layers).
    pub(super) fn in_layer(self, layer: &Layer) -> bool {
        let attention = match &layer.mixer {
            Some(TokenMixer::Attention(a)) => Some(a),
            _ => None,
        };
        let moe = match &layer.ffn {
            Some(Ffn::Moe(m)) => Some(m),
            _ => None,
        };
        let activation = layer.ffn.as_ref().map(Ffn::activation);
        let window = attention.and_then(|a| a.window).map(|w| w.kind);
        let recurrent = match &layer.mixer {
            Some(TokenMixer::Recurrent(m)) => Some(m),
            _ => None,
        };
        match self {
            Feature::Mla => {
                attention.is_some_and(|a| matches!(a.shape, AttentionShape::Mla { .. }))
            }
            Feature::Sliding => window == Some(WindowKind::Sliding),
            Feature::Chunked => window == Some(WindowKind::Chunked),
            Feature::Sinks => attention.is_some_and(|a| a.sinks),
            Feature::RouterBias => moe.is_some_and(|m| m.router_bias),
            Feature::ExpertBias => moe.is_some_and(|m| m.expert_bias),
            Feature::ClampedSwiglu => activation == Some(ExpertActivation::ClampedSwiglu),
            Feature::Mtp | Feature::LmHeadBias => false,
            Feature::NormBias => layer.norms.bias,
            Feature::Indexer => attention.is_some_and(|a| a.indexer.is_some()),
            Feature::Jitter => moe.is_some_and(|m| m.jitter.is_some()),
            Feature::GatedDeltanet => matches!(recurrent, Some(Mixer::GatedDeltanet(_))),
            Feature::Mamba2 => matches!(recurrent, Some(Mixer::Mamba2(_))),
            Feature::AttentionGate => attention.is_some_and(|a| a.gate),
            Feature::Blocks => layer.mixer.is_none() || layer.ffn.is_none(),
            Feature::Relu2 => activation == Some(ExpertActivation::Relu2),
            Feature::FullAttention => attention.is_some_and(|a| a.own_shape),
            Feature::VNorm => attention.is_some_and(|a| a.v_norm),
            Feature::PostNorms => layer.norms.post,
            Feature::BranchNorms => moe.is_some_and(|m| m.branch_norms),
            Feature::RouterScale => moe.is_some_and(|m| m.router_scale),
            Feature::GeluTanh => activation == Some(ExpertActivation::GeluTanh),
            Feature::LatentExperts => moe.is_some_and(|m| m.latent.is_some()),
        }
    }
}

/// A part of smelt that reads the [`Stack`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consumer {
    /// The cost model: parameters, FLOPs and the KV cache ([`mod@crate::cost`]).
    Counts,
    /// The activation memory ([`crate::cost::memory`]).
    Activations,
    /// The training memory ([`crate::cost::training`]).
    TrainingMemory,
    /// The kernel plan the benchmark and the time prediction walk.
    KernelPlan,
    /// The launchers' FLOP formulas ([`crate::launcher_flops`]), but the exact count.
    LauncherFlops,
    /// The Hugging Face export ([`crate::hf`]), in the families that build each feature.
    Export,
}

impl Consumer {
    /// Every consumer, in the table's order.
    pub const ALL: [Consumer; 6] = [
        Consumer::Counts,
        Consumer::Activations,
        Consumer::TrainingMemory,
        Consumer::KernelPlan,
        Consumer::LauncherFlops,
        Consumer::Export,
    ];

    /// Whether every consumer but the counts and the export refuses `feature`: the
    /// features from the recurrent mixers on in [`Feature::ALL`]'s order (the recurrent
    /// mixers, the attention gate, one-block layers, relu2, Gemma 4's pieces and LatentMoE),
    /// none of which is described by the activation and training memory nor planned.
    fn undescribed(feature: Feature) -> bool {
        feature >= Feature::GatedDeltanet
    }

    /// The capability table: whether the consumer handles `feature`.
    pub fn handles(self, feature: Feature) -> bool {
        match self {
            Consumer::Counts | Consumer::Export => true,
            Consumer::Activations | Consumer::KernelPlan => !Self::undescribed(feature),
            Consumer::TrainingMemory => feature != Feature::Mtp && !Self::undescribed(feature),
            Consumer::LauncherFlops => {
                !matches!(feature, Feature::FullAttention | Feature::LatentExperts)
            }
        }
    }

    /// The consumer, as the subject of a refusal.
    pub fn name(self) -> &'static str {
        match self {
            Consumer::Counts => "the cost model",
            Consumer::Activations => "the activation memory",
            Consumer::TrainingMemory => "the training memory",
            Consumer::KernelPlan => "the kernel plan",
            Consumer::LauncherFlops => "the launcher FLOP formula",
            Consumer::Export => "the Hugging Face export",
        }
    }

    /// The consumer, as a column of the table.
    fn column(self) -> &'static str {
        match self {
            Consumer::Counts => "FLOPs, params, KV",
            Consumer::Activations => "activations",
            Consumer::TrainingMemory => "training memory",
            Consumer::KernelPlan => "kernel plan",
            Consumer::LauncherFlops => "launcher FLOP formulas",
            Consumer::Export => "HF export",
        }
    }

    /// What follows a refusal: what is not modelled, and what the user gets or does.
    fn consequence(self) -> &'static str {
        match self {
            Consumer::Counts => "smelt refuses rather than approximates",
            Consumer::Activations => {
                "what it saves for the backward pass is not modelled; activations are not \
                 reported for this model and cannot be matched"
            }
            Consumer::TrainingMemory => {
                "its activations and tensor-parallel shards are not modelled; remove \
                 [training] (or, for MTP modules, set [counting] mtp = false)"
            }
            Consumer::KernelPlan => {
                "its kernels are not in the plan; bench and predict's layer-stack roofline \
                 refuse this model"
            }
            Consumer::LauncherFlops => {
                "the formula has no term for it (one attention shape per model, routed \
                 experts at the hidden width), and smelt does not guess what a launcher \
                 would count"
            }
            Consumer::Export => "no family's code builds it",
        }
    }

    /// The first feature of `features` (in [`Feature::ALL`]'s order) the consumer does not
    /// handle, if any.
    pub fn unhandled(self, features: &[Feature]) -> Option<Feature> {
        Feature::ALL
            .into_iter()
            .find(|f| features.contains(f) && !self.handles(*f))
    }

    /// Refuses `stack` ([`refusal`]) if it holds a feature the consumer does not handle.
    pub fn check(self, stack: &Stack) -> Result<()> {
        match self.unhandled_in(stack) {
            Some(f) => Err(refusal(self, None, f.field(), f.words())),
            None => Ok(()),
        }
    }

    /// The first feature of `stack` (in [`Feature::ALL`]'s order) the consumer does not
    /// handle, if any.
    pub fn unhandled_in(self, stack: &Stack) -> Option<Feature> {
        (Feature::ALL.into_iter()).find(|&f| !self.handles(f) && stack.has(f))
    }

    /// [`Consumer::check`] of the activation memory under `policy`: the Transformers
    /// policies also count [`TRANSFORMERS_ONLY`]'s and [`TRANSFORMERS_NEMOTRON_H`]'s
    /// features (module docs' notes), which the table's column and every other policy
    /// refuse. Any other consumer: its check.
    pub fn check_policy(self, stack: &Stack, policy: ActivationPolicy) -> Result<()> {
        let also: &[&[Feature]] = if self == Consumer::Activations && policy.is_transformers() {
            &[&TRANSFORMERS_ONLY, &TRANSFORMERS_NEMOTRON_H]
        } else {
            &[]
        };
        let unhandled = (Feature::ALL.into_iter())
            .find(|&f| !self.handles(f) && !also.iter().any(|a| a.contains(&f)) && stack.has(f));
        match unhandled {
            Some(f) => Err(refusal(self, None, f.field(), f.words())),
            None => Ok(()),
        }
    }

    /// [`Consumer::check`] of `model`'s stack.
    pub fn check_model(self, model: &super::Model) -> Result<()> {
        self.check(&Stack::of(model)?)
    }

    /// [`Consumer::check`] of a stack holding `features`.
    pub fn check_features(self, features: &[Feature]) -> Result<()> {
        match self.unhandled(features) {
            Some(f) => Err(refusal(self, None, f.field(), f.words())),
            None => Ok(()),
        }
    }
}

/// The one refusal of something a consumer does not model: `field` (the model file's, or a
/// config's key) named, then `<consumer> does not model <what>: <consequence>`, with
/// `detail` (which formula, which family) after the consumer when given.
pub fn refusal(consumer: Consumer, detail: Option<&str>, field: &str, what: &str) -> Error {
    let subject = match detail {
        Some(d) => format!("{} ({d})", consumer.name()),
        None => consumer.name().to_owned(),
    };
    Error::invalid(
        field,
        format!(
            "{subject} does not model {what}: {}",
            consumer.consequence()
        ),
    )
}

/// The capability table in Markdown (the module docs' copy), with the cells of the
/// export's column when `export` is given (e.g. the families that build each feature).
pub fn markdown(export: Option<&dyn Fn(Feature) -> String>) -> String {
    let mut out = String::from("| feature (model field) |");
    for c in Consumer::ALL {
        out.push_str(&format!(" {} |", c.column()));
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(Consumer::ALL.len()));
    out.push('\n');
    for f in Feature::ALL {
        let field = match f.field() {
            // Tables are written as tables.
            "model.mla"
            | "model.window"
            | "model.indexer"
            | "model.recurrent"
            | "model.blocks"
            | "model.full_attention" => {
                format!("[{}]", f.field())
            }
            other => other.to_owned(),
        };
        out.push_str(&format!("| {} (`{field}`) |", f.short()));
        for c in Consumer::ALL {
            let cell = match (c, export) {
                (Consumer::Export, Some(e)) => e(f),
                _ if c.handles(f) => "yes".to_owned(),
                _ => "no".to_owned(),
            };
            out.push_str(&format!(" {cell} |"));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The module docs' tables (this module's and the cost model's, which
    /// `docs/conventions.md` is generated from) are the code's.
    #[test]
    fn the_docs_tables_are_the_codes() {
        for source in [
            include_str!("capability.rs"),
            include_str!("../cost/mod.rs"),
        ] {
            let docs: String = source
                .lines()
                .take_while(|l| l.starts_with("//!"))
                .map(|l| format!("{}\n", l.trim_start_matches("//!").trim_start()))
                .collect();
            let begin = "<!-- capabilities:begin -->\n";
            let start = docs.find(begin).unwrap() + begin.len();
            let end = docs.find("<!-- capabilities:end -->").unwrap();
            assert_eq!(&docs[start..end], markdown(None));
        }
    }

    /// [`Feature::ALL`] lists every feature once, in the declaration order the refusals
    /// and [`Consumer::undescribed`] read.
    #[test]
    fn all_is_in_declaration_order() {
        assert!(Feature::ALL.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(Feature::ALL[0], Feature::Mla);
        assert_eq!(*Feature::ALL.last().unwrap(), Feature::LatentExperts);
    }

    /// The Transformers policies pass Gemma 4's pieces, the Gated DeltaNet hybrids'
    /// ([`TRANSFORMERS_ONLY`]) and Nemotron-H's ([`TRANSFORMERS_NEMOTRON_H`]), each a
    /// feature the activations column refuses, which between them are every feature the
    /// column refuses (the families' own modules refuse what their classes do not build);
    /// the other policies refuse what the column does.
    #[test]
    fn only_the_transformers_policies_count_the_families_own_pieces() {
        for f in TRANSFORMERS_ONLY.into_iter().chain(TRANSFORMERS_NEMOTRON_H) {
            assert!(!Consumer::Activations.handles(f), "{f:?}");
        }
        let stack = |extra: &str, moe: &str| {
            let spec = crate::model::ModelSpec::from_toml_str(&format!(
                "[model]\nlayers = 2\nhidden = 64\nheads = 4\nkv_heads = 2\nhead_dim = 16\n\
                 vocab = 128\n{extra}\n[model.moe]\nexperts = 4\ntop_k = 2\nexpert_ffn = 32\n\
                 {moe}\n[workload]\ncontext = 64\nmean_doc_len = 64\n"
            ))
            .unwrap();
            Stack::of(&spec.model).unwrap()
        };
        let counted = [
            (
                stack("v_norm = true\npost_norms = true", ""),
                "model.v_norm",
            ),
            (stack("attention_gate = true", ""), "model.attention_gate"),
        ];
        let relu2 = stack("", "activation = \"relu2\"");
        let counted = [
            counted[0].clone(),
            counted[1].clone(),
            (relu2, "model.moe.activation"),
        ];
        for f in Feature::ALL {
            let listed = TRANSFORMERS_ONLY.contains(&f) || TRANSFORMERS_NEMOTRON_H.contains(&f);
            assert_eq!(listed, !Consumer::Activations.handles(f), "{f:?}");
        }
        for &policy in ActivationPolicy::ALL {
            for (stack, want) in &counted {
                let checked = Consumer::Activations.check_policy(stack, policy);
                assert_eq!(checked.is_ok(), policy.is_transformers(), "{policy}");
                if let Err(Error::InvalidSpec { field, .. }) = checked {
                    assert_eq!(field, *want, "{policy}");
                }
            }
        }
    }

    /// Every refusal is worded one way and names the feature's field.
    #[test]
    fn refusals_are_worded_one_way_and_name_the_field() {
        for c in Consumer::ALL {
            for f in Feature::ALL {
                let refused = c.check_features(&[f]);
                assert_eq!(refused.is_err(), !c.handles(f), "{c:?} {f:?}");
                let Err(Error::InvalidSpec { field, rule }) = refused else {
                    continue;
                };
                assert_eq!(field, f.field());
                let want = format!("{} does not model {}: ", c.name(), f.words());
                assert!(rule.starts_with(&want), "{rule}");
                assert!(rule.ends_with(c.consequence()), "{rule}");
            }
        }
    }
}

//! What a model is costed on ([`Workload`]) and what is counted ([`Counting`]).

use serde::{Deserialize, Serialize};

use super::is_false;
use super::recompute::RecomputeModules;
use crate::error::{Error, Result};
use crate::names::named_enum;

named_enum! {
    /// How many keys a query attends inside its document.
    #[derive(Default)]
    pub enum Attention: "attention" {
        /// Causal: the `t`-th token of a document attends `t` keys (mean `(T+1)/2`).
        #[default]
        Causal = "causal",
        /// Dense: every token attends all `T` keys of its document (what most FLOP
        /// counters, e.g. PyTorch's `FlopCounterMode`, count for a masked attention).
        Dense = "dense",
    }
}

/// The sequences a model is costed on: packed `context`-token sequences of documents, with
/// a document (segment) mask, so attention stays inside each document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Packed sequence length in tokens; no document may be longer.
    pub context: u64,
    /// Mean document length in tokens (the paper's shortcut). Exactly one of this and
    /// `doc_lengths` must be given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_doc_len: Option<u64>,
    /// A document-length histogram, `[[length, count], ...]`: costed exactly.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "pairs"
    )]
    pub doc_lengths: Option<Vec<[u64; 2]>>,
    /// Causal or dense attention inside a document.
    #[serde(default)]
    pub attention: Attention,
    /// Bytes per KV-cache element (2 for bf16).
    #[serde(default = "default_kv_bytes")]
    pub kv_dtype_bytes: u64,
}

impl Workload {
    /// In words, for the line under a table's title: `context 4096, documents of 991 tokens
    /// (mean), causal attention, 2-byte KV`.
    pub fn summary(&self) -> String {
        let docs = match (&self.mean_doc_len, &self.doc_lengths) {
            (Some(t), _) => format!("documents of {t} tokens (mean)"),
            (None, Some(h)) => format!("documents from a histogram of {} lengths", h.len()),
            (None, None) => "no document lengths".to_owned(),
        };
        format!(
            "context {}, {docs}, {} attention, {}-byte KV",
            self.context,
            self.attention.as_str(),
            self.kv_dtype_bytes
        )
    }

    /// Reads a document-length histogram from CSV with the header `length,count` (what
    /// `--doc-lengths FILE` takes); `source` names it in errors.
    pub fn histogram_from_csv(text: &str, source: &str) -> Result<Vec<[u64; 2]>> {
        let mut reader = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            .from_reader(text.as_bytes());
        let headers = reader
            .headers()
            .map_err(|e| Error::parse(format!("{source}: {e}")))?
            .clone();
        if headers.iter().collect::<Vec<_>>() != ["length", "count"] {
            return Err(Error::invalid(
                format!("{source}: header"),
                "must be `length,count`",
            ));
        }
        let mut out = Vec::new();
        for (i, record) in reader.records().enumerate() {
            let record = record.map_err(|e| Error::parse(format!("{source}: {e}")))?;
            let num = |c: usize| -> Result<u64> {
                let raw = record.get(c).unwrap_or("");
                raw.parse().map_err(|_| {
                    Error::invalid(
                        format!("{source}: row {}", i + 2),
                        format!("'{raw}' is not a non-negative integer"),
                    )
                })
            };
            out.push([num(0)?, num(1)?]);
        }
        Ok(out)
    }
}

/// What is counted in addition to the non-embedding defaults. Both default to `false`:
/// SMELT's `N` and `F` exclude embeddings and the LM head.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Counting {
    /// Count the input embedding (`vocab * hidden` parameters; a lookup costs no FLOPs).
    #[serde(default)]
    pub embeddings: bool,
    /// Count the LM head (`vocab * hidden` parameters, `2 * hidden * vocab` forward FLOPs
    /// per token, once per token, not per layer execution).
    #[serde(default)]
    pub lm_head: bool,
    /// Count the multi-token-prediction modules (`model.mtp_layers`), as DeepSeek counts
    /// its 685B; off by default, as it counts its 671B.
    #[serde(default, skip_serializing_if = "is_false")]
    pub mtp: bool,
    /// What the KV budget counts: elements written per token (`per_token`, the default),
    /// or elements held by one sequence at the workload's context (`at_context`), where a
    /// windowed layer holds at most its window.
    #[serde(default, skip_serializing_if = "KvCount::is_per_token")]
    pub kv: KvCount,
    /// What the activations budget counts: the bytes per token a training step saves for
    /// the backward pass under this execution policy (`megatron`, the default: Megatron-Core
    /// with Transformer Engine, no recomputation; `megatron-selective` with
    /// `recompute_modules`, `megatron-full`; `transformers-eager` or `transformers-sdpa`;
    /// `unfused-eager`, `-flash`, `-selective`, `-full`: what an op-by-op step needs, a
    /// lower bound for unfused stacks).
    #[serde(default, skip_serializing_if = "ActivationPolicy::is_default")]
    pub activations: ActivationPolicy,
    /// The submodules `megatron-selective` recomputes (Megatron-Core's `recompute_modules`;
    /// default `["core_attn"]`, Megatron's). Read by `megatron-selective` only.
    #[serde(default, skip_serializing_if = "RecomputeModules::is_default")]
    pub recompute_modules: RecomputeModules,
    /// Bytes per element of a saved activation (2: bf16 or fp16).
    #[serde(
        default = "default_activation_bytes",
        skip_serializing_if = "is_default_activation_bytes"
    )]
    pub activation_bytes: u64,
}

impl Default for Counting {
    fn default() -> Self {
        Self {
            embeddings: false,
            lm_head: false,
            mtp: false,
            kv: KvCount::PerToken,
            activations: ActivationPolicy::Megatron,
            recompute_modules: RecomputeModules::default(),
            activation_bytes: default_activation_bytes(),
        }
    }
}

fn default_activation_bytes() -> u64 {
    2
}

fn is_default_activation_bytes(b: &u64) -> bool {
    *b == default_activation_bytes()
}

named_enum! {
    /// What a training step keeps for the backward pass (the cost model's activation
    /// memory, [`crate::cost::memory`]).
    #[derive(Default)]
    pub enum ActivationPolicy: "activation policy" {
        /// Unfused: a plain PyTorch step where every op saves what its backward reads,
        /// attention probabilities included (one row per query, as long as its document).
        Eager = "unfused-eager" | "eager",
        /// Unfused, but for attention as a fused kernel, which saves its output and
        /// log-sum-exp, not the probabilities.
        Flash = "unfused-flash" | "flash",
        /// Unfused, with the attention core recomputed, its inputs and output kept.
        Selective = "unfused-selective" | "selective",
        /// Unfused, with every layer execution recomputed: only its input is kept.
        Full = "unfused-full" | "full",
        /// What a Transformers 5.24 training step saves with eager attention and eager
        /// experts, tensor by tensor ([`crate::cost::transformers`]).
        TransformersEager = "transformers-eager",
        /// What a Transformers 5.24 training step saves with its defaults: SDPA attention
        /// and `grouped_mm` experts ([`crate::cost::transformers`]).
        TransformersSdpa = "transformers-sdpa",
        /// What Megatron-Core with Transformer Engine saves, tensor by tensor, with no
        /// recomputation ([`crate::cost::megatron`]).
        #[default]
        Megatron = "megatron",
        /// Megatron-Core with `recompute_granularity = "selective"` and `[counting]
        /// recompute_modules` ([`crate::cost::megatron`]).
        MegatronSelective = "megatron-selective",
        /// Megatron-Core with `recompute_granularity = "full"` (`recompute_method =
        /// "uniform"`, `recompute_num_layers = 1`): each layer's input
        /// ([`crate::cost::megatron`]).
        MegatronFull = "megatron-full",
    }
}

impl ActivationPolicy {
    fn is_default(&self) -> bool {
        *self == ActivationPolicy::default()
    }

    /// The unfused counts ([`crate::cost::memory`]), which every model's report shows: a
    /// lower bound for a step whose every op saves what its own backward reads (not for
    /// fused kernels that recompute elementwise ops, as Megatron-Core's).
    pub const UNFUSED: &'static [ActivationPolicy] = &[
        ActivationPolicy::Eager,
        ActivationPolicy::Flash,
        ActivationPolicy::Selective,
        ActivationPolicy::Full,
    ];

    /// The Megatron-Core policies ([`crate::cost::megatron`]).
    pub const MEGATRON: &'static [ActivationPolicy] = &[
        ActivationPolicy::Megatron,
        ActivationPolicy::MegatronSelective,
        ActivationPolicy::MegatronFull,
    ];

    /// Whether the policy is a stack's count ([`crate::cost::transformers`],
    /// [`crate::cost::megatron`]), not an unfused one.
    pub fn is_stack(self) -> bool {
        !Self::UNFUSED.contains(&self)
    }

    /// Whether the policy is one of Megatron-Core's.
    pub fn is_megatron(self) -> bool {
        Self::MEGATRON.contains(&self)
    }

    /// Whether the policy is one of Transformers'.
    pub fn is_transformers(self) -> bool {
        matches!(
            self,
            ActivationPolicy::TransformersEager | ActivationPolicy::TransformersSdpa
        )
    }
}

named_enum! {
    /// What the KV budget counts.
    #[derive(Default)]
    pub enum KvCount: "kv count" {
        /// Key and value elements every token writes, over all layer executions.
        #[default]
        PerToken = "per_token",
        /// Elements one sequence of `workload.context` tokens holds at its end.
        AtContext = "at_context",
    }
}

impl KvCount {
    fn is_per_token(&self) -> bool {
        *self == KvCount::PerToken
    }
}

impl Counting {
    pub(super) fn is_default(&self) -> bool {
        *self == Counting::default()
    }
}

/// `[[length, count], ...]`, each pair exactly two non-negative integers (an extra element
/// is an error, never dropped).
fn pairs<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Vec<[u64; 2]>>, D::Error> {
    use serde::de::Error as _;
    let raw: Vec<Vec<u64>> = Vec::deserialize(d)?;
    raw.into_iter()
        .enumerate()
        .map(|(i, p)| {
            <[u64; 2]>::try_from(p.as_slice()).map_err(|_| {
                D::Error::custom(format!(
                    "doc_lengths[{i}] must be a [length, count] pair; got {} numbers",
                    p.len()
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn default_kv_bytes() -> u64 {
    2
}

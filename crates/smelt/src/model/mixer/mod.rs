//! The recurrent token mixers ([`Mixer`]: Gated DeltaNet, Mamba-2) a model's recurrent
//! layers run in place of attention, with their shapes and the knobs a lattice searches.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::units::{add, product};

mod gated_deltanet;
mod mamba2;

pub use gated_deltanet::{DELTA_RULE_CHUNK, GatedDeltaNet};
pub use mamba2::Mamba2;

/// Layers whose token mixer is recurrent: the listed layers run `mixer` in place of the
/// attention block (their FFN, norms and loop visits are the model's as for any layer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recurrent {
    /// 1-based indices of the recurrent layers, strictly increasing; the others are
    /// attention layers (at least one must remain).
    pub layers: Vec<u64>,
    /// The recurrent token mixer of those layers, one kind per model.
    pub mixer: Mixer,
}

/// A recurrent token mixer kind, each with its own shapes (a table named by the kind, as
/// `[model.recurrent.mixer.gated_deltanet]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Mixer {
    /// Gated DeltaNet (Yang et al., arXiv:2412.06464) as Qwen3-Next and Qwen3.5 run it.
    GatedDeltanet(GatedDeltaNet),
    /// Mamba-2 (Dao and Gu, arXiv:2405.21060) as Nemotron-H runs it.
    Mamba2(Mamba2),
}

impl Mixer {
    /// What the recurrence's own state is called for the kind named `kind`
    /// ([`Mixer::as_str`]): `delta` (Gated DeltaNet's delta-rule matrix), `ssm` (Mamba-2's).
    pub fn state_word_of(kind: &str) -> &'static str {
        match kind {
            "mamba2" => "ssm",
            _ => "delta",
        }
    }

    /// The kind's name, as the model file spells it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Mixer::GatedDeltanet(_) => "gated_deltanet",
            Mixer::Mamba2(_) => "mamba2",
        }
    }

    /// The shape a lattice searches, in words: Gated DeltaNet's `keys 16x128, values
    /// 32x128` (heads x head width), Mamba-2's `heads 64x64, state 128` (heads x head
    /// width, state per head and channel).
    pub fn shape_text(&self) -> String {
        match self {
            Mixer::GatedDeltanet(g) => format!(
                "keys {}x{}, values {}x{}",
                g.key_heads, g.key_head_dim, g.value_heads, g.value_head_dim
            ),
            Mixer::Mamba2(m) => format!("heads {}x{}, state {}", m.heads, m.head_dim, m.state),
        }
    }

    /// [`Mixer::shape_text`] for a narrow column: `k16x128 v32x128`, `64x64 s128`.
    pub fn shape_compact(&self) -> String {
        match self {
            Mixer::GatedDeltanet(g) => format!(
                "k{}x{} v{}x{}",
                g.key_heads, g.key_head_dim, g.value_heads, g.value_head_dim
            ),
            Mixer::Mamba2(m) => format!("{}x{} s{}", m.heads, m.head_dim, m.state),
        }
    }
}

impl Mixer {
    /// The mixer's searched knobs in the search's tie-break order: Gated DeltaNet's
    /// `key_heads`, `value_heads`, `key_head_dim`, `value_head_dim`; Mamba-2's `heads`,
    /// `head_dim`, `state` (then 0).
    pub fn knobs(&self) -> [u64; 4] {
        match self {
            Mixer::GatedDeltanet(g) => {
                [g.key_heads, g.value_heads, g.key_head_dim, g.value_head_dim]
            }
            Mixer::Mamba2(s) => [s.heads, s.head_dim, s.state, 0],
        }
    }
}

impl Mixer {
    /// Checks the mixer's shapes (the errors name `model.recurrent.mixer.<kind>.<field>`).
    pub fn validate(&self) -> Result<()> {
        match self {
            Mixer::GatedDeltanet(g) => g.validate(),
            Mixer::Mamba2(m) => m.validate(),
        }
    }

    /// Whether `self` differs from `other` at most in the knobs a lattice searches (Gated
    /// DeltaNet's heads and head widths, Mamba-2's heads, head width and state): the same
    /// kind, the same convolution, and for Mamba-2 the same groups, chunk and biases.
    pub fn same_but_knobs(&self, other: &Mixer) -> bool {
        match (*self, *other) {
            (Mixer::GatedDeltanet(a), Mixer::GatedDeltanet(b)) => {
                GatedDeltaNet {
                    key_heads: b.key_heads,
                    value_heads: b.value_heads,
                    key_head_dim: b.key_head_dim,
                    value_head_dim: b.value_head_dim,
                    ..a
                } == b
            }
            (Mixer::Mamba2(a), Mixer::Mamba2(b)) => {
                Mamba2 {
                    heads: b.heads,
                    head_dim: b.head_dim,
                    state: b.state,
                    ..a
                } == b
            }
            _ => false,
        }
    }

    /// The mixer's cost on a residual stream of width `h` ([`RecurrentBlock`]).
    pub(crate) fn block(&self, h: u64) -> Result<RecurrentBlock> {
        let (block, words) = match self {
            Mixer::GatedDeltanet(g) => (g.block(h), gated_deltanet::WORDS),
            Mixer::Mamba2(m) => (m.block(h), mamba2::WORDS),
        };
        block.map_err(|e| words.params_overflow(e))
    }
}

/// The recurrent token mixer of one layer, for one sequence of `T` tokens: its weights,
/// projections, convolution and scan as each mixer counts them (the formulas are with each
/// mixer: `GatedDeltaNet::block` and `Mamba2::block` in `crate::model`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RecurrentBlock {
    /// The mixer's words, for the refusal of a count too large for 64 bits.
    pub kind: MixerWords,
    /// Every weight: projections, convolution, `A_log`, `dt_bias`, the gated norm.
    pub params: u64,
    /// Multiply-adds per token of the projections.
    pub macs: u64,
    /// Convolution channels times taps (`c·w`): multiply-adds per convolution output.
    pub conv_macs: u64,
    /// Taps of the convolution.
    pub conv_kernel: u64,
    /// Multiply-adds of the delta rule per padded token: `n_v·(2·C·d_k + C·d_v + 3·d_k·d_v)`.
    pub core_macs: u64,
    /// Chunk length `C`.
    pub chunk: u64,
    /// Multiply-adds per pair of state slots of the chunk-to-chunk recurrence (Mamba-2's
    /// `n_h·N·d`; 0 for Gated DeltaNet, whose scan is counted per chunk).
    pub slot_macs: u64,
    /// The state one sequence holds per layer execution, elements: the convolution's last
    /// `w` inputs per channel (`c·w`, as Transformers' cache holds it) and the recurrence's
    /// (the delta rule's `n_v·d_k·d_v`, Mamba-2's SSM state `n_h·d·N`).
    pub conv_state: u64,
    pub delta_state: u64,
}

impl RecurrentBlock {
    /// Multiply-adds of the convolution and the scan over one sequence of `t` tokens.
    pub fn sequence_macs(&self, t: u64) -> Result<u64> {
        self.sequence_macs_unchecked(t).map_err(|e| {
            self.kind.overflow(
                e,
                Budget::Flops,
                &format!("flops.recurrent (the convolution and scan over one {t}-token sequence)"),
                Some("workload.context"),
            )
        })
    }

    /// [`Self::sequence_macs`], an overflow not yet named.
    fn sequence_macs_unchecked(&self, t: u64) -> Result<u64> {
        const WHAT: &str = "flops.recurrent";
        let outputs = add(t, self.conv_kernel - 1, WHAT)?;
        let chunks = t.div_ceil(self.chunk);
        let padded = product(&[chunks, self.chunk], WHAT)?;
        let slots = add(chunks, 1, WHAT)?;
        [
            product(&[padded, self.core_macs], WHAT)?,
            product(&[slots, slots, self.slot_macs], WHAT)?,
        ]
        .into_iter()
        .try_fold(product(&[outputs, self.conv_macs], WHAT)?, |s, x| {
            add(s, x, WHAT)
        })
    }
}

/// A recurrent mixer in a refusal's words: which budget of it overflows, of what, and which
/// of its fields to reduce. Each mixer states its own (`WORDS` in its file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MixerWords {
    /// The model file's table of the mixer (`model.recurrent.mixer.mamba2`).
    pub table: &'static str,
    /// The mixer in words (`Mamba-2`).
    pub words: &'static str,
    /// The fields its parameters grow with, largest effect first.
    pub params_knobs: &'static str,
    /// The fields its FLOPs and state grow with, largest effect first.
    pub knobs: &'static str,
}

/// The budget a count belongs to, in a refusal's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Budget {
    /// Parameters.
    Params,
    /// FLOPs per token.
    Flops,
    /// The KV cache (with the recurrent state).
    Kv,
}

impl MixerWords {
    /// `e`, an overflow of the `budget` of `what` (the quantity, e.g. `flops.recurrent`, with
    /// what it counts), as a refusal naming the budget and the fields to reduce (`also`: a
    /// field outside the mixer's table that the count also grows with); any other error
    /// unchanged.
    pub fn overflow(self, e: Error, budget: Budget, what: &str, also: Option<&str>) -> Error {
        if !matches!(e, Error::Overflow { .. }) {
            return e;
        }
        let knobs = match budget {
            Budget::Params => self.params_knobs,
            Budget::Flops | Budget::Kv => self.knobs,
        };
        let budget = match budget {
            Budget::Params => "the parameter budget",
            Budget::Flops => "the FLOP budget",
            Budget::Kv => "the KV budget",
        };
        let table = self.table;
        let also = also.map_or(String::new(), |a| format!(", or {a}"));
        Error::invalid(
            table,
            format!(
                "{budget} of {what} of the {} layers overflows 64 bits (the model is too large \
                 to count exactly): reduce {table}'s {knobs}{also}",
                self.words,
            ),
        )
    }

    /// [`Self::overflow`] of the mixer's parameters.
    fn params_overflow(self, e: Error) -> Error {
        self.overflow(
            e,
            Budget::Params,
            "params.recurrent (the weights)",
            Some("model.hidden"),
        )
    }
}

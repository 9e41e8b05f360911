//! The widths of a model's own architecture parts that the search moves ([`Knobs`]).

use super::{Mixer, Model};

/// The widths of a model's own architecture parts that a lattice searches, beside the
/// hidden size, heads, head width and experts ([`crate::search`]): MLA's latent rank and
/// per-head widths, the recurrent mixer's shape and the dense FFN's width; 0 (or `None`)
/// where the model has no such part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Knobs {
    /// MLA's key/value latent rank (`kv_lora_rank`).
    pub kv_lora_rank: u64,
    /// MLA's per-head `(qk_nope_head_dim, v_head_dim)`.
    pub mla_widths: (u64, u64),
    /// The recurrent layers' mixer.
    pub mixer: Option<Mixer>,
    /// The dense layers' FFN width.
    pub dense_ffn: u64,
}

impl Model {
    /// The model's searched widths ([`Knobs`]).
    pub fn knobs(&self) -> Knobs {
        Knobs {
            kv_lora_rank: self.mla.as_ref().map_or(0, |a| a.kv_lora_rank),
            mla_widths: self
                .mla
                .as_ref()
                .map_or((0, 0), |a| (a.qk_nope_head_dim, a.v_head_dim)),
            mixer: self.recurrent.as_ref().map(|r| r.mixer),
            dense_ffn: self.dense.as_ref().map_or(0, |d| d.ffn),
        }
    }

    /// The model with `knobs` in place of its own, each where the model has that part
    /// (MLA, recurrent layers, dense layers); a `None` mixer keeps the model's.
    pub fn with_knobs(mut self, knobs: Knobs) -> Self {
        if let Some(a) = &mut self.mla {
            a.kv_lora_rank = knobs.kv_lora_rank;
            (a.qk_nope_head_dim, a.v_head_dim) = knobs.mla_widths;
        }
        if let (Some(r), Some(m)) = (&mut self.recurrent, knobs.mixer) {
            r.mixer = m;
        }
        if let Some(d) = &mut self.dense {
            d.ffn = knobs.dense_ffn;
        }
        self
    }
}

//! Sliding windows and Llama-4's chunks under the Transformers policies. Under eager
//! attention a window saves nothing: its mask is made once per forward, outside the layers,
//! and added to the scores (an addition saves nothing), and the probabilities are `T × T`
//! whatever the window. Under SDPA, Transformers hands a windowed layer a mask wherever the
//! window does not cover the sequence (`_ignore_causal_mask_sdpa` keeps it when
//! `kv_length >= local_attention_size`: a window or chunk no longer than the sequence; the
//! chunked mask passes its chunk size as `local_size`), and with a mask `use_gqa_in_sdpa`
//! is false: per such layer execution the kernel saves the mask as an additive `T × T`
//! tensor in the model's dtype (`b·T²` per sequence), and `repeat_kv` copies the keys and
//! values to every head (a view with one KV head).

use super::{Step, refuse};
use crate::error::Result;
use crate::model::AttentionLayer;

impl Step {
    /// Whether SDPA runs `a` with a mask (module docs); refuses a partial RoPE with one,
    /// which was not checked.
    pub(super) fn sdpa_mask(self, a: &AttentionLayer) -> Result<bool> {
        let masked = !self.eager
            && a.window
                .as_ref()
                .is_some_and(|w| u128::from(self.context) >= u128::from(w.size));
        if masked && a.rope_dim.is_some() {
            return Err(refuse(
                self.policy,
                "model.rope_dim",
                "a partial RoPE in a windowed layer under SDPA",
            ));
        }
        Ok(masked)
    }
}

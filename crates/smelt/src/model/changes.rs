//! Changes to a workload asked for by name: the command line's `--context`,
//! `--mean-doc-len`, `--doc-lengths` and `--dense`, and the Python module's keywords of the
//! same names. Each change given replaces that part of the file's own `[workload]`.

use super::workload::{Attention, Workload};
use crate::error::{Error, Result};

/// The parts of a workload to replace (`None`/`false`: keep the file's).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadChanges {
    /// Packed sequence length, tokens.
    #[serde(default)]
    pub context: Option<u64>,
    /// Mean document length, tokens (replaces a histogram).
    #[serde(default)]
    pub mean_doc_len: Option<u64>,
    /// A document-length histogram, `[[length, count], ...]` (replaces a mean).
    #[serde(default)]
    pub doc_lengths: Option<Vec<[u64; 2]>>,
    /// Dense attention (every key of the document) instead of causal.
    #[serde(default)]
    pub dense: bool,
}

impl WorkloadChanges {
    /// Whether no change is asked for.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// `base` with the changes applied, validated. A mean document length and a histogram
    /// together are refused (each replaces the other).
    pub fn apply(&self, base: &Workload) -> Result<Workload> {
        let mut w = base.clone();
        w.context = self.context.unwrap_or(w.context);
        match (self.mean_doc_len, &self.doc_lengths) {
            (Some(_), Some(_)) => {
                return Err(Error::invalid(
                    "mean_doc_len",
                    "give a mean document length or a histogram (doc_lengths), not both",
                ));
            }
            (Some(t), None) => (w.mean_doc_len, w.doc_lengths) = (Some(t), None),
            (None, Some(h)) => (w.mean_doc_len, w.doc_lengths) = (None, Some(h.clone())),
            (None, None) => {}
        }
        if self.dense {
            w.attention = Attention::Dense;
        }
        w.validate()?;
        Ok(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_replace_their_part_and_are_validated() {
        let base = crate::ModelSpec::default_workload();
        assert_eq!(WorkloadChanges::default().apply(&base).unwrap(), base);
        let w = WorkloadChanges {
            context: Some(8192),
            doc_lengths: Some(vec![[100, 3], [8192, 1]]),
            dense: true,
            ..Default::default()
        }
        .apply(&base)
        .unwrap();
        assert_eq!(w.context, 8192);
        assert_eq!((w.mean_doc_len, w.attention), (None, Attention::Dense));
        let both = WorkloadChanges {
            mean_doc_len: Some(10),
            doc_lengths: Some(vec![[10, 1]]),
            ..Default::default()
        };
        let e = both.apply(&base).unwrap_err().to_string();
        assert!(e.starts_with("mean_doc_len: "), "{e}");
        let long = WorkloadChanges {
            context: Some(512),
            mean_doc_len: Some(1024),
            ..Default::default()
        };
        let e = long.apply(&base).unwrap_err().to_string();
        assert!(e.contains("mean_doc_len"), "{e}");
    }
}

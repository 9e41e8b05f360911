//! The workload flags of `cost`, `match`, `grid`, `bench` and `import`.

use std::path::PathBuf;

use anyhow::Context;
use smelt::budget::Budget;
use smelt::model::WorkloadChanges;
use smelt::{ModelSpec, Workload};

/// The workload both models are costed at: by default the file's own `[workload]` (a
/// budget's `[workload]` table, else its Baseline's), or for a config.json 4096-token
/// sequences of 991-token documents, causal (`max_position_embeddings` is not used). Each
/// flag given replaces that part.
#[derive(Debug, Clone, clap::Args)]
pub struct WorkloadArgs {
    /// Packed sequence length, tokens.
    #[arg(long, value_name = "TOKENS", value_parser = clap::value_parser!(u64).range(1..))]
    context: Option<u64>,
    /// Mean document length, tokens.
    #[arg(long, value_name = "TOKENS", conflicts_with = "doc_lengths",
          value_parser = clap::value_parser!(u64).range(1..))]
    mean_doc_len: Option<u64>,
    /// A document-length histogram, costed exactly: a CSV file with the header
    /// `length,count`.
    #[arg(long, value_name = "FILE")]
    doc_lengths: Option<PathBuf>,
    /// Count dense attention (every key of the document) instead of causal.
    #[arg(long)]
    dense: bool,
}

impl WorkloadArgs {
    /// `base` with the flags given applied, validated.
    pub fn apply(&self, base: &Workload) -> anyhow::Result<Workload> {
        let doc_lengths = match &self.doc_lengths {
            Some(path) => {
                let text = smelt::io::read_to_string(path)?;
                Some(Workload::histogram_from_csv(
                    &text,
                    &path.display().to_string(),
                )?)
            }
            None => None,
        };
        let changes = WorkloadChanges {
            context: self.context,
            mean_doc_len: self.mean_doc_len,
            doc_lengths,
            dense: self.dense,
        };
        changes
            .apply(base)
            .context("the workload given by the flags")
    }

    /// `spec` at the workload the flags give.
    pub fn spec(&self, mut spec: ModelSpec) -> anyhow::Result<ModelSpec> {
        spec.workload = self.apply(&spec.workload)?;
        Ok(spec)
    }

    /// `budget` at the workload the flags give (unchanged when no flag is given).
    pub fn budget(&self, budget: Budget) -> anyhow::Result<Budget> {
        if !self.is_set() {
            return Ok(budget);
        }
        Ok(budget.with_workload(self.apply(&budget.baseline().workload)?)?)
    }

    /// The files the flags read (a `--doc-lengths` histogram), which an output must not
    /// replace.
    pub fn inputs(&self) -> Vec<PathBuf> {
        self.doc_lengths.iter().cloned().collect()
    }

    fn is_set(&self) -> bool {
        let lengths = self.mean_doc_len.is_some() || self.doc_lengths.is_some();
        self.context.is_some() || lengths || self.dense
    }
}

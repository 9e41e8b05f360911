//! Which share of a grid's cells a process times (the scheme: "Shards" in [`crate::study`]).

use crate::error::{Error, Result};

/// Which share of a grid's cells a process times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shard {
    /// This shard, from 1.
    pub index: u64,
    /// Shards in all.
    pub of: u64,
}

impl Shard {
    /// Parses `K/N` (`1 <= K <= N`).
    pub fn parse(text: &str) -> Result<Self> {
        let bad = || Error::invalid("shard", format!("'{text}' is not K/N with 1 <= K <= N"));
        let (k, n) = text.split_once('/').ok_or_else(bad)?;
        let (index, of) = (
            k.trim().parse::<u64>().map_err(|_| bad())?,
            n.trim().parse::<u64>().map_err(|_| bad())?,
        );
        match (1..=of).contains(&index) {
            true => Ok(Self { index, of }),
            false => Err(bad()),
        }
    }

    /// Whether the cell at `position` (from 0) is this shard's.
    pub fn has(&self, position: usize) -> bool {
        position as u64 % self.of == self.index - 1
    }
}

/// What a shard's output carries to be merged.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ShardInfo {
    /// This shard, from 1.
    pub index: u64,
    /// Shards in all.
    pub of: u64,
    /// The digest of the grid matched and the benchmark's settings.
    pub digest: String,
}

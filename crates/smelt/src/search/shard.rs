//! A grid's benchmark spread over many GPUs: `smelt grid --bench cuda --shard K/N` times
//! the cells whose position `i` (from 0) has `i mod N = K - 1`, and `smelt merge` joins the
//! shards' JSON into the grid's.
//!
//! Every shard matches the whole grid (matching is cheap and deterministic) and writes it
//! with its `shard`: `K`, `N` and a digest of what was matched (each cell's labels,
//! Baseline, matched model and search size, which the grid, its lattices and its workloads
//! determine) and of the benchmark's settings. The merge refuses shards whose digests or
//! `N` differ, a shard given twice, and a missing one; it takes each cell's time from the
//! shard that timed it and recomputes the summary.

use serde_json::Value;

use super::grid::{GridCell, GridReport, time_summary_of};
use crate::bench::{BenchOptions, TimeRatio};
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

/// FNV-1a, 64 bits, as hex: a digest to tell grids apart (not a security measure).
fn fnv(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The digest of `cells` (labels, models, search sizes) and the benchmark's `opts`.
pub fn digest(cells: &[GridCell], opts: &BenchOptions) -> Result<String> {
    let what: Vec<Value> = cells
        .iter()
        .map(|c| serde_json::json!([c.scale, c.sparsity_label, c.baseline, c.looped, c.lattice]))
        .collect();
    let text = serde_json::to_string(&(what, opts))
        .map_err(|e| Error::serialize("the shard digest", e))?;
    Ok(fnv(&text))
}

/// Merges the JSON of every shard of one grid (`smelt grid --format json --shard K/N`) into
/// the grid's JSON, each cell timed by its shard, the summary recomputed.
pub fn merge(parts: &[Value]) -> Result<Value> {
    let info = |v: &Value, i: usize| -> Result<(u64, u64, String)> {
        let s = &v["shard"];
        match (s["index"].as_u64(), s["of"].as_u64(), s["digest"].as_str()) {
            (Some(k), Some(n), Some(d)) => Ok((k, n, d.to_owned())),
            _ => Err(Error::invalid(
                format!("shards[{i}]"),
                "is not the JSON of a grid shard (smelt grid --format json --shard K/N)",
            )),
        }
    };
    let infos = (parts.iter().enumerate())
        .map(|(i, v)| info(v, i))
        .collect::<Result<Vec<_>>>()?;
    let Some((_, of, digest)) = infos.first().cloned() else {
        return Err(Error::invalid("shards", "none given"));
    };
    let mut by_index: Vec<Option<&Value>> = vec![None; of as usize];
    for ((k, n, d), v) in infos.iter().zip(parts) {
        if *n != of || *d != digest {
            return Err(Error::invalid(
                format!("shard {k}/{n}"),
                "is a shard of another grid, lattice, workload or benchmark setting \
                 (its digest differs): merge the shards of one run",
            ));
        }
        let slot = &mut by_index[(*k - 1) as usize];
        if slot.replace(v).is_some() {
            return Err(Error::invalid(format!("shard {k}/{n}"), "is given twice"));
        }
    }
    if let Some(missing) = by_index.iter().position(Option::is_none) {
        return Err(Error::invalid(
            format!("shard {}/{of}", missing + 1),
            "is missing: give every shard's output",
        ));
    }
    let mut merged = parts[0].clone();
    let cells = merged["cells"]
        .as_array_mut()
        .ok_or_else(|| Error::invalid("shards[0].cells", "is not a list of cells"))?;
    let mut times: Vec<(Option<TimeRatio>, bool)> = Vec::with_capacity(cells.len());
    for (i, cell) in cells.iter_mut().enumerate() {
        let from = by_index[i % of as usize]
            .map(|v| &v["cells"][i])
            .unwrap_or(&Value::Null);
        let obj = cell
            .as_object_mut()
            .ok_or_else(|| Error::invalid(format!("cells[{i}]"), "is not a cell"))?;
        obj.remove("time");
        obj.remove("time_failed");
        for key in ["time", "time_failed"] {
            if let Some(v) = from.get(key) {
                obj.insert(key.to_owned(), v.clone());
            }
        }
        let time = match from.get("time") {
            Some(t) => Some(
                serde_json::from_value::<TimeRatio>(t.clone())
                    .map_err(|e| Error::invalid(format!("cells[{i}].time"), e.to_string()))?,
            ),
            None => None,
        };
        times.push((time, from.get("time_failed").is_some()));
    }
    let backend = parts
        .iter()
        .find_map(|p| serde_json::from_value(p["summary"]["time_ratio"]["backend"].clone()).ok())
        .unwrap_or(crate::bench::Backend::Cuda);
    let summary = time_summary_of(&times, backend);
    merged["summary"]["time_ratio"] =
        serde_json::to_value(summary).map_err(|e| Error::serialize("JSON", e))?;
    if let Some(m) = merged.as_object_mut() {
        m.remove("shard");
    }
    Ok(merged)
}

/// Marks `report` as shard `shard` of a run with `opts`.
pub fn mark(report: &mut GridReport, shard: Shard, opts: &BenchOptions) -> Result<()> {
    report.shard = Some(ShardInfo {
        index: shard.index,
        of: shard.of,
        digest: digest(&report.cells, opts)?,
    });
    Ok(())
}

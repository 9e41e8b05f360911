//! `smelt merge`: a grid benchmarked in shards joined into the grid's JSON.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use super::{emit, write_file};

/// Merge the JSON outputs of a grid benchmarked in shards into the grid's JSON.
///
/// `smelt grid GRID --bench cuda --shard K/N --format json` times the cells whose position
/// (from 0) is K-1 modulo N: run one per GPU (each with its own CUDA_VISIBLE_DEVICES) or
/// per task of a job array, then merge their outputs. Shards of different grids, lattices,
/// workloads or benchmark settings are refused, as are a missing or repeated shard.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shards' JSON files (every shard of one run, in any order).
    #[arg(required = true, value_name = "SHARD.json")]
    shards: Vec<PathBuf>,
    /// Write the merged JSON here instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

/// Runs `smelt merge`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let parts = args
        .shards
        .iter()
        .map(|p| {
            let text = smelt::io::read_to_string(p)?;
            // A UTF-8 byte-order mark is not part of the JSON (as for config.json files).
            let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
            serde_json::from_str::<serde_json::Value>(text)
                .with_context(|| format!("'{}' is not JSON", p.display()))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let merged = smelt::study::merge(&parts).with_context(|| {
        let named: Vec<String> = (args.shards.iter().enumerate())
            .map(|(i, p)| format!("shards[{i}] = '{}'", p.display()))
            .collect();
        format!("merging {}", named.join(", "))
    })?;
    let text = smelt::report::to_json(&merged)?;
    match &args.output {
        Some(path) => write_file(path, &text, "the merged grid", &args.shards)?,
        None => emit(&text)?,
    }
    Ok(ExitCode::SUCCESS)
}

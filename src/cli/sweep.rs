//! `smelt sweep`: the paper's ablations, every candidate re-matched to the same Baseline.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use smelt::budget::Budget;
use smelt::search::{self, Knob};

use super::{EXIT_TOLERANCE, RowFormat, emit, render_rows};

/// Vary one recipe knob (loop span, depth or repeats) and re-match every candidate.
///
/// Values are a list and/or ranges: `0..=12`, `0..12`, `8,10,12,14,16`, `1,2..=4`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("knob").required(true).args(["span", "depth", "repeats"])))]
pub struct Args {
    /// The budget file.
    budget: PathBuf,
    /// Looped layers (0: no loop), placed as the recipe says.
    #[arg(long, value_name = "VALUES")]
    span: Option<String>,
    /// Physical layers of the looped model (the recipe's span and placement apply).
    #[arg(long, value_name = "VALUES")]
    depth: Option<String>,
    /// Executions of the looped block.
    #[arg(long, value_name = "VALUES")]
    repeats: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: RowFormat,
}

/// Parses `a..=b`, `a..b`, `n` and comma-separated lists of them.
pub fn parse_values(flag: &str, text: &str) -> anyhow::Result<Vec<u64>> {
    let num = |s: &str| -> anyhow::Result<u64> {
        s.trim()
            .parse::<u64>()
            .with_context(|| format!("--{flag}: '{}' is not a non-negative integer", s.trim()))
    };
    let mut out = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        if part.is_empty() {
            bail!("--{flag}: empty item in '{text}'");
        }
        let (lo, hi) = if let Some((a, b)) = part.split_once("..=") {
            (num(a)?, num(b)?)
        } else if let Some((a, b)) = part.split_once("..") {
            let b = num(b)?;
            if b == 0 {
                bail!("--{flag}: the range '{part}' is empty");
            }
            (num(a)?, b - 1)
        } else {
            let v = num(part)?;
            (v, v)
        };
        if lo > hi {
            bail!("--{flag}: the range '{part}' is empty");
        }
        if hi - lo > 1024 || out.len() > 1024 {
            bail!("--{flag}: at most 1024 values");
        }
        out.extend(lo..=hi);
    }
    Ok(out)
}

/// Runs `smelt sweep`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let budget = Budget::load(&args.budget)
        .with_context(|| format!("budget file '{}'", args.budget.display()))?;
    let (knob, flag, text) = match (&args.span, &args.depth, &args.repeats) {
        (Some(t), None, None) => (Knob::Span, "span", t),
        (None, Some(t), None) => (Knob::Depth, "depth", t),
        (None, None, Some(t)) => (Knob::Repeats, "repeats", t),
        _ => bail!("give exactly one of --span, --depth, --repeats"),
    };
    let values = parse_values(flag, text)?;
    let r = search::sweep(&budget, knob, &values)?;
    let text = render_rows(&r, args.format)?;
    emit(&text)?;
    Ok(if r.rows.iter().all(|row| row.within_tolerance) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_TOLERANCE)
    })
}

#[cfg(test)]
mod tests {
    use super::parse_values;

    #[test]
    fn values_parse() {
        assert_eq!(parse_values("span", "0..=3").unwrap(), vec![0, 1, 2, 3]);
        assert_eq!(parse_values("span", "0..3").unwrap(), vec![0, 1, 2]);
        assert_eq!(parse_values("depth", "8,10, 12").unwrap(), vec![8, 10, 12]);
        assert_eq!(parse_values("repeats", "1,2..=3").unwrap(), vec![1, 2, 3]);
        assert!(parse_values("span", "3..=1").is_err());
        assert!(parse_values("span", "a").is_err());
        assert!(parse_values("span", "1,,2").is_err());
        assert!(parse_values("span", "0..0").is_err());
        assert!(parse_values("span", "0..=100000").is_err());
    }
}

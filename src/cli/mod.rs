//! Argument parsing (clap) and dispatch. The library never sees clap types.

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

mod cost;

/// Exit code for an error: bad input, unreadable file.
pub const EXIT_ERROR: u8 = 1;

const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  error: a file could not be read, parsed or validated (the message names the field
     and the rule), or a count overflowed
  2  usage error: bad command-line arguments";

/// Compute-matched budgets for looped MoE Transformers.
///
/// smelt computes a model's per-token training FLOPs, non-embedding parameters and KV cache
/// from an exact analytic cost model, so that a looped model can be compared fairly with an
/// ordinary one.
#[derive(Debug, Parser)]
#[command(name = "smelt", version, after_help = EXIT_CODES)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Cost(cost::Args),
}

/// Output format of a single-result command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum OutputFormat {
    /// A readable table.
    #[default]
    Table,
    /// JSON, the stable contract for scripts (documented in the README).
    Json,
    /// TOML.
    Toml,
}

impl From<OutputFormat> for smelt::report::Format {
    fn from(f: OutputFormat) -> Self {
        match f {
            OutputFormat::Table => smelt::report::Format::Table,
            OutputFormat::Json => smelt::report::Format::Json,
            OutputFormat::Toml => smelt::report::Format::Toml,
        }
    }
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Cost(args) => cost::run(args),
    }
}

/// Writes `text` to standard output.
pub fn emit(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

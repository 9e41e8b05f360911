//! The `smelt` command line: a thin layer over the library.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

mod cli;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(code) => code,
        Err(err) => {
            // A closed pipe (`smelt ... | head`) is not an error.
            if let Some(io) = err.root_cause().downcast_ref::<std::io::Error>()
                && io.kind() == std::io::ErrorKind::BrokenPipe
            {
                return ExitCode::SUCCESS;
            }
            let _ = writeln!(std::io::stderr(), "smelt: error: {err:#}");
            ExitCode::from(cli::EXIT_ERROR)
        }
    }
}

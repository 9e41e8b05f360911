//! The `smelt` command line: a thin layer over the library.

use std::io::Write;
use std::process::ExitCode;

use clap::{CommandFactory, Parser};

mod cli;

fn main() -> ExitCode {
    let args = match cli::Cli::try_parse() {
        Ok(args) => args,
        Err(err) => return usage_error(&err),
    };
    match cli::run(args) {
        Ok(code) => code,
        Err(err) => {
            // A closed pipe (`smelt ... | head`) is not an error.
            if let Some(io) = err.root_cause().downcast_ref::<std::io::Error>()
                && io.kind() == std::io::ErrorKind::BrokenPipe
            {
                return ExitCode::SUCCESS;
            }
            let text = smelt::progress::visible(&format!("{err:#}"));
            let _ = writeln!(std::io::stderr(), "smelt: error: {text}");
            ExitCode::from(cli::EXIT_ERROR)
        }
    }
}

/// What clap says of arguments it refuses (or of `--help`, `--version`), as clap prints it,
/// unless an argument holds a control character (an escape sequence that would clear or
/// retitle the terminal, which clap quotes as typed): then the message without styles, the
/// control characters escaped.
fn usage_error(err: &clap::Error) -> ExitCode {
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if !err.use_stderr() || args.iter().all(|a| smelt::progress::visible(a) == *a) {
        err.exit();
    }
    let plain = cli::Cli::command()
        .styles(clap::builder::Styles::plain())
        .try_get_matches_from(&args)
        .err()
        .map_or_else(
            || err.render().to_string(),
            |e| e.render().ansi().to_string(),
        );
    let _ = write!(std::io::stderr(), "{}", smelt::progress::visible(&plain));
    ExitCode::from(u8::try_from(err.exit_code()).unwrap_or(2))
}

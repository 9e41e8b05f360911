//! The one error type of the library.
//!
//! Every variant names what was wrong in terms a user can act on: the field (as a dotted
//! path into the file, e.g. `model.kv_heads`) and the rule it broke. The binary adds the
//! file name as context; the library never prints.

/// Everything that can go wrong in smelt.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A model, workload or budget value breaks a rule.
    #[error("{field}: {rule}")]
    InvalidSpec {
        /// Dotted path of the offending field, e.g. `model.kv_heads`.
        field: String,
        /// The rule it breaks, with the values involved.
        rule: String,
    },
    /// A file could not be parsed (syntax, a missing or unknown field, a wrong type).
    #[error("{message}")]
    Parse {
        /// The parser's message, which names the field and shows the offending line.
        message: String,
    },
    /// A count does not fit in the integer type that holds it. Raised instead of wrapping.
    #[error(
        "arithmetic overflow computing {what}: the model is too large to count exactly in 64 bits"
    )]
    Overflow {
        /// Which quantity overflowed.
        what: &'static str,
    },
    /// No lattice point satisfies the budget's constraints.
    #[error("{budget}: no feasible configuration: {reason}")]
    Infeasible {
        /// The budget's name.
        budget: String,
        /// Which constraint leaves nothing.
        reason: String,
    },
    /// A benchmark backend failed or is unavailable (boxed, so that `Error` has the same
    /// shape with or without the `cuda` feature).
    #[error("{backend} backend: {message}")]
    Backend {
        /// Which backend.
        backend: &'static str,
        /// What went wrong.
        message: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A result could not be written in the asked format (e.g. a TOML table after a value).
    #[error("writing {format}: {message}")]
    Serialize {
        /// The format being written (`JSON`, `TOML`, `CSV`, the model file...).
        format: &'static str,
        /// The serialiser's message.
        message: String,
    },
    /// The LP solver behind the MILP cross-check failed (not a property of the budget).
    #[error("MILP solver: {message}")]
    Solver {
        /// The solver's message.
        message: String,
    },
    /// A check smelt makes on itself failed: a bug, reported rather than hidden.
    #[error("internal error (a bug in smelt; please report it): {message}")]
    Internal {
        /// What failed.
        message: String,
    },
    /// A picture could not be drawn.
    #[error("plot: {message}")]
    Plot {
        /// What went wrong.
        message: String,
    },
    /// The caller asked the work to stop ([`Progress::cancelled`](crate::progress::Progress::cancelled)).
    #[error("interrupted")]
    Interrupted,
    /// A file could not be read or written.
    #[error("{path}: {error}")]
    Io {
        /// The path involved.
        path: String,
        /// The underlying error (in the message; not a `source()`, so it prints once).
        error: std::io::Error,
    },
}

impl Error {
    /// Shorthand for [`Error::InvalidSpec`].
    pub fn invalid(field: impl Into<String>, rule: impl Into<String>) -> Self {
        Error::InvalidSpec {
            field: field.into(),
            rule: rule.into(),
        }
    }

    /// [`Error::Parse`] from a parser's message, capped: a line of at most
    /// [`MAX_QUOTED_LINE`] characters and [`MAX_QUOTED`] in all, so that a one-line 50 MB
    /// file does not come back as a 50 MB message. A missing top-level table is said
    /// plainly rather than pointed at line 1, column 1.
    pub(crate) fn parse(message: impl std::fmt::Display) -> Self {
        let message = message.to_string();
        if let Some(field) = missing_at_top(&message) {
            return Error::Parse {
                message: format!("missing field `{field}` (a table or key the file must have)"),
            };
        }
        let mut out = String::new();
        for line in message.lines() {
            let mut chars = line.chars();
            let kept: String = chars.by_ref().take(MAX_QUOTED_LINE).collect();
            out.push_str(&kept);
            if chars.next().is_some() {
                out.push('…');
            }
            out.push('\n');
            if out.len() > MAX_QUOTED {
                out.push_str("…\n");
                break;
            }
        }
        Error::Parse {
            message: out.trim_end().to_owned(),
        }
    }

    /// [`Error::Serialize`] in `format`.
    pub(crate) fn serialize(format: &'static str, e: impl std::fmt::Display) -> Self {
        Error::Serialize {
            format,
            message: e.to_string(),
        }
    }
}

/// The longest line of a file an error message quotes.
pub const MAX_QUOTED_LINE: usize = 240;
/// The most characters of parser output an error message carries.
pub const MAX_QUOTED: usize = 2000;

/// `Some(field)` when a TOML parser's message is a missing field located at line 1, column
/// 1 (where TOML places errors about the whole document).
fn missing_at_top(message: &str) -> Option<&str> {
    if !message.contains("line 1, column 1") {
        return None;
    }
    let rest = message.split("missing field `").nth(1)?;
    rest.split('`').next()
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

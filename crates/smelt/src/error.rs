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
    /// A picture could not be drawn.
    #[error("plot: {message}")]
    Plot {
        /// What went wrong.
        message: String,
    },
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

    /// [`Error::Serialize`] in `format`.
    pub(crate) fn serialize(format: &'static str, e: impl std::fmt::Display) -> Self {
        Error::Serialize {
            format,
            message: e.to_string(),
        }
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

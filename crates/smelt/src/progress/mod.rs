//! Progress of long work (a grid, a sweep, a fit's starts, a bootstrap, a benchmark), told
//! to whoever asks. The library prints nothing of itself; `Terminal` (feature `terminal`)
//! is the command line's reporter: a bar on a terminal, plain lines on standard error
//! otherwise, nothing when quiet (`smelt ... --quiet`).

#[cfg(feature = "terminal")]
mod terminal;
#[cfg(feature = "terminal")]
pub use terminal::Terminal;

/// `text` with every control character but newlines and tabs escaped (`\u{1b}`), for a
/// terminal: a file name, a value or a device name quoted in a message cannot clear or
/// retitle it. Text without one is returned as it is.
pub fn visible(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\n' | '\t' => c.to_string(),
            c if c.is_control() => c.escape_debug().to_string(),
            c => c.to_string(),
        })
        .collect()
}

/// Receives progress reports. Calls may come from several threads at once.
pub trait Progress: Sync {
    /// A task of `total` steps begins (`total` 0: unknown).
    fn begin(&self, task: &str, total: u64) {
        let _ = (task, total);
    }

    /// `n` more steps are done.
    fn advance(&self, n: u64) {
        let _ = n;
    }

    /// A line of news about the task (what is being timed, say).
    fn note(&self, text: &str) {
        let _ = text;
    }

    /// The task is over.
    fn end(&self) {}

    /// Whether whoever asked for the work wants it stopped (Ctrl-C in the Python module).
    /// Long loops (grid cells, sweep values, a fit's starts, bootstrap resamples, benchmark
    /// kernels) ask between steps and return [`Error::Interrupted`](crate::Error::Interrupted).
    fn cancelled(&self) -> bool {
        false
    }
}

/// [`Error::Interrupted`](crate::Error::Interrupted) when `progress` asks to stop.
pub(crate) fn check(progress: &dyn Progress) -> crate::Result<()> {
    match progress.cancelled() {
        true => Err(crate::Error::Interrupted),
        false => Ok(()),
    }
}

/// No reports.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Progress for Silent {}

//! Progress on standard error, for command lines: a bar on a terminal (indicatif), a line
//! when each task begins and ends otherwise, nothing when quiet.

use std::io::IsTerminal;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::Progress;

/// The task under way: its name, when it began, and its bar on a terminal.
type Task = Option<(String, Instant, Option<ProgressBar>)>;

/// Reports on standard error (feature `terminal`). Standard output is left to the result.
pub struct Terminal {
    quiet: bool,
    terminal: bool,
    task: Mutex<Task>,
}

impl Terminal {
    /// Reports on standard error unless `quiet`: a bar when standard error is a terminal,
    /// plain lines otherwise.
    pub fn new(quiet: bool) -> Self {
        Self {
            quiet,
            terminal: std::io::stderr().is_terminal(),
            task: Mutex::new(None),
        }
    }

    fn task(&self) -> MutexGuard<'_, Task> {
        self.task.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Writes a line to standard error, ignoring a failure: a full or closed standard error
/// loses the progress, never the result (`eprintln!` would panic).
fn line(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

impl Progress for Terminal {
    fn begin(&self, task: &str, total: u64) {
        if self.quiet {
            return;
        }
        let bar = self.terminal.then(|| {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({elapsed})")
                .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style.progress_chars("=> "));
            bar.set_message(task.to_owned());
            bar
        });
        if bar.is_none() {
            line(&format!("smelt: {task} ({total} steps)"));
        }
        *self.task() = Some((task.to_owned(), Instant::now(), bar));
    }

    fn advance(&self, n: u64) {
        if let Some((_, _, Some(bar))) = &*self.task() {
            bar.inc(n);
        }
    }

    fn note(&self, text: &str) {
        if self.quiet {
            return;
        }
        match &*self.task() {
            Some((_, _, Some(bar))) => bar.println(text),
            _ => line(&format!("smelt: {text}")),
        }
    }

    fn end(&self) {
        let Some((task, start, bar)) = self.task().take() else {
            return;
        };
        if let Some(bar) = bar {
            bar.finish_and_clear();
        }
        if !self.quiet {
            let seconds = start.elapsed().as_secs_f64();
            line(&format!("smelt: {task}: done in {seconds:.1} s"));
        }
    }
}

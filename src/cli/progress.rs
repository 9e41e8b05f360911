//! Progress on standard error: a bar on a terminal (indicatif), a line when each task begins
//! and ends otherwise, nothing with `--quiet`. Standard output carries only the result.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use smelt::progress::Progress;

/// The command line's [`Progress`].
pub struct Reporter {
    quiet: bool,
    terminal: bool,
    state: Mutex<Option<(String, Instant, Option<ProgressBar>)>>,
}

impl Reporter {
    /// Reports on standard error unless `quiet`.
    pub fn new(quiet: bool) -> Self {
        Self {
            quiet,
            terminal: std::io::stderr().is_terminal(),
            state: Mutex::new(None),
        }
    }

    fn with_state<T>(
        &self,
        f: impl FnOnce(&mut Option<(String, Instant, Option<ProgressBar>)>) -> T,
    ) -> T {
        let mut guard = self
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut guard)
    }
}

impl Progress for Reporter {
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
            eprintln!("smelt: {task} ({total} steps)");
        }
        self.with_state(|s| *s = Some((task.to_owned(), Instant::now(), bar)));
    }

    fn advance(&self, n: u64) {
        self.with_state(|s| {
            if let Some((_, _, Some(bar))) = s {
                bar.inc(n);
            }
        });
    }

    fn note(&self, text: &str) {
        if self.quiet {
            return;
        }
        self.with_state(|s| match s {
            Some((_, _, Some(bar))) => bar.println(text),
            _ => eprintln!("smelt: {text}"),
        });
    }

    fn end(&self) {
        self.with_state(|s| {
            if let Some((task, start, bar)) = s.take() {
                if let Some(bar) = bar {
                    bar.finish_and_clear();
                }
                if !self.quiet {
                    eprintln!(
                        "smelt: {task}: done in {:.1} s",
                        start.elapsed().as_secs_f64()
                    );
                }
            }
        });
    }
}

//! Progress on standard error, for command lines: a bar on a terminal (indicatif);
//! otherwise (a log, a pipe) a line when each task begins and ends and, while it runs, one
//! every [`LOG_EVERY`] with the steps done (from a thread of its own, so that a step that
//! hangs still shows in a log); nothing when quiet.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::Progress;

/// The task under way: its name, when it began, and its bar on a terminal.
type Task = Option<(String, Instant, Option<ProgressBar>)>;

/// How often a task under way is reported when standard error is not a terminal.
pub const LOG_EVERY: Duration = Duration::from_secs(10);

/// What the log's ticker reads: the steps of the task under way, and whether it still is.
#[derive(Default)]
struct Ticker {
    done: AtomicU64,
    running: AtomicBool,
}

/// Reports on standard error (feature `terminal`). Standard output is left to the result.
pub struct Terminal {
    quiet: bool,
    terminal: bool,
    task: Mutex<Task>,
    ticker: Mutex<Option<Arc<Ticker>>>,
}

/// Writes `task: done/total steps (elapsed)` every [`LOG_EVERY`] while `ticker` runs.
fn tick(ticker: Arc<Ticker>, task: String, total: u64, start: Instant) {
    let mut last = Instant::now();
    while ticker.running.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(200));
        if last.elapsed() >= LOG_EVERY && ticker.running.load(Ordering::Relaxed) {
            let done = ticker.done.load(Ordering::Relaxed);
            let seconds = start.elapsed().as_secs_f64();
            line(&format!(
                "smelt: {task}: {done}/{total} steps ({seconds:.0} s)"
            ));
            last = Instant::now();
        }
    }
}

impl Terminal {
    /// Reports on standard error unless `quiet`: a bar when standard error is a terminal,
    /// plain lines otherwise.
    pub fn new(quiet: bool) -> Self {
        Self {
            quiet,
            terminal: std::io::stderr().is_terminal(),
            task: Mutex::new(None),
            ticker: Mutex::new(None),
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
    let _ = writeln!(std::io::stderr().lock(), "{}", super::visible(text));
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
        let start = Instant::now();
        if bar.is_none() {
            line(&format!("smelt: {task} ({total} steps)"));
            let ticker = Arc::new(Ticker::default());
            ticker.running.store(true, Ordering::Relaxed);
            let (t, name) = (ticker.clone(), task.to_owned());
            std::thread::spawn(move || tick(t, name, total, start));
            let old = self
                .ticker
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .replace(ticker);
            if let Some(old) = old {
                old.running.store(false, Ordering::Relaxed);
            }
        }
        *self.task() = Some((task.to_owned(), start, bar));
    }

    fn advance(&self, n: u64) {
        if let Some(t) = &*self.ticker.lock().unwrap_or_else(|p| p.into_inner()) {
            t.done.fetch_add(n, Ordering::Relaxed);
        }
        if let Some((_, _, Some(bar))) = &*self.task() {
            bar.inc(n);
        }
    }

    fn note(&self, text: &str) {
        if self.quiet {
            return;
        }
        match &*self.task() {
            Some((_, _, Some(bar))) => bar.println(super::visible(text)),
            _ => line(&format!("smelt: {text}")),
        }
    }

    fn end(&self) {
        if let Some(t) = self.ticker.lock().unwrap_or_else(|p| p.into_inner()).take() {
            t.running.store(false, Ordering::Relaxed);
        }
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

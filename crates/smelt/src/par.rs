//! The parallel maps: rayon's work-stealing pool, results in input order, so output
//! never depends on the number of threads.

use rayon::prelude::*;

/// `f` over `items` on the current pool, in order.
pub(crate) fn map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync + Send) -> Vec<R> {
    items.par_iter().map(f).collect()
}

/// `f` over `0..n` on the current pool, in order.
pub(crate) fn map_range<R: Send>(n: usize, f: impl Fn(usize) -> R + Sync + Send) -> Vec<R> {
    (0..n).into_par_iter().map(f).collect()
}

/// `f(index, chunk)` over the `chunk`-long chunks of `data`, in parallel.
pub(crate) fn for_chunks<T: Send>(
    data: &mut [T],
    chunk: usize,
    f: impl Fn(usize, &mut [T]) + Sync + Send,
) {
    data.par_chunks_mut(chunk.max(1))
        .enumerate()
        .for_each(|(i, c)| f(i, c));
}

/// Runs `f` on a pool of `threads` threads (the global pool when `threads` is `None` or the
/// pool cannot be built).
pub(crate) fn with_threads<R: Send>(threads: Option<usize>, f: impl FnOnce() -> R + Send) -> R {
    match threads.and_then(|n| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n.max(1))
            .build()
            .ok()
    }) {
        Some(pool) => pool.install(f),
        None => f(),
    }
}

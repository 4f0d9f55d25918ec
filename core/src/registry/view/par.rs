//! Answers built on every core: a long list's rows (each a redacted preview and
//! maybe two cgroup reads) are independent, so a list of thousands is split
//! among scoped threads.

use std::num::NonZeroUsize;

/// Fewer items than this are mapped on the calling thread (a thread start costs
/// more than a short list).
const PAR_MIN_ITEMS: usize = 256;

/// The most threads one map uses.
const PAR_MAX_THREADS: usize = 8;

/// `items` mapped by `f`, in their order; on up to every core for a long slice.
/// A panic in `f` is raised again here, as if `f` had run on this thread.
pub(in crate::registry) fn par_map<T: Sync, R: Send>(
    items: &[T],
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, NonZeroUsize::get)
        .min(PAR_MAX_THREADS);
    if threads < 2 || items.len() < PAR_MIN_ITEMS {
        return items.iter().map(f).collect();
    }
    let chunk = items.len().div_ceil(threads);
    let f = &f;
    std::thread::scope(|scope| {
        let parts: Vec<_> = items
            .chunks(chunk)
            .map(|part| scope.spawn(move || part.iter().map(f).collect::<Vec<R>>()))
            .collect();
        let mut out = Vec::with_capacity(items.len());
        for part in parts {
            match part.join() {
                Ok(rows) => out.extend(rows),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        out
    })
}

#[cfg(test)]
mod tests {
    use super::par_map;

    #[test]
    fn par_map_keeps_the_order_of_a_long_slice() {
        let items: Vec<usize> = (0..1_000).collect();
        let doubled = par_map(&items, |n| n * 2);
        assert_eq!(doubled, items.iter().map(|n| n * 2).collect::<Vec<_>>());
        assert!(par_map(&[] as &[usize], |n| *n).is_empty());
    }
}

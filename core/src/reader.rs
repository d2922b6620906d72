//! Reader identities for the model registry's reference counters (see `registry`).

// `ReaderId::exclusive` is an `unsafe fn`: its contract is what the registry's single-writer
// rows rely on. It contains no unsafe operation itself.
#![allow(unsafe_code)]

/// Exclusive reader rows: threads holding [`ReaderId::exclusive`] indices below this count
/// their references without atomic read-modify-writes. Each row costs one 64-byte counter
/// line per 16 slots of every registry chunk.
#[cfg(not(any(loom, feature = "compact-registry")))]
pub const EXCLUSIVE_ROWS: usize = 32;
/// Exclusive reader rows (none with the feature `compact-registry`: every reader shares the
/// one row, which is correct for any number of threads and right for a single-threaded host).
#[cfg(all(not(loom), feature = "compact-registry"))]
pub const EXCLUSIVE_ROWS: usize = 0;
/// Exclusive reader rows (reduced under loom to keep the state space small).
#[cfg(loom)]
pub const EXCLUSIVE_ROWS: usize = 2;

/// Shared reader rows, for every other thread.
#[cfg(not(any(loom, feature = "compact-registry")))]
pub const SHARED_ROWS: usize = 8;
/// Shared reader rows (one with the feature `compact-registry`).
#[cfg(all(not(loom), feature = "compact-registry"))]
pub const SHARED_ROWS: usize = 1;
/// Shared reader rows (reduced under loom).
#[cfg(loom)]
pub const SHARED_ROWS: usize = 1;

/// Which reader row a thread counts its references in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReaderId {
    pub(crate) row: usize,
    pub(crate) exclusive: bool,
}

impl ReaderId {
    /// A row shared with other threads: any value is correct (it is reduced modulo the number
    /// of shared rows); distinct values for concurrently running threads avoid contention.
    #[inline]
    // With the feature `compact-registry` there is one shared row (`% 1`).
    #[allow(clippy::modulo_one)]
    pub const fn shared(hint: usize) -> Self {
        Self {
            row: EXCLUSIVE_ROWS + hint % SHARED_ROWS,
            exclusive: false,
        }
    }

    /// Exclusive row `index` if it is below [`EXCLUSIVE_ROWS`], otherwise a shared row.
    ///
    /// # Safety
    ///
    /// For the whole life of the process, at most one thread may ever use a given `index`
    /// (with any registry). The registry then updates that row's counters with plain loads and
    /// stores; a second thread on the same row would lose updates and could free a value early.
    #[inline]
    // With the feature `compact-registry` there is no exclusive row (the comparison is false).
    #[allow(clippy::absurd_extreme_comparisons)]
    pub const unsafe fn exclusive(index: usize) -> Self {
        if index < EXCLUSIVE_ROWS {
            Self {
                row: index,
                exclusive: true,
            }
        } else {
            Self::shared(index)
        }
    }

    /// Whether this id counts without read-modify-writes.
    pub const fn is_exclusive(self) -> bool {
        self.exclusive
    }
}

/// A process-wide memory barrier: when it returns, every thread of the process that was
/// running has executed a full memory barrier (Linux `membarrier(PRIVATE_EXPEDITED)`), and the
/// caller has too.
///
/// With one, the registry's readers order their counter increment before their state load with
/// a compiler fence only, and the rare unloader pays for the ordering with this barrier instead
/// (the asymmetric Dekker pattern of userspace RCU).
#[derive(Clone, Copy, Debug)]
pub struct HeavyBarrier(fn());

impl HeavyBarrier {
    /// Wraps `barrier`.
    ///
    /// # Safety
    ///
    /// `barrier` must never fail and must, before returning, make every thread of the process
    /// that is running execute a full (SeqCst) memory barrier, and execute one itself; threads
    /// that are not running must be ordered by the context switch that stopped them. A barrier
    /// that does less lets the registry free a model a reader still uses.
    pub const unsafe fn new(barrier: fn()) -> Self {
        Self(barrier)
    }

    /// Runs the barrier.
    #[inline]
    pub fn run(self) {
        (self.0)()
    }
}

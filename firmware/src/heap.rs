//! The global heap: a fixed region managed by `embedded-alloc`'s first-fit allocator, with the
//! counters the example reports and an emergency reserve.
//!
//! * **Counters**: bytes live (requested sizes), their peak since [`CountingHeap::reset_peak`],
//!   allocations made.
//! * **Reserve**: Rust's `Vec`/`Box`/`String` abort on a refused allocation, and so would the
//!   core's load path and its dependencies (serde_json, miniz_oxide). So an allocation the main
//!   heap refuses — or the one [`CountingHeap::fail_at`] designates, to test every allocation
//!   of a load — is served from a small separate reserve instead, and recorded. The runtime
//!   asks ([`nrt_core::host::Platform::take_heap_failure`]) after each stage of a load and
//!   returns `NRT_RESOURCE`, freeing what the stage built. Only when the reserve is exhausted
//!   too does an allocation fail for real (the panic handler then exits with code 101).
//! * **Trial heaps** ([`CountingHeap::use_trial_heap`]): the same region again, as a fresh
//!   heap of a given size, to find the smallest heap the example passes in.

use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use embedded_alloc::LlffHeap;

/// Bytes of the emergency reserve.
pub const RESERVE_BYTES: usize = 48 * 1024;
/// Heaps the region can be re-initialised as (the main one, then trials).
pub const HEAPS: usize = 24;

struct Region<const N: usize>(UnsafeCell<MaybeUninit<[u8; N]>>);

// SAFETY: the bytes are only ever handed to one heap at a time (see `use_trial_heap`).
unsafe impl<const N: usize> Sync for Region<N> {}

impl<const N: usize> Region<N> {
    const fn new() -> Self {
        Self(UnsafeCell::new(MaybeUninit::uninit()))
    }
    fn range(&self) -> (usize, usize) {
        let start = self.0.get() as usize;
        (start, start + N)
    }
}

static MAIN: Region<{ crate::heap::MAIN_BYTES }> = Region::new();
static RESERVE: Region<RESERVE_BYTES> = Region::new();

/// Bytes of the main heap region (`NRT_FW_HEAP_BYTES` at build time).
pub const MAIN_BYTES: usize = include!(concat!(env!("OUT_DIR"), "/heap_bytes.rs"));

/// The global allocator.
pub struct CountingHeap {
    heaps: [LlffHeap; HEAPS],
    current: AtomicUsize,
    reserve: LlffHeap,
    live: AtomicUsize,
    peak: AtomicUsize,
    count: AtomicUsize,
    fail_at: AtomicUsize,
    failed: AtomicBool,
    reserve_live: AtomicUsize,
    reserve_peak: AtomicUsize,
    heap_size: AtomicUsize,
}

/// What [`CountingHeap::stats`] reports.
#[derive(Clone, Copy, Debug, defmt::Format)]
pub struct Stats {
    /// Bytes live (requested sizes, main heap and reserve).
    pub live: usize,
    /// Peak of `live` since the last reset.
    pub peak: usize,
    /// Allocations made so far.
    pub count: usize,
    /// Peak bytes of the reserve ever used.
    pub reserve_peak: usize,
}

impl CountingHeap {
    /// Not yet usable: call [`CountingHeap::init`] first.
    pub const fn new() -> Self {
        Self {
            heaps: [const { LlffHeap::empty() }; HEAPS],
            current: AtomicUsize::new(0),
            reserve: LlffHeap::empty(),
            live: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            count: AtomicUsize::new(0),
            fail_at: AtomicUsize::new(0),
            failed: AtomicBool::new(false),
            reserve_live: AtomicUsize::new(0),
            reserve_peak: AtomicUsize::new(0),
            heap_size: AtomicUsize::new(0),
        }
    }

    /// Sets up the main heap (all of its region) and the reserve. Call once, first thing.
    pub fn init(&self) {
        let (start, _) = MAIN.range();
        let (rstart, _) = RESERVE.range();
        // SAFETY: called once, before any allocation; the regions are static and used by
        // nothing else.
        unsafe {
            self.heaps[0].init(start, MAIN_BYTES);
            self.reserve.init(rstart, RESERVE_BYTES);
        }
        self.heap_size.store(MAIN_BYTES, Ordering::Relaxed);
    }

    /// Replaces the heap with a fresh one of `size` bytes over the start of the same region.
    /// Returns false (and changes nothing) if something is still allocated, `size` exceeds
    /// the region or every trial heap was used. The previous heap is never used again.
    pub fn use_trial_heap(&self, size: usize) -> bool {
        let next = self.current.load(Ordering::Relaxed) + 1;
        if self.live.load(Ordering::Relaxed) != 0
            || !(64..=MAIN_BYTES).contains(&size)
            || next >= HEAPS
        {
            return false;
        }
        let (start, _) = MAIN.range();
        // SAFETY: nothing is allocated from the current heap, which is abandoned; each heap
        // of the array is initialised at most once.
        unsafe { self.heaps[next].init(start, size) };
        self.current.store(next, Ordering::Relaxed);
        self.heap_size.store(size, Ordering::Relaxed);
        true
    }

    /// Size of the heap in use.
    pub fn heap_size(&self) -> usize {
        self.heap_size.load(Ordering::Relaxed)
    }

    /// The counters.
    pub fn stats(&self) -> Stats {
        Stats {
            live: self.live.load(Ordering::Relaxed),
            peak: self.peak.load(Ordering::Relaxed),
            count: self.count.load(Ordering::Relaxed),
            reserve_peak: self.reserve_peak.load(Ordering::Relaxed),
        }
    }

    /// Restarts the peak at the bytes live now.
    pub fn reset_peak(&self) {
        self.peak
            .store(self.live.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    /// Serves allocation number `n` (counted by [`Stats::count`]) from the reserve, as if the
    /// heap had refused it; 0 disarms.
    pub fn fail_at(&self, n: usize) {
        self.fail_at.store(n, Ordering::Relaxed);
    }

    /// Whether an allocation was refused since the last call (clears the record).
    pub fn take_failure(&self) -> bool {
        self.failed.swap(false, Ordering::Relaxed)
    }

    fn heap(&self) -> &LlffHeap {
        let i = self.current.load(Ordering::Relaxed).min(HEAPS - 1);
        &self.heaps[i]
    }

    fn in_reserve(ptr: *mut u8) -> bool {
        let (s, e) = RESERVE.range();
        (s..e).contains(&(ptr as usize))
    }

    fn add_live(&self, size: usize) {
        let live = self.live.fetch_add(size, Ordering::Relaxed) + size;
        self.peak.fetch_max(live, Ordering::Relaxed);
    }
}

impl Default for CountingHeap {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: every block comes from one of the `LlffHeap`s and goes back to the one whose region
// holds it (the reserve's range is disjoint from the main region).
unsafe impl GlobalAlloc for CountingHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let n = self.count.fetch_add(1, Ordering::Relaxed) + 1;
        let forced = self.fail_at.load(Ordering::Relaxed) == n;
        // SAFETY: forwarded with the caller's layout.
        let mut p = if forced {
            core::ptr::null_mut()
        } else {
            unsafe { self.heap().alloc(layout) }
        };
        if p.is_null() {
            self.failed.store(true, Ordering::Relaxed);
            // SAFETY: as above.
            p = unsafe { self.reserve.alloc(layout) };
            if !p.is_null() {
                let r = self
                    .reserve_live
                    .fetch_add(layout.size(), Ordering::Relaxed)
                    + layout.size();
                self.reserve_peak.fetch_max(r, Ordering::Relaxed);
            }
        }
        if !p.is_null() {
            self.add_live(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        self.live.fetch_sub(layout.size(), Ordering::Relaxed);
        if Self::in_reserve(ptr) {
            self.reserve_live
                .fetch_sub(layout.size(), Ordering::Relaxed);
            // SAFETY: the block came from the reserve with this layout.
            unsafe { self.reserve.dealloc(ptr, layout) }
        } else {
            // SAFETY: the block came from the current heap with this layout (a heap is
            // replaced only when nothing is allocated from it).
            unsafe { self.heap().dealloc(ptr, layout) }
        }
    }
}

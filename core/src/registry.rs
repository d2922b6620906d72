//! The model registry: a fixed-capacity slot table whose lookups write no shared cache line.
//!
//! # Protocol
//!
//! Each slot has a `state` word (EMPTY → RESERVED → LIVE → DEAD → RESERVED → EMPTY), the `id`
//! of the value it holds, and the value. References are counted per slot in **reader rows**:
//! a row is a run of cache lines holding one counter per slot.
//!
//! * An **exclusive** row belongs to one thread for the life of the process (a [`ReaderId`]
//!   built with the `unsafe` [`ReaderId::exclusive`] promises that). Its owner updates its
//!   counters with a plain load and store — no read-modify-write, no lock prefix — and no other
//!   thread writes the row, so resolving writes nothing any other thread writes.
//! * A **shared** row may be used by several threads ([`ReaderId::shared`], any number is
//!   correct): its counters are updated with atomic read-modify-writes.
//!
//! Nothing registry-global is written on the hot path.
//!
//! * **Resolve** (reader): `counter[row][slot] += 1`, a SeqCst fence, then load `state`; if it
//!   is LIVE and the slot's `id` equals the handle's, the reference is held; otherwise undo the
//!   increment and report a miss. The value is never touched on a miss.
//! * **Release**: `counter[row][slot] -= 1` (Release). A [`Ref`] is `!Send`, so the thread
//!   that incremented an exclusive counter is the one that decrements it.
//! * **Erase** (unloader, holding a probe reference): CAS `state` LIVE → DEAD.
//! * **Drain**: a SeqCst fence, then wait until the sum of the slot's counters over every row
//!   is 0 (Acquire loads); then read/drop the value and mark the slot EMPTY.
//!
//! **Invariant.** Once the erase is visible no new reference can be taken, and the value is not
//! freed until every reference taken before it is released. Proof sketch (a store-buffering /
//! Dekker pattern closed by the two SeqCst fences): the fences are totally ordered. If the
//! reader's fence comes after the unloader's, the reader's state load observes the erase (or
//! later) and backs out without touching the value. If it comes before, the unloader's counter
//! loads observe the reader's increment (or a later value of that counter, which still
//! includes it until the reader's own release), so the drain waits for the matching release;
//! the release is a Release store and the drain's loads acquire it, so everything the reader
//! did with the value happens before the value is freed. Counters may be transiently non-zero
//! because of readers backing out; that only delays the drain. A stale reader can never see
//! LIVE with a matching id again because ids are unique (never reused within a registry), which
//! is also what makes stale and forged handles harmless: the id is the handle's generation.
//!
//! Fences rather than SeqCst accesses close the pattern because loom models SeqCst accesses as
//! AcqRel but models SeqCst fences exactly, so the model checker verifies the very code that
//! runs. With a [`HeavyBarrier`] (Linux `membarrier`), the reader's fence becomes a compiler
//! fence and the drain runs the process-wide barrier instead: the asymmetric form of the same
//! pattern (userspace RCU's), which loom cannot model; the stress test exercises it.
//!
//! The protocol is model-checked with loom (`core/tests/loom_registry.rs`) and the unsafe code
//! is run under Miri.

#![allow(unsafe_code)]

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;
use core::mem::MaybeUninit;

use crate::sync::{AtomicU32, Ordering, UnsafeCell, compiler_fence, fence, spin_hint};

pub use crate::reader::{EXCLUSIVE_ROWS, HeavyBarrier, ReaderId, SHARED_ROWS};

const ROWS: usize = EXCLUSIVE_ROWS + SHARED_ROWS;

const EMPTY: u32 = 0;
const RESERVED: u32 = 1;
const LIVE: u32 = 2;
const DEAD: u32 = 3;

/// Counters per 64-byte line.
#[cfg(not(loom))]
const LANES: usize = 16;
#[cfg(loom)]
const LANES: usize = 2;

/// Refuse a reference when a counter reaches this (leaked guards), rather than wrap.
const COUNTER_LIMIT: u32 = u32::MAX / 2;

#[repr(align(64))]
struct CounterLine([AtomicU32; LANES]);

impl CounterLine {
    fn new() -> Self {
        Self(core::array::from_fn(|_| AtomicU32::new(0)))
    }
}

struct Slot<T> {
    state: AtomicU32,
    id: AtomicU32,
    value: UnsafeCell<MaybeUninit<T>>,
}

/// A handle to a registered value: the slot and the value's unique id (its generation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Handle {
    slot: u32,
    id: u32,
}

impl Handle {
    /// The value's id (monotone, never reused within a registry).
    pub const fn id(self) -> u32 {
        self.id
    }

    /// The slot index.
    pub const fn slot(self) -> u32 {
        self.slot
    }

    /// Packs the handle into 64 bits (id in the high half), for opaque C handles.
    pub const fn to_raw(self) -> u64 {
        ((self.id as u64) << 32) | self.slot as u64
    }

    /// Unpacks [`Handle::to_raw`]. Any value is accepted: a forged one simply never resolves.
    pub const fn from_raw(raw: u64) -> Self {
        Self {
            slot: raw as u32,
            id: (raw >> 32) as u32,
        }
    }
}

/// Why an insertion failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum InsertError {
    /// Every slot is in use.
    Full,
    /// The 32-bit id space is used up (ids are never reused).
    IdsExhausted,
}

/// A fixed-capacity registry of `T` values (see the module documentation for the protocol).
pub struct Registry<T> {
    slots: Box<[Slot<T>]>,
    counters: Box<[CounterLine]>,
    lines_per_row: usize,
    next_id: AtomicU32,
    heavy_barrier: Option<HeavyBarrier>,
}

// SAFETY: the registry hands out `&T` to several threads at once (`Sync` needs `T: Sync`) and
// moves `T` values in and out across threads (`Send` needs `T: Send`); all shared state besides
// the values is atomic.
unsafe impl<T: Send + Sync> Sync for Registry<T> {}
// SAFETY: as above; owning the registry owns the values.
unsafe impl<T: Send> Send for Registry<T> {}

impl<T> fmt::Debug for Registry<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("capacity", &self.capacity())
            .field("live", &self.live_handles().len())
            .finish_non_exhaustive()
    }
}

impl<T> Registry<T> {
    /// A registry of `capacity` slots. All memory is allocated here, once. Readers and drains
    /// order themselves with SeqCst fences.
    pub fn new(capacity: u32) -> Self {
        Self::with_heavy_barrier(capacity, None)
    }

    /// A registry whose drains use `heavy_barrier` (when given) so that readers need only a
    /// compiler fence. Under `--cfg loom` the barrier is ignored (loom cannot model it) and the
    /// symmetric fences are checked.
    pub fn with_heavy_barrier(capacity: u32, heavy_barrier: Option<HeavyBarrier>) -> Self {
        #[cfg(loom)]
        let heavy_barrier: Option<HeavyBarrier> = {
            let _ = heavy_barrier;
            None
        };
        let cap = capacity as usize;
        let lines_per_row = cap.div_ceil(LANES).max(1);
        let slots = (0..cap)
            .map(|_| Slot {
                state: AtomicU32::new(EMPTY),
                id: AtomicU32::new(0),
                value: UnsafeCell::new(MaybeUninit::uninit()),
            })
            .collect::<Vec<_>>()
            .into_boxed_slice();
        let counters = (0..ROWS * lines_per_row)
            .map(|_| CounterLine::new())
            .collect::<Vec<_>>()
            .into_boxed_slice();
        Self {
            slots,
            counters,
            lines_per_row,
            next_id: AtomicU32::new(1),
            heavy_barrier,
        }
    }

    /// Number of slots.
    pub fn capacity(&self) -> u32 {
        self.slots.len() as u32
    }

    /// Bytes the registry occupies (slots, counters and the header), fixed at construction.
    pub fn footprint_bytes(&self) -> usize {
        core::mem::size_of::<Self>()
            + core::mem::size_of_val(&*self.slots)
            + core::mem::size_of_val(&*self.counters)
    }

    fn counter(&self, row: usize, slot: usize) -> Option<&AtomicU32> {
        let line = row * self.lines_per_row + slot / LANES;
        self.counters.get(line)?.0.get(slot % LANES)
    }

    /// Sum of the slot's counters. The fence (or the heavy barrier) orders these loads after a
    /// preceding erase (the unloader's half of the protocol).
    fn references(&self, slot: usize) -> u32 {
        match self.heavy_barrier {
            Some(b) => b.run(),
            None => fence(Ordering::SeqCst),
        }
        (0..ROWS)
            .filter_map(|r| self.counter(r, slot))
            .map(|c| c.load(Ordering::Acquire))
            .fold(0u32, u32::wrapping_add)
    }

    /// Stores `value` in a free slot under a fresh id.
    pub fn insert(&self, value: T) -> Result<Handle, InsertError> {
        let Some((index, slot)) = self.slots.iter().enumerate().find(|(_, s)| {
            s.state
                .compare_exchange(EMPTY, RESERVED, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        }) else {
            return Err(InsertError::Full);
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        if id == 0 || id == u32::MAX {
            // Keep the counter pinned at the end so later inserts fail too.
            self.next_id.store(u32::MAX, Ordering::Relaxed);
            slot.state.store(EMPTY, Ordering::Release);
            return Err(InsertError::IdsExhausted);
        }
        // SAFETY: the slot is RESERVED by us: no reader dereferences a RESERVED slot and no other
        // writer can claim it, so we have exclusive access to the value cell.
        slot.value.with_mut(|p| unsafe { (*p).write(value) });
        slot.id.store(id, Ordering::Relaxed);
        // Publish: a reader that sees LIVE also sees the id and the value.
        slot.state.store(LIVE, Ordering::Release);
        Ok(Handle {
            slot: index as u32,
            id,
        })
    }

    /// Takes a reference to the value of `handle`, or `None` if it is not registered (never
    /// was, was erased, or the handle is stale or forged). `reader` is the calling thread's
    /// reader row.
    #[inline]
    pub fn resolve(&self, handle: Handle, reader: ReaderId) -> Option<Ref<'_, T>> {
        let index = handle.slot as usize;
        let slot = self.slots.get(index)?;
        let counter = self.counter(reader.row, index)?;
        if reader.exclusive {
            // Only this thread writes this counter: a plain load and store suffice.
            let v = counter.load(Ordering::Relaxed);
            if v >= COUNTER_LIMIT {
                return None;
            }
            counter.store(v + 1, Ordering::Relaxed);
        } else if counter.fetch_add(1, Ordering::Relaxed) >= COUNTER_LIMIT {
            counter.fetch_sub(1, Ordering::Release);
            return None;
        }
        let r = Ref {
            slot,
            counter,
            exclusive: reader.exclusive,
            handle,
            registry: self,
            _not_send: core::marker::PhantomData,
        };
        if self.heavy_barrier.is_some() {
            // The drain's heavy barrier orders the increment before the state load for us.
            compiler_fence(Ordering::SeqCst);
        } else {
            fence(Ordering::SeqCst);
        }
        if slot.state.load(Ordering::Acquire) == LIVE
            && slot.id.load(Ordering::Relaxed) == handle.id
        {
            return Some(r);
        }
        // Dropping `r` undoes the increment.
        None
    }

    /// Handles of every LIVE value (a snapshot).
    pub fn live_handles(&self) -> Vec<Handle> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.state.load(Ordering::Acquire) == LIVE)
            .map(|(i, s)| Handle {
                slot: i as u32,
                id: s.id.load(Ordering::Relaxed),
            })
            .collect()
    }
}

impl<T> Drop for Registry<T> {
    fn drop(&mut self) {
        for slot in self.slots.iter() {
            let state = slot.state.load(Ordering::Acquire);
            if state == LIVE || state == DEAD {
                // SAFETY: `&mut self`: no reference can be outstanding (a `Ref` borrows the
                // registry), and LIVE/DEAD slots hold an initialised value.
                slot.value.with_mut(|p| unsafe { (*p).assume_init_drop() });
            }
        }
    }
}

/// A held reference to a registered value; dropping it releases the reference. Not `Send`:
/// the thread that took it releases it (exclusive rows have a single writer).
pub struct Ref<'a, T> {
    registry: &'a Registry<T>,
    slot: &'a Slot<T>,
    counter: &'a AtomicU32,
    exclusive: bool,
    handle: Handle,
    _not_send: core::marker::PhantomData<*const ()>,
}

// SAFETY: sharing `&Ref` only gives `&T` (needs `T: Sync`); only the owner drops it.
unsafe impl<T: Sync> Sync for Ref<'_, T> {}

impl<T> Ref<'_, T> {
    /// The handle this reference was resolved from.
    pub fn handle(&self) -> Handle {
        self.handle
    }

    /// References to this slot currently held by everyone (including this one). Diagnostic only:
    /// the value may change as soon as it is read.
    pub fn references(&self) -> u32 {
        self.registry.references(self.handle.slot as usize)
    }
}

impl<'a, T> Ref<'a, T> {
    /// Erases the value: from now on no new reference can be taken. The probe reference `self`
    /// is released; the returned [`Erased`] waits for the others and then frees the value. Fails
    /// (returning `self`) if someone else erased it first.
    pub fn erase(self) -> Result<Erased<'a, T>, Self> {
        match self
            .slot
            .state
            .compare_exchange(LIVE, DEAD, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => {
                let erased = Erased {
                    registry: self.registry,
                    slot: self.slot,
                    handle: self.handle,
                };
                drop(self);
                Ok(erased)
            }
            Err(_) => Err(self),
        }
    }
}

impl<T> core::ops::Deref for Ref<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: we hold a counted reference taken while the slot was LIVE with our id; by the
        // protocol the value stays initialised and is not freed or replaced until we release it.
        self.slot.value.with(|p| unsafe { (*p).assume_init_ref() })
    }
}

impl<T> Drop for Ref<'_, T> {
    #[inline]
    fn drop(&mut self) {
        if self.exclusive {
            // Single writer (this thread): plain load and store, Release for the drain.
            let v = self.counter.load(Ordering::Relaxed);
            self.counter.store(v.wrapping_sub(1), Ordering::Release);
        } else {
            self.counter.fetch_sub(1, Ordering::Release);
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for Ref<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ref")
            .field("handle", &self.handle)
            .field("value", &**self)
            .finish()
    }
}

/// An erased value: unreachable by new lookups, waiting for earlier references to drain.
///
/// Dropping it without [`Erased::wait`] would leak the slot, so it drains and frees on drop.
pub struct Erased<'a, T> {
    registry: &'a Registry<T>,
    slot: &'a Slot<T>,
    handle: Handle,
}

impl<T> fmt::Debug for Erased<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Erased")
            .field("handle", &self.handle)
            .finish_non_exhaustive()
    }
}

impl<'a, T> Erased<'a, T> {
    /// The erased handle.
    pub fn handle(&self) -> Handle {
        self.handle
    }

    /// References still held.
    pub fn references(&self) -> u32 {
        self.registry.references(self.handle.slot as usize)
    }

    /// Whether every reference has been released.
    pub fn is_drained(&self) -> bool {
        self.references() == 0
    }

    /// Waits, without a timeout, until every reference is released, calling `relax(n)` after
    /// the `n`-th unsuccessful check (n = 1, 2, ...). Returns exclusive access to the value.
    pub fn wait(self, mut relax: impl FnMut(u64)) -> Drained<'a, T> {
        let mut n = 0u64;
        while !self.is_drained() {
            n = n.wrapping_add(1);
            relax(n);
            spin_hint();
        }
        let drained = Drained {
            slot: self.slot,
            handle: self.handle,
        };
        core::mem::forget(self);
        drained
    }
}

impl<T> Drop for Erased<'_, T> {
    /// An erased value is never leaked: dropping the waiter drains and frees it.
    fn drop(&mut self) {
        while !self.is_drained() {
            spin_hint();
        }
        // SAFETY: erased (DEAD) and drained just above.
        drop(unsafe { take_slot(self.slot) });
    }
}

/// Moves the value out of an erased, drained slot and frees the slot for reuse.
///
/// # Safety
///
/// The slot must be DEAD (so its value is initialised) and drained (no reference held; none can
/// be taken since it is not LIVE), and this must be called once per erase.
unsafe fn take_slot<T>(slot: &Slot<T>) -> T {
    slot.state.store(RESERVED, Ordering::Relaxed);
    // SAFETY: per the contract we own the initialised value; reading it out leaves the cell
    // logically uninitialised, which the EMPTY state below records.
    let value = slot.value.with_mut(|p| unsafe { (*p).assume_init_read() });
    slot.id.store(0, Ordering::Relaxed);
    slot.state.store(EMPTY, Ordering::Release);
    value
}

/// Exclusive access to an erased, drained value, before it is freed.
pub struct Drained<'a, T> {
    slot: &'a Slot<T>,
    handle: Handle,
}

impl<T> fmt::Debug for Drained<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Drained")
            .field("handle", &self.handle)
            .finish_non_exhaustive()
    }
}

impl<T> Drained<'_, T> {
    /// The handle the value had.
    pub fn handle(&self) -> Handle {
        self.handle
    }

    /// Moves the value out and frees the slot for reuse.
    pub fn take(self) -> T {
        // SAFETY: a `Drained` exists only for an erased, drained slot, and `forget` below makes
        // this the only take.
        let value = unsafe { take_slot(self.slot) };
        core::mem::forget(self);
        value
    }
}

impl<T> core::ops::Deref for Drained<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: erased and drained: exclusive access to an initialised value.
        self.slot.value.with(|p| unsafe { (*p).assume_init_ref() })
    }
}

impl<T> Drop for Drained<'_, T> {
    fn drop(&mut self) {
        // SAFETY: as in `take`; `drop` runs at most once and only when `take` did not.
        drop(unsafe { take_slot(self.slot) });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use alloc::string::{String, ToString};
    use alloc::sync::Arc;
    use core::sync::atomic::{AtomicBool, AtomicUsize};

    #[test]
    fn insert_resolve_release() {
        let r = Registry::new(4);
        let h = r.insert(String::from("a")).unwrap();
        assert_eq!(h.id(), 1);
        let g = r.resolve(h, ReaderId::shared(0)).unwrap();
        assert_eq!(&*g, "a");
        assert_eq!(g.references(), 1);
        let g2 = r.resolve(h, ReaderId::shared(5)).unwrap();
        assert_eq!(g2.references(), 2);
        drop(g);
        drop(g2);
        assert_eq!(r.references(h.slot() as usize), 0);
    }

    #[test]
    fn ids_are_monotone_and_never_reused_across_erase_and_insert() {
        let r = Registry::new(1);
        let mut last = 0;
        for i in 0..10 {
            let h = r.insert(i).unwrap();
            assert!(h.id() > last);
            assert_eq!(h.slot(), 0);
            last = h.id();
            let v = r
                .resolve(h, ReaderId::shared(0))
                .unwrap()
                .erase()
                .unwrap()
                .wait(|_| {})
                .take();
            assert_eq!(v, i);
            assert!(
                r.resolve(h, ReaderId::shared(0)).is_none(),
                "stale handle must miss"
            );
        }
    }

    #[test]
    fn full_registry_refuses_inserts() {
        let r = Registry::new(2);
        r.insert(1).unwrap();
        let h = r.insert(2).unwrap();
        assert_eq!(r.insert(3), Err(InsertError::Full));
        drop(r.resolve(h, ReaderId::shared(0)).unwrap().erase().unwrap());
        assert!(r.insert(4).is_ok());
    }

    #[test]
    fn zero_capacity_is_always_full() {
        let r = Registry::<u8>::new(0);
        assert_eq!(r.insert(1), Err(InsertError::Full));
        assert!(
            r.resolve(Handle::from_raw(0), ReaderId::shared(0))
                .is_none()
        );
    }

    #[test]
    fn stale_and_forged_handles_miss() {
        let r = Registry::new(2);
        let h = r.insert(7u64).unwrap();
        let forged = [
            Handle {
                slot: h.slot,
                id: h.id + 1,
            },
            Handle { slot: 1, id: h.id },
            Handle { slot: 99, id: h.id },
            Handle {
                slot: u32::MAX,
                id: u32::MAX,
            },
            Handle::from_raw(0),
        ];
        for f in forged {
            assert!(r.resolve(f, ReaderId::shared(3)).is_none(), "{f:?}");
        }
        assert_eq!(Handle::from_raw(h.to_raw()), h);
        assert_eq!(r.references(0), 0, "misses leave no reference behind");
    }

    #[test]
    fn erase_twice_fails_the_second_time() {
        let r = Registry::new(1);
        let h = r.insert(1).unwrap();
        let a = r.resolve(h, ReaderId::shared(0)).unwrap();
        let b = r.resolve(h, ReaderId::shared(1)).unwrap();
        let erased = a.erase().unwrap();
        let b = b.erase().unwrap_err();
        assert_eq!(
            *b, 1,
            "a held reference still reads the value after the erase"
        );
        assert!(!erased.is_drained());
        drop(b);
        assert!(erased.is_drained());
        assert_eq!(erased.wait(|_| {}).take(), 1);
    }

    #[test]
    fn erased_value_waits_for_references_and_is_not_freed_early() {
        let r = Arc::new(Registry::new(1));
        let h = r.insert(String::from("model")).unwrap();
        let held = Arc::new(AtomicBool::new(true));
        let reader = {
            let (r, held) = (Arc::clone(&r), Arc::clone(&held));
            std::thread::spawn(move || {
                let g = r.resolve(h, ReaderId::shared(1)).unwrap();
                while held.load(Ordering::SeqCst) {
                    assert_eq!(&*g, "model");
                    std::thread::yield_now();
                }
                g.len()
            })
        };
        while r.references(0) == 0 {
            std::thread::yield_now();
        }
        let erased = r.resolve(h, ReaderId::shared(0)).unwrap().erase().unwrap();
        assert!(
            r.resolve(h, ReaderId::shared(2)).is_none(),
            "misses after the erase"
        );
        let relaxed = AtomicUsize::new(0);
        let release = Arc::clone(&held);
        let drained = erased.wait(|n| {
            relaxed.store(n as usize, Ordering::SeqCst);
            if n == 3 {
                release.store(false, Ordering::SeqCst);
            }
        });
        assert!(relaxed.load(Ordering::SeqCst) >= 3);
        assert_eq!(&*drained, "model");
        assert_eq!(drained.take(), "model");
        assert_eq!(reader.join().unwrap(), 5);
    }

    #[test]
    fn registry_drop_frees_live_and_erased_values() {
        let v = Arc::new(());
        {
            let r = Registry::new(3);
            r.insert(Arc::clone(&v)).unwrap();
            let h = r.insert(Arc::clone(&v)).unwrap();
            let erased = r.resolve(h, ReaderId::shared(0)).unwrap().erase().unwrap();
            core::mem::forget(erased); // DEAD but never taken: the registry's drop frees it
            assert_eq!(Arc::strong_count(&v), 3);
        }
        assert_eq!(Arc::strong_count(&v), 1);
    }

    #[test]
    fn live_handles_snapshot() {
        let r = Registry::new(4);
        let a = r.insert("a".to_string()).unwrap();
        let b = r.insert("b".to_string()).unwrap();
        drop(r.resolve(a, ReaderId::shared(0)).unwrap().erase().unwrap());
        assert_eq!(r.live_handles(), [b]);
    }

    #[test]
    fn exclusive_and_shared_rows_count_together() {
        let r = Registry::new(2);
        let h = r.insert(3u8).unwrap();
        // SAFETY: this test thread is the only user of exclusive row 0 in this registry's life
        // (no other test uses this registry).
        let ex = unsafe { ReaderId::exclusive(0) };
        assert!(ex.is_exclusive());
        // SAFETY: out of range: becomes shared.
        assert!(!unsafe { ReaderId::exclusive(EXCLUSIVE_ROWS) }.is_exclusive());
        let a = r.resolve(h, ex).unwrap();
        let b = r.resolve(h, ex).unwrap();
        let c = r.resolve(h, ReaderId::shared(1)).unwrap();
        assert_eq!(a.references(), 3);
        drop(b);
        assert_eq!(c.references(), 2);
        let erased = c.erase().unwrap();
        assert!(r.resolve(h, ex).is_none());
        assert_eq!(erased.references(), 1);
        drop(a);
        assert_eq!(erased.wait(|_| {}).take(), 3);
    }

    #[test]
    fn counters_spread_over_shards_and_sum() {
        let r = Registry::new(40);
        let hs: alloc::vec::Vec<_> = (0..40).map(|i| r.insert(i).unwrap()).collect();
        let refs: alloc::vec::Vec<_> = hs
            .iter()
            .enumerate()
            .map(|(i, h)| r.resolve(*h, ReaderId::shared(i * 7)).unwrap())
            .collect();
        for (i, g) in refs.iter().enumerate() {
            assert_eq!(**g, i);
            assert_eq!(g.references(), 1);
        }
        assert!(r.footprint_bytes() >= ROWS * 3 * 64);
    }
}

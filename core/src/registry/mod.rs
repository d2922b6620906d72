//! The model registry: a growable slot table whose lookups write no shared cache line.
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
//! # Growth
//!
//! The slots live in **chunks** of [`CHUNK_SLOTS`] slots (fewer for a registry whose upper
//! bound is smaller), each with its own reader counters. The registry is created with an upper
//! bound (its [`Registry::capacity`]) and allocates only a table of one chunk pointer per
//! chunk, all NULL. An insert that finds every allocated slot in use allocates the next chunk
//! and publishes it with a compare-and-swap on its table entry (Release; two racing growers
//! each allocate and the loser frees its own). Chunks never move and are freed only when the
//! registry drops, so a [`Ref`] — a plain reference into a chunk — stays valid, and a reader
//! reaches its slot with one Acquire load of the table entry (NULL: the handle misses). Memory
//! is therefore bounded by the upper bound, allocated a chunk at a time, never on the lookup
//! path, and never returned before the registry drops.
//!
//! The protocol is model-checked with loom (`core/tests/loom_registry.rs`) and the unsafe code
//! is run under Miri.

#![allow(unsafe_code)]

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;
use core::mem::MaybeUninit;
use core::ptr;

#[cfg(target_has_atomic = "64")]
use crate::sync::AtomicU64;
use crate::sync::{
    AtomicPtr, AtomicU32, AtomicUsize, Ordering, UnsafeCell, compiler_fence, fence, spin_hint,
};

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

/// Slots per chunk: the registry grows by this many slots (with their reader counters) at a
/// time. Under loom, two, so that the model checks cover a registry of several chunks; under
/// Miri, eight, so that the growth tests cover several chunks without interpreting hundreds of
/// thousands of slot probes.
#[cfg(not(any(loom, miri)))]
pub const CHUNK_SLOTS: u32 = 256;
/// Slots per chunk (reduced under loom).
#[cfg(loom)]
pub const CHUNK_SLOTS: u32 = 2;
/// Slots per chunk (reduced under Miri).
#[cfg(all(miri, not(loom)))]
pub const CHUNK_SLOTS: u32 = 8;

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
    /// The handle ([`Handle::to_raw`]) while the slot is LIVE, 0 otherwise: set after the
    /// state becomes LIVE, cleared before it leaves LIVE, so reading the handle here means
    /// the value was LIVE at that instant ([`Registry::is_live`] in one load and one
    /// comparison). Handles are never 0 (ids start at 1).
    #[cfg(target_has_atomic = "64")]
    live_key: AtomicU64,
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

/// A registry of `T` values that grows on demand up to a fixed upper bound (see the module
/// documentation for the protocol and its growth).
pub struct Registry<T> {
    /// One pointer per chunk, NULL until the chunk is allocated; never shrinks, and a chunk,
    /// once published, stays at its address until the registry drops.
    chunks: Box<[AtomicPtr<Chunk<T>>]>,
    /// One pointer per chunk to its first slot, stored by the thread that published the chunk
    /// right after publishing it: [`Registry::is_live`]'s way to a slot, one dependent load
    /// shorter than through the chunk. NULL until stored; lookups then go through `chunks`.
    slot_ptrs: Box<[AtomicPtr<Slot<T>>]>,
    /// `slot_ptrs[0]` again, inside the registry itself: most processes hold fewer values than
    /// a chunk, and reaching the first chunk's slots then takes one load from the registry
    /// rather than two.
    first_slots: AtomicPtr<Slot<T>>,
    /// How many slots `first_slots` reaches: 0 until the first chunk is published (so a
    /// lookup needs one comparison, not a NULL test as well), then `chunk_len`. Stored after
    /// `first_slots` (Release) and read before it (Acquire).
    first_len: AtomicUsize,
    /// Slots per chunk (`1 << chunk_shift`).
    chunk_len: usize,
    /// Slots per chunk, as a power of two.
    chunk_shift: u32,
    /// Upper bound on the number of slots.
    capacity: u32,
    /// Counter lines per reader row within one chunk.
    lines_per_row: usize,
    next_id: AtomicU32,
    heavy_barrier: Option<HeavyBarrier>,
}

/// A run of slots and their reader counters, allocated in one piece when the registry grows.
struct Chunk<T> {
    slots: Box<[Slot<T>]>,
    counters: Box<[CounterLine]>,
}

impl<T> Chunk<T> {
    fn new(slots: usize, lines_per_row: usize) -> Self {
        Self {
            slots: (0..slots)
                .map(|_| Slot {
                    state: AtomicU32::new(EMPTY),
                    id: AtomicU32::new(0),
                    #[cfg(target_has_atomic = "64")]
                    live_key: AtomicU64::new(0),
                    value: UnsafeCell::new(MaybeUninit::uninit()),
                })
                .collect::<Vec<_>>()
                .into_boxed_slice(),
            counters: (0..ROWS * lines_per_row)
                .map(|_| CounterLine::new())
                .collect::<Vec<_>>()
                .into_boxed_slice(),
        }
    }

    #[inline]
    fn counter(&self, lines_per_row: usize, row: usize, local: usize) -> Option<&AtomicU32> {
        let line = row * lines_per_row + local / LANES;
        self.counters.get(line)?.0.get(local % LANES)
    }

    fn bytes(&self) -> usize {
        core::mem::size_of::<Self>()
            + core::mem::size_of_val(&*self.slots)
            + core::mem::size_of_val(&*self.counters)
    }
}

// SAFETY: the registry hands out `&T` to several threads at once (`Sync` needs `T: Sync`) and
// moves `T` values in and out across threads (`Send` needs `T: Send`); all shared state besides
// the values is atomic, and chunks are owned by the registry.
unsafe impl<T: Send + Sync> Sync for Registry<T> {}
// SAFETY: as above; owning the registry owns the chunks and the values.
unsafe impl<T: Send> Send for Registry<T> {}

impl<T> fmt::Debug for Registry<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("capacity", &self.capacity())
            .field("allocated", &self.allocated_slots())
            .field("live", &self.live_handles().len())
            .finish_non_exhaustive()
    }
}

impl<T> Registry<T> {
    /// A registry of at most `capacity` slots. Only the chunk table (one pointer per
    /// [`CHUNK_SLOTS`] slots) is allocated here; slots and their counters are allocated a chunk
    /// at a time when an insert finds every allocated slot in use. Readers and drains order
    /// themselves with SeqCst fences.
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
        // Small registries get one chunk of exactly their (rounded-up) size.
        let chunk_slots = capacity.max(1).next_power_of_two().min(CHUNK_SLOTS);
        let chunk_shift = chunk_slots.trailing_zeros();
        let n_chunks = (capacity as usize).div_ceil(chunk_slots as usize);
        Self {
            chunks: (0..n_chunks)
                .map(|_| AtomicPtr::new(ptr::null_mut()))
                .collect::<Vec<_>>()
                .into_boxed_slice(),
            slot_ptrs: (0..n_chunks)
                .map(|_| AtomicPtr::new(ptr::null_mut()))
                .collect::<Vec<_>>()
                .into_boxed_slice(),
            first_slots: AtomicPtr::new(ptr::null_mut()),
            first_len: AtomicUsize::new(0),
            chunk_len: 1 << chunk_shift,
            chunk_shift,
            capacity,
            lines_per_row: (chunk_slots as usize).div_ceil(LANES),
            next_id: AtomicU32::new(1),
            heavy_barrier,
        }
    }

    /// The upper bound on the number of values held at once.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Slots allocated so far (a multiple of the chunk size, at most [`Registry::capacity`]
    /// rounded up to a chunk).
    pub fn allocated_slots(&self) -> u32 {
        self.chunks
            .iter()
            .filter(|c| !c.load(Ordering::Acquire).is_null())
            .count() as u32
            * (1 << self.chunk_shift)
    }

    /// Bytes the registry occupies now: the header, the chunk table and the chunks allocated
    /// so far.
    pub fn footprint_bytes(&self) -> usize {
        core::mem::size_of::<Self>()
            + core::mem::size_of_val(&*self.chunks)
            + core::mem::size_of_val(&*self.slot_ptrs)
            + self.chunk_list().map(|(_, c)| c.bytes()).sum::<usize>()
    }

    /// The chunk of slot `index`, if allocated.
    #[inline]
    fn chunk(&self, index: usize) -> Option<&Chunk<T>> {
        let p = self
            .chunks
            .get(index >> self.chunk_shift)?
            .load(Ordering::Acquire);
        // SAFETY: a non-NULL entry points to a chunk published (Release, after its
        // construction) by `grow` and freed only by `Drop`, which has `&mut self`.
        unsafe { p.as_ref() }
    }

    /// The allocated chunks with the index of their first slot.
    fn chunk_list(&self) -> impl Iterator<Item = (usize, &Chunk<T>)> {
        (0..self.chunks.len()).filter_map(move |i| {
            let first = i << self.chunk_shift;
            self.chunk(first).map(|c| (first, c))
        })
    }

    /// The chunk at table position `i`, allocating and publishing it if it is not there yet.
    /// Two threads growing at once allocate one chunk each; the loser frees its own.
    fn chunk_or_grow(&self, i: usize) -> Option<&Chunk<T>> {
        let entry = self.chunks.get(i)?;
        let p = entry.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: as in `chunk`.
            return unsafe { p.as_ref() };
        }
        let fresh = Box::into_raw(Box::new(Chunk::new(
            1 << self.chunk_shift,
            self.lines_per_row,
        )));
        match entry.compare_exchange(ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {
                // SAFETY: we just published our own allocation; it lives until `Drop`.
                let chunk = unsafe { fresh.as_ref() }?;
                let first = chunk.slots.as_ptr().cast_mut();
                if let Some(shortcut) = self.slot_ptrs.get(i) {
                    shortcut.store(first, Ordering::Release);
                }
                if i == 0 {
                    self.first_slots.store(first, Ordering::Release);
                    self.first_len.store(self.chunk_len, Ordering::Release);
                }
                Some(chunk)
            }
            Err(winner) => {
                // SAFETY: `fresh` was never published: we still own it.
                drop(unsafe { Box::from_raw(fresh) });
                // SAFETY: as in `chunk`.
                unsafe { winner.as_ref() }
            }
        }
    }

    /// Sum of the slot's counters. The fence (or the heavy barrier) orders these loads after a
    /// preceding erase (the unloader's half of the protocol).
    fn references(&self, index: usize) -> u32 {
        match self.heavy_barrier {
            Some(b) => b.run(),
            None => fence(Ordering::SeqCst),
        }
        let Some(chunk) = self.chunk(index) else {
            return 0;
        };
        let local = index & ((1 << self.chunk_shift) - 1);
        (0..ROWS)
            .filter_map(|r| chunk.counter(self.lines_per_row, r, local))
            .map(|c| c.load(Ordering::Acquire))
            .fold(0u32, u32::wrapping_add)
    }

    /// Stores `value` in a free slot under a fresh id, allocating a chunk when every allocated
    /// slot is in use.
    pub fn insert(&self, value: T) -> Result<Handle, InsertError> {
        let found = (0..self.chunks.len()).find_map(|i| {
            let chunk = self.chunk_or_grow(i)?;
            let first = i << self.chunk_shift;
            chunk.slots.iter().enumerate().find_map(|(local, s)| {
                let index = first + local;
                (index < self.capacity as usize
                    && s.state.load(Ordering::Relaxed) == EMPTY
                    && s.state
                        .compare_exchange(EMPTY, RESERVED, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok())
                .then_some((index, s))
            })
        });
        let Some((index, slot)) = found else {
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
        let handle = Handle {
            slot: index as u32,
            id,
        };
        #[cfg(target_has_atomic = "64")]
        slot.live_key.store(handle.to_raw(), Ordering::Release);
        Ok(handle)
    }

    /// Takes a reference to the value of `handle`, or `None` if it is not registered (never
    /// was, was erased, or the handle is stale or forged). `reader` is the calling thread's
    /// reader row.
    #[inline]
    pub fn resolve(&self, handle: Handle, reader: ReaderId) -> Option<Ref<'_, T>> {
        let index = handle.slot as usize;
        let chunk = self.chunk(index)?;
        let local = index & ((1 << self.chunk_shift) - 1);
        let slot = chunk.slots.get(local)?;
        let counter = chunk.counter(self.lines_per_row, reader.row, local)?;
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

    /// Whether `handle` names a LIVE value at the moment of the call: two loads, no reference
    /// taken, nothing written. The value may be erased right after, so this answers only
    /// questions that do not read the value (the C library's `nrt_get_model_nc_count`, whose
    /// answer is the session's logical-core size once the model exists). Stale and forged
    /// handles are not live.
    #[inline]
    pub fn is_live(&self, handle: Handle) -> bool {
        let index = handle.slot as usize;
        if index < self.first_len.load(Ordering::Acquire) {
            // The common case, straight through: a slot of the first chunk.
            // A non-zero `first_len` was stored after `first_slots` (Release, read Acquire).
            let first = self.first_slots.load(Ordering::Relaxed);
            // SAFETY: the first chunk is published (`first_len` is non-zero), lives until
            // `Drop` (`&mut self`), and `index` is below its `chunk_len` slots.
            let slot = unsafe { &*first.add(index) };
            return Self::slot_is(slot, handle);
        }
        self.is_live_beyond_first_chunk(handle)
    }

    /// [`Registry::is_live`] for a slot outside the first chunk (or before it exists).
    #[inline]
    fn is_live_beyond_first_chunk(&self, handle: Handle) -> bool {
        self.slot(handle.slot as usize)
            .is_some_and(|slot| Self::slot_is(slot, handle))
    }

    /// Whether `slot` holds the LIVE value `handle` names.
    #[inline(always)]
    fn slot_is(slot: &Slot<T>, handle: Handle) -> bool {
        #[cfg(target_has_atomic = "64")]
        return slot.live_key.load(Ordering::Acquire) == handle.to_raw();
        #[cfg(not(target_has_atomic = "64"))]
        return slot.state.load(Ordering::Acquire) == LIVE
            && slot.id.load(Ordering::Relaxed) == handle.id;
    }

    /// Slot `index`, if its chunk is allocated: through the chunk's slot pointer when it is
    /// stored, else through the chunk.
    #[inline]
    fn slot(&self, index: usize) -> Option<&Slot<T>> {
        if index < self.first_len.load(Ordering::Acquire) {
            // A non-zero `first_len` was stored after `first_slots` (Release, read Acquire).
            let first = self.first_slots.load(Ordering::Relaxed);
            // SAFETY: as below, for the first chunk: it is published (`first_len` is non-zero)
            // and `index` is below its `chunk_len` slots.
            return Some(unsafe { &*first.add(index) });
        }
        let local = index & ((1 << self.chunk_shift) - 1);
        let chunk = index >> self.chunk_shift;
        let first = if chunk == 0 {
            self.first_slots.load(Ordering::Acquire)
        } else {
            self.slot_ptrs.get(chunk)?.load(Ordering::Acquire)
        };
        if !first.is_null() {
            // SAFETY: a non-NULL entry points to the first of the `1 << chunk_shift` slots of
            // a chunk that was published before it was stored (Release, read Acquire) and is
            // freed only by `Drop` (`&mut self`); `local` is below `1 << chunk_shift`.
            return Some(unsafe { &*first.add(local) });
        }
        self.chunk(index)?.slots.get(local)
    }

    /// Handles of every LIVE value (a snapshot).
    pub fn live_handles(&self) -> Vec<Handle> {
        self.chunk_list()
            .flat_map(|(first, c)| {
                c.slots
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.state.load(Ordering::Acquire) == LIVE)
                    .map(move |(local, s)| Handle {
                        slot: (first + local) as u32,
                        id: s.id.load(Ordering::Relaxed),
                    })
            })
            .collect()
    }
}

impl<T> Drop for Registry<T> {
    fn drop(&mut self) {
        for entry in self.chunks.iter() {
            let p = entry.load(Ordering::Acquire);
            if p.is_null() {
                continue;
            }
            // SAFETY: `&mut self`: no reference can be outstanding (a `Ref` borrows the
            // registry); the chunk was allocated by `chunk_or_grow` with `Box::into_raw` and is
            // freed only here.
            let chunk = unsafe { Box::from_raw(p) };
            for slot in chunk.slots.iter() {
                let state = slot.state.load(Ordering::Acquire);
                if state == LIVE || state == DEAD {
                    // SAFETY: LIVE/DEAD slots hold an initialised value, dropped once here.
                    slot.value.with_mut(|p| unsafe { (*p).assume_init_drop() });
                }
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
        // The key goes before the state leaves LIVE (see `Slot::live_key`). Clearing it when
        // the exchange below fails is harmless: the state was not LIVE, so neither was the key.
        #[cfg(target_has_atomic = "64")]
        self.slot.live_key.store(0, Ordering::Release);
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
mod tests;

//! Unit tests of the registry protocol and its growth.

use super::*;
use alloc::string::{String, ToString};
use alloc::sync::Arc;
use alloc::vec;
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
        assert!(!r.is_live(f), "{f:?}");
    }
    assert!(r.is_live(h));
    assert_eq!(Handle::from_raw(h.to_raw()), h);
    assert_eq!(r.references(0), 0, "misses leave no reference behind");
}

#[test]
fn is_live_follows_insert_erase_and_reuse() {
    let r = Registry::new(1);
    let h = r.insert(1u8).unwrap();
    assert!(r.is_live(h));
    let g = r.resolve(h, ReaderId::shared(0)).unwrap();
    let erased = g.erase().ok().unwrap();
    // Erased: no longer live, although the value is not drained yet.
    assert!(!r.is_live(h));
    assert_eq!(erased.wait(|_| {}).take(), 1);
    assert!(!r.is_live(h));
    // The slot reused under a new id: the old handle stays dead, the new one is live.
    let h2 = r.insert(2u8).unwrap();
    assert_eq!(h2.slot(), h.slot());
    assert!(!r.is_live(h));
    assert!(r.is_live(h2));
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
    // No exclusive row with the feature `compact-registry`: the id falls back to the shared one.
    assert_eq!(ex.is_exclusive(), EXCLUSIVE_ROWS != 0);
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

#[test]
fn grows_a_chunk_at_a_time_up_to_the_bound() {
    let cap = 3 * CHUNK_SLOTS + 5;
    let r = Registry::new(cap);
    assert_eq!(
        r.allocated_slots(),
        0,
        "nothing but the table at construction"
    );
    let empty = r.footprint_bytes();
    let first = r.insert(0u32).unwrap();
    assert_eq!(r.allocated_slots(), CHUNK_SLOTS);
    assert!(r.footprint_bytes() > empty);
    // A reference taken before the registry grows stays valid while it grows (chunks never
    // move).
    let held = r.resolve(first, ReaderId::shared(0)).unwrap();
    let mut handles = vec![first];
    for i in 1..cap {
        handles.push(r.insert(i).unwrap());
    }
    assert_eq!(*held, 0);
    assert_eq!(r.allocated_slots(), 4 * CHUNK_SLOTS);
    assert_eq!(r.insert(u32::MAX), Err(InsertError::Full));
    let slots: std::collections::BTreeSet<u32> = handles.iter().map(|h| h.slot()).collect();
    assert_eq!(
        slots,
        (0..cap).collect(),
        "every slot below the bound, once"
    );
    for (i, h) in handles.iter().enumerate() {
        assert_eq!(*r.resolve(*h, ReaderId::shared(i)).unwrap(), i as u32);
    }
    drop(held);
    // Free a slot in the last chunk: the next insert reuses it without growing.
    let last = handles[cap as usize - 1];
    drop(
        r.resolve(last, ReaderId::shared(0))
            .unwrap()
            .erase()
            .unwrap(),
    );
    let again = r.insert(7).unwrap();
    assert_eq!(again.slot(), last.slot());
    assert_ne!(again.id(), last.id());
    assert_eq!(r.allocated_slots(), 4 * CHUNK_SLOTS);
}

#[test]
fn small_bounds_allocate_small_chunks() {
    let r = Registry::new(3);
    r.insert(1u8).unwrap();
    assert_eq!(
        r.allocated_slots(),
        4,
        "one chunk of the bound rounded up to a power of two"
    );
    r.insert(2).unwrap();
    r.insert(3).unwrap();
    assert_eq!(
        r.insert(4),
        Err(InsertError::Full),
        "the bound, not the chunk, limits"
    );
}

#[test]
#[cfg_attr(
    miri,
    ignore = "10,000 inserts are slow under Miri; the growth tests above cover the unsafe code"
)]
fn ten_thousand_values_inserted_resolved_and_erased() {
    let r = Registry::new(65_536);
    let handles: Vec<Handle> = (0..10_000u32).map(|i| r.insert(i).unwrap()).collect();
    assert_eq!(r.live_handles().len(), 10_000);
    for (i, h) in handles.iter().enumerate() {
        let v = r
            .resolve(*h, ReaderId::shared(i))
            .unwrap()
            .erase()
            .unwrap()
            .wait(|_| {})
            .take();
        assert_eq!(v, i as u32);
        assert!(r.resolve(*h, ReaderId::shared(0)).is_none());
    }
    assert!(r.live_handles().is_empty());
}

#[test]
fn threads_growing_at_once_lose_nothing() {
    let r = Arc::new(Registry::new(4 * CHUNK_SLOTS));
    let threads: Vec<_> = (0..4usize)
        .map(|t| {
            let r = Arc::clone(&r);
            std::thread::spawn(move || {
                (0..CHUNK_SLOTS as usize)
                    .map(|i| (r.insert(t * 1000 + i).unwrap(), t * 1000 + i))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let all: Vec<(Handle, usize)> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    assert_eq!(all.len(), 4 * CHUNK_SLOTS as usize);
    let slots: std::collections::BTreeSet<u32> = all.iter().map(|(h, _)| h.slot()).collect();
    assert_eq!(slots.len(), all.len(), "no slot handed out twice");
    assert_eq!(r.allocated_slots(), 4 * CHUNK_SLOTS);
    for (h, v) in &all {
        assert_eq!(*r.resolve(*h, ReaderId::shared(0)).unwrap(), *v);
    }
}

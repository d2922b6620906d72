//! Loom model checks of the registry protocol: every interleaving (bounded by
//! `LOOM_MAX_PREEMPTIONS`) of resolvers racing an unloader.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test -p nrt-core --test loom_registry --release
//! ```
#![cfg(loom)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;
use nrt_core::registry::{ReaderId, Registry};

/// A value that knows whether it was freed, so a use after free is caught even when the memory
/// itself is still there.
struct Model {
    id: u32,
    freed: Arc<AtomicBool>,
}

impl Drop for Model {
    fn drop(&mut self) {
        assert!(!self.freed.swap(true, Ordering::SeqCst), "double free");
    }
}

fn use_model(m: &Model, id: u32) {
    assert_eq!(m.id, id);
    assert!(!m.freed.load(Ordering::SeqCst), "use after free");
}

/// The unloader's (main thread's) row: shared.
const MAIN: ReaderId = ReaderId::shared(0);

/// Reader `i`'s row: exclusive (the production fast path) or shared (read-modify-writes).
fn reader(i: usize, exclusive: bool) -> ReaderId {
    if exclusive {
        // SAFETY: each loom thread of a model uses a distinct index, and no other thread of
        // the model uses exclusive rows.
        unsafe { ReaderId::exclusive(i) }
    } else {
        ReaderId::shared(i)
    }
}

/// (a) Two resolvers on exclusive rows and one unloader: no access after free, the unload
/// completes, and a resolve that starts after the erase misses.
#[test]
fn two_resolvers_and_an_unloader() {
    two_resolvers_and_an_unloader_on(true);
}

/// (a') The same with both resolvers on one shared row (atomic read-modify-writes), also
/// shared with the unloader.
#[test]
fn two_shared_resolvers_and_an_unloader() {
    two_resolvers_and_an_unloader_on(false);
}

fn two_resolvers_and_an_unloader_on(exclusive: bool) {
    loom::model(move || {
        let freed = Arc::new(AtomicBool::new(false));
        let reg = Arc::new(Registry::new(1));
        let h = reg
            .insert(Model {
                id: 42,
                freed: Arc::clone(&freed),
            })
            .unwrap();
        let erased_flag = Arc::new(AtomicBool::new(false));

        let readers: Vec<_> = (0..2)
            .map(|shard| {
                let (reg, erased_flag) = (Arc::clone(&reg), Arc::clone(&erased_flag));
                thread::spawn(move || {
                    let erased_before = erased_flag.load(Ordering::SeqCst);
                    match reg.resolve(h, reader(shard, exclusive)) {
                        Some(g) => {
                            assert!(!erased_before, "resolved after the erase was visible");
                            use_model(&g, 42);
                        }
                        None => {}
                    }
                })
            })
            .collect();

        let probe = reg.resolve(h, MAIN).expect("registered");
        let erased = probe.erase().ok().expect("first erase");
        erased_flag.store(true, Ordering::SeqCst);
        let drained = erased.wait(|_| {});
        let m = drained.take();
        use_model(&m, 42);
        drop(m);
        assert!(freed.load(Ordering::SeqCst));
        assert!(
            reg.resolve(h, MAIN).is_none(),
            "a resolve after the unload misses"
        );

        for r in readers {
            r.join().unwrap();
        }
    });
}

/// (b) One resolve racing the erase of the same handle, with the slot then reused by a new
/// value: the stale handle never resolves to the new value.
#[test]
fn resolve_racing_erase_and_slot_reuse() {
    loom::model(|| {
        let freed_old = Arc::new(AtomicBool::new(false));
        let freed_new = Arc::new(AtomicBool::new(false));
        let reg = Arc::new(Registry::new(1));
        let old = reg
            .insert(Model {
                id: 1,
                freed: Arc::clone(&freed_old),
            })
            .unwrap();

        let reader = {
            let reg = Arc::clone(&reg);
            thread::spawn(move || {
                if let Some(g) = reg.resolve(old, reader(0, true)) {
                    use_model(&g, 1);
                }
            })
        };

        let erased = reg.resolve(old, MAIN).unwrap().erase().ok().unwrap();
        drop(erased.wait(|_| {}).take());
        let new = reg
            .insert(Model {
                id: 2,
                freed: Arc::clone(&freed_new),
            })
            .unwrap();
        assert_eq!(new.slot(), old.slot());
        assert!(new.id() > old.id());

        reader.join().unwrap();
        assert!(reg.resolve(old, MAIN).is_none());
        use_model(&reg.resolve(new, MAIN).unwrap(), 2);
    });
}

/// Two unloaders race on one handle: exactly one erases, the value is freed exactly once.
#[test]
fn concurrent_erases_free_once() {
    loom::model(|| {
        let freed = Arc::new(AtomicBool::new(false));
        let reg = Arc::new(Registry::new(1));
        let h = reg
            .insert(Model {
                id: 9,
                freed: Arc::clone(&freed),
            })
            .unwrap();
        let unloaders: Vec<_> = (0..2)
            .map(|shard| {
                let reg = Arc::clone(&reg);
                thread::spawn(move || match reg.resolve(h, reader(shard, true)) {
                    Some(g) => match g.erase() {
                        Ok(e) => {
                            drop(e.wait(|_| {}).take());
                            true
                        }
                        Err(_) => false,
                    },
                    None => false,
                })
            })
            .collect();
        let wins: usize = unloaders
            .into_iter()
            .map(|t| usize::from(t.join().unwrap()))
            .sum();
        assert_eq!(wins, 1);
        assert!(freed.load(Ordering::SeqCst));
    });
}

/// Growth: two inserts race to allocate the second chunk (capacity 4, chunks of 2 under loom)
/// while a reader on an exclusive row resolves a value of the first chunk and a handle of the
/// second. Exactly one chunk is published (no slot is handed out twice), the loser frees its
/// own, the reader never sees a value that is not there, and every value is freed once.
#[test]
fn inserts_racing_to_grow_and_a_reader() {
    loom::model(|| {
        let reg = Arc::new(Registry::new(4));
        let flags: Vec<_> = (0..4).map(|_| Arc::new(AtomicBool::new(false))).collect();
        let mk = |id: u32| Model {
            id,
            freed: Arc::clone(&flags[id as usize]),
        };
        let a = reg.insert(mk(0)).unwrap();
        let b = reg.insert(mk(1)).unwrap();
        assert_eq!((a.slot(), b.slot()), (0, 1));
        let growers: Vec<_> = [2u32, 3]
            .into_iter()
            .map(|id| {
                let reg = Arc::clone(&reg);
                let m = mk(id);
                thread::spawn(move || reg.insert(m).unwrap())
            })
            .collect();
        let reader = {
            let reg = Arc::clone(&reg);
            thread::spawn(move || {
                use_model(&reg.resolve(a, reader(0, true)).unwrap(), 0);
                // A handle into the second chunk: misses until its insert publishes it.
                let h = nrt_core::registry::Handle::from_raw((3u64 << 32) | 2);
                if let Some(g) = reg.resolve(h, reader(0, true)) {
                    assert!(g.id == 2 || g.id == 3);
                    use_model(&g, g.id);
                }
            })
        };
        let hs: Vec<_> = growers.into_iter().map(|t| t.join().unwrap()).collect();
        reader.join().unwrap();
        let mut slots: Vec<u32> = hs.iter().map(|h| h.slot()).collect();
        slots.sort_unstable();
        assert_eq!(slots, [2, 3]);
        for (h, id) in hs.iter().zip([2u32, 3]) {
            use_model(&reg.resolve(*h, MAIN).unwrap(), id);
        }
        drop(reg);
        assert!(flags.iter().all(|f| f.load(Ordering::SeqCst)));
    });
}

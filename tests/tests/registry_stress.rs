//! Stress: 8 threads resolve handles and work on the models while another thread loads and
//! unloads models in a loop. Every unload returns, no handle resolves after its unload
//! returned, and a resolved reference always reads its own model. `NRT_STRESS_SECS` sets the
//! duration (default 3 s).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nrt_core::{ModelHandle, NrtStatus, Runtime, RuntimeOptions};
use nrt_host::StdHost;
use nrt_sim::{Instance, SimDriver};
use nrt_tests::init;
use nrt_tests::models::model;

struct Entry {
    handle: ModelHandle,
    name: String,
    /// Set once `unload` of this handle has returned.
    unloaded: AtomicBool,
}

#[test]
fn resolvers_and_a_loader_unloader_for_several_seconds() {
    let secs: u64 = std::env::var("NRT_STRESS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let rt = Runtime::with_options(
        SimDriver::new(Instance::Trn1, 1),
        StdHost::new(),
        RuntimeOptions {
            max_models: 16,
            ..Default::default()
        },
    );
    init(&rt, &[("NEURON_RT_LOG_LEVEL", "QUIET")]).unwrap();

    let entries: Mutex<Vec<Arc<Entry>>> = Mutex::new(Vec::new());
    let stop = AtomicBool::new(false);
    let resolved = AtomicU64::new(0);
    let missed = AtomicU64::new(0);
    let unloads = AtomicU64::new(0);
    let deadline = Instant::now() + Duration::from_secs(secs);

    std::thread::scope(|s| {
        for t in 0..8u64 {
            let (rt, entries, stop, resolved, missed) = (&rt, &entries, &stop, &resolved, &missed);
            s.spawn(move || {
                let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ t;
                while !stop.load(Ordering::Relaxed) {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let entry = {
                        let e = entries.lock().unwrap();
                        if e.is_empty() {
                            continue;
                        }
                        Arc::clone(&e[(rng % e.len() as u64) as usize])
                    };
                    match rt.model(entry.handle) {
                        Ok(m) => {
                            // While we hold the reference its unload cannot have returned.
                            assert!(
                                !entry.unloaded.load(Ordering::SeqCst),
                                "resolved after unload"
                            );
                            for _ in 0..(rng % 64) {
                                assert_eq!(m.name(), entry.name, "read another model's record");
                                std::hint::spin_loop();
                            }
                            assert_eq!(
                                rt.io_tensor_count(entry.handle).map(|c| c.0).unwrap_or(2),
                                2
                            );
                            assert!(
                                !entry.unloaded.load(Ordering::SeqCst),
                                "resolved after unload"
                            );
                            resolved.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => {
                            assert_eq!(e.status(), NrtStatus::InvalidHandle);
                            missed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            });
        }

        // The loader / unloader.
        let mut n = 0u64;
        while Instant::now() < deadline {
            n += 1;
            let name = format!("model-{n}");
            let handle = rt.register_model(model(&name, 0)).unwrap();
            let mut e = entries.lock().unwrap();
            e.push(Arc::new(Entry {
                handle,
                name,
                unloaded: AtomicBool::new(false),
            }));
            // Keep between 4 and 12 models loaded; unload the oldest one.
            if e.len() > 4 + (n % 8) as usize {
                let victim = e.remove(0);
                // Readers that already copied it may still try it: that is the point.
                e.push(Arc::clone(&victim));
                drop(e);
                rt.unload(victim.handle).unwrap();
                victim.unloaded.store(true, Ordering::SeqCst);
                unloads.fetch_add(1, Ordering::Relaxed);
                let mut e = entries.lock().unwrap();
                e.retain(|x| !x.unloaded.load(Ordering::SeqCst) || x.handle != victim.handle);
                // Every later resolve of the unloaded handle misses.
                assert_eq!(
                    rt.model(victim.handle).unwrap_err().status(),
                    NrtStatus::InvalidHandle
                );
            }
        }
        stop.store(true, Ordering::Relaxed);
    });

    let (r, m, u) = (
        resolved.into_inner(),
        missed.into_inner(),
        unloads.into_inner(),
    );
    eprintln!("stress: {r} resolves, {m} misses, {u} unloads in {secs} s");
    assert!(r > 1000, "too few resolves: {r}");
    assert!(u > 100, "too few unloads: {u}");
    rt.close();
}

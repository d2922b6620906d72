//! A synchronous execute of a model with device tensors allocates nothing on the heap.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use nrt_core::Runtime;
use nrt_core::tensor::{TensorPlacement, TensorSet};
use nrt_host::StdHost;
use nrt_sim::{Instance, SimDriver};
use nrt_tests::init;

struct Counting;
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged, counting calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn sync_execute_allocates_nothing_per_call() {
    let rt = Runtime::with_host(SimDriver::new(Instance::Trn1, 1), StdHost::new());
    init(&rt, &[("NEURON_RT_LOG_LEVEL", "ERROR")]).unwrap();
    let h = rt.load(&nrt_tests::models::empty_neff(), 0, -1).unwrap();
    let mut inputs = TensorSet::new();
    inputs.add(
        "in",
        rt.tensor_allocate(TensorPlacement::Device, 0, 64, "in")
            .unwrap(),
    );
    let mut outputs = TensorSet::new();
    outputs.add(
        "out",
        rt.tensor_allocate(TensorPlacement::Device, 0, 64, "out")
            .unwrap(),
    );
    // Warm up: the thread's reader row, device pages touched once.
    for _ in 0..10 {
        rt.execute(h, &inputs, &outputs).unwrap();
    }
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for _ in 0..1000 {
        rt.execute(h, &inputs, &outputs).unwrap();
    }
    let after = ALLOCATIONS.load(Ordering::Relaxed);
    assert_eq!(after - before, 0, "heap allocations in 1000 executes");
}

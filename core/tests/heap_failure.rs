//! A refused heap allocation during a load (issue 18): a host that records the refusal
//! ([`Platform::take_heap_failure`]) gets `NRT_RESOURCE` from `load` whichever allocation of the
//! load was refused, and the load leaves nothing behind (heap bytes, staged subgraphs). Also
//! the bad-input statuses the firmware example checks on its targets, here on the host.
//!
//! The allocator counts this thread's allocations and "refuses" the k-th one the way the
//! firmware's heap does: it records the refusal and serves it anyway (on the target, from an
//! emergency reserve).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use nrt_core::driver::{
    Arch, DeviceInfo, Driver, DriverError, ErrorKind, Platform, StagedModel, SubgraphImage,
};
use nrt_core::host::{Host, Platform as HostPlatform};
use nrt_core::io::{Dtype, TensorUsage};
use nrt_core::neff::{self, NeffFeatures, NeffSpec, NeffTensor, SIM_PROGRAM_MEMBER, SubgraphSpec};
use nrt_core::runtime::RuntimeOptions;
use nrt_core::{FrameworkType, NrtStatus, Runtime};

thread_local! {
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
    static COUNT: Cell<usize> = const { Cell::new(0) };
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static FAIL_AT: Cell<usize> = const { Cell::new(0) };
    static FAILED: Cell<bool> = const { Cell::new(false) };
}

struct Counting;

// SAFETY: forwards to the system allocator; the counters are thread-local cells with const
// initialisers (no allocation, no destructor).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ACTIVE.with(Cell::get) {
            let n = COUNT.with(|c| {
                c.set(c.get() + 1);
                c.get()
            });
            if FAIL_AT.with(Cell::get) == n {
                FAILED.with(|f| f.set(true));
            }
            LIVE.with(|l| l.set(l.get() + layout.size() as isize));
        }
        // SAFETY: the caller's layout, forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if ACTIVE.with(Cell::get) {
            LIVE.with(|l| l.set(l.get() - layout.size() as isize));
        }
        // SAFETY: allocated by `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live() -> isize {
    LIVE.with(Cell::get)
}
fn count() -> usize {
    COUNT.with(Cell::get)
}

#[derive(Debug)]
struct Unsupported(&'static str);
impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}
impl DriverError for Unsupported {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Unsupported
    }
    fn unsupported(operation: &'static str) -> Self {
        Unsupported(operation)
    }
}

/// One device of one core; staging records the model, nothing else.
#[derive(Default)]
struct OneCore {
    staged: AtomicUsize,
}
impl Driver for OneCore {
    type Error = Unsupported;
    fn is_funtime(&self) -> bool {
        true
    }
    fn discover(&self) -> Result<DeviceInfo, Unsupported> {
        Ok(DeviceInfo {
            device_count: 1,
            cores_per_device: 1,
            arch: Arch::V2,
            platform: Platform::Simulator,
        })
    }
    fn stage_subgraph(&self, image: &SubgraphImage<'_>) -> Result<StagedModel, Unsupported> {
        let n = self.staged.fetch_add(1, Ordering::Relaxed) as u64;
        Ok(StagedModel {
            lnc: image.lnc,
            handle: n + 1,
            plumbing: false,
        })
    }
    fn stop_model(&self, _: StagedModel) -> Result<(), Unsupported> {
        Ok(())
    }
    fn unstage_model(&self, _: StagedModel) -> Result<(), Unsupported> {
        self.staged.fetch_sub(1, Ordering::Relaxed);
        Ok(())
    }
}

struct RecordingPlatform;
impl HostPlatform for RecordingPlatform {
    fn take_heap_failure(&self) -> bool {
        FAILED.with(|f| f.replace(false))
    }
}
struct RecordingHost;
impl Host for RecordingHost {
    type Platform = RecordingPlatform;
    fn platform(&self) -> &RecordingPlatform {
        &RecordingPlatform
    }
}

fn neff(subgraphs: usize, gzip: bool) -> Vec<u8> {
    let t = |name: &str, usage, var_id| NeffTensor {
        name: name.into(),
        usage,
        size: 64,
        dtype: Dtype::Float32,
        shape: vec![4, 4],
        var_id,
    };
    neff::write(&NeffSpec {
        name: "model".into(),
        uuid: [7; 16],
        version: (2, 0),
        feature_bits: NeffFeatures::empty(),
        lnc_size: subgraphs as u32,
        num_tpb: subgraphs as u32,
        gzip,
        subgraphs: (0..subgraphs)
            .map(|i| SubgraphSpec {
                name: format!("sg{i:02}"),
                members: vec![(SIM_PROGRAM_MEMBER.into(), vec![0x5a; 300])],
            })
            .collect(),
        tensors: vec![
            t("x", TensorUsage::Input, 1),
            t("w", TensorUsage::Input, 2),
            t("y", TensorUsage::Output, 3),
        ],
    })
    .unwrap()
}

type Rt<'d> = Runtime<&'d OneCore, RecordingHost>;

fn runtime(driver: &OneCore) -> Rt<'_> {
    let options = RuntimeOptions {
        max_models: 2,
        inflate_window: 1024,
        ..RuntimeOptions::default()
    };
    let rt = Runtime::with_options(driver, RecordingHost, options);
    rt.init(FrameworkType::NoFw, "", "", &[("NEURON_RT_NUM_CORES", "1")])
        .unwrap();
    rt
}

fn status<T>(r: nrt_core::Result<T>) -> NrtStatus {
    r.err().map_or(NrtStatus::Success, |e| e.status())
}

/// Refuses allocation k of a load for every k: `NRT_RESOURCE`, nothing left behind.
fn refuse_each(gzip: bool) -> usize {
    let bytes = neff(1, gzip);
    ACTIVE.with(|a| a.set(true));
    let start = live();
    let driver = OneCore::default();
    let rt = runtime(&driver);
    // The first load grows the registry by a chunk it keeps for its life.
    let h = rt.load(&bytes, 0, -1).unwrap();
    rt.unload(h).unwrap();
    let base = live();
    let c0 = count();
    let h = rt.load(&bytes, 0, -1).unwrap();
    let n = count() - c0;
    rt.unload(h).unwrap();
    assert_eq!(live(), base);
    assert!(n > 10, "a load makes {n} allocations");
    for k in 1..=n {
        FAIL_AT.with(|f| f.set(count() + k));
        let r = rt.load(&bytes, 0, -1);
        FAIL_AT.with(|f| f.set(0));
        assert_eq!(
            status(r),
            NrtStatus::Resource,
            "allocation {k} of {n} refused"
        );
        assert_eq!(
            live(),
            base,
            "allocation {k} of {n} refused: heap bytes left"
        );
        assert_eq!(driver.staged.load(Ordering::Relaxed), 0, "allocation {k}");
        assert!(!FAILED.with(Cell::get), "the refusal was taken");
    }
    // And the runtime still loads.
    let h = rt.load(&bytes, 0, -1).unwrap();
    rt.unload(h).unwrap();
    rt.close();
    drop(rt);
    assert_eq!(live(), start, "the runtime gave everything back");
    ACTIVE.with(|a| a.set(false));
    n
}

#[test]
fn every_refused_allocation_of_a_plain_load_is_nrt_resource_and_leaks_nothing() {
    let n = refuse_each(false);
    eprintln!("plain-tar NEFF: {n} allocations per load");
}

#[test]
fn every_refused_allocation_of_a_gzip_load_is_nrt_resource_and_leaks_nothing() {
    let n = refuse_each(true);
    eprintln!("gzip NEFF: {n} allocations per load");
}

#[test]
fn a_refusal_before_the_load_is_not_the_loads() {
    let driver = OneCore::default();
    let rt = runtime(&driver);
    FAILED.with(|f| f.set(true));
    let h = rt.load(&neff(1, false), 0, -1).unwrap();
    rt.unload(h).unwrap();
    rt.close();
}

#[test]
fn bad_inputs_give_the_statuses_the_firmware_checks() {
    let driver = OneCore::default();
    let rt = runtime(&driver);
    let bytes = neff(1, false);
    assert_eq!(
        status(rt.load(&bytes[..bytes.len() / 2], 0, -1)),
        NrtStatus::Invalid
    );
    assert_eq!(status(rt.load(&bytes[..100], 0, -1)), NrtStatus::Invalid);
    assert_eq!(status(rt.load(&neff(2, false), 0, -1)), NrtStatus::Invalid);
    assert_eq!(status(rt.load(&bytes, 1, -1)), NrtStatus::Invalid);
    assert_eq!(driver.staged.load(Ordering::Relaxed), 0);
    rt.close();
    let rt = Runtime::with_host(&driver, RecordingHost);
    let r = rt.init(FrameworkType::NoFw, "", "", &[("NEURON_RT_NUM_CORES", "2")]);
    assert_eq!(status(r), NrtStatus::Failure);
}

//! The firmware example: nrt-core on a fixed heap, on bare metal.
//!
//! init → load the NEFF built into the image → 1,000 executions checked against the host
//! simulator's outputs → unload → close; the runtime's bad-input statuses (truncated NEFF,
//! wrong core counts, every allocation of a load refused in turn); re-initialisation; and the
//! smallest heap the flow passes in. Results go out as `defmt` lines (`fw: ...`) and the exit
//! code (0: every check passed).
#![no_std]
#![no_main]

extern crate alloc;

use nrt_core::host::{Host, Platform};
use nrt_core::runtime::RuntimeOptions;
use nrt_core::tensor::{TensorPlacement, TensorSet};
use nrt_core::{Error, FrameworkType, NrtStatus, Runtime};
use nrt_firmware::driver::FwDriver;
use nrt_firmware::heap::{CountingHeap, MAIN_BYTES, RESERVE_BYTES};
use nrt_firmware::{check, exit};

#[global_allocator]
static HEAP: CountingHeap = CountingHeap::new();
static DRIVER: FwDriver = FwDriver::new();

#[allow(dead_code)]
mod data {
    include!(concat!(env!("OUT_DIR"), "/fw_data.rs"));
}

/// Executions of the main run.
const EXECUTIONS: u32 = 1000;
/// Executions of each trial of the smallest-heap search (peaks repeat from the first one).
const TRIAL_EXECUTIONS: u32 = 4;
/// Granularity of the smallest-heap search, bytes.
const STEP: usize = 64;
/// The NEFF parser's decompression window (its knob).
const INFLATE_WINDOW: usize = 1024;
/// Models the registry holds (its capacity knob).
const MAX_MODELS: u32 = 2;

struct FwPlatform;
impl Platform for FwPlatform {
    fn take_heap_failure(&self) -> bool {
        HEAP.take_failure()
    }
}

struct FwHost;
impl Host for FwHost {
    type Platform = FwPlatform;
    fn platform(&self) -> &FwPlatform {
        &FwPlatform
    }
}

type Rt = Runtime<&'static FwDriver, FwHost>;

const VARS: [(&str, &str); 1] = [("NEURON_RT_NUM_CORES", "1")];

fn runtime() -> Rt {
    let options = RuntimeOptions {
        max_models: MAX_MODELS,
        inflate_window: INFLATE_WINDOW,
        ..RuntimeOptions::default()
    };
    Runtime::with_options(&DRIVER, FwHost, options)
}

/// A step's status; a heap refusal the runtime did not report is `NRT_RESOURCE` all the same.
fn step<T>(r: Result<T, Error>) -> Result<T, NrtStatus> {
    let r = r.map_err(|e| e.status());
    if HEAP.take_failure() {
        return Err(NrtStatus::Resource);
    }
    r
}

#[derive(Clone, Copy, Default, defmt::Format)]
struct Figures {
    init: usize,
    load: usize,
    execute: usize,
    growth: isize,
}

/// init → load → `executions` checked executions → unload → close on a fresh runtime.
fn scenario(neff: &[u8], executions: u32) -> Result<Figures, NrtStatus> {
    let mut f = Figures::default();
    let base = HEAP.stats().live;
    HEAP.reset_peak();
    let rt = runtime();
    let r = step(rt.init(FrameworkType::NoFw, "", "", &VARS)).and_then(|()| {
        f.init = HEAP.stats().peak - base;
        run_model(&rt, neff, executions, &mut f)
    });
    rt.close();
    drop(rt);
    let _ = HEAP.take_failure();
    r?;
    let left = HEAP.stats().live;
    check!(
        left == base,
        "fw: FAIL {=usize} heap bytes left after close",
        left - base
    );
    check!(
        DRIVER.in_use() == (0, 0),
        "fw: FAIL device memory or staged models left after close"
    );
    Ok(f)
}

fn run_model(rt: &Rt, neff: &[u8], executions: u32, f: &mut Figures) -> Result<(), NrtStatus> {
    let before = HEAP.stats().live;
    HEAP.reset_peak();
    let h = step(rt.load(neff, 0, -1))?;
    f.load = HEAP.stats().peak - before;
    let r = execute(rt, h, executions, f);
    let u = step(rt.unload(h));
    r.and(u)
}

fn execute(
    rt: &Rt,
    h: nrt_core::ModelHandle,
    executions: u32,
    f: &mut Figures,
) -> Result<(), NrtStatus> {
    let mut ins = TensorSet::new();
    let mut x = None;
    for &(name, bytes) in &data::DATA[0].0 {
        let t = step(rt.tensor_allocate(TensorPlacement::Device, 0, bytes.len() as u64, name))?;
        step(t.write(0, bytes))?;
        if name == "x_t" {
            x = Some(t.clone());
        }
        ins.add(name, t);
    }
    let x = x.ok_or(NrtStatus::Invalid)?;
    let y = step(rt.tensor_allocate(TensorPlacement::Device, 0, data::OUTPUT_BYTES as u64, "y_t"))?;
    let mut outs = TensorSet::new();
    outs.add("y_t", y.clone());
    step(Ok(()))?;
    let mut got = [0u8; data::OUTPUT_BYTES];
    let mut after_first = 0usize;
    HEAP.reset_peak();
    let before = HEAP.stats().live;
    for i in 0..executions {
        let (inputs, expected) = &data::DATA[i as usize % data::SETS];
        let x_bytes = inputs
            .iter()
            .find(|(n, _)| *n == "x_t")
            .map_or(&[][..], |(_, b)| *b);
        step(x.write(0, x_bytes))?;
        step(rt.execute(h, &ins, &outs))?;
        step(y.read(0, &mut got))?;
        check!(
            &got[..] == *expected,
            "fw: FAIL execution {=u32}: outputs differ from the host simulator's",
            i
        );
        if i == 0 {
            after_first = HEAP.stats().live;
        }
    }
    f.execute = HEAP.stats().peak - before;
    f.growth = HEAP.stats().live as isize - after_first as isize;
    Ok(())
}

/// A load refused with `want` leaves the heap and the device as they were.
fn refused(rt: &Rt, neff: &[u8], lnc: i32, want: NrtStatus, what: &str) {
    let base = HEAP.stats().live;
    let got = match rt.load(neff, lnc, -1) {
        Ok(h) => {
            let _ = rt.unload(h);
            NrtStatus::Success
        }
        Err(e) => e.status(),
    };
    let _ = HEAP.take_failure();
    check!(
        got == want,
        "fw: FAIL {=str}: {=str}, expected {=str}",
        what,
        got.name(),
        want.name()
    );
    check!(
        HEAP.stats().live == base,
        "fw: FAIL {=str}: heap bytes leaked",
        what
    );
    check!(
        DRIVER.in_use() == (0, 0),
        "fw: FAIL {=str}: device memory leaked",
        what
    );
    defmt::info!("fw: bad input {=str}: {=str}", what, got.name());
}

fn bad_inputs() {
    let rt = runtime();
    check!(
        rt.init(FrameworkType::NoFw, "", "", &VARS).is_ok(),
        "fw: FAIL init"
    );
    refused(
        &rt,
        &data::NEFF[..data::NEFF.len() / 2],
        0,
        NrtStatus::Invalid,
        "truncated NEFF",
    );
    refused(
        &rt,
        &data::NEFF[..100],
        0,
        NrtStatus::Invalid,
        "truncated header",
    );
    refused(
        &rt,
        data::NEFF_TWO,
        0,
        NrtStatus::Invalid,
        "NEFF for 2 cores on 1",
    );
    refused(
        &rt,
        data::NEFF,
        1,
        NrtStatus::Invalid,
        "load on core 1 of 1",
    );
    rt.close();
    drop(rt);
    let rt = runtime();
    let got = rt
        .init(FrameworkType::NoFw, "", "", &[("NEURON_RT_NUM_CORES", "2")])
        .map_err(|e| e.status());
    let want = NrtStatus::Failure;
    let got = got.err().unwrap_or(NrtStatus::Success);
    check!(
        got == want,
        "fw: FAIL init with 2 cores of 1: {=str}, expected {=str}",
        got.name(),
        want.name()
    );
    defmt::info!("fw: bad input init 2 cores of 1: {=str}", got.name());
    drop(rt);
    let _ = HEAP.take_failure();
    check!(
        HEAP.stats().live == 0,
        "fw: FAIL heap bytes left after the bad inputs"
    );
}

/// Every allocation of a load refused in turn: `NRT_RESOURCE`, nothing leaked.
fn refuse_each_allocation(neff: &[u8], what: &str) {
    let rt = runtime();
    check!(
        rt.init(FrameworkType::NoFw, "", "", &VARS).is_ok(),
        "fw: FAIL init"
    );
    // A first load and unload: the registry keeps its slot chunk for the runtime's life.
    let warm = rt.load(neff, 0, -1).map(|h| rt.unload(h));
    check!(matches!(warm, Ok(Ok(()))), "fw: FAIL load");
    let base = HEAP.stats().live;
    let c0 = HEAP.stats().count;
    let ok = rt.load(neff, 0, -1).map(|h| rt.unload(h));
    check!(matches!(ok, Ok(Ok(()))), "fw: FAIL load");
    let n = HEAP.stats().count - c0;
    check!(HEAP.stats().live == base, "fw: FAIL load + unload leaked");
    for k in 1..=n {
        HEAP.fail_at(HEAP.stats().count + k);
        let r = rt.load(neff, 0, -1);
        HEAP.fail_at(0);
        let got = match r {
            Ok(h) => {
                let _ = rt.unload(h);
                NrtStatus::Success
            }
            Err(e) => e.status(),
        };
        let _ = HEAP.take_failure();
        check!(
            got == NrtStatus::Resource,
            "fw: FAIL {=str}: allocation {=usize} of {=usize} refused gave {=str}",
            what,
            k,
            n,
            got.name()
        );
        check!(
            HEAP.stats().live == base,
            "fw: FAIL {=str}: allocation {=usize} refused leaked heap",
            what,
            k
        );
        check!(
            DRIVER.in_use() == (0, 0),
            "fw: FAIL {=str}: allocation {=usize} refused leaked device memory",
            what,
            k
        );
    }
    rt.close();
    drop(rt);
    defmt::info!(
        "fw: refused each of {=usize} allocations of a {=str} load: NRT_RESOURCE, nothing leaked",
        n,
        what
    );
}

/// The smallest heap the flow passes in (to `STEP` bytes), and a quarter less failing cleanly.
fn smallest_heap() -> usize {
    let trial = |size: usize| -> Result<(), NrtStatus> {
        check!(HEAP.use_trial_heap(size), "fw: FAIL no trial heap left");
        scenario(data::NEFF, TRIAL_EXECUTIONS).map(|_| ())
    };
    let (mut lo, mut hi) = (STEP, MAIN_BYTES / STEP * STEP);
    while hi - lo > STEP {
        let mid = (lo + hi) / 2 / STEP * STEP;
        match trial(mid) {
            Ok(()) => hi = mid,
            Err(NrtStatus::Resource) => lo = mid,
            Err(s) => {
                defmt::error!("fw: FAIL heap of {=usize} bytes: {=str}", mid, s.name());
                exit(1);
            }
        }
    }
    check!(
        trial(hi).is_ok(),
        "fw: FAIL the smallest heap found does not pass again"
    );
    let smaller = hi * 3 / 4 / STEP * STEP;
    let r = trial(smaller);
    check!(
        r == Err(NrtStatus::Resource),
        "fw: FAIL a heap of {=usize} bytes did not fail with NRT_RESOURCE",
        smaller
    );
    defmt::info!("fw: heap of {=usize} bytes: NRT_RESOURCE, cleanly", smaller);
    hi
}

#[cfg_attr(target_arch = "arm", cortex_m_rt::entry)]
#[cfg_attr(target_arch = "riscv32", riscv_rt::entry)]
fn main() -> ! {
    nrt_firmware::stack::paint();
    HEAP.init();
    defmt::info!(
        "fw: start heap={=usize} reserve={=usize}",
        MAIN_BYTES,
        RESERVE_BYTES
    );
    let f = match scenario(data::NEFF, EXECUTIONS) {
        Ok(f) => f,
        Err(s) => {
            defmt::error!("fw: FAIL main run: {=str}", s.name());
            exit(1);
        }
    };
    defmt::info!(
        "fw: executions={=u32} outputs match the host simulator",
        EXECUTIONS
    );
    defmt::info!(
        "fw: peak heap init={=usize} load={=usize} execute={=usize}",
        f.init,
        f.load,
        f.execute
    );
    defmt::info!(
        "fw: heap growth over {=u32} executions: {=isize}",
        EXECUTIONS - 1,
        f.growth
    );
    check!(f.growth == 0, "fw: FAIL the heap grew during execution");
    let g = match scenario(data::NEFF_GZ, 2) {
        Ok(g) => g,
        Err(s) => {
            defmt::error!("fw: FAIL gzip NEFF: {=str}", s.name());
            exit(1);
        }
    };
    defmt::info!(
        "fw: gzip NEFF: outputs match; peak heap load={=usize}",
        g.load
    );
    bad_inputs();
    refuse_each_allocation(data::NEFF, "plain");
    defmt::info!("fw: reserve peak plain={=usize}", HEAP.stats().reserve_peak);
    refuse_each_allocation(data::NEFF_GZ, "gzip");
    defmt::info!("fw: reserve peak gzip={=usize}", HEAP.stats().reserve_peak);
    // Re-initialisation: the same runtime, closed, comes up again and runs the model.
    let base = HEAP.stats().live;
    let rt = runtime();
    check!(
        rt.init(FrameworkType::NoFw, "", "", &VARS).is_ok(),
        "fw: FAIL init"
    );
    rt.close();
    check!(
        rt.init(FrameworkType::NoFw, "", "", &VARS).is_ok(),
        "fw: FAIL re-init after close"
    );
    let mut f = Figures::default();
    let r = run_model(&rt, data::NEFF, 2, &mut f);
    rt.close();
    drop(rt);
    check!(
        r.is_ok(),
        "fw: FAIL the re-initialised runtime did not run the model"
    );
    check!(
        HEAP.stats().live == base && DRIVER.in_use() == (0, 0),
        "fw: FAIL re-init leaked"
    );
    defmt::info!("fw: re-init: init/close/init/load/execute/unload/close ok");
    let min = smallest_heap();
    defmt::info!("fw: smallest heap={=usize}", min);
    defmt::info!("fw: stack peak={=usize}", nrt_firmware::stack::used());
    defmt::info!("fw: PASS");
    exit(0)
}

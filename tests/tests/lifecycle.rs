//! Spec 002 §1-§3: the state machine, `init` order and every branch, `close`, fork.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::mpsc;

use nrt_core::bitmap::CoreBitmap;
use nrt_core::driver::{CompatRange, Driver, DriverCall, DriverVersion};
use nrt_core::{FrameworkType, InitState, Level, NrtStatus, Runtime};
use nrt_sim::{DriverEmulation, Instance, SimConfig, SimDriver, SimMachine};
use nrt_tests::{assert_err, assert_err_prefix, init, runtime_on};

fn funtime(instance: Instance, devices: u32) -> Arc<SimMachine> {
    SimMachine::new(SimConfig::funtime(instance, devices))
}

fn emulated(instance: Instance, devices: u32) -> Arc<SimMachine> {
    SimMachine::new(SimConfig::emulate_driver(instance, devices))
}

fn emulated_with(
    instance: Instance,
    version: DriverVersion,
    compat: CompatRange,
) -> Arc<SimMachine> {
    SimMachine::new(SimConfig {
        instance,
        device_count: 1,
        emulate_driver: Some(DriverEmulation {
            version: Some(version),
            compat: Some(compat),
        }),
        refuse_plumbing: false,
    })
}

// ---- §3 the state machine -------------------------------------------------------------------

#[test]
fn state_names_are_the_nrt_state_symbols() {
    assert_eq!(InitState::Start as u8, 0);
    assert_eq!(InitState::Init as u8, 1);
    assert_eq!(InitState::Child as u8, 2);
    assert_eq!(InitState::Closed as u8, 3);
    assert_eq!(InitState::Start.name(), "NRT_STATE_START");
    assert_eq!(InitState::Init.name(), "NRT_STATE_INIT");
    assert_eq!(InitState::Child.name(), "NRT_STATE_CHILD");
    assert_eq!(InitState::Closed.name(), "NRT_STATE_CLOSED");
}

#[test]
fn guard_maps_each_state_to_its_status_and_message() {
    assert!(InitState::Init.guard().is_ok());
    assert_err(
        InitState::Start.guard(),
        NrtStatus::Uninitialized,
        "NRT uninitialized",
    );
    assert_err(
        InitState::Closed.guard(),
        NrtStatus::Closed,
        "NRT already closed",
    );
    assert_err(
        InitState::Child.guard(),
        NrtStatus::Failure,
        "Incompatible runtime state: NRT_STATE_CHILD",
    );
}

#[test]
fn guarded_calls_before_init_return_uninitialized_13() {
    let (rt, host) = runtime_on(&funtime(Instance::Trn1, 1));
    assert_eq!(rt.state(), InitState::Start);
    assert_err(rt.guard(), NrtStatus::Uninitialized, "NRT uninitialized");
    assert_err(
        rt.visible_lnc_count(),
        NrtStatus::Uninitialized,
        "NRT uninitialized",
    );
    assert_err(
        rt.allocation(),
        NrtStatus::Uninitialized,
        "NRT uninitialized",
    );
    assert_eq!(NrtStatus::Uninitialized.code(), 13);
    assert!(host.contains(Level::Error, "NRT uninitialized"));
}

#[test]
fn init_is_idempotent_when_already_init() {
    let m = emulated(Instance::Trn1, 2);
    let (rt, host) = runtime_on(&m);
    init(&rt, &[("NEURON_RT_NUM_CORES", "2")]).unwrap();
    let before = rt.allocation().unwrap();
    let discover_calls = rt.driver().calls(DriverCall::Discover);
    // A second init with a different (even invalid) configuration changes nothing.
    init(
        &rt,
        &[
            ("NEURON_RT_NUM_CORES", "bogus"),
            ("NEURON_RT_VISIBLE_CORES", "3"),
        ],
    )
    .unwrap();
    assert_eq!(rt.state(), InitState::Init);
    assert_eq!(rt.allocation().unwrap(), before);
    assert_eq!(rt.driver().calls(DriverCall::Discover), discover_calls);
    assert_eq!(
        rt.driver().calls(DriverCall::RegisterSoftIncompatCallback),
        1
    );
    assert_eq!(m.reserved(), CoreBitmap::range(0, 2));
    assert_eq!(host.fork_registrations(), 1);
}

#[test]
fn close_returns_to_start_and_a_later_init_succeeds() {
    let m = emulated(Instance::Trn2, 1);
    let (rt, _host) = runtime_on(&m);
    init(&rt, &[]).unwrap();
    assert_eq!(m.reserved(), CoreBitmap::range(0, 8));
    rt.close();
    assert_eq!(rt.state(), InitState::Start);
    assert!(m.reserved().is_empty());
    assert_err(rt.guard(), NrtStatus::Uninitialized, "NRT uninitialized");
    assert_err(
        rt.visible_lnc_count(),
        NrtStatus::Uninitialized,
        "NRT uninitialized",
    );
    init(&rt, &[("NEURON_RT_NUM_CORES", "1")]).unwrap();
    assert_eq!(rt.visible_lnc_count().unwrap(), 1);
    assert_eq!(m.reserved(), CoreBitmap::range(0, 2));
    rt.close();
    assert!(m.reserved().is_empty());
}

#[test]
fn close_when_not_init_does_nothing() {
    let (rt, _host) = runtime_on(&emulated(Instance::Trn1, 1));
    rt.close();
    assert_eq!(rt.state(), InitState::Start);
    assert_eq!(rt.driver().calls(DriverCall::ShutdownCores), 0);
    assert_eq!(rt.driver().calls(DriverCall::ReleaseCores), 0);
}

#[test]
fn close_tears_down_cores_and_unmarks_exactly_the_reserved_range() {
    let m = emulated(Instance::Trn1, 2);
    let (a, _) = runtime_on(&m);
    let (b, _) = runtime_on(&m);
    init(&a, &[("NEURON_RT_NUM_CORES", "1")]).unwrap();
    init(&b, &[("NEURON_RT_NUM_CORES", "2")]).unwrap();
    assert_eq!(b.allocation().unwrap().topology.first_lnc(), 1);
    assert_eq!(m.reserved(), CoreBitmap::range(0, 3));
    assert!(m.cores()[0].initialized && m.cores()[0].exec_ready);
    a.close();
    assert_eq!(m.reserved(), CoreBitmap::range(1, 2));
    assert!(!m.cores()[0].initialized);
    assert!(m.cores()[1].initialized);
    assert_eq!(a.driver().calls(DriverCall::ShutdownCores), 1);
    assert_eq!(a.driver().calls(DriverCall::ReleaseCores), 1);
    b.close();
    assert!(m.reserved().is_empty());
}

/// A driver that parks inside `shutdown_cores` so a test can look at the runtime mid-close.
struct ParkingDriver {
    inner: SimDriver,
    entered: mpsc::SyncSender<()>,
    release: std::sync::Mutex<mpsc::Receiver<()>>,
}

/// Forwards to the simulator, parking in `shutdown_cores` until released.
macro_rules! parking {
    (@value $s:ident, $d:ident => $e:expr) => {{
        let $d = &$s.inner;
        $e
    }};
    ($s:ident, ShutdownCores, $d:ident => $e:expr) => {{
        $s.entered.send(()).unwrap();
        $s.release.lock().unwrap().recv().unwrap();
        let $d = &$s.inner;
        $e
    }};
    ($s:ident, $call:ident, $d:ident => $e:expr) => {{
        let $d = &$s.inner;
        $e
    }};
}

impl Driver for ParkingDriver {
    type Error = <SimDriver as Driver>::Error;
    nrt_core::forward_driver!(parking);
}

#[test]
fn calls_during_close_see_closed_14() {
    let (entered_tx, entered_rx) = mpsc::sync_channel(1);
    let (release_tx, release_rx) = mpsc::channel();
    let driver = ParkingDriver {
        inner: SimDriver::with_config(SimConfig::emulate_driver(Instance::Trn1, 1)),
        entered: entered_tx,
        release: std::sync::Mutex::new(release_rx),
    };
    let rt = Runtime::new(driver);
    init(&rt, &[]).unwrap();
    std::thread::scope(|s| {
        let closer = s.spawn(|| rt.close());
        entered_rx.recv().unwrap();
        // Mid-teardown: CLOSED.
        assert_eq!(rt.state(), InitState::Closed);
        assert_err(rt.guard(), NrtStatus::Closed, "NRT already closed");
        assert_err(
            rt.visible_lnc_count(),
            NrtStatus::Closed,
            "NRT already closed",
        );
        assert_err(init(&rt, &[]), NrtStatus::Closed, "NRT already closed");
        release_tx.send(()).unwrap();
        closer.join().unwrap();
    });
    assert_eq!(rt.state(), InitState::Start);
    assert_eq!(NrtStatus::Closed.code(), 14);
}

#[test]
fn forked_child_enters_child_and_refuses_init_and_every_guarded_call() {
    let (rt, host) = runtime_on(&funtime(Instance::Trn1, 1));
    init(&rt, &[]).unwrap();
    host.simulate_fork();
    assert_eq!(rt.state(), InitState::Child);
    let msg = "Incompatible runtime state: NRT_STATE_CHILD";
    assert_err(rt.guard(), NrtStatus::Failure, msg);
    assert_err(rt.visible_lnc_count(), NrtStatus::Failure, msg);
    assert_err(rt.allocation(), NrtStatus::Failure, msg);
    assert_err(init(&rt, &[]), NrtStatus::Failure, msg);
    // Terminal: close does nothing and init still fails.
    rt.close();
    assert_eq!(rt.state(), InitState::Child);
    assert_err(init(&rt, &[]), NrtStatus::Failure, msg);
}

#[test]
fn fork_after_close_still_enters_child() {
    let (rt, host) = runtime_on(&funtime(Instance::Trn1, 1));
    init(&rt, &[]).unwrap();
    rt.close();
    host.simulate_fork();
    assert_err(
        init(&rt, &[]),
        NrtStatus::Failure,
        "Incompatible runtime state: NRT_STATE_CHILD",
    );
}

#[test]
fn fork_before_first_init_does_not_affect_the_child() {
    let (rt, host) = runtime_on(&funtime(Instance::Trn1, 1));
    host.simulate_fork(); // handlers not registered yet: nothing to see
    init(&rt, &[]).unwrap();
    assert_eq!(rt.state(), InitState::Init);
}

#[test]
fn mark_forked_child_is_terminal() {
    let (rt, _host) = runtime_on(&funtime(Instance::Trn1, 1));
    rt.mark_forked_child();
    assert_err(
        init(&rt, &[]),
        NrtStatus::Failure,
        "Incompatible runtime state: NRT_STATE_CHILD",
    );
    assert_eq!(rt.state(), InitState::Child);
}

// ---- §1 init order ---------------------------------------------------------------------------

#[test]
fn soft_incompat_registration_failure_returns_invalid_before_the_state_guard() {
    let (rt, _host) = runtime_on(&funtime(Instance::Trn1, 1));
    rt.mark_forked_child();
    rt.driver()
        .fail_next(DriverCall::RegisterSoftIncompatCallback);
    // CHILD would give NRT_FAILURE, but the callback registration comes first.
    assert_err(
        init(&rt, &[]),
        NrtStatus::Invalid,
        "Failed to register nrt_soft_incompat_callback",
    );
    assert_eq!(rt.driver().calls(DriverCall::Discover), 0);
}

#[test]
fn discovery_error_returns_invalid_cannot_find_neuron_devices() {
    let (rt, _host) = runtime_on(&funtime(Instance::Trn1, 1));
    rt.driver().fail_next(DriverCall::Discover);
    assert_err_prefix(
        init(&rt, &[]),
        NrtStatus::Invalid,
        "Cannot find Neuron devices.",
    );
    assert_eq!(rt.state(), InitState::Start);
    init(&rt, &[]).unwrap();
}

#[test]
fn no_devices_returns_invalid_cannot_find_neuron_devices() {
    let (rt, _host) = runtime_on(&funtime(Instance::Trn1, 0));
    let e = init(&rt, &[]).unwrap_err();
    assert_eq!(e.status(), NrtStatus::Invalid);
    assert!(e.message().starts_with("Cannot find Neuron devices."));
    assert!(e.message().contains("inf2 or trn1"));
    assert_eq!(e.message().matches("https://").count(), 2);
}

#[test]
fn configuration_is_parsed_after_discovery_and_before_negotiation() {
    let (rt, _host) = runtime_on(&emulated(Instance::Trn1, 1));
    assert_err(
        init(&rt, &[("NEURON_RT_NUM_CORES", "a")]),
        NrtStatus::Invalid,
        "Invalid value for NEURON_RT_NUM_CORES: \"a\": \"a\" is not a non-negative integer",
    );
    assert_eq!(rt.driver().calls(DriverCall::Discover), 1);
    assert_eq!(rt.driver().calls(DriverCall::DriverVersion), 0);
    assert_eq!(rt.driver().calls(DriverCall::ReserveCores), 0);
}

#[test]
fn hw_revision_is_overridden_off_real_hardware() {
    let (rt, _host) = runtime_on(&funtime(Instance::Trn1, 1));
    init(&rt, &[]).unwrap();
    assert_eq!(rt.driver().calls(DriverCall::OverrideHwRevision), 1);
}

#[test]
fn banner_and_instance_info_are_logged() {
    let (rt, host) = runtime_on(&emulated(Instance::Trn1, 2));
    init(&rt, &[("NEURON_RT_LOG_LEVEL", "INFO")]).unwrap();
    assert!(host.contains(Level::Info, "Neuron Runtime 2.31.24.0"));
    assert!(host.contains(Level::Info, "Found neuron driver: 2.27"));
    assert!(host.contains(
        Level::Info,
        "Instance info:: device count:2 cores per device:2 architecture:TRN"
    ));
}

#[test]
fn log_level_filters_records() {
    let (rt, host) = runtime_on(&emulated(Instance::Trn1, 1));
    init(&rt, &[]).unwrap(); // default ERROR: no info records
    assert!(!host.records().iter().any(|(l, _)| *l == Level::Info));
    rt.close();
    host.clear();
    init(&rt, &[("NEURON_RT_LOG_LEVEL", "QUIET")]).unwrap();
    rt.close();
    let _ = rt.visible_lnc_count();
    assert!(host.records().is_empty());
}

// ---- §1 (7) driver compatibility -------------------------------------------------------------

#[test]
fn funtime_skips_driver_negotiation() {
    // The funtime simulator has no driver version at all: negotiation must not be attempted.
    let (rt, _host) = runtime_on(&funtime(Instance::Trn2, 1));
    init(&rt, &[]).unwrap();
    assert_eq!(rt.driver().calls(DriverCall::DriverVersion), 0);
    assert_eq!(rt.driver().calls(DriverCall::CompatibleVersion), 0);
    assert_eq!(rt.driver().calls(DriverCall::ReserveCores), 0);
    assert_eq!(rt.driver().calls(DriverCall::InitCores), 0);
    assert_eq!(rt.driver().calls(DriverCall::StartExecReady), 0);
}

#[test]
fn unreadable_driver_version_returns_invalid() {
    let m = SimMachine::new(SimConfig {
        instance: Instance::Trn1,
        device_count: 1,
        emulate_driver: Some(DriverEmulation {
            version: None,
            compat: Some(CompatRange { min: 5, max: 7 }),
        }),
        refuse_plumbing: false,
    });
    let (rt, _host) = runtime_on(&m);
    assert_err_prefix(
        init(&rt, &[]),
        NrtStatus::Invalid,
        "Unable to determine Neuron Driver version",
    );
    assert!(m.reserved().is_empty());
}

#[test]
fn driver_major_1_requires_driver_2_1() {
    for major in [0, 1] {
        let m = emulated_with(
            Instance::Trn1,
            DriverVersion { major, minor: 9 },
            CompatRange { min: 5, max: 7 },
        );
        let (rt, _host) = runtime_on(&m);
        assert_err(
            init(&rt, &[]),
            NrtStatus::Invalid,
            "Neuron Runtime 2.x requires Neuron driver(aws-neuron-dkms) version 2.1 or above.",
        );
        assert_eq!(rt.driver().calls(DriverCall::CompatibleVersion), 0);
    }
}

#[test]
fn unreadable_compat_range_returns_invalid() {
    let m = SimMachine::new(SimConfig {
        instance: Instance::Trn1,
        device_count: 1,
        emulate_driver: Some(DriverEmulation {
            version: Some(DriverVersion {
                major: 2,
                minor: 27,
            }),
            compat: None,
        }),
        refuse_plumbing: false,
    });
    let (rt, _host) = runtime_on(&m);
    assert_err_prefix(
        init(&rt, &[]),
        NrtStatus::Invalid,
        "Unable to read compatible Driver version",
    );
}

const V2: DriverVersion = DriverVersion {
    major: 2,
    minor: 27,
};

#[test]
fn runtime_id_below_driver_min_names_runtime_and_collectives_packages() {
    // trn2 runtime ids (10, 11); driver accepts [11, 12].
    let (rt, _host) = runtime_on(&emulated_with(
        Instance::Trn2,
        V2,
        CompatRange { min: 11, max: 12 },
    ));
    assert_err(
        init(&rt, &[]),
        NrtStatus::Invalid,
        "Neuron Runtime compatibility id 10 is not within the range [11, 12] supported by the \
         installed Neuron driver. Please update aws-neuronx-runtime-lib and \
         aws-neuronx-collectives.",
    );
    assert_eq!(rt.driver().calls(DriverCall::ReserveCores), 0);
}

#[test]
fn driver_max_below_runtime_id_names_dkms_package() {
    // trn2 runtime ids (10, 11); driver accepts [9, 10].
    let (rt, _host) = runtime_on(&emulated_with(
        Instance::Trn2,
        V2,
        CompatRange { min: 9, max: 10 },
    ));
    assert_err(
        init(&rt, &[]),
        NrtStatus::Invalid,
        "Neuron Runtime compatibility id 11 is not within the range [9, 10] supported by the \
         installed Neuron driver. Please update aws-neuronx-dkms.",
    );
}

#[test]
fn compat_is_a_range_test_not_equality() {
    // Wide ranges that contain the ids are accepted, for both id pairs.
    for (instance, range) in [
        (Instance::Trn2, CompatRange { min: 10, max: 11 }),
        (Instance::Trn2, CompatRange { min: 1, max: 100 }),
        (Instance::Trn1, CompatRange { min: 5, max: 7 }),
        (Instance::Trn1, CompatRange { min: 6, max: 6 }),
        (Instance::Inf2, CompatRange { min: 0, max: 6 }),
    ] {
        let (rt, _host) = runtime_on(&emulated_with(instance, V2, range));
        init(&rt, &[]).unwrap_or_else(|e| panic!("{instance:?} {range:?}: {e}"));
    }
    // SUNDA (trn1/inf2) uses (6, 6): a driver range [7, 7] is too new, [5, 5] too old.
    let (rt, _host) = runtime_on(&emulated_with(
        Instance::Trn1,
        V2,
        CompatRange { min: 7, max: 7 },
    ));
    assert_err_prefix(
        init(&rt, &[]),
        NrtStatus::Invalid,
        "Neuron Runtime compatibility id 6 ",
    );
    let (rt, _host) = runtime_on(&emulated_with(
        Instance::Inf2,
        V2,
        CompatRange { min: 5, max: 5 },
    ));
    let e = init(&rt, &[]).unwrap_err();
    assert!(
        e.message().ends_with("Please update aws-neuronx-dkms."),
        "{e}"
    );
    // The default pair (10, 11) against the SUNDA driver range [5, 7] of the real driver fails.
    let (rt, _host) = runtime_on(&emulated_with(
        Instance::Trn2,
        V2,
        CompatRange { min: 5, max: 7 },
    ));
    assert_err_prefix(
        init(&rt, &[]),
        NrtStatus::Invalid,
        "Neuron Runtime compatibility id 11 ",
    );
}

// ---- §1 failure cleanup ---------------------------------------------------------------------

#[test]
fn failed_init_at_each_driver_call_leaves_start_and_nothing_reserved() {
    let cases = [
        (DriverCall::RegisterSoftIncompatCallback, NrtStatus::Invalid),
        (DriverCall::Discover, NrtStatus::Invalid),
        (DriverCall::DriverVersion, NrtStatus::Invalid),
        (DriverCall::CompatibleVersion, NrtStatus::Invalid),
        (DriverCall::ReserveCores, NrtStatus::Failure),
        (DriverCall::InitCores, NrtStatus::Failure),
        (DriverCall::StartExecReady, NrtStatus::Failure),
    ];
    for vars in [&[][..], &[("NEURON_RT_VISIBLE_CORES", "1-2")][..]] {
        for (call, status) in cases {
            let m = emulated(Instance::Trn1, 2);
            let (rt, _host) = runtime_on(&m);
            rt.driver().fail_next(call);
            let e = init(&rt, vars).unwrap_err();
            assert_eq!(e.status(), status, "{call:?}: {e}");
            assert_eq!(rt.state(), InitState::Start, "{call:?}");
            assert!(m.reserved().is_empty(), "{call:?} left {:?}", m.reserved());
            assert!(
                m.cores().iter().all(|c| !c.initialized && !c.exec_ready),
                "{call:?}"
            );
            // Everything acquired was given back exactly once.
            let reserved = rt.driver().calls(DriverCall::ReserveCores) > 0;
            let released = rt.driver().calls(DriverCall::ReleaseCores);
            let expect_release = u32::from(reserved && !matches!(call, DriverCall::ReserveCores));
            assert_eq!(released, expect_release, "{call:?}");
            let shut = rt.driver().calls(DriverCall::ShutdownCores);
            assert_eq!(
                shut,
                u32::from(call == DriverCall::StartExecReady),
                "{call:?}"
            );
            // The fault was one-shot: a retry succeeds.
            init(&rt, vars).unwrap_or_else(|e| panic!("retry after {call:?}: {e}"));
            assert!(!m.reserved().is_empty());
            rt.close();
            assert!(m.reserved().is_empty());
        }
    }
}

#[test]
fn init_cores_failure_reports_failed_to_initialize_devices() {
    let (rt, _host) = runtime_on(&emulated(Instance::Trn1, 1));
    rt.driver().fail_next(DriverCall::InitCores);
    assert_err(
        init(&rt, &[]),
        NrtStatus::Failure,
        "Failed to initialize devices, error:1 (injected fault in InitCores)",
    );
}

#[test]
fn atfork_registration_failure_returns_failure_and_releases_everything() {
    let m = emulated(Instance::Trn1, 1);
    let (rt, host) = runtime_on(&m);
    host.set_fork_registration_error(Some(12));
    assert_err(
        init(&rt, &[]),
        NrtStatus::Failure,
        "Failed to set atfork handlers, ret=12",
    );
    assert_eq!(rt.state(), InitState::Start);
    assert!(m.reserved().is_empty());
    assert_eq!(rt.driver().calls(DriverCall::ShutdownCores), 1);
    host.set_fork_registration_error(None);
    init(&rt, &[]).unwrap();
}

#[test]
fn dropping_an_initialized_runtime_releases_its_cores() {
    let m = emulated(Instance::Trn1, 1);
    {
        let (rt, _host) = runtime_on(&m);
        init(&rt, &[]).unwrap();
        assert_eq!(m.reserved(), CoreBitmap::range(0, 2));
    }
    assert!(m.reserved().is_empty());
}

#[test]
fn framework_is_recorded() {
    let (rt, _host) = runtime_on(&funtime(Instance::Inf2, 1));
    rt.init(
        FrameworkType::Pytorch,
        "2.5.1",
        "1.0",
        &[("NEURON_RT_NUM_CORES", "1")],
    )
    .unwrap();
    let f = rt.framework().unwrap();
    assert_eq!(f.kind, FrameworkType::Pytorch);
    assert_eq!(f.version.as_str(), "2.5.1");
    assert_eq!(f.fal_version.as_str(), "1.0");
    assert_eq!(FrameworkType::from_raw(1), Some(FrameworkType::NoFw));
    assert_eq!(FrameworkType::from_raw(6), None);
}

#[test]
fn concurrent_inits_bring_the_runtime_up_once() {
    let m = emulated(Instance::Trn1, 1);
    let (rt, _host) = runtime_on(&m);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..4).map(|_| s.spawn(|| init(&rt, &[]))).collect();
        for h in hs {
            h.join().unwrap().unwrap();
        }
    });
    assert_eq!(rt.driver().calls(DriverCall::ReserveCores), 1);
    assert_eq!(m.reserved(), CoreBitmap::range(0, 2));
}

//! Spec 002 §1 (8): logical-core allocation, implicit and explicit.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use nrt_core::bitmap::CoreBitmap;
use nrt_core::driver::DriverCall;
use nrt_core::{InitState, Level, NrtStatus};
use nrt_sim::{Instance, SimConfig, SimMachine};
use nrt_tests::{assert_err, assert_err_prefix, init, runtime_on};

fn funtime(instance: Instance, devices: u32) -> Arc<SimMachine> {
    SimMachine::new(SimConfig::funtime(instance, devices))
}

fn emulated(instance: Instance, devices: u32) -> Arc<SimMachine> {
    SimMachine::new(SimConfig::emulate_driver(instance, devices))
}

fn set(cores: &[u32]) -> CoreBitmap {
    let mut b = CoreBitmap::new();
    for &c in cores {
        b.insert(c);
    }
    b
}

// ---- implicit -------------------------------------------------------------------------------

#[test]
fn implicit_unset_or_zero_allocates_every_core() {
    for vars in [&[][..], &[("NEURON_RT_NUM_CORES", "0")][..]] {
        let m = emulated(Instance::Trn1, 2);
        let (rt, _host) = runtime_on(&m);
        init(&rt, vars).unwrap();
        let a = rt.allocation().unwrap();
        assert_eq!(
            (
                a.topology.lnc_size(),
                a.topology.first_lnc(),
                a.topology.lnc_count()
            ),
            (1, 0, 4)
        );
        assert_eq!(m.reserved(), CoreBitmap::range(0, 4));
    }
}

#[test]
fn implicit_trn2_uses_lnc_2_by_default() {
    let m = emulated(Instance::Trn2, 2);
    let (rt, _host) = runtime_on(&m);
    init(&rt, &[]).unwrap();
    let a = rt.allocation().unwrap();
    assert_eq!(
        (
            a.topology.lnc_size(),
            a.topology.first_lnc(),
            a.topology.lnc_count()
        ),
        (2, 0, 8)
    );
    assert_eq!(m.reserved(), CoreBitmap::range(0, 16));
    assert_eq!(rt.visible_lnc_count().unwrap(), 8);
}

#[test]
fn implicit_num_cores_n_reserves_the_first_n_free_cores() {
    let m = emulated(Instance::Trn1, 2);
    let (a, _) = runtime_on(&m);
    let (b, _) = runtime_on(&m);
    init(&a, &[("NEURON_RT_NUM_CORES", "1")]).unwrap();
    init(&b, &[("NEURON_RT_NUM_CORES", "3")]).unwrap();
    assert_eq!(a.allocation().unwrap().reserved, set(&[0]));
    let bb = b.allocation().unwrap();
    assert_eq!(bb.reserved, set(&[1, 2, 3]));
    // Indices seen by the caller are relative to the process.
    assert_eq!(b.absolute_lnc(0).unwrap(), 1);
    assert_eq!(b.absolute_lnc(2).unwrap(), 3);
    assert_err(
        b.absolute_lnc(3),
        NrtStatus::Invalid,
        "Logical Neuron Core 3 is not visible to this process (visible: 0-2)",
    );
}

#[test]
fn implicit_whole_device_rule_on_trn2() {
    // trn2: LNC 2, 8 physical cores per device (4 logical).
    for (n, ok) in [
        ("1", true),
        ("2", false),
        ("3", false),
        ("4", true),
        ("8", true),
    ] {
        let m = emulated(Instance::Trn2, 2);
        let (rt, _host) = runtime_on(&m);
        let r = init(&rt, &[("NEURON_RT_NUM_CORES", n)]);
        if ok {
            r.unwrap_or_else(|e| panic!("NUM_CORES={n}: {e}"));
        } else {
            assert_err(
                r,
                NrtStatus::Invalid,
                "`NEURON_RT_NUM_CORES` must request one core, or the whole device (multiple of 4)",
            );
            assert!(m.reserved().is_empty());
            assert_eq!(rt.driver().calls(DriverCall::ReserveCores), 0);
        }
    }
    // With LNC 1 on trn2 the device is 8 logical cores.
    let (rt, _host) = runtime_on(&emulated(Instance::Trn2, 1));
    assert_err(
        init(
            &rt,
            &[
                ("NEURON_RT_NUM_CORES", "2"),
                ("NEURON_RT_VIRTUAL_CORE_SIZE", "1"),
            ],
        ),
        NrtStatus::Invalid,
        "`NEURON_RT_NUM_CORES` must request one core, or the whole device (multiple of 8)",
    );
}

#[test]
fn implicit_whole_device_rule_does_not_apply_to_sunda() {
    let (rt, _host) = runtime_on(&emulated(Instance::Inf2, 6));
    init(&rt, &[("NEURON_RT_NUM_CORES", "3")]).unwrap();
    assert_eq!(rt.visible_lnc_count().unwrap(), 3);
}

#[test]
fn implicit_conflict_returns_failure_not_available() {
    let m = emulated(Instance::Trn1, 1);
    let (a, _) = runtime_on(&m);
    let (b, _) = runtime_on(&m);
    init(&a, &[]).unwrap();
    assert_err(
        init(&b, &[("NEURON_RT_NUM_CORES", "1")]),
        NrtStatus::Failure,
        "Logical Neuron Core(s) not available - Requested:1 Available:0 Logical Core size 1",
    );
    assert_eq!(b.state(), InitState::Start);
    a.close();
    init(&b, &[("NEURON_RT_NUM_CORES", "1")]).unwrap();
}

#[test]
fn implicit_conflict_reports_the_longest_free_run() {
    let m = emulated(Instance::Trn1, 2);
    let (a, _) = runtime_on(&m);
    let (b, _) = runtime_on(&m);
    init(&a, &[("NEURON_RT_NUM_CORES", "1")]).unwrap();
    assert_err(
        init(&b, &[]),
        NrtStatus::Failure,
        "Logical Neuron Core(s) not available - Requested:4 Available:3 Logical Core size 1",
    );
}

#[test]
fn implicit_unaligned_start_core_is_refused_and_released() {
    // Another process holds physical core 0 with LNC 1; an LNC-2 process then gets cores 1-2,
    // which do not start a logical core.
    let m = emulated(Instance::Trn2, 1);
    let (a, _) = runtime_on(&m);
    let (b, _) = runtime_on(&m);
    init(
        &a,
        &[
            ("NEURON_RT_NUM_CORES", "1"),
            ("NEURON_RT_VIRTUAL_CORE_SIZE", "1"),
        ],
    )
    .unwrap();
    assert_eq!(m.reserved(), set(&[0]));
    assert_err(
        init(&b, &[("NEURON_RT_NUM_CORES", "1")]),
        NrtStatus::Invalid,
        "Cannot start process with LNC Size of 2. The first free physical NeuronCore 1 is not \
         aligned to the LNC size; free aligned cores or select them with \
         NEURON_RT_VISIBLE_CORES=1-1",
    );
    assert_eq!(
        m.reserved(),
        set(&[0]),
        "the unaligned reservation was given back"
    );
    assert_eq!(b.driver().calls(DriverCall::ReleaseCores), 1);
    // The suggestion works.
    init(&b, &[("NEURON_RT_VISIBLE_CORES", "1-1")]).unwrap();
    assert_eq!(m.reserved(), set(&[0, 2, 3]));
}

#[test]
fn funtime_marks_the_bitmap_locally() {
    let m = funtime(Instance::Trn1, 2);
    let (rt, _host) = runtime_on(&m);
    init(&rt, &[("NEURON_RT_NUM_CORES", "3")]).unwrap();
    let a = rt.allocation().unwrap();
    assert_eq!(a.reserved, CoreBitmap::range(0, 3));
    assert!(!a.driver_reserved);
    assert_eq!(rt.driver().calls(DriverCall::ReserveCores), 0);
    assert!(m.reserved().is_empty(), "nothing asked of the driver");
    rt.close();
    assert_eq!(rt.driver().calls(DriverCall::ReleaseCores), 0);
}

#[test]
fn funtime_request_beyond_the_instance_is_not_available() {
    let (rt, _host) = runtime_on(&funtime(Instance::Trn1, 1));
    assert_err(
        init(&rt, &[("NEURON_RT_NUM_CORES", "3")]),
        NrtStatus::Failure,
        "Logical Neuron Core(s) not available - Requested:3 Available:2 Logical Core size 1",
    );
}

#[test]
fn lnc_size_beyond_the_arch_is_invalid() {
    let (rt, _host) = runtime_on(&funtime(Instance::Trn1, 1));
    assert_err(
        init(&rt, &[("NEURON_RT_VIRTUAL_CORE_SIZE", "2")]),
        NrtStatus::Invalid,
        "Invalid value for NEURON_RT_VIRTUAL_CORE_SIZE: \"2\": this instance supports logical \
         core sizes up to 1",
    );
    let (rt, _host) = runtime_on(&funtime(Instance::Trn2, 1));
    init(&rt, &[("NEURON_RT_VIRTUAL_CORE_SIZE", "1")]).unwrap();
    assert_eq!(rt.visible_lnc_count().unwrap(), 8);
}

// ---- explicit -------------------------------------------------------------------------------

#[test]
fn explicit_range_reserves_exactly_those_cores() {
    let m = emulated(Instance::Trn1, 4);
    let (rt, host) = runtime_on(&m);
    init(
        &rt,
        &[
            ("NEURON_RT_VISIBLE_CORES", "3-6"),
            ("NEURON_RT_LOG_LEVEL", "INFO"),
        ],
    )
    .unwrap();
    let a = rt.allocation().unwrap();
    assert_eq!((a.topology.first_lnc(), a.topology.lnc_count()), (3, 4));
    assert_eq!(m.reserved(), CoreBitmap::range(3, 4));
    assert_eq!(rt.absolute_lnc(0).unwrap(), 3);
    assert!(host.contains(
        Level::Info,
        "LNC info: first lnc 3 last lnc 6 first pnc 3 last pnc 6"
    ));
}

#[test]
fn explicit_list_is_deduplicated_and_sorted() {
    let m = emulated(Instance::Trn1, 4);
    let (rt, _host) = runtime_on(&m);
    init(&rt, &[("NEURON_RT_VISIBLE_CORES", "5,3,4,4,3-4")]).unwrap();
    let a = rt.allocation().unwrap();
    assert_eq!((a.topology.first_lnc(), a.topology.lnc_count()), (3, 3));
    assert_eq!(m.reserved(), set(&[3, 4, 5]));
}

#[test]
fn explicit_lnc_translates_to_physical_cores() {
    let m = emulated(Instance::Trn2, 1);
    let (rt, host) = runtime_on(&m);
    init(
        &rt,
        &[
            ("NEURON_RT_VISIBLE_CORES", "1-2"),
            ("NEURON_RT_LOG_LEVEL", "INFO"),
        ],
    )
    .unwrap();
    assert_eq!(m.reserved(), CoreBitmap::range(2, 4));
    assert!(host.contains(
        Level::Info,
        "LNC info: first lnc 1 last lnc 2 first pnc 2 last pnc 5"
    ));
}

#[test]
fn explicit_non_contiguous_cores_are_invalid() {
    let (rt, _host) = runtime_on(&emulated(Instance::Trn1, 4));
    assert_err(
        init(&rt, &[("NEURON_RT_VISIBLE_CORES", "0,2")]),
        NrtStatus::Invalid,
        "Logical Neuron cores are not contiguous: NEURON_RT_VISIBLE_CORES=0,2",
    );
    assert_eq!(rt.driver().calls(DriverCall::ReserveCores), 0);
}

#[test]
fn explicit_conflict_names_the_requested_range() {
    let m = emulated(Instance::Trn1, 2);
    let (a, _) = runtime_on(&m);
    let (b, _) = runtime_on(&m);
    init(&a, &[("NEURON_RT_VISIBLE_CORES", "2")]).unwrap();
    assert_err(
        init(&b, &[("NEURON_RT_VISIBLE_CORES", "1-2")]),
        NrtStatus::Failure,
        "Logical Neuron Core(s) not available - Requested:lnc1-lnc2 Available:1 Logical Core \
         size 1",
    );
    assert_eq!(m.reserved(), set(&[2]));
}

#[test]
fn explicit_cores_beyond_the_instance_are_not_available() {
    for m in [funtime(Instance::Trn1, 1), emulated(Instance::Trn1, 1)] {
        let (rt, _host) = runtime_on(&m);
        assert_err(
            init(&rt, &[("NEURON_RT_VISIBLE_CORES", "1-2")]),
            NrtStatus::Failure,
            "Logical Neuron Core(s) not available - Requested:lnc1-lnc2 Available:2 Logical Core \
             size 1",
        );
    }
}

#[test]
fn explicit_wins_over_num_cores_with_a_warning() {
    let (rt, host) = runtime_on(&emulated(Instance::Trn1, 2));
    init(
        &rt,
        &[
            ("NEURON_RT_VISIBLE_CORES", "1"),
            ("NEURON_RT_NUM_CORES", "3"),
            ("NEURON_RT_LOG_LEVEL", "WARNING"),
        ],
    )
    .unwrap();
    assert_eq!(rt.visible_lnc_count().unwrap(), 1);
    assert!(host.contains(
        Level::Warning,
        "Using NEURON_RT_VISIBLE_CORES to allocate Logical Neuron Cores; NEURON_RT_NUM_CORES=3 \
         is ignored"
    ));
}

#[test]
fn explicit_funtime_marks_locally() {
    let m = funtime(Instance::Trn2, 1);
    let (rt, _host) = runtime_on(&m);
    init(&rt, &[("NEURON_RT_VISIBLE_CORES", "3")]).unwrap();
    let a = rt.allocation().unwrap();
    assert_eq!(a.reserved, CoreBitmap::range(6, 2));
    assert_eq!(rt.driver().calls(DriverCall::ReserveCores), 0);
}

#[test]
fn explicit_malformed_value_is_refused_by_init() {
    let (rt, _host) = runtime_on(&funtime(Instance::Trn1, 1));
    assert_err_prefix(
        init(&rt, &[("NEURON_RT_VISIBLE_CORES", "3-1")]),
        NrtStatus::Invalid,
        "Invalid value for NEURON_RT_VISIBLE_CORES: \"3-1\"",
    );
}

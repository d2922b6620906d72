//! The simulator's kernel-driver emulation reserves cores with the driver's own scan
//! (`ncrwl_nc_range_mark` in neuron_crwl.c).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use nrt_core::bitmap::CoreBitmap;
use nrt_core::driver::{Driver, DriverError, ErrorKind, Reservation, ReserveRequest};
use nrt_sim::{Instance, SimConfig, SimDriver, SimMachine};

fn req(count: u32, start: u32, end: u32) -> ReserveRequest {
    ReserveRequest { count, start, end }
}

/// A Trn1 machine of two devices (4 cores) with the cores of `busy` held by another process.
fn machine_with_busy(busy: &[u32]) -> (SimDriver, SimDriver) {
    let machine = SimMachine::new(SimConfig::emulate_driver(Instance::Trn1, 2));
    let other = SimDriver::attach(&machine);
    for &c in busy {
        assert_eq!(
            other.reserve_cores(req(1, c, c)).unwrap(),
            Reservation::Reserved(CoreBitmap::range(c, 1))
        );
    }
    (SimDriver::attach(&machine), other)
}

#[test]
fn free_busy_free_free_is_unavailable_for_two_like_the_driver() {
    // [free, busy, free, free]: the run from core 0 stops at busy core 1, the scan resumes at
    // core 3 (it skips core 2), and core 3 alone is too short.
    let (me, _other) = machine_with_busy(&[1]);
    assert_eq!(
        me.reserve_cores(req(2, 0, 3)).unwrap(),
        Reservation::Unavailable { available: 1 }
    );
    assert!(me.reserved().is_empty());
    // Starting the range at core 2 finds the pair.
    assert_eq!(
        me.reserve_cores(req(2, 2, 3)).unwrap(),
        Reservation::Reserved(CoreBitmap::range(2, 2))
    );
}

#[test]
fn the_first_long_enough_run_is_taken() {
    let (me, _other) = machine_with_busy(&[0]);
    assert_eq!(
        me.reserve_cores(req(2, 0, 3)).unwrap(),
        Reservation::Reserved(CoreBitmap::range(1, 2))
    );
    assert_eq!(
        me.reserve_cores(req(1, 0, 3)).unwrap(),
        Reservation::Reserved(CoreBitmap::range(3, 1))
    );
    assert_eq!(
        me.reserve_cores(req(1, 0, 3)).unwrap(),
        Reservation::Unavailable { available: 0 }
    );
}

#[test]
fn max_available_is_the_longest_run_the_scan_saw() {
    // [free, free, busy, free]: runs of 2 (cores 0-1), then core 3 is never a run start
    // (the scan resumes at core 4 after the run that stopped at core 2).
    let (me, _other) = machine_with_busy(&[2]);
    assert_eq!(
        me.reserve_cores(req(3, 0, 3)).unwrap(),
        Reservation::Unavailable { available: 2 }
    );
}

#[test]
fn zero_cores_succeed_empty_and_bad_ranges_are_refused() {
    let (me, _other) = machine_with_busy(&[]);
    assert_eq!(
        me.reserve_cores(req(0, 1, 3)).unwrap(),
        Reservation::Reserved(CoreBitmap::new())
    );
    for bad in [req(1, 2, 1), req(1, 0, 4)] {
        assert_eq!(
            me.reserve_cores(bad).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
    }
}

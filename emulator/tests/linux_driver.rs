//! `nrt_linux::LinuxDriver`, unmodified, against the emulator: discovery, version, compatible
//! version, driver info, core reservation, bring-up (attach + reset) and teardown, then a
//! whole `nrt_core::Runtime` init/close over it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use nrt_core::bitmap::CoreBitmap;
use nrt_core::driver::{
    Arch, CompatRange, CoreInitParams, DeviceInfo, Driver, DriverVersion, Platform, Reservation,
    ReserveRequest,
};
use nrt_core::topology::Topology;
use nrt_core::{FrameworkType, Runtime};
use nrt_emu::InProcessConfig;
use nrt_linux::LinuxDriver;
use nrt_sim::Instance;

fn params(first_lnc: u32, lnc_count: u32, lnc_size: u32, cores_per_device: u32) -> CoreInitParams {
    CoreInitParams {
        topology: Topology::new(first_lnc, lnc_count, lnc_size, cores_per_device).unwrap(),
        reset_cores: true,
        implicit_async: false,
        async_max_inflight: 0,
    }
}

#[test]
fn linux_driver_discovers_reserves_and_brings_up_cores() {
    let ((), acc) = emulate(InProcessConfig::new(Instance::Trn1, 2), |emu| {
        let driver = LinuxDriver::with_roots(emu.dev_dir(), emu.sysfs_root());
        assert_eq!(
            driver.discover().unwrap(),
            DeviceInfo {
                device_count: 2,
                cores_per_device: 2,
                arch: Arch::V2,
                platform: Platform::Hardware,
            }
        );
        assert_eq!(
            driver.driver_version().unwrap(),
            DriverVersion {
                major: 2,
                minor: 24
            }
        );
        assert_eq!(
            driver.compatible_version().unwrap(),
            CompatRange { min: 5, max: 7 }
        );
        assert_eq!(driver.driver_info().unwrap().feature_flags1, 0xff);

        let Reservation::Reserved(cores) = driver
            .reserve_cores(ReserveRequest {
                count: 3,
                start: 0,
                end: 3,
            })
            .unwrap()
        else {
            panic!("not reserved")
        };
        assert_eq!(cores.iter().collect::<Vec<_>>(), vec![0, 1, 2]);
        assert_eq!(emu.accounting().reserved_cores, 3);
        // Only one core is left: the driver reports the longest free run.
        assert_eq!(
            driver
                .reserve_cores(ReserveRequest {
                    count: 2,
                    start: 0,
                    end: 3,
                })
                .unwrap(),
            Reservation::Unavailable { available: 1 }
        );

        // Cores 0-2 span both devices: both are opened O_RDWR and reset.
        let p = params(0, 3, 1, 2);
        driver.init_cores(&p).unwrap();
        let acc = emu.accounting();
        assert_eq!(acc.attached_processes, 1);
        assert_eq!(acc.per_request.get(&NC_RESET), Some(&2));
        assert_eq!(acc.per_request.get(&NC_RESET_READY), Some(&2));
        driver.start_exec_ready(&p).unwrap();
        driver.shutdown_cores(&p).unwrap();
        assert_eq!(emu.accounting().attached_processes, 0);
        driver.release_cores(&cores).unwrap();
        assert_eq!(emu.accounting().reserved_cores, 0);
        assert_eq!(driver.reserved(), CoreBitmap::new());
        // Dropping the driver closes the misc fd, which unmarks anything left.
        let _ = driver.reserve_cores(ReserveRequest {
            count: 1,
            start: 3,
            end: 3,
        });
        assert_eq!(emu.accounting().reserved_cores, 1);
        drop(driver);
        assert_eq!(emu.accounting().reserved_cores, 0);
    });
    assert_eq!(acc.ioctls_failed, 1, "{acc}"); // the EBUSY mark
    assert_eq!(
        (acc.reserved_cores, acc.attached_processes, acc.allocations),
        (0, 0, 0)
    );
}

#[test]
fn a_runtime_inits_and_closes_over_the_emulated_trn2() {
    let ((), acc) = emulate(InProcessConfig::new(Instance::Trn2, 1), |emu| {
        let rt = Runtime::new(LinuxDriver::with_roots(emu.dev_dir(), emu.sysfs_root()));
        rt.init(FrameworkType::NoFw, "", "", &[]).unwrap();
        // 8 physical cores, logical cores of 2.
        assert_eq!(rt.visible_lnc_count().unwrap(), 4);
        assert_eq!(emu.accounting().reserved_cores, 8);
        rt.close();
        assert_eq!(emu.accounting().reserved_cores, 0);
    });
    assert_eq!((acc.reserved_cores, acc.attached_processes), (0, 0));
    assert!(acc.per_request.contains_key(&COMPATIBLE_VERSION), "{acc}");
}

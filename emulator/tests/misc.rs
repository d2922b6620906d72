//! The misc requests through the real syscall path: compatible version, driver and basic
//! info, and what an O_WRONLY fd may not do.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use nrt_emu::InProcessConfig;
use nrt_sim::Instance;

#[test]
fn compatible_version_and_driver_info_per_instance() {
    for (instance, arch, min, max) in [
        (Instance::Trn2, 3, 10, 11),
        (Instance::Trn1, 2, 5, 7),
        (Instance::Inf2, 2, 5, 7),
    ] {
        let ((), acc) = emulate(InProcessConfig::new(instance, 1), |emu| {
            let fd = open(&emu.device_path(0), libc::O_WRONLY).unwrap();
            let mut v = [0u8; 8];
            assert_eq!(ioctl(&fd, COMPATIBLE_VERSION, &mut v), Ok(0));
            assert_eq!(
                (get32(&v, 0), get32(&v, 4)),
                (max, min),
                "{instance:?}: max first"
            );
            let mut info = [0u8; 24];
            assert_eq!(ioctl(&fd, DRIVER_INFO_GET, &mut info), Ok(0));
            assert_eq!(get32(&info, 0), arch);
            assert_eq!(get32(&info, 4), 0);
            assert_eq!(get32(&info, 8), 0);
            assert_eq!(get32(&info, 12), 24);
            assert_eq!(get64(&info, 16), 0xff);
            let mut basic = [0u8; 8];
            assert_eq!(ioctl(&fd, DEVICE_BASIC_INFO, &mut basic), Ok(0));
            assert_eq!((get32(&basic, 0), get32(&basic, 4)), (arch, 0));
            // DRIVER_INFO_SET: the kernel's ENOTSUPP (524).
            assert_eq!(ioctl(&fd, DRIVER_INFO_SET, &mut info), Err(524));
        });
        assert_eq!(acc.ioctls_served, 4);
        assert_eq!(acc.ioctls_failed, 1);
        assert_eq!(acc.per_request.get(&COMPATIBLE_VERSION), Some(&1));
    }
}

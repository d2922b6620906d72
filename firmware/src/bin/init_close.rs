//! The firmware example without the heap: nrt-core built without `alloc` (no NEFF parser, no
//! models), only the lifecycle — init, the visible cores, close, re-init, and a wrong core count. Its size is the core's floor.
#![no_std]
#![no_main]

#[cfg(feature = "alloc")]
compile_error!(
    "build init-close with --no-default-features --features lite: it measures the core without alloc"
);

use core::fmt;

use nrt_core::driver::{Arch, DeviceInfo, Driver, DriverError, ErrorKind, Platform};
use nrt_core::{FrameworkType, NrtStatus, Runtime};
use nrt_firmware::{check, exit};

#[derive(Debug)]
struct Unsupported(&'static str);

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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

struct Lite;

impl Driver for Lite {
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
}

#[cfg_attr(target_arch = "arm", cortex_m_rt::entry)]
#[cfg_attr(target_arch = "riscv32", riscv_rt::entry)]
fn main() -> ! {
    nrt_firmware::stack::paint();
    let rt = Runtime::new(Lite);
    check!(
        rt.init(FrameworkType::NoFw, "", "", &[("NEURON_RT_NUM_CORES", "1")])
            .is_ok(),
        "fw-lite: FAIL init"
    );
    check!(
        rt.visible_lnc_count().ok() == Some(1),
        "fw-lite: FAIL visible cores"
    );
    rt.close();
    check!(
        rt.init(FrameworkType::NoFw, "", "", &[]).is_ok(),
        "fw-lite: FAIL re-init after close"
    );
    check!(
        rt.visible_lnc_count().ok() == Some(1),
        "fw-lite: FAIL visible cores after re-init"
    );
    rt.close();
    let got = rt
        .init(FrameworkType::NoFw, "", "", &[("NEURON_RT_NUM_CORES", "2")])
        .map_err(|e| e.status());
    check!(
        got == Err(NrtStatus::Failure),
        "fw-lite: FAIL init with 2 cores of 1"
    );
    defmt::info!("fw-lite: init/close/re-init ok");
    defmt::info!("fw-lite: stack peak={=usize}", nrt_firmware::stack::used());
    defmt::info!("fw-lite: PASS");
    exit(0)
}

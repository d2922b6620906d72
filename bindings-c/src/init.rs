//! The lifecycle and machine queries: `nrt_init`, `nrt_close`, `nrt_get_version`,
//! `nrt_get_status_as_str`, the core counts, `nrt_get_instance_info`, `nrt_host_device_id_get` and
//! `nrt_get_vnc_memory_stats`.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use nrt_backend::{AnyDriver, FrontEnd, NO_DEVICE_HINT, Selection};
use nrt_core::{Error, FrameworkType, InitState, NrtStatus, err};
use nrt_host::EnvVars;
use nrt_sim::Instance;

use crate::machine;
use crate::{DRIVER, cstr, out, put, rt};

/// Opens the backend the `NEURON_RT_*` variables select, unless one is chosen already. An
/// invalid value is logged and returned (`NRT_INVALID`); with `auto` and no Neuron device
/// nothing is chosen (discovery then fails as libnrt's does) and the log says how to select
/// the simulator.
pub(crate) fn choose_backend() -> Result<(), Error> {
    if DRIVER.get().is_some() {
        return Ok(());
    }
    let selection = Selection::from_vars(FrontEnd::CLibrary, &EnvVars::capture())?;
    match selection.open() {
        Some(driver) => {
            let _ = DRIVER.get_or_choose(|| driver);
        }
        None => rt().log(nrt_core::Level::Error, format_args!("{NO_DEVICE_HINT}")),
    }
    Ok(())
}

pub(crate) static WORKERS_STOP: AtomicBool = AtomicBool::new(false);
pub(crate) static WORKERS: Mutex<Vec<std::thread::JoinHandle<()>>> = Mutex::new(Vec::new());

pub(crate) fn start_workers() {
    WORKERS_STOP.store(false, Ordering::SeqCst);
    let mut w = WORKERS.lock().unwrap_or_else(PoisonError::into_inner);
    if w.is_empty() {
        if let Ok(h) = std::thread::Builder::new()
            .name("nrt-async".into())
            .spawn(|| rt().run_async_worker(&WORKERS_STOP))
        {
            w.push(h);
        }
    }
}

pub(crate) fn stop_workers() {
    WORKERS_STOP.store(true, Ordering::SeqCst);
    let handles = std::mem::take(&mut *WORKERS.lock().unwrap_or_else(PoisonError::into_inner));
    for h in handles {
        let _ = h.join();
    }
}

/// `nrt_init`.
///
/// # Safety
///
/// The version strings are NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_init(
    framework: u32,
    fw_version: *const c_char,
    fal_version: *const c_char,
) -> u32 {
    api!("nrt_init", {
        crate::forward_log_records();
        choose_backend()?;
        // SAFETY: the caller's contract.
        let fw = unsafe { cstr(fw_version) }.unwrap_or_default();
        // SAFETY: the caller's contract.
        let fal = unsafe { cstr(fal_version) }.unwrap_or_default();
        let kind = FrameworkType::from_raw(framework).unwrap_or(FrameworkType::Invalid);
        rt().init(kind, &fw, &fal, &EnvVars::capture())?;
        start_workers();
        Ok(())
    })
}

/// `nrt_close`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_close() {
    api!(void "nrt_close", {
        // A forked child has nothing to close: the runtime and its worker threads belong to
        // the parent (joining them here would wait forever).
        if rt().state() == InitState::Child {
            return Ok(());
        }
        rt().close();
        stop_workers();
        Ok(())
    })
}

/// `nrt_get_version`.
///
/// # Safety
///
/// `ver` is NULL or writable for `size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_get_version(ver: *mut c_void, size: usize) -> u32 {
    api!("nrt_get_version", {
        let p = out(ver.cast::<u8>(), "version")?;
        // SAFETY: the caller's contract: writable for `size` bytes.
        let buf = unsafe { std::slice::from_raw_parts_mut(p, size) };
        nrt_core::version::write_version(buf)
    })
}

/// `nrt_get_status_as_str`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_get_status_as_str(status: u32) -> *const c_char {
    api!(value "nrt_get_status_as_str", std::ptr::null(), {
    static NAMES: OnceLock<Vec<(u32, std::ffi::CString)>> = OnceLock::new();
    let names = NAMES.get_or_init(|| {
        let mut v: Vec<(u32, std::ffi::CString)> = NrtStatus::ALL
            .iter()
            .filter_map(|s| std::ffi::CString::new(s.name()).ok().map(|c| (s.code(), c)))
            .collect();
        if let Ok(c) = std::ffi::CString::new("NRT_UNKNOWN_STATUS") {
            v.push((u32::MAX, c));
        }
        v
    });
    Ok(names
        .iter()
        .find(|(c, _)| *c == status)
        .or_else(|| names.last())
        .map_or(std::ptr::null(), |(_, s)| s.as_ptr()))
    })
}

/// Physical cores and logical core size of the machine, discovering it if needed (the count
/// calls work before `nrt_init`).
pub(crate) fn machine_counts() -> Result<(u32, u32, u32), Error> {
    use nrt_core::driver::Driver;
    choose_backend()?;
    let info = DRIVER
        .discover()
        .map_err(|_| err!(Invalid, "Cannot find Neuron devices"))?;
    let vars = EnvVars::capture();
    let lnc = nrt_core::Config::parse(&vars)?
        .virtual_core_size
        .unwrap_or(info.arch.default_lnc_size())
        .max(1);
    let total = info.total_physical_cores();
    let visible = if rt().state() == InitState::Init {
        rt().visible_lnc_count().unwrap_or(total / lnc)
    } else {
        total / lnc
    };
    Ok((total, total / lnc, visible))
}

macro_rules! count_fn {
    ($name:ident, $label:literal, $pick:expr) => {
        #[doc = concat!("`", $label, "`.")]
        ///
        /// # Safety
        ///
        /// `count` is NULL or writable.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(count: *mut u32) -> u32 {
            api!($label, {
                let p = out(count, "count")?;
                let c = machine_counts()?;
                // SAFETY: checked non-NULL; the caller's contract.
                unsafe { put(p, $pick(c)) };
                Ok(())
            })
        }
    };
}

count_fn!(nrt_get_total_nc_count, "nrt_get_total_nc_count", |c: (
    u32,
    u32,
    u32
)| c.0);
count_fn!(nrt_get_total_vnc_count, "nrt_get_total_vnc_count", |c: (
    u32,
    u32,
    u32
)| c.1);
count_fn!(
    nrt_get_visible_nc_count,
    "nrt_get_visible_nc_count",
    |c: (u32, u32, u32)| c.2
);
count_fn!(
    nrt_get_visible_lnc_count,
    "nrt_get_visible_lnc_count",
    |c: (u32, u32, u32)| c.2
);

/// `nrt_get_instance_info`: family, size, arch name and device revision (32 bytes; a shorter
/// buffer gets the leading fields that fit).
///
/// # Safety
///
/// `info` is NULL or writable for `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_get_instance_info(info: *mut c_void, len: usize) -> u32 {
    api!("nrt_get_instance_info", {
        rt().guard()?;
        let p = out(info.cast::<u8>(), "instance info")?;
        let device = rt().device_info()?;
        let (id, revision): (_, &[u8]) = match DRIVER.get().and_then(AnyDriver::as_sim) {
            Some(d) => {
                let family = match d.machine().config().instance {
                    Instance::Trn1 => "trn1",
                    Instance::Inf2 => "inf2",
                    Instance::Trn2 => "trn2",
                };
                let name = machine::simulated_instance_type(family, device.device_count);
                (machine::from_instance_type(name, &device), b"sim")
            }
            None => match std::fs::read_to_string("/sys/class/dmi/id/product_name") {
                Ok(name) => (machine::from_instance_type(&name, &device), b""),
                Err(_) => (machine::from_arch(&device), b""),
            },
        };
        let arch = id.arch_name.as_bytes();
        let mut bytes = [0u8; 32];
        bytes[0..4].copy_from_slice(&id.family.to_ne_bytes());
        bytes[4..8].copy_from_slice(&id.size.to_ne_bytes());
        bytes[8..8 + arch.len().min(15)].copy_from_slice(&arch[..arch.len().min(15)]);
        bytes[24..24 + revision.len().min(7)].copy_from_slice(&revision[..revision.len().min(7)]);
        let n = len.min(32);
        // SAFETY: the caller's contract: writable for `len` bytes; we write `min(len, 32)`.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, n) };
        Ok(())
    })
}

/// `nrt_host_device_id_get`: the device's own index (the simulator has no containers).
///
/// # Safety
///
/// `host_device_id` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_host_device_id_get(
    neuron_dev: c_int,
    host_device_id: *mut u32,
) -> u32 {
    api!("nrt_host_device_id_get", {
        rt().guard()?;
        let p = out(host_device_id, "host device id")?;
        use nrt_core::driver::Driver;
        let devices = DRIVER
            .discover()
            .map_err(|_| err!(Invalid, "Cannot find Neuron devices"))?
            .device_count;
        match u32::try_from(neuron_dev) {
            Ok(d) if d < devices => {
                // SAFETY: checked non-NULL.
                unsafe { put(p, d) };
                Ok(())
            }
            _ => Err(err!(
                Invalid,
                "No Neuron device {neuron_dev} (the machine has {devices})"
            )),
        }
    })
}

/// `nrt_get_vnc_memory_stats`: device memory in use on the logical core's device and the
/// device's capacity.
///
/// # Safety
///
/// `stats` is NULL or writable for `size_in` bytes; `size_out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_get_vnc_memory_stats(
    vnc: u32,
    stats: *mut c_void,
    size_in: usize,
    size_out: *mut usize,
) -> u32 {
    api!("nrt_get_vnc_memory_stats", {
        rt().guard()?;
        let p = out(stats.cast::<u8>(), "stats")?;
        let abs = rt().absolute_lnc(vnc.into())?;
        let device = rt().topology()?.device_of_lnc(abs);
        // The simulator knows every allocation of its devices (tensors, staged models); on the
        // Linux driver the library counts what it allocated through the driver.
        let (used, limit) = match DRIVER.get().and_then(AnyDriver::as_sim) {
            Some(d) => {
                let m = d.machine();
                (
                    m.device_bytes_allocated(device),
                    m.config().instance.hbm_bytes_per_device(),
                )
            }
            None => (
                DRIVER.bytes_allocated(device),
                machine::hbm_bytes_per_device(rt().device_info()?.arch),
            ),
        };
        let bytes: [u64; 2] = [used, limit];
        let n = size_in.min(16);
        // SAFETY: the caller's contract: writable for `size_in` bytes; we write `min(size_in, 16)`.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr().cast::<u8>(), p, n) };
        if !size_out.is_null() {
            // SAFETY: checked non-NULL.
            unsafe { put(size_out, n) };
        }
        Ok(())
    })
}

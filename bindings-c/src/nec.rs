//! `nrt/nec.h`: the collectives engine's entry points for the collectives library and its
//! network proxy threads.
//!
//! nrt-rs runs single-device programs: it builds no communicators, maps no device semaphores and
//! has no device-link topology, so the proxy and topology calls are not provided (each logs one
//! line naming itself and the reason, and returns its failure value: `NRT_FAILURE`, -1, 0,
//! `false`, or nothing for `void`). The device count, the logical core size and the version
//! are real.

// What the crate's `api!` macro expands to refers to.
use nrt_core::Error;

use std::ffi::{c_char, c_int, c_void};

use nrt_core::driver::Driver;
use nrt_core::err;
use nrt_core::version::{GIT_HASH, RT_VERSION, split_version};

use crate::ffi_util::{boundary, logged, unsupported, unsupported_status};
use crate::{DRIVER, choose_backend, machine_counts, out, put};

const NO_PROXY: &str = "nrt-rs builds no collective communicators, so there are no network proxy \
                        buffers or device semaphores";
const NO_TOPOLOGY: &str = "nrt-rs models no device-to-device links or pods";

/// Logs that `name` is not provided and returns `fallback` (for calls that return no status).
fn not_provided<T>(name: &'static str, why: &str, fallback: T) -> T {
    let _ = unsupported(name, why);
    fallback
}

/// `nec_inc_semaphore`: not provided ([`NO_PROXY`]); writes nothing.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn nec_inc_semaphore(sem_inc_addr: *mut u32, val: u32) {
    let _ = (sem_inc_addr, val);
    boundary("nec_inc_semaphore", (), || {
        not_provided("nec_inc_semaphore", NO_PROXY, ())
    });
}

macro_rules! dynamic_size_fn {
    ($name:ident, $label:literal) => {
        #[doc = concat!("`", $label, "`: not provided (no dynamic send/receive metadata exists); returns 0.")]
        #[unsafe(no_mangle)]
        pub(crate) extern "C" fn $name(
            dyn_input: *mut c_void,
            data_type_sz: usize,
            rank: c_int,
            rank_n: c_int,
        ) -> usize {
            let _ = (dyn_input, data_type_sz, rank, rank_n);
            boundary($label, 0, || not_provided($label, NO_PROXY, 0))
        }
    };
}

dynamic_size_fn!(
    nec_get_dynamic_send_size_bytes,
    "nec_get_dynamic_send_size_bytes"
);
dynamic_size_fn!(
    nec_get_dynamic_send_offset_bytes,
    "nec_get_dynamic_send_offset_bytes"
);
dynamic_size_fn!(
    nec_get_dynamic_recv_offset_bytes,
    "nec_get_dynamic_recv_offset_bytes"
);

/// `nec_set_recv_size_bytes`: not provided; writes nothing.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn nec_set_recv_size_bytes(
    dyn_input: *mut c_void,
    recv_size_bytes: usize,
    data_type_sz: usize,
    src_rank: c_int,
    rank_n: c_int,
) {
    let _ = (dyn_input, recv_size_bytes, data_type_sz, src_rank, rank_n);
    boundary("nec_set_recv_size_bytes", (), || {
        not_provided("nec_set_recv_size_bytes", NO_PROXY, ())
    });
}

/// The number of Neuron devices of the machine (discovering the backend if needed).
fn device_count() -> Result<u32, Error> {
    choose_backend()?;
    DRIVER
        .discover()
        .map(|info| info.device_count)
        .map_err(|_| {
            let e = err!(Invalid, "Cannot find Neuron devices");
            logged(e)
        })
}

/// `nec_get_device_count`: the machine's device count; the ids `0..count` are written to
/// `available_devices_array` (at most `array_size` of them). -1 on failure (logged).
///
/// # Safety
///
/// `available_devices_array` is NULL (with `array_size` 0) or writable for `array_size` ints.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn nec_get_device_count(
    available_devices_array: *mut c_int,
    array_size: u32,
) -> c_int {
    boundary("nec_get_device_count", -1, || {
        let n = match device_count() {
            Ok(n) => n,
            Err(_) => return -1,
        };
        if array_size > 0 && available_devices_array.is_null() {
            let _ = logged(err!(Invalid, "available_devices_array is NULL"));
            return -1;
        }
        for i in 0..n.min(array_size) {
            // SAFETY: the caller's contract: writable for `array_size` ints; `i < array_size`.
            unsafe { available_devices_array.add(i as usize).write(i as c_int) };
        }
        c_int::try_from(n).unwrap_or(c_int::MAX)
    })
}

/// `nec_get_device_pci_bdf`: not provided (devices are not addressed through PCI here).
#[unsafe(no_mangle)]
pub(crate) extern "C" fn nec_get_device_pci_bdf(
    neuron_dev: c_int,
    domain: *mut u32,
    bus_num: *mut u32,
    pci_slot: *mut u8,
    dev_func: *mut u8,
) -> c_int {
    let _ = (neuron_dev, domain, bus_num, pci_slot, dev_func);
    boundary("nec_get_device_pci_bdf", -1, || {
        not_provided(
            "nec_get_device_pci_bdf",
            "nrt-rs does not read the PCI location of devices",
            -1,
        )
    })
}

/// `nec_get_virtual_core_size`: physical cores per logical core (`NEURON_RT_VIRTUAL_CORE_SIZE`
/// or the instance's default).
///
/// # Safety
///
/// `virtual_core_size` is NULL or writable.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn nec_get_virtual_core_size(virtual_core_size: *mut u32) -> u32 {
    api!("nec_get_virtual_core_size", {
        let p = out(virtual_core_size, "virtual_core_size")?;
        let (total, lnc_count, _) = machine_counts()?;
        let size = total.checked_div(lnc_count).unwrap_or(1);
        // SAFETY: checked non-NULL; the caller's contract.
        unsafe { put(p, size) };
        Ok(())
    })
}

/// `nec_version_info_t` up to its flexible tail (56 bytes).
#[repr(C)]
struct NecVersionInfo {
    major: u64,
    minor: u64,
    patch: u64,
    maintenance: u64,
    git_hash: [u8; 16],
    compatibility_version: u64,
}

const _: () = assert!(size_of::<NecVersionInfo>() == 56);

/// `nec_get_version_info`: the runtime version (`major.minor.patch.maintenance` of libnrt 2.31
/// as this library reports it), the first 15 characters of the build's git hash, and
/// compatibility version 0 (nrt-rs makes no collectives-compatibility claim).
///
/// # Safety
///
/// `version_info` is NULL or writable for 56 bytes.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn nec_get_version_info(version_info: *mut c_void) -> u32 {
    api!("nec_get_version_info", {
        let p = out(version_info.cast::<NecVersionInfo>(), "version_info")?;
        let [major, minor, patch, maintenance] = split_version(RT_VERSION);
        let mut git_hash = [0u8; 16];
        for (d, s) in git_hash.iter_mut().zip(GIT_HASH.bytes().take(15)) {
            *d = s;
        }
        let v = NecVersionInfo {
            major,
            minor,
            patch,
            maintenance,
            git_hash,
            compatibility_version: 0,
        };
        // SAFETY: checked non-NULL; the caller's contract (56 writable bytes, 8-aligned).
        unsafe { put(p, v) };
        Ok(())
    })
}

unsupported_status!(
    /// `nec_build_port_and_rid_map`.
    nec_build_port_and_rid_map,
    "nec_build_port_and_rid_map",
    "nrt-rs models no device-to-device links or pods",
    (local_nec_dev_id: c_int, mla_indexes: *mut c_int, host_device_ids: *mut c_int, count: c_int)
);

/// `nec_is_mla_available`: not provided; `false`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn nec_is_mla_available(local_nec_dev_id: c_int, mla_idx: c_int) -> bool {
    let _ = (local_nec_dev_id, mla_idx);
    boundary("nec_is_mla_available", false, || {
        not_provided("nec_is_mla_available", NO_TOPOLOGY, false)
    })
}

macro_rules! topology_int_fn {
    ($name:ident, $label:literal, $a:ident) => {
        #[doc = concat!("`", $label, "`: not provided (no device-link topology); -1.")]
        #[unsafe(no_mangle)]
        pub(crate) extern "C" fn $name(local_nec_dev_id: c_int, $a: c_int) -> c_int {
            let _ = (local_nec_dev_id, $a);
            boundary($label, -1, || not_provided($label, NO_TOPOLOGY, -1))
        }
    };
}

topology_int_fn!(nec_mla_idx_to_rid, "nec_mla_idx_to_rid", mla_idx);
topology_int_fn!(nec_rid_to_mla_idx, "nec_rid_to_mla_idx", rid);

/// `nec_get_peer_mla_idx`: not provided; -1.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn nec_get_peer_mla_idx(
    local_nec_dev_id: c_int,
    mla_idx: c_int,
    port: c_int,
) -> c_int {
    let _ = (local_nec_dev_id, mla_idx, port);
    boundary("nec_get_peer_mla_idx", -1, || {
        not_provided("nec_get_peer_mla_idx", NO_TOPOLOGY, -1)
    })
}

/// `nec_get_p2p_pod_peer_node`: not provided; -1, `*peer_node` untouched.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn nec_get_p2p_pod_peer_node(
    nec_dev_id: u32,
    node: c_int,
    port_distance: u32,
    peer_node: *mut c_int,
) -> c_int {
    let _ = (nec_dev_id, node, port_distance, peer_node);
    boundary("nec_get_p2p_pod_peer_node", -1, || {
        not_provided("nec_get_p2p_pod_peer_node", NO_TOPOLOGY, -1)
    })
}

unsupported_status!(
    /// `nec_pod_node_can_access_peer_node`.
    nec_pod_node_can_access_peer_node,
    "nec_pod_node_can_access_peer_node",
    "nrt-rs models no device-to-device links or pods",
    (pod_type: u32, local_rid: u32, local_node_id: u32, remote_rid: u32, remote_node_id: u32, can_access_peer: *mut c_int)
);

/// `nec_ndl_printk`: not provided (nothing reaches the kernel log).
#[unsafe(no_mangle)]
pub(crate) extern "C" fn nec_ndl_printk(str: *mut c_char, size: u32, action: u32) {
    let _ = (str, size, action);
    boundary("nec_ndl_printk", (), || {
        not_provided(
            "nec_ndl_printk",
            "nrt-rs does not write to the kernel log through the Neuron driver",
            (),
        )
    });
}

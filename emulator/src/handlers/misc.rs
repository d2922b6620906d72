//! The misc set (`ncdev_misc_ioctl`), the only requests served on an `O_WRONLY` fd and the
//! fall-through of every unknown request on an `O_RDWR` one: core-range mark/unmark, the
//! compatible-version range, basic and driver info.

use nrt_core::driver::Arch;
use nrt_sim::Instance;

use super::call::{Call, Outcome, errno};
use crate::abi::layouts::{compatible_version, crwl_nc_map, device_basic_info, device_driver_info};
use crate::abi::requests::{self as rq, ioc_dir, ioc_nr, ioc_size};
use crate::abi::{Layout, Rec};
use crate::crwl::{Mark, shift_left, shift_right};
use crate::state::State;

/// `NEURON_ARCH_*` of an instance.
pub(crate) fn arch_number(instance: Instance) -> u32 {
    match instance.arch() {
        Arch::V1 => 1,
        Arch::V2 => 2,
        _ => 3,
    }
}

/// The PCI revision the emulated devices report (a production part: not the driver's QEMU
/// (255) or hardware-emulator (240) revisions, so the runtime takes its hardware paths).
pub const PCI_REVISION: u32 = 0;

/// `feature_flags1` of driver 2.24.7.0: DMABUF … CONTIGUOUS_SCRATCHPAD.
pub const FEATURE_FLAGS: u64 = 0xff;

/// The kernel's `ENOTSUPP` (not a user-space errno; what `DRIVER_INFO_SET` returns).
pub(crate) const ENOTSUPP: i32 = 524;

/// Serves a misc request; anything else is `EINVAL`.
pub(crate) fn misc(st: &mut State, call: &Call<'_, '_>) -> Outcome {
    let r = call.request;
    match r {
        rq::CRWL_NC_RANGE_MARK | rq::CRWL_NC_RANGE_MARK_EXT0 => range_mark(st, call),
        rq::CRWL_NC_RANGE_UNMARK | rq::CRWL_NC_RANGE_UNMARK_EXT0 => range_unmark(st, call),
        rq::COMPATIBLE_VERSION => {
            let range = st.instance.driver_compat_range();
            let mut rec = Rec::zeroed(&compatible_version::LAYOUT);
            rec.set(compatible_version::MAX, u64::from(range.max));
            rec.set(compatible_version::MIN, u64::from(range.min));
            call.write_arg(&rec)?;
            Ok(0)
        }
        rq::DEVICE_BASIC_INFO => {
            let mut rec = Rec::zeroed(&device_basic_info::LAYOUT);
            rec.set(
                device_basic_info::ARCHITECTURE,
                u64::from(arch_number(st.instance)),
            );
            rec.set(device_basic_info::REVISION, u64::from(PCI_REVISION));
            call.write_arg(&rec)?;
            Ok(0)
        }
        _ if ioc_nr(r) == ioc_nr(rq::DRIVER_INFO_GET) => driver_info(st, call),
        rq::DEVICE_BDF_EXT
        | rq::DMABUF_FD
        | rq::PRINTK
        | rq::NC_PID_STATE_DUMP
        | rq::GET_LOGICAL_TO_PHYSICAL_NC_MAP => errno(libc::EOPNOTSUPP),
        _ if [115, 121, 122, 123].contains(&ioc_nr(r)) => errno(libc::EOPNOTSUPP),
        _ => errno(libc::EINVAL),
    }
}

/// `ncdev_driver_info`: dispatched by number; a write is `ENOTSUPP`, a read of at least the
/// struct's size gets the struct.
fn driver_info(st: &State, call: &Call<'_, '_>) -> Outcome {
    match ioc_dir(call.request) {
        1 => errno(ENOTSUPP),
        2 if ioc_size(call.request) as usize >= device_driver_info::LAYOUT.sizeof => {
            let mut rec = Rec::zeroed(&device_driver_info::LAYOUT);
            rec.set(
                device_driver_info::ARCHITECTURE,
                u64::from(arch_number(st.instance)),
            );
            rec.set(device_driver_info::REVISION, u64::from(PCI_REVISION));
            rec.set(device_driver_info::VERSION, 0);
            rec.set(
                device_driver_info::SIZE,
                device_driver_info::LAYOUT.sizeof as u64,
            );
            rec.set(device_driver_info::FEATURE_FLAGS1, FEATURE_FLAGS);
            call.write_arg(&rec)?;
            Ok(0)
        }
        _ => errno(libc::EINVAL),
    }
}

/// The struct size a range request copies: the legacy struct when `_IOC_SIZE` is a pointer's,
/// the extended one when it is the extended struct's, else `EINVAL`.
fn range_size(call: &Call<'_, '_>) -> Result<usize, super::call::Fail> {
    use crate::abi::layouts::crwl_nc_map_ext;
    match ioc_size(call.request) as usize {
        8 => Ok(crwl_nc_map::LAYOUT.sizeof),
        n if n == crwl_nc_map_ext::LAYOUT.sizeof => Ok(n),
        _ => errno(libc::EINVAL),
    }
}

fn ext_layout() -> &'static Layout {
    &crate::abi::layouts::crwl_nc_map_ext::LAYOUT
}

/// The bitmap of an extended record as 8 words.
fn bitmap_words(rec: &Rec) -> Vec<u64> {
    use crate::abi::layouts::crwl_nc_map_ext;
    rec.field_bytes(crwl_nc_map_ext::BITMAP)
        .chunks(8)
        .map(|c| {
            let mut w = [0u8; 8];
            for (d, s) in w.iter_mut().zip(c) {
                *d = *s;
            }
            u64::from_le_bytes(w)
        })
        .collect()
}

fn set_bitmap_words(rec: &mut Rec, words: &[u64]) {
    use crate::abi::layouts::crwl_nc_map_ext;
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    rec.set_field_bytes(crwl_nc_map_ext::BITMAP, &bytes);
}

/// `ncdev_crwl_nc_range_mark`: indices are relative to the fd's device; the result bitmap is
/// shifted back and copied out on success and on `EBUSY` alike.
fn range_mark(st: &mut State, call: &Call<'_, '_>) -> Outcome {
    use crate::abi::layouts::crwl_nc_map_ext as ext;
    let size = range_size(call)?;
    // The legacy struct is a prefix of the extended one (same offsets, 8-byte bitmap).
    let mut rec = call.read_arg_n(ext_layout(), size)?;
    let offset = st.instance.cores_per_device() * call.device;
    let start = rec.get32(ext::START_NC_INDEX).wrapping_add(offset);
    let end = rec.get32(ext::END_NC_INDEX).wrapping_add(offset);
    let count = rec.get32(ext::NC_COUNT);
    let (map, max, result) = match st.ranges.mark(call.tgid(), count, start, end) {
        Mark::Marked(map) => (map, 0, Ok(0)),
        Mark::Busy(max) => (vec![0; 8], max, errno(libc::EBUSY)),
        Mark::Invalid => (vec![0; 8], 0, errno(libc::EINVAL)),
    };
    set_bitmap_words(&mut rec, &shift_right(&map, offset as usize));
    rec.set(ext::MAX_NC_AVAILABLE, u64::from(max));
    // The driver copies the struct back whatever the outcome; a failed copy after a failed
    // mark is ignored.
    let copied = call.write_arg_n(&rec, size);
    match result {
        Ok(v) => copied.map(|_| v),
        Err(e) => Err(e),
    }
}

/// `ncdev_crwl_nc_range_unmark`: always succeeds once the struct is read; frees only the
/// caller's cores.
fn range_unmark(st: &mut State, call: &Call<'_, '_>) -> Outcome {
    let size = range_size(call)?;
    let rec = call.read_arg_n(ext_layout(), size)?;
    let offset = st.instance.cores_per_device() * call.device;
    let map = shift_left(&bitmap_words(&rec), offset as usize);
    st.ranges.unmark(call.tgid(), &map);
    Ok(0)
}

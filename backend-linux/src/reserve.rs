//! Core-range reservation (`CRWL_NC_RANGE_MARK` / `UNMARK`, 512-core `_EXT0` forms when the
//! driver reports `BIG_CORE_MAPS`).

use nrt_core::bitmap::{CoreBitmap, MAX_CORES};
use nrt_core::driver::ReserveRequest;

use crate::error::LinuxError;
use crate::sys::{self, DeviceFd};

// The extended reservation bitmap and the runtime's core bitmap are the same 512 bits.
const _: () = assert!(sys::CRWL_NC_MAP_EXT_WORDS * 64 == MAX_CORES as usize);

/// What a mark gave.
pub(crate) enum MarkOutcome {
    /// The cores marked.
    Reserved(CoreBitmap),
    /// `EBUSY`: the driver's longest free run.
    Busy { available: u32 },
}

fn legacy_bitmap(bitmap: u64) -> CoreBitmap {
    let mut words = [0u64; sys::CRWL_NC_MAP_EXT_WORDS];
    words[0] = bitmap;
    CoreBitmap::from_words(words)
}

/// Marks a core range with the `_EXT0` request (`big`, the driver has `BIG_CORE_MAPS`) or the
/// legacy 64-core one.
pub(crate) fn mark(
    fd: &DeviceFd,
    big: bool,
    request: ReserveRequest,
) -> Result<MarkOutcome, LinuxError> {
    if big {
        let mut arg = sys::CrwlNcMapExt {
            nc_count: request.count,
            start_nc_index: request.start,
            end_nc_index: request.end,
            ..Default::default()
        };
        return match sys::ioctl(fd, sys::CRWL_NC_RANGE_MARK_EXT0, &mut arg) {
            Ok(_) => Ok(MarkOutcome::Reserved(CoreBitmap::from_words(arg.bitmap))),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Ok(MarkOutcome::Busy {
                available: arg.max_nc_available,
            }),
            Err(e) => Err(LinuxError::io("CRWL_NC_RANGE_MARK_EXT0", e)),
        };
    }
    let mut arg = sys::CrwlNcMap {
        nc_count: request.count,
        start_nc_index: request.start,
        end_nc_index: request.end,
        ..Default::default()
    };
    match sys::ioctl(fd, sys::CRWL_NC_RANGE_MARK, &mut arg) {
        Ok(_) => Ok(MarkOutcome::Reserved(legacy_bitmap(arg.bitmap))),
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Ok(MarkOutcome::Busy {
            available: arg.max_nc_available,
        }),
        Err(e) => Err(LinuxError::io("CRWL_NC_RANGE_MARK", e)),
    }
}

/// Unmarks the cores of `bitmap` (the legacy request carries cores 0–63 only).
pub(crate) fn unmark(fd: &DeviceFd, big: bool, bitmap: &CoreBitmap) -> Result<(), LinuxError> {
    let nc_count = bitmap.len();
    let start_nc_index = bitmap.first().unwrap_or(0);
    let end_nc_index = bitmap.last().unwrap_or(0);
    if big {
        let mut arg = sys::CrwlNcMapExt {
            nc_count,
            start_nc_index,
            end_nc_index,
            max_nc_available: 0,
            bitmap: *bitmap.words(),
        };
        return sys::ioctl(fd, sys::CRWL_NC_RANGE_UNMARK_EXT0, &mut arg)
            .map(|_| ())
            .map_err(|e| LinuxError::io("CRWL_NC_RANGE_UNMARK_EXT0", e));
    }
    let words = bitmap.words();
    if words.iter().skip(1).any(|&w| w != 0) {
        return Err(LinuxError::bitmap_too_wide("CRWL_NC_RANGE_UNMARK"));
    }
    let mut arg = sys::CrwlNcMap {
        nc_count,
        start_nc_index,
        end_nc_index,
        max_nc_available: 0,
        bitmap: words[0],
    };
    sys::ioctl(fd, sys::CRWL_NC_RANGE_UNMARK, &mut arg)
        .map(|_| ())
        .map_err(|e| LinuxError::io("CRWL_NC_RANGE_UNMARK", e))
}

//! `nrt/nrt.h` functions the header declared and the library did not export (found by
//! `tests/c/all_headers.c`, which takes the address of every declared function). They belong
//! with their kin (the count functions) when `lib.rs` is split into one file per C object.

// What the crate's `api!` macro expands to refers to.

use crate::{machine_counts, out, put};

/// `nrt_get_visible_vnc_count`: logical cores visible to this process (as
/// `nrt_get_visible_nc_count`, its deprecated twin). Callable before `nrt_init`.
///
/// # Safety
///
/// `vnc_count` is NULL or writable.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn nrt_get_visible_vnc_count(vnc_count: *mut u32) -> u32 {
    api!("nrt_get_visible_vnc_count", {
        let p = out(vnc_count, "count")?;
        let (_, _, visible) = machine_counts()?;
        // SAFETY: checked non-NULL; the caller's contract.
        unsafe { put(p, visible) };
        Ok(())
    })
}

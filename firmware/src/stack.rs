//! Stack high-water mark: the stack below the caller is painted with a pattern first thing,
//! and [`used`] finds the deepest byte that was overwritten since.

const PATTERN: u32 = 0xA5A5_5A5A;
/// Bytes painted below the painting frame (the stack's expected depth is well under this).
const WINDOW: usize = 256 * 1024;

unsafe extern "C" {
    static __euninit: u8;
    static _stack_start: u8;
}

fn bounds() -> (usize, usize) {
    // Linker symbols: only their addresses are taken.
    let (low, top) = (
        &raw const __euninit as usize,
        &raw const _stack_start as usize,
    );
    (low.next_multiple_of(4), top)
}

/// Paints the stack from `WINDOW` bytes below here (or the end of the statics) up to 1 KiB
/// below the caller's frame.
#[inline(never)]
pub fn paint() {
    let marker = 0u32;
    let here = core::ptr::addr_of!(marker) as usize;
    let (low, top) = bounds();
    let bottom = here.saturating_sub(WINDOW).max(low).next_multiple_of(4);
    let end = here.saturating_sub(1024) & !3;
    let mut p = bottom;
    while p < end && p < top {
        // SAFETY: unused stack memory below the live frames, word aligned.
        unsafe { core::ptr::write_volatile(p as *mut u32, PATTERN) };
        p += 4;
    }
    BOTTOM.store(bottom, core::sync::atomic::Ordering::Relaxed);
}

static BOTTOM: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// Bytes of stack used at most since [`paint`] (from the top of the stack).
pub fn used() -> usize {
    let (_, top) = bounds();
    let mut p = BOTTOM.load(core::sync::atomic::Ordering::Relaxed);
    if p == 0 {
        return 0;
    }
    // SAFETY: the painted range, word aligned; read only.
    while p < top && unsafe { core::ptr::read_volatile(p as *const u32) } == PATTERN {
        p += 4;
    }
    top - p
}

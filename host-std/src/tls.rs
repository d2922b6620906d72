//! Per-thread words of the host (the registry reader index, the current C function's name)
//! reached without `__tls_get_addr`.
//!
//! Rust's `thread_local!` in a shared library uses the general-dynamic TLS model: every access
//! calls `__tls_get_addr`. Profiles of libnrt's hot path showed those calls at 15 % of a
//! `nrt_get_model_nc_count` loop. On x86-64 Linux these words instead live in a `.tbss` block
//! accessed with the **initial-exec** model (`%fs:0` plus a GOT-held offset, relaxed to a
//! constant by the linker in an executable): two loads, no call. A shared library using it is
//! marked `STATIC_TLS`; glibc reserves surplus static TLS for such libraries, so `dlopen` works
//! (the block is 32 bytes). Other targets fall back to `thread_local!`.

/// The per-thread words. Zero-initialised: no reader index drawn yet, no call label.
#[repr(C)]
#[derive(Clone, Copy)]
struct Words {
    /// 0: none drawn yet; otherwise the thread's reader index plus one.
    reader: usize,
    /// Pointer and length of a `&'static str`; NULL when unset.
    label_ptr: *const u8,
    label_len: usize,
    _pad: usize,
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
core::arch::global_asm!(
    ".pushsection .tbss,\"awT\",@nobits",
    ".p2align 4",
    ".globl nrt_host_thread_words_v1",
    ".hidden nrt_host_thread_words_v1",
    ".type nrt_host_thread_words_v1, @object",
    ".size nrt_host_thread_words_v1, 32",
    "nrt_host_thread_words_v1:",
    ".zero 32",
    ".popsection",
);

/// The calling thread's words.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[inline(always)]
fn words() -> *mut Words {
    let p: *mut Words;
    // SAFETY: the initial-exec access sequence of the x86-64 TLS ABI: `%fs:0` holds the thread
    // pointer (the TCB's self pointer) and the GOT entry the TPOFF of the 32-byte, 16-aligned
    // `.tbss` block defined above. It reads memory only; the result is this thread's block.
    unsafe {
        core::arch::asm!(
            "mov {p}, qword ptr fs:[0]",
            "add {p}, qword ptr [rip + nrt_host_thread_words_v1@GOTTPOFF]",
            p = out(reg) p,
            options(nostack, readonly, pure),
        );
    }
    p
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
#[inline(always)]
fn words() -> *mut Words {
    thread_local! {
        static WORDS: core::cell::UnsafeCell<Words> = const {
            core::cell::UnsafeCell::new(Words {
                reader: 0,
                label_ptr: core::ptr::null(),
                label_len: 0,
                _pad: 0,
            })
        };
    }
    WORDS.with(core::cell::UnsafeCell::get)
}

/// The calling thread's reader index, drawn from `next` the first time.
#[inline]
pub(crate) fn reader_index(next: impl FnOnce() -> usize) -> usize {
    let w = words();
    // SAFETY: `w` is the calling thread's own block (no other thread accesses it), valid for
    // the thread's life; no reference to it is held across this call.
    let v = unsafe { (*w).reader };
    if v != 0 {
        return v - 1;
    }
    let index = next();
    // SAFETY: as above.
    unsafe { (*w).reader = index.wrapping_add(1) };
    index
}

/// Sets the calling thread's call label (the C function it is in) and returns the previous
/// one (`None` when unset).
#[inline]
pub fn replace_call_label(label: Option<&'static str>) -> Option<&'static str> {
    let w = words();
    let old = call_label();
    let (ptr, len) = label.map_or((core::ptr::null(), 0), |s| (s.as_ptr(), s.len()));
    // SAFETY: the calling thread's own block, as in `reader_index`.
    unsafe {
        (*w).label_ptr = ptr;
        (*w).label_len = len;
    }
    old
}

/// The calling thread's call label (`None` when unset).
#[inline]
pub fn call_label() -> Option<&'static str> {
    let w = words();
    // SAFETY: the calling thread's own block, as in `reader_index`.
    let (ptr, len) = unsafe { ((*w).label_ptr, (*w).label_len) };
    if ptr.is_null() {
        return None;
    }
    // SAFETY: a non-NULL pointer was stored by `replace_call_label` from a `&'static str` of
    // this length: valid UTF-8 that lives forever.
    Some(unsafe { core::str::from_utf8_unchecked(core::slice::from_raw_parts(ptr, len)) })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn call_labels_are_per_thread() {
        assert_eq!(replace_call_label(Some("nrt_a")), None);
        assert_eq!(call_label(), Some("nrt_a"));
        std::thread::spawn(|| {
            assert_eq!(call_label(), None, "a new thread starts unset");
            assert_eq!(replace_call_label(Some("nrt_b")), None);
            assert_eq!(call_label(), Some("nrt_b"));
        })
        .join()
        .unwrap();
        assert_eq!(replace_call_label(None), Some("nrt_a"));
        assert_eq!(call_label(), None);
    }

    #[test]
    fn reader_index_is_drawn_once_per_thread() {
        let mut draws = 0;
        let a = reader_index(|| {
            draws += 1;
            41
        });
        let b = reader_index(|| {
            draws += 1;
            7
        });
        assert_eq!((a, b, draws), (41, 41, 1));
        let other = std::thread::spawn(|| (reader_index(|| 5), reader_index(|| 6)))
            .join()
            .unwrap();
        assert_eq!(other, (5, 5));
    }
}

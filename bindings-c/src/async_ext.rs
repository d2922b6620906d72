//! The `nrt_async.h` calls beyond the version-3 scheduling API: completion handles
//! (`nrta_get_completion_handle`) and error trackers (`nrta_error_tracker_*`).
//!
//! Both come from the 2.x form of the explicit-async interface, where every scheduling call
//! took an error tracker; libnrt 2.31 (version 3) replaced that argument with `NRT_STATUS *ret`
//! and removed these calls. nrt-rs keeps them as stand-alone calls over version-3 sequence ids:
//!
//! - A completion handle is an eventfd. When the request has already completed it is signalled
//!   at once; otherwise a watcher thread (started on demand, gone when nothing is watched)
//!   polls the request's completion and signals it then — or when the runtime closes, which
//!   completes every queued request. The watcher writes to its own duplicate of the descriptor,
//!   so a caller that closes its handle early never makes it write to a reused number.
//! - An error tracker belongs to one logical core and collects, in completion order, every
//!   execution on that core that fails once it exists (whichever call ran it), as
//!   `{seq_id, error_code}`. `seq_id` is the request's sequence id when the failed execution
//!   ran from the core's compute queue (`nrta_execute_schedule`) on the library's worker thread,
//!   and 0 for a synchronous `nrt_execute` (which reports its status itself), with implicit
//!   async mode on (whose queue has no sequence ids), and for a queued request that a waiting
//!   call (`nrt_unload`, `nrt_close`, `nrt_async_drain_queued_execs`) ran on its own thread. Failures reach the trackers through the hook the first
//!   `nrta_error_tracker_create` installs in `exec_observer.rs`, which the driver wrapper calls
//!   for every failed submission.

// What the crate's `api!` macro expands to refers to.
use crate::rt;

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use nrt_core::{NrtStatus, Xu, err};

use crate::ffi_util::{boundary, log_msg, logged};
use crate::{out, put};

/// `nrta_error_t` (16 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NrtaError {
    /// The request's sequence id (0: none).
    pub(crate) seq_id: u64,
    /// Its `NRT_STATUS`.
    pub(crate) error_code: u64,
}

const _: () = assert!(size_of::<NrtaError>() == 16);

// ---- completion handles ----------------------------------------------------------------------

/// Watched requests: (sequence id, the watcher's duplicate of the handle).
fn watched() -> MutexGuard<'static, Vec<(u64, c_int)>> {
    static W: Mutex<Vec<(u64, c_int)>> = Mutex::new(Vec::new());
    W.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether a watcher thread is running (changed only with the `watched` lock held).
static WATCHING: Mutex<bool> = Mutex::new(false);

/// Makes `fd` readable (adds 1 to the eventfd counter).
fn signal(fd: c_int) {
    let one = 1u64;
    // SAFETY: `fd` is an eventfd this module opened and has not closed.
    unsafe { libc::write(fd, (&raw const one).cast(), 8) };
}

/// Whether request `seq` is done: completed, or the runtime is no longer running (closing
/// completes every queued request), without logging.
fn done(seq: u64) -> bool {
    if rt().guard().is_err() {
        return true;
    }
    rt().is_completed(seq).unwrap_or(true)
}

fn watcher() {
    loop {
        std::thread::sleep(Duration::from_micros(100));
        let mut w = watched();
        w.retain(|&(seq, fd)| {
            if done(seq) {
                signal(fd);
                // SAFETY: the watcher's own duplicate, closed once, here.
                unsafe { libc::close(fd) };
                false
            } else {
                true
            }
        });
        if w.is_empty() {
            *WATCHING.lock().unwrap_or_else(PoisonError::into_inner) = false;
            return;
        }
    }
}

/// `nrta_get_completion_handle`: a new eventfd in `*fd` that polls readable once request `seq`
/// has completed. An id that was never issued is `NRT_INVALID`.
///
/// # Safety
///
/// `fd` is NULL or writable.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn nrta_get_completion_handle(seq: u64, fd: *mut c_int) -> u32 {
    api!("nrta_get_completion_handle", {
        let p = out(fd, "fd")?;
        // Validates the id (logged by the runtime when invalid).
        let completed = rt().is_completed(seq)?;
        // SAFETY: plain system calls on descriptors created here.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if efd < 0 {
            let e = err!(
                Resource,
                "Failed to create a completion handle: {}",
                std::io::Error::last_os_error()
            );
            return Err(logged(e));
        }
        if completed {
            signal(efd);
        } else {
            // SAFETY: `efd` is open.
            let own = unsafe { libc::fcntl(efd, libc::F_DUPFD_CLOEXEC, 0) };
            if own < 0 {
                // SAFETY: ours, open.
                unsafe { libc::close(efd) };
                let e = err!(
                    Resource,
                    "Failed to create a completion handle: {}",
                    std::io::Error::last_os_error()
                );
                return Err(logged(e));
            }
            let mut w = watched();
            w.push((seq, own));
            let mut running = WATCHING.lock().unwrap_or_else(PoisonError::into_inner);
            if !*running {
                let spawned = std::thread::Builder::new()
                    .name("nrt-completion".into())
                    .spawn(watcher);
                if spawned.is_err() {
                    w.pop();
                    // SAFETY: ours, open, closed once.
                    unsafe {
                        libc::close(own);
                        libc::close(efd);
                    }
                    let e = err!(Resource, "Failed to start the completion-handle watcher");
                    return Err(logged(e));
                }
                *running = true;
            }
        }
        // SAFETY: checked non-NULL.
        unsafe { put(p, efd) };
        Ok(())
    })
}

// ---- error trackers --------------------------------------------------------------------------

struct Tracker {
    /// Absolute logical core.
    lnc: u32,
    /// Process-relative logical core.
    relative: u32,
    /// Implicit async mode was on when it was created (no sequence ids then).
    implicit: bool,
    pending: Vec<NrtaError>,
    /// The list the last `get_list` returned (valid until the next call or destruction).
    returned: Vec<NrtaError>,
}

fn trackers() -> MutexGuard<'static, HashMap<usize, Tracker>> {
    static T: OnceLock<Mutex<HashMap<usize, Tracker>>> = OnceLock::new();
    T.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// Called for every failed execution on absolute logical core `lnc` once a tracker was created
/// (the hook of `exec_observer.rs`): appends it to the trackers of that core.
/// `from_queue_thread`: it ran on the library's async worker thread.
fn record_failure(lnc: u32, status: NrtStatus, from_queue_thread: bool) {
    let mut t = trackers();
    if t.is_empty() {
        return;
    }
    for tr in t.values_mut().filter(|tr| tr.lnc == lnc) {
        let seq_id = if from_queue_thread && !tr.implicit {
            // The compute queue runs one request at a time, in order, and marks it completed
            // after the execution returns: the failing one follows the last completed one.
            rt().last_completed_sequence(tr.relative, Xu::Compute, 0)
                .map_or(0, |last| last + 1)
        } else {
            0
        };
        tr.pending.push(NrtaError {
            seq_id,
            error_code: u64::from(status.code()),
        });
    }
}

/// `nrta_error_tracker_create`: a tracker of process-relative logical core `lnc_idx`.
///
/// # Safety
///
/// `error_tracker` is NULL or writable.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn nrta_error_tracker_create(
    lnc_idx: u32,
    error_tracker: *mut *mut c_void,
) -> u32 {
    api!("nrta_error_tracker_create", {
        let p = out(error_tracker, "error_tracker")?;
        let lnc = rt().absolute_lnc(i64::from(lnc_idx))?;
        let implicit = rt().config()?.implicit_async();
        crate::exec_observer::set_failure_hook(record_failure);
        // The handle is the address of a small allocation of ours (unique while it lives).
        let h = Box::into_raw(Box::new(lnc_idx)) as usize;
        trackers().insert(
            h,
            Tracker {
                lnc,
                relative: lnc_idx,
                implicit,
                pending: Vec::new(),
                returned: Vec::new(),
            },
        );
        // SAFETY: checked non-NULL.
        unsafe { put(p, h as *mut c_void) };
        Ok(())
    })
}

/// `nrta_error_tracker_destroy`: frees the tracker; NULL is ignored, an unknown pointer logged.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn nrta_error_tracker_destroy(error_tracker: *mut c_void) {
    boundary("nrta_error_tracker_destroy", (), || {
        if error_tracker.is_null() {
            return;
        }
        if trackers().remove(&(error_tracker as usize)).is_some() {
            // SAFETY: was listed, so it came from `Box::into_raw` in create; unlisted, so
            // freed once.
            drop(unsafe { Box::from_raw(error_tracker.cast::<u32>()) });
        } else {
            log_msg(format_args!("{error_tracker:p} is not an error tracker"));
        }
    });
}

/// `nrta_error_tracker_get_list`: the failures recorded since the previous call, oldest first
/// (`*list` NULL when there are none); the tracker starts empty again.
///
/// # Safety
///
/// `list` and `error_count` are NULL or writable.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn nrta_error_tracker_get_list(
    error_tracker: *mut c_void,
    list: *mut *const NrtaError,
    error_count: *mut usize,
) -> u32 {
    api!("nrta_error_tracker_get_list", {
        let l = out(list, "list")?;
        let c = out(error_count, "error_count")?;
        let mut t = trackers();
        let Some(tr) = t.get_mut(&(error_tracker as usize)) else {
            let e = if error_tracker.is_null() {
                err!(Invalid, "error_tracker is NULL")
            } else {
                err!(InvalidHandle, "{error_tracker:p} is not an error tracker")
            };
            return Err(logged(e));
        };
        tr.returned = std::mem::take(&mut tr.pending);
        let ptr = if tr.returned.is_empty() {
            std::ptr::null()
        } else {
            tr.returned.as_ptr()
        };
        // SAFETY: checked non-NULL.
        unsafe {
            put(l, ptr);
            put(c, tr.returned.len());
        }
        Ok(())
    })
}

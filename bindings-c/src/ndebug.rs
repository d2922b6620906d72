//! `nrt/ndebug_stream.h`: per-logical-core streams of debug events, read by the process that
//! owns the core.
//!
//! A stream is process-local: an in-memory queue of events and an eventfd in semaphore mode
//! whose count is the number of waiting events, so the descriptor handed to the client polls
//! readable exactly while an event waits. The library keeps its own duplicate of the
//! descriptor for signalling, so a client that closes its copy the wrong way never makes the
//! library write to a reused descriptor number.
//!
//! Event sources: none yet on either backend — the simulator's instruction set has no debug
//! print or debug tensor-read instruction, and the Linux backend does not read the device's
//! debug queues. [`emit`] is the entry point for a future source; it applies the documented
//! rules (events with no client connected are dropped, and so are events beyond
//! `NEURON_RT_DEBUG_STREAM_BUFFER_SIZE` waiting ones, default 65536).

// What the crate's `api!` macro expands to refers to.
use crate::rt;
use nrt_core::Error;

use std::collections::VecDeque;
use std::ffi::{c_int, c_void};
use std::sync::{Mutex, MutexGuard, PoisonError};

use nrt_core::err;

use crate::ffi_util::{boundary, log_msg, logged};
use crate::{out, put};

/// `ndebug_stream_event_header_t` (64 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct EventHeader {
    /// Payload bytes.
    pub(crate) data_size: u64,
    /// `ndebug_stream_event_type_t`.
    pub(crate) kind: u32,
    reserved: [u8; 52],
}

const _: () = assert!(size_of::<EventHeader>() == 64);

/// The default stream capacity in events.
const DEFAULT_CAPACITY: usize = 65536;

struct Stream {
    lnc: c_int,
    /// The descriptor the client got.
    client_fd: c_int,
    /// The library's duplicate of it, written to signal an event.
    own_fd: c_int,
    /// Events it holds at most.
    #[cfg_attr(
        not(test),
        allow(dead_code, reason = "read by `emit`, which has no caller yet")
    )]
    capacity: usize,
    events: VecDeque<(EventHeader, Vec<u8>)>,
}

fn streams() -> MutexGuard<'static, Vec<Stream>> {
    static S: Mutex<Vec<Stream>> = Mutex::new(Vec::new());
    S.lock().unwrap_or_else(PoisonError::into_inner)
}

fn capacity() -> usize {
    std::env::var("NEURON_RT_DEBUG_STREAM_BUFFER_SIZE")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(DEFAULT_CAPACITY)
}

fn fail(e: Error) -> Error {
    logged(e)
}

/// `nrt_debug_client_connect`: `logical_nc_idx` is a logical core visible to this process
/// (process-relative); a second client of the same core is `NRT_INVALID`.
///
/// # Safety
///
/// `stream_fd` is NULL or writable.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn nrt_debug_client_connect(
    logical_nc_idx: c_int,
    stream_fd: *mut c_int,
) -> u32 {
    api!("nrt_debug_client_connect", {
        let p = out(stream_fd, "stream_fd")?;
        rt().guard()?;
        let visible = rt().visible_lnc_count()?;
        if logical_nc_idx < 0 || logical_nc_idx as u32 >= visible {
            return Err(fail(err!(
                Invalid,
                "Logical Neuron Core {logical_nc_idx} is not visible to this process ({visible} are)"
            )));
        }
        let mut s = streams();
        if s.iter().any(|st| st.lnc == logical_nc_idx) {
            return Err(fail(err!(
                Invalid,
                "The debug stream of Logical Neuron Core {logical_nc_idx} already has a client"
            )));
        }
        // SAFETY: plain system calls on descriptors this function creates.
        let fd = unsafe {
            libc::eventfd(
                0,
                libc::EFD_CLOEXEC | libc::EFD_NONBLOCK | libc::EFD_SEMAPHORE,
            )
        };
        if fd < 0 {
            return Err(fail(err!(
                Resource,
                "Failed to create the debug stream descriptor: {}",
                std::io::Error::last_os_error()
            )));
        }
        // SAFETY: `fd` is open.
        let own = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
        if own < 0 {
            // SAFETY: `fd` is ours and open.
            unsafe { libc::close(fd) };
            return Err(fail(err!(
                Resource,
                "Failed to create the debug stream descriptor: {}",
                std::io::Error::last_os_error()
            )));
        }
        s.push(Stream {
            lnc: logical_nc_idx,
            client_fd: fd,
            own_fd: own,
            capacity: capacity(),
            events: VecDeque::new(),
        });
        // SAFETY: checked non-NULL.
        unsafe { put(p, fd) };
        Ok(())
    })
}

/// `nrt_debug_client_connect_close`: ends the connection, drops its waiting events and closes
/// both descriptors. An unknown descriptor is logged and left alone.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn nrt_debug_client_connect_close(stream_fd: c_int) {
    boundary("nrt_debug_client_connect_close", (), || {
        let removed = {
            let mut s = streams();
            s.iter()
                .position(|st| st.client_fd == stream_fd)
                .map(|i| s.swap_remove(i))
        };
        match removed {
            Some(st) => {
                // SAFETY: both descriptors were opened by `nrt_debug_client_connect` and are
                // closed once, here.
                unsafe {
                    libc::close(st.own_fd);
                    libc::close(st.client_fd);
                }
            }
            None => log_msg(format_args!("{stream_fd} is not a debug stream connection")),
        }
    });
}

/// `nrt_debug_client_read_one_event`: the oldest waiting event (header, and a `malloc`ed copy
/// of its payload that the caller frees; NULL for an empty payload). `NRT_QUEUE_EMPTY` when
/// none waits; `NRT_INVALID` for a descriptor that is not a connection.
///
/// # Safety
///
/// `header` is NULL or writable for 64 bytes; `payload` is NULL or writable.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn nrt_debug_client_read_one_event(
    stream_fd: c_int,
    header: *mut c_void,
    payload: *mut *mut c_void,
) -> u32 {
    api!("nrt_debug_client_read_one_event", {
        let h = out(header.cast::<EventHeader>(), "header")?;
        let p = out(payload, "payload")?;
        let mut s = streams();
        let Some(st) = s.iter_mut().find(|st| st.client_fd == stream_fd) else {
            return Err(fail(err!(
                Invalid,
                "{stream_fd} is not a debug stream connection"
            )));
        };
        let Some((head, data)) = st.events.pop_front() else {
            return Err(err!(QueueEmpty, "No debug event is waiting"));
        };
        let mut count = 0u64;
        // SAFETY: `own_fd` is open while the stream is listed; reads the 8-byte counter
        // (semaphore mode: takes 1).
        unsafe { libc::read(st.own_fd, (&raw mut count).cast(), 8) };
        let copy = if data.is_empty() {
            std::ptr::null_mut()
        } else {
            // SAFETY: plain allocation, checked below.
            let m = unsafe { libc::malloc(data.len()) }.cast::<u8>();
            if m.is_null() {
                return Err(fail(err!(
                    Resource,
                    "Failed to allocate a {}-byte debug event payload",
                    data.len()
                )));
            }
            // SAFETY: `m` holds `data.len()` bytes.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), m, data.len()) };
            m.cast()
        };
        // SAFETY: checked non-NULL; the caller's contract.
        unsafe {
            put(h, head);
            put(p, copy);
        }
        Ok(())
    })
}

/// Pushes an event to the stream of (process-relative) logical core `lnc`, if a client is
/// connected and the stream has room; returns whether it was queued.
#[cfg_attr(
    not(test),
    allow(
        dead_code,
        reason = "no event source yet: see the module documentation"
    )
)]
pub(crate) fn emit(lnc: c_int, kind: u32, payload: Vec<u8>) -> bool {
    let mut s = streams();
    let Some(st) = s.iter_mut().find(|st| st.lnc == lnc) else {
        return false;
    };
    if st.events.len() >= st.capacity {
        return false;
    }
    st.events.push_back((
        EventHeader {
            data_size: payload.len() as u64,
            kind,
            reserved: [0; 52],
        },
        payload,
    ));
    let one = 1u64;
    // SAFETY: `own_fd` is open while the stream is listed; adds 1 to the counter.
    unsafe { libc::write(st.own_fd, (&raw const one).cast(), 8) };
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream registered directly (a connection needs an initialised runtime), fed by
    /// `emit` and read back through the exported function.
    #[test]
    fn emitted_events_are_read_in_order_and_the_descriptor_polls_readable_while_any_wait() {
        // SAFETY: plain system calls on descriptors created here.
        let fd = unsafe {
            libc::eventfd(
                0,
                libc::EFD_CLOEXEC | libc::EFD_NONBLOCK | libc::EFD_SEMAPHORE,
            )
        };
        assert!(fd >= 0);
        // SAFETY: `fd` is open.
        let own = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
        assert!(own >= 0);
        streams().push(Stream {
            lnc: 7,
            client_fd: fd,
            own_fd: own,
            capacity: 2,
            events: VecDeque::new(),
        });
        let readable = || {
            let mut p = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&raw mut p, 1, 0) == 1 }
        };
        assert!(!readable());
        assert!(!emit(8, 1, vec![1])); // no client on core 8
        assert!(emit(7, 1, vec![1, 2, 3]));
        assert!(emit(7, 1, Vec::new()));
        assert!(!emit(7, 1, vec![9])); // over capacity: dropped
        assert!(readable());

        let mut header = EventHeader {
            data_size: 99,
            kind: 99,
            reserved: [0; 52],
        };
        let mut payload: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid out-pointers.
        let r = unsafe {
            nrt_debug_client_read_one_event(fd, (&raw mut header).cast(), &raw mut payload)
        };
        assert_eq!(r, 0);
        assert_eq!((header.data_size, header.kind), (3, 1));
        assert!(!payload.is_null());
        // SAFETY: a 3-byte malloc'ed copy.
        let bytes = unsafe { std::slice::from_raw_parts(payload.cast::<u8>(), 3) }.to_vec();
        assert_eq!(bytes, [1, 2, 3]);
        // SAFETY: malloc'ed by the call.
        unsafe { libc::free(payload) };
        assert!(readable());

        // SAFETY: valid out-pointers.
        let r = unsafe {
            nrt_debug_client_read_one_event(fd, (&raw mut header).cast(), &raw mut payload)
        };
        assert_eq!(r, 0);
        assert_eq!((header.data_size, header.kind), (0, 1));
        assert!(payload.is_null());
        assert!(!readable());

        // SAFETY: valid out-pointers.
        let r = unsafe {
            nrt_debug_client_read_one_event(fd, (&raw mut header).cast(), &raw mut payload)
        };
        assert_eq!(r, nrt_core::NrtStatus::QueueEmpty.code());
        nrt_debug_client_connect_close(fd);
        assert!(streams().iter().all(|s| s.client_fd != fd));
    }
}

//! `nrt/nrt_async_sendrecv.h`: asynchronous tensor send/receive between logical cores of
//! different hosts, over the network (EFA). nrt-rs has no network transport, on either backend,
//! so every call logs that it is not provided and returns `NRT_FAILURE`; none of them has an
//! effect. (Even the limit queries: a communicator limit of a facility that cannot create
//! communicators would be a made-up number.)

// What the crate's `api!` macro expands to refers to.

use std::ffi::{c_char, c_int, c_void};

use crate::ffi_util::unsupported_status;

unsupported_status!(
    /// `nrt_async_sendrecv_get_max_num_communicators_per_lnc`.
    nrt_async_sendrecv_get_max_num_communicators_per_lnc,
    "nrt_async_sendrecv_get_max_num_communicators_per_lnc",
    "asynchronous send/receive needs a network transport (EFA), which nrt-rs does not implement",
    (num: *mut c_int)
);
unsupported_status!(
    /// `nrt_async_sendrecv_get_max_num_pending_request`.
    nrt_async_sendrecv_get_max_num_pending_request,
    "nrt_async_sendrecv_get_max_num_pending_request",
    "asynchronous send/receive needs a network transport (EFA), which nrt-rs does not implement",
    (num: *mut c_int)
);
unsupported_status!(
    /// `nrt_async_sendrecv_init`.
    nrt_async_sendrecv_init,
    "nrt_async_sendrecv_init",
    "asynchronous send/receive needs a network transport (EFA), which nrt-rs does not implement",
    (lnc: c_int)
);
unsupported_status!(
    /// `nrt_async_sendrecv_close`.
    nrt_async_sendrecv_close,
    "nrt_async_sendrecv_close",
    "asynchronous send/receive needs a network transport (EFA), which nrt-rs does not implement",
    (lnc: c_int)
);
unsupported_status!(
    /// `nrt_async_sendrecv_connect`.
    nrt_async_sendrecv_connect,
    "nrt_async_sendrecv_connect",
    "asynchronous send/receive needs a network transport (EFA), which nrt-rs does not implement",
    (peer_ip: *const c_char, peer_lnc: c_int, lnc: c_int, send_comm: *mut *mut c_void)
);
unsupported_status!(
    /// `nrt_async_sendrecv_accept`.
    nrt_async_sendrecv_accept,
    "nrt_async_sendrecv_accept",
    "asynchronous send/receive needs a network transport (EFA), which nrt-rs does not implement",
    (peer_ip: *const c_char, peer_lnc: c_int, lnc: c_int, recv_comm: *mut *mut c_void)
);
unsupported_status!(
    /// `nrt_async_sendrecv_test_comm`.
    nrt_async_sendrecv_test_comm,
    "nrt_async_sendrecv_test_comm",
    "asynchronous send/receive needs a network transport (EFA), which nrt-rs does not implement",
    (comm: *mut c_void, done: *mut bool)
);
unsupported_status!(
    /// `nrt_async_sendrecv_send_tensor`.
    nrt_async_sendrecv_send_tensor,
    "nrt_async_sendrecv_send_tensor",
    "asynchronous send/receive needs a network transport (EFA), which nrt-rs does not implement",
    (tensor: *mut c_void, offset: usize, length: usize, send_comm: *mut c_void, request: *mut *mut c_void)
);
unsupported_status!(
    /// `nrt_async_sendrecv_recv_tensor`.
    nrt_async_sendrecv_recv_tensor,
    "nrt_async_sendrecv_recv_tensor",
    "asynchronous send/receive needs a network transport (EFA), which nrt-rs does not implement",
    (tensor: *mut c_void, offset: usize, length: usize, recv_comm: *mut c_void, request: *mut *mut c_void)
);
unsupported_status!(
    /// `nrt_async_sendrecv_test_request`.
    nrt_async_sendrecv_test_request,
    "nrt_async_sendrecv_test_request",
    "asynchronous send/receive needs a network transport (EFA), which nrt-rs does not implement",
    (request: *mut c_void, done: *mut bool, size: *mut usize)
);
unsupported_status!(
    /// `nrt_async_sendrecv_flush`.
    nrt_async_sendrecv_flush,
    "nrt_async_sendrecv_flush",
    "asynchronous send/receive needs a network transport (EFA), which nrt-rs does not implement",
    (lnc: c_int)
);

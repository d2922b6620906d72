//! `nrt_sys_trace.h`: the system trace — per-core ring buffers of the runtime's events, fed by
//! the core's event seam ([`nrt_core::events`]) — and the one event hook of the library, which
//! also forwards events to the profilers (`profile.rs` and `inspect.rs`, which register
//! themselves with [`set_listener`]).
//!
//! Event types (`nrt_sys_trace_get_event_types`, in this order): `nrt_load`, `nrt_unload`,
//! `nrt_exec_submit`, `nrt_exec_start`, `nrt_exec_complete`, `nrt_tensor_read`,
//! `nrt_tensor_write`, `nrt_tensor_copy`, `nrt_error`. Each event gets an id (1, 2, … in the
//! order the runtime reported them, over all cores) and lands in the ring of its core (`nc_idx`,
//! process-relative); an error names no core and lands in a ring of its own, fetched only when
//! no core is selected. `nrt_sys_trace_fetch_events` removes the selected events and returns
//! them, ordered by id, as `{"events":[…],"dropped_events":N}`; the fields are listed in
//! `docs/PROFILING.md`.

use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use nrt_core::events::{EventHook, RuntimeEvent};
use nrt_core::{Error, err};

use crate::c_strings::{c_string_array, free_c_string_array};
use crate::ffi_util::logged;
use crate::handles::Objects;
use crate::trace_store::{
    EVENT_TYPES, EventStore, FetchOptions, Recorded, TraceConfig, events_json,
};
use crate::{cstr, invalid, out, put, rt};

static CONFIGS: Objects<TraceConfig> = Objects::new(1024, 3, "system trace options");

type Capture = EventStore;

static CAPTURE: Mutex<Option<Capture>> = Mutex::new(None);

fn capture() -> MutexGuard<'static, Option<Capture>> {
    CAPTURE.lock().unwrap_or_else(PoisonError::into_inner)
}

fn record(e: &RuntimeEvent<'_>) {
    if let Some(c) = capture().as_mut() {
        c.record(e);
    }
}

// ---- the library's event hook -----------------------------------------------------------------

/// Consumers of runtime events; the hook is installed while any is active.
pub(crate) const CONSUMER_TRACE: u8 = 1;
/// `nrt_profile_*` (one model or continuous).
pub(crate) const CONSUMER_PROFILE: u8 = 2;
/// Inspect capture.
pub(crate) const CONSUMER_INSPECT: u8 = 4;

static ACTIVE: AtomicU8 = AtomicU8::new(0);
/// Inspect capture with device profiles is on (continuous profiling refuses to start then).
static INSPECT_DEVICE_PROFILES: AtomicBool = AtomicBool::new(false);

/// Records whether inspect capture with device profiles is on.
pub(crate) fn set_inspect_device_profiles(on: bool) {
    INSPECT_DEVICE_PROFILES.store(on, Ordering::SeqCst);
}

/// Whether inspect capture with device profiles is on.
pub(crate) fn inspect_device_profiles() -> bool {
    INSPECT_DEVICE_PROFILES.load(Ordering::SeqCst)
}
static PROFILE_LISTENER: OnceLock<EventHook> = OnceLock::new();
static INSPECT_LISTENER: OnceLock<EventHook> = OnceLock::new();

/// Registers the receiver of events of `consumer` ([`CONSUMER_PROFILE`] or
/// [`CONSUMER_INSPECT`]), called with every event while that consumer is active.
pub(crate) fn set_listener(consumer: u8, f: EventHook) {
    let slot = if consumer == CONSUMER_INSPECT {
        &INSPECT_LISTENER
    } else {
        &PROFILE_LISTENER
    };
    let _ = slot.set(f);
}

/// Marks `consumer` active or not, installing or removing the runtime's event hook.
pub(crate) fn set_active(consumer: u8, on: bool) {
    // Serialised, so the hook installed always matches the last consumer set.
    static TOGGLE: Mutex<()> = Mutex::new(());
    let _g = TOGGLE.lock().unwrap_or_else(PoisonError::into_inner);
    let now = if on {
        ACTIVE.fetch_or(consumer, Ordering::SeqCst) | consumer
    } else {
        ACTIVE.fetch_and(!consumer, Ordering::SeqCst) & !consumer
    };
    rt().set_event_hook((now != 0).then_some(dispatch as EventHook));
}

fn dispatch(e: &RuntimeEvent<'_>) {
    let active = ACTIVE.load(Ordering::Acquire);
    if active & CONSUMER_TRACE != 0 {
        record(e);
    }
    if active & CONSUMER_PROFILE != 0 {
        if let Some(f) = PROFILE_LISTENER.get() {
            f(e);
        }
    }
    if active & CONSUMER_INSPECT != 0 {
        if let Some(f) = INSPECT_LISTENER.get() {
            f(e);
        }
    }
}

/// Starts capture with `config` (already capturing: `NRT_INVALID`).
pub(crate) fn start(config: TraceConfig) -> Result<(), Error> {
    {
        let mut c = capture();
        if c.is_some() {
            return Err(logged(err!(
                Invalid,
                "System trace capture is already started (nrt_sys_trace_stop ends it)"
            )));
        }
        *c = Some(EventStore::new(config));
    }
    set_active(CONSUMER_TRACE, true);
    Ok(())
}

/// Ends capture, discarding what was not fetched (not capturing: `NRT_INVALID`).
pub(crate) fn stop() -> Result<(), Error> {
    if capture().take().is_none() {
        return Err(logged(err!(
            Invalid,
            "System trace capture is not started (nrt_sys_trace_start starts it)"
        )));
    }
    set_active(CONSUMER_TRACE, false);
    Ok(())
}

static FETCH_OPTIONS: Objects<FetchOptions> = Objects::new(1024, 4, "fetch options");

/// [`EventStore::take`] on the capture of `nrt_sys_trace_start`.
pub(crate) fn take_events(opts: FetchOptions) -> Result<(Vec<Recorded>, u64), Error> {
    match capture().as_mut() {
        Some(c) => Ok(c.take(opts)),
        None => Err(logged(err!(
            Invalid,
            "System trace capture is not started (nrt_sys_trace_start starts it)"
        ))),
    }
}

// ---- exported functions ------------------------------------------------------------------------

/// `nrt_sys_trace_config_allocate`: new options with the defaults.
///
/// # Safety
///
/// `options` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_sys_trace_config_allocate(options: *mut *mut c_void) -> u32 {
    api!("nrt_sys_trace_config_allocate", {
        let p = out(options, "options")?;
        let h = CONFIGS.insert(TraceConfig::default())?;
        // SAFETY: checked non-NULL.
        unsafe { put(p, h) };
        Ok(())
    })
}

/// `nrt_sys_trace_config_set_defaults`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_sys_trace_config_set_defaults(options: *mut c_void) {
    api!(void "nrt_sys_trace_config_set_defaults", {
        CONFIGS.with(options, |c| {
            *c = TraceConfig::default();
        })
    });
}

/// `nrt_sys_trace_config_free`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_sys_trace_config_free(options: *mut c_void) {
    api!(void "nrt_sys_trace_config_free", {
        if !options.is_null() {
            CONFIGS.remove(options)?;
        }
        Ok(())
    });
}

/// `nrt_sys_trace_config_set_max_events_per_nc`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_sys_trace_config_set_max_events_per_nc(options: *mut c_void, max: u64) {
    api!(void "nrt_sys_trace_config_set_max_events_per_nc", {
        CONFIGS.with(options, |c| {
            c.max_events_per_nc = max;
        })
    });
}

/// `nrt_sys_trace_config_set_capture_enabled_for_nc`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_sys_trace_config_set_capture_enabled_for_nc(
    options: *mut c_void,
    nc_idx: u32,
    enabled: bool,
) {
    api!(void "nrt_sys_trace_config_set_capture_enabled_for_nc", {
        CONFIGS.with(options, |c| {
            if enabled {
                c.disabled_nc.remove(&nc_idx);
            } else {
                c.disabled_nc.insert(nc_idx);
            }
        })
    });
}

/// `nrt_sys_trace_config_set_capture_enabled_for_event_type`.
///
/// # Safety
///
/// `event_type` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_sys_trace_config_set_capture_enabled_for_event_type(
    options: *mut c_void,
    event_type: *const c_char,
    enabled: bool,
) -> u32 {
    api!("nrt_sys_trace_config_set_capture_enabled_for_event_type", {
        // SAFETY: the caller's contract.
        let Some(name) = (unsafe { cstr(event_type) }) else {
            return Err(invalid("event_type"));
        };
        CONFIGS.with(options, |c| c.set_type(&name, enabled))?
    })
}

/// `nrt_sys_trace_get_event_types`: every event type, `malloc`ed.
///
/// # Safety
///
/// `event_types` and `count` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_sys_trace_get_event_types(
    event_types: *mut *mut *const c_char,
    count: *mut usize,
) -> u32 {
    api!("nrt_sys_trace_get_event_types", {
        let (p, n) = (out(event_types, "event_types")?, out(count, "count")?);
        // SAFETY: both checked non-NULL.
        unsafe { c_string_array(&EVENT_TYPES, p, n) }
    })
}

/// `nrt_sys_trace_free_event_types`.
///
/// # Safety
///
/// `event_types` is NULL or an array returned by this library with `count` names.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_sys_trace_free_event_types(
    event_types: *mut *const c_char,
    count: usize,
) {
    api!(void "nrt_sys_trace_free_event_types", {
        // SAFETY: the caller's contract.
        unsafe { free_c_string_array(event_types, count) };
        Ok(())
    });
}

/// `nrt_sys_trace_config_get_enabled_event_types`.
///
/// # Safety
///
/// `event_types` and `count` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_sys_trace_config_get_enabled_event_types(
    options: *mut c_void,
    event_types: *mut *mut *const c_char,
    count: *mut usize,
) -> u32 {
    api!("nrt_sys_trace_config_get_enabled_event_types", {
        let (p, n) = (out(event_types, "event_types")?, out(count, "count")?);
        let names = CONFIGS.with(options, |c| c.enabled_types())?;
        // SAFETY: both checked non-NULL.
        unsafe { c_string_array(&names, p, n) }
    })
}

/// `nrt_sys_trace_start`: capture with `options` (NULL: the defaults).
#[unsafe(no_mangle)]
pub extern "C" fn nrt_sys_trace_start(options: *mut c_void) -> u32 {
    api!("nrt_sys_trace_start", {
        let config = if options.is_null() {
            TraceConfig::default()
        } else {
            CONFIGS.with(options, |c| c.clone())?
        };
        start(config)
    })
}

/// `nrt_sys_trace_stop`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_sys_trace_stop() -> u32 {
    api!("nrt_sys_trace_stop", stop())
}

/// `nrt_sys_trace_fetch_options_allocate`.
///
/// # Safety
///
/// `options` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_sys_trace_fetch_options_allocate(options: *mut *mut c_void) -> u32 {
    api!("nrt_sys_trace_fetch_options_allocate", {
        let p = out(options, "options")?;
        let h = FETCH_OPTIONS.insert(FetchOptions::default())?;
        // SAFETY: checked non-NULL.
        unsafe { put(p, h) };
        Ok(())
    })
}

/// `nrt_sys_trace_fetch_options_set_defaults`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_sys_trace_fetch_options_set_defaults(options: *mut c_void) {
    api!(void "nrt_sys_trace_fetch_options_set_defaults", {
        FETCH_OPTIONS.with(options, |o| *o = FetchOptions::default())
    });
}

/// `nrt_sys_trace_fetch_options_free`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_sys_trace_fetch_options_free(options: *mut c_void) {
    api!(void "nrt_sys_trace_fetch_options_free", {
        if !options.is_null() {
            FETCH_OPTIONS.remove(options)?;
        }
        Ok(())
    });
}

/// `nrt_sys_trace_fetch_options_set_max_events_per_nc`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_sys_trace_fetch_options_set_max_events_per_nc(
    options: *mut c_void,
    max: u64,
) {
    api!(void "nrt_sys_trace_fetch_options_set_max_events_per_nc", {
        FETCH_OPTIONS.with(options, |o| {
            o.max_events_per_nc = Some(max);
        })
    });
}

/// `nrt_sys_trace_fetch_options_set_nc_idx`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_sys_trace_fetch_options_set_nc_idx(options: *mut c_void, nc_idx: u64) {
    api!(void "nrt_sys_trace_fetch_options_set_nc_idx", {
        FETCH_OPTIONS.with(options, |o| o.nc = Some(nc_idx))
    });
}

/// `nrt_sys_trace_fetch_events`: the selected events as JSON in a `malloc`ed buffer.
///
/// # Safety
///
/// `buffer` and `written_size` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_sys_trace_fetch_events(
    buffer: *mut *mut c_char,
    written_size: *mut usize,
    options: *const c_void,
) -> u32 {
    api!("nrt_sys_trace_fetch_events", {
        let (b, n) = (out(buffer, "buffer")?, out(written_size, "written_size")?);
        let opts = if options.is_null() {
            FetchOptions::default()
        } else {
            FETCH_OPTIONS.with(options, |o| *o)?
        };
        let (events, dropped) = take_events(opts)?;
        let text = events_json(&events, dropped);
        // SAFETY: plain allocation; checked below.
        let p = unsafe { libc::malloc(text.len() + 1) }.cast::<u8>();
        if p.is_null() {
            return Err(logged(err!(
                Resource,
                "Failed to allocate {} bytes for the system trace events",
                text.len() + 1
            )));
        }
        // SAFETY: `p` has room for the text and the NUL; `b` and `n` were checked non-NULL.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), p, text.len());
            p.add(text.len()).write(0);
            put(b, p.cast());
            put(n, text.len());
        }
        Ok(())
    })
}

/// `nrt_sys_trace_buffer_free`.
///
/// # Safety
///
/// `buffer` is NULL or was returned by [`nrt_sys_trace_fetch_events`] and not freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_sys_trace_buffer_free(buffer: *mut c_char) {
    // SAFETY: the caller's contract; free(NULL) does nothing.
    unsafe { libc::free(buffer.cast()) };
}

//! Output completion counters: `nrt_tensor_check_output_completion` and
//! `nrt_tensor_reset_output_completion`.
//!
//! Every successful execution (synchronous, implicit async or `nrta_execute_schedule`, on any
//! backend) adds 1 to the counter of each device location it wrote an output to; a tensor's
//! counter is the one of its device location (buffer and offset), so every tensor naming the
//! same storage shares it. The executions are counted by `exec_observer.rs`, which the driver
//! wrapper (`backend.rs`) calls with each execution's output bindings and result.
//!
//! Host tensors have no counter: a synchronous execution copies them through device memory
//! the runtime allocates for that call, and async executions refuse them. Checking one is
//! `NRT_INVALID` with a log line.

// What the crate's `api!` macro expands to refers to.
use crate::rt;
use nrt_core::Error;

use std::ffi::c_void;
use std::time::{Duration, Instant};

use nrt_core::err;

use crate::exec_observer::{Key, counters};
use crate::ffi_util::{log_msg, logged};
use crate::tensor_of;

/// The counter key of a tensor handle.
fn key_of(tensor: *const c_void) -> Result<Key, Error> {
    let r = tensor_of(tensor)?;
    let t = r.get();
    match t.device_location() {
        Some((b, off)) => Ok((b.device, b.addr + off)),
        None => {
            let e = err!(
                Invalid,
                "Tensor \"{}\" is not in device memory: output completion is counted for device tensors only",
                t.name()
            );
            Err(logged(e))
        }
    }
}

/// How long an unbounded wait goes before its one warning.
const UNBOUNDED_WARNING: Duration = Duration::from_secs(30);

/// `nrt_tensor_check_output_completion`: waits until the tensor's completion count reaches
/// `expected_completion_count`, for at most `timeout` microseconds (negative: without limit,
/// with one warning after 30 s). `NRT_TIMEOUT` when it does not (logged); `NRT_INVALID` for
/// NULL.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn nrt_tensor_check_output_completion(
    output_tensor: *const c_void,
    timeout: i64,
    expected_completion_count: u64,
) -> u32 {
    api!("nrt_tensor_check_output_completion", {
        rt().guard()?;
        let key = key_of(output_tensor)?;
        let start = Instant::now();
        let deadline = u64::try_from(timeout).ok().map(Duration::from_micros);
        let mut warned = false;
        let c = counters();
        loop {
            let count = c.get(key);
            if count >= expected_completion_count {
                return Ok(());
            }
            let elapsed = start.elapsed();
            let wait = match deadline {
                Some(d) if elapsed >= d => {
                    let e = err!(
                        Timeout,
                        "Output tensor completion count is {count} after {timeout} us, expected {expected_completion_count}"
                    );
                    return Err(logged(e));
                }
                Some(d) => d - elapsed,
                None => {
                    if !warned && elapsed >= UNBOUNDED_WARNING {
                        warned = true;
                        log_msg(format_args!(
                            "Still waiting for output tensor completion ({count} of {expected_completion_count}) after {} s",
                            UNBOUNDED_WARNING.as_secs()
                        ));
                    }
                    UNBOUNDED_WARNING
                }
            };
            c.wait_timeout(wait.min(Duration::from_millis(100)), || {
                c.get(key) >= expected_completion_count
            });
        }
    })
}

/// `nrt_tensor_reset_output_completion`: sets the tensor's completion count to 0.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn nrt_tensor_reset_output_completion(output_tensor: *mut c_void) -> u32 {
    api!("nrt_tensor_reset_output_completion", {
        rt().guard()?;
        let key = key_of(output_tensor)?;
        counters().reset(key);
        Ok(())
    })
}

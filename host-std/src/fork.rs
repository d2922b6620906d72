//! Fork detection: a `pthread_atfork` child handler that bumps a process-global counter.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::sys;

/// Incremented by the fork-child handler in every child created by `fork()` after
/// [`register_fork_handlers`] succeeded.
static FORK_GENERATION: AtomicU32 = AtomicU32::new(0);

/// Whether the handler is installed. A mutex rather than a `Once` so that a failed
/// `pthread_atfork` can be retried by a later call.
static REGISTERED: Mutex<bool> = Mutex::new(false);

/// The fork-child handler. Async-signal-safe: one atomic operation.
extern "C" fn atfork_child() {
    FORK_GENERATION.fetch_add(1, Ordering::SeqCst);
}

/// Installs the process's fork-child handler with `pthread_atfork`, once per process: later
/// calls after a success return `Ok(())` without registering again. `Err(ret)` carries
/// `pthread_atfork`'s error number; the next call tries again.
pub fn register_fork_handlers() -> Result<(), i32> {
    let mut registered = REGISTERED.lock().unwrap_or_else(PoisonError::into_inner);
    if *registered {
        return Ok(());
    }
    match sys::pthread_atfork_child(atfork_child) {
        0 => {
            *registered = true;
            Ok(())
        }
        ret => Err(ret),
    }
}

/// How many `fork()`s separate this process from the one that called
/// [`register_fork_handlers`] (0 there, 1 in its child, 2 in a grandchild, ...). Constant 0 until
/// the handlers are registered. Async-signal-safe: one atomic load.
#[inline]
pub fn fork_generation() -> u32 {
    FORK_GENERATION.load(Ordering::SeqCst)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn registration_is_idempotent() {
        assert_eq!(register_fork_handlers(), Ok(()));
        assert_eq!(register_fork_handlers(), Ok(()));
    }

    #[test]
    fn forked_child_sees_a_new_generation() {
        register_fork_handlers().unwrap();
        let before = fork_generation();
        let status = sys::testing::fork_child_sees_new_generation(before).unwrap();
        assert_eq!(status, Some(0), "the child did not observe the fork");
        // Only the child's copy of the counter moves.
        assert_eq!(fork_generation(), before);
    }
}

//! nrt-core on bare metal: the pieces the firmware binaries share.
//!
//! * [`log`]: a `defmt` global logger that writes its frames through semihosting into a file
//!   of the host (`defmt.out` in QEMU's working directory), decoded there with `defmt-print`;
//!   the exit code goes back through semihosting too ([`exit`]).
//! * [`heap`] (feature `alloc`): the fixed global heap, with the counters the example reports
//!   (live, peak, allocations) and an emergency reserve that turns a refused allocation into a
//!   recorded failure the runtime reports as `NRT_RESOURCE` (see `docs/FIRMWARE.md`).
//! * [`driver`] and [`interp`] (feature `alloc`): a `Driver` whose device memory is a static
//!   arena and whose executions interpret the NEFF's simulator program on the target.
//! * [`stack`]: the stack's high-water mark.
#![no_std]

#[cfg(feature = "alloc")]
extern crate alloc;

// The critical-section implementations (single core / single hart) the heap relies on.
#[cfg(target_arch = "arm")]
use cortex_m as _;
#[cfg(target_arch = "riscv32")]
use riscv as _;

#[cfg(feature = "alloc")]
pub mod driver;
#[cfg(feature = "alloc")]
pub mod heap;
#[cfg(feature = "alloc")]
pub mod interp;
pub mod log;
pub mod stack;

/// Ends the QEMU run with `code` (0: every check passed).
pub fn exit(code: i32) -> ! {
    log::flush();
    semihosting::process::exit(code)
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    defmt::error!("panic: {}", defmt::Display2Format(info));
    exit(101)
}

/// Fails the run (exit code 1) when `cond` does not hold, naming the check.
#[macro_export]
macro_rules! check {
    ($cond:expr, $($arg:tt)+) => {
        if !$cond {
            defmt::error!($($arg)+);
            $crate::exit(1);
        }
    };
}

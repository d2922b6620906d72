//! What an emulator is ([`EmuConfig`]), the faults it injects ([`FaultPlan`]) and what it
//! reports ([`Accounting`]).

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use nrt_sim::Instance;

use crate::abi;

/// An emulated machine.
#[derive(Clone, Debug)]
pub struct EmuConfig {
    /// Instance family: trn1/inf2 (V2, 2 cores per device) or trn2 (V3, 8 cores).
    pub instance: Instance,
    /// Number of devices (`root/dev/neuron0 …`); at most 64.
    pub devices: u32,
    /// Directory holding `dev/` (the device nodes) and `sys/` (the sysfs tree).
    pub root: PathBuf,
    /// Driver requests to fail.
    pub faults: FaultPlan,
}

/// Driver requests the emulator fails on purpose. A failed request has no effect: the
/// emulator answers the errno without looking at the argument. Only driver ioctls on an
/// emulated device node count (`openat`/`close` and other files do not).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultPlan {
    /// (ordinal, errno): the ordinal-th driver ioctl (from 1) fails.
    nth: Vec<(u64, i32)>,
    /// (request number, errno): every ioctl of that request fails.
    requests: Vec<(u32, i32)>,
}

impl FaultPlan {
    /// No faults.
    pub fn none() -> Self {
        Self::default()
    }

    /// Also fails the `n`-th driver ioctl (counted from 1 over every driver ioctl served)
    /// with `errno`.
    pub fn fail_nth(mut self, n: u64, errno: i32) -> Self {
        self.nth.push((n, errno));
        self
    }

    /// Also fails every ioctl of request number `request` with `errno`.
    pub fn fail_request(mut self, request: u32, errno: i32) -> Self {
        self.requests.push((request, errno));
        self
    }

    /// Whether nothing is injected.
    pub fn is_empty(&self) -> bool {
        self.nth.is_empty() && self.requests.is_empty()
    }

    /// The errno to fail the `ordinal`-th ioctl (request `request`) with, if any.
    pub fn errno_for(&self, ordinal: u64, request: u32) -> Option<i32> {
        self.nth
            .iter()
            .find(|(n, _)| *n == ordinal)
            .map(|(_, e)| *e)
            .or_else(|| {
                self.requests
                    .iter()
                    .find(|(r, _)| *r == request)
                    .map(|(_, e)| *e)
            })
    }
}

/// A snapshot of what the emulator holds and has served.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Accounting {
    /// Bytes of live memory chunks (host and device, notification queues included).
    pub allocated_bytes: u64,
    /// Live memory chunks (handles).
    pub allocations: u64,
    /// Cores marked by `CRWL_NC_RANGE_MARK*` and not unmarked.
    pub reserved_cores: u32,
    /// Processes attached (an `O_RDWR` open) to at least one device.
    pub attached_processes: u32,
    /// Driver ioctls answered (failed ones included).
    pub ioctls_served: u64,
    /// Driver ioctls answered with an error (injected faults included).
    pub ioctls_failed: u64,
    /// Executions started through the launch convention (doorbell rings).
    pub launches: u64,
    /// Launches that completed with a non-zero status (or could not post one).
    pub launch_failures: u64,
    /// Driver ioctls served, by request number.
    pub per_request: BTreeMap<u32, u64>,
    /// Live memory chunks allocated with a `mem_type` (`NEURON_MEMALLOC_TYPE_*`), by type:
    /// (chunks, bytes; sizes rounded up to pages as the driver does).
    pub by_mem_type: BTreeMap<u32, (u64, u64)>,
}

impl fmt::Display for Accounting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "nrt-emu: {} ioctls served ({} failed), {} launches ({} failed)",
            self.ioctls_served, self.ioctls_failed, self.launches, self.launch_failures
        )?;
        writeln!(
            f,
            "  held: {} bytes in {} allocations, {} reserved cores, {} attached processes",
            self.allocated_bytes, self.allocations, self.reserved_cores, self.attached_processes
        )?;
        for (request, count) in &self.per_request {
            writeln!(
                f,
                "  {:<36} {request:#010x} {count}",
                abi::name_of(*request)
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nth_takes_precedence_and_requests_match_exactly() {
        let plan = FaultPlan::none()
            .fail_nth(3, libc::EIO)
            .fail_request(0x4008_4e5d, libc::ENOMEM);
        assert!(!plan.is_empty());
        assert_eq!(plan.errno_for(3, 0x4008_4e5d), Some(libc::EIO));
        assert_eq!(plan.errno_for(2, 0x4008_4e5d), Some(libc::ENOMEM));
        assert_eq!(plan.errno_for(2, 0x8018_4e6e), None);
        assert!(FaultPlan::none().is_empty());
    }

    #[test]
    fn display_names_requests() {
        let mut a = Accounting {
            ioctls_served: 2,
            ..Default::default()
        };
        a.per_request.insert(0x4008_4e5d, 2);
        let text = a.to_string();
        assert!(text.contains("2 ioctls served (0 failed)"), "{text}");
        assert!(text.contains("COMPATIBLE_VERSION"), "{text}");
        assert!(text.contains("0x40084e5d 2"), "{text}");
    }
}

//! The geometry of the cores a runtime owns, and the pure planning of their allocation.
//!
//! A logical core (LNC) groups `lnc_size` consecutive physical cores (PNCs): logical core `l`
//! covers physical cores `[l * lnc_size, (l + 1) * lnc_size)`, and physical core `p` sits on
//! device `p / cores_per_device`. Core indices are *absolute* (machine-wide) unless their name
//! says *relative* (process-relative: what callers of the runtime pass, 0 being the process's
//! first logical core). [`Topology`] is the one place these conversions are computed.
//!
//! [`plan`] turns discovery and configuration into an [`AllocationPlan`] — which physical cores
//! to ask the driver for — and [`AllocationPlan::accept`] checks what the driver (or funtime)
//! reserved against it. Neither touches a driver or logs: the runtime does both around them
//! (`runtime/init.rs`).

use core::ops::Range;

use crate::bitmap::{CoreBitmap, MAX_CORES};
use crate::config::{Config, vars};
use crate::device::{Arch, DeviceInfo};
use crate::error::{Error, Result};

/// Where a process's logical cores are: the first one (absolute), how many, their size, and
/// the physical cores per device. Cores are bounded by [`MAX_CORES`] and a logical core has at
/// most [`MAX_LNC_SIZE`] physical cores, so a topology packs into one `u32`
/// ([`Topology::to_bits`]) that the runtime publishes with a single atomic store (32-bit
/// atomics exist on every target the core builds for).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Topology {
    first_lnc: u16,
    lnc_count: u16,
    lnc_size: u16,
    cores_per_device: u16,
}

/// Physical core `pnc` as (device, core within the device), on devices of `cores_per_device`
/// physical cores (0 is taken as 1). The one place a physical core is located on its device.
pub const fn locate_pnc(pnc: u32, cores_per_device: u32) -> (u32, u32) {
    let per_device = if cores_per_device == 0 {
        1
    } else {
        cores_per_device
    };
    (pnc / per_device, pnc % per_device)
}

/// The physical cores of device `device`, on devices of `cores_per_device` physical cores.
pub fn device_pncs(device: u32, cores_per_device: u32) -> CoreBitmap {
    CoreBitmap::range(device.saturating_mul(cores_per_device), cores_per_device)
}

/// Most physical cores a logical core may have.
pub const MAX_LNC_SIZE: u32 = 8;

impl Topology {
    /// A topology, if the first logical core is below [`MAX_CORES`], the count is 1 to
    /// [`MAX_CORES`], the size is 1 to [`MAX_LNC_SIZE`], and the cores per device are 1 to
    /// [`MAX_CORES`]. (Only the default topology, which no session has, owns no core.)
    pub fn new(
        first_lnc: u32,
        lnc_count: u32,
        lnc_size: u32,
        cores_per_device: u32,
    ) -> Option<Self> {
        let fits = first_lnc < MAX_CORES
            && (1..=MAX_CORES).contains(&lnc_count)
            && (1..=MAX_LNC_SIZE).contains(&lnc_size)
            && (1..=MAX_CORES).contains(&cores_per_device);
        fits.then_some(Self {
            first_lnc: first_lnc as u16,
            lnc_count: lnc_count as u16,
            lnc_size: lnc_size as u16,
            cores_per_device: cores_per_device as u16,
        })
    }

    /// The first logical core (absolute); process-relative core 0.
    pub const fn first_lnc(&self) -> u32 {
        self.first_lnc as u32
    }

    /// Number of logical cores.
    pub const fn lnc_count(&self) -> u32 {
        self.lnc_count as u32
    }

    /// Physical cores per logical core.
    #[inline]
    pub const fn lnc_size(&self) -> u32 {
        self.lnc_size as u32
    }

    /// Physical cores per device.
    pub const fn cores_per_device(&self) -> u32 {
        self.cores_per_device as u32
    }

    /// The last logical core (absolute); the first one when there are none.
    pub const fn last_lnc(&self) -> u32 {
        (self.first_lnc() + self.lnc_count()).saturating_sub(1)
    }

    /// The absolute logical core of a process-relative index, if the process owns it.
    pub const fn absolute_lnc(&self, relative: u32) -> Option<u32> {
        if relative < self.lnc_count() {
            Some(self.first_lnc() + relative)
        } else {
            None
        }
    }

    /// The process-relative index of an absolute logical core, if the process owns it.
    pub const fn relative_lnc(&self, absolute: u32) -> Option<u32> {
        match absolute.checked_sub(self.first_lnc()) {
            Some(r) if r < self.lnc_count() => Some(r),
            _ => None,
        }
    }

    /// Physical core `index` of absolute logical core `lnc`.
    pub const fn pnc(&self, lnc: u32, index: u32) -> u32 {
        lnc.saturating_mul(self.lnc_size()).saturating_add(index)
    }

    /// The device holding absolute logical core `lnc`.
    pub const fn device_of_lnc(&self, lnc: u32) -> u32 {
        self.device_of_pnc(self.pnc(lnc, 0))
    }

    /// The device holding physical core `pnc`.
    pub const fn device_of_pnc(&self, pnc: u32) -> u32 {
        locate_pnc(pnc, self.cores_per_device()).0
    }

    /// The physical cores of the process's logical cores.
    pub const fn pnc_range(&self) -> Range<u32> {
        let first = self.pnc(self.first_lnc(), 0);
        first..first.saturating_add(self.lnc_count().saturating_mul(self.lnc_size()))
    }

    /// The physical cores of the process's logical cores, as a bitmap: what `nrt_close`
    /// releases, rebuilt from the logical range.
    pub fn physical_cores(&self) -> CoreBitmap {
        let r = self.pnc_range();
        CoreBitmap::range(r.start, r.end - r.start)
    }

    /// The topology packed into 32 bits: the first logical core (9 bits), the count (10 bits),
    /// the size minus one (3 bits), the cores per device minus one (10 bits). Only the default
    /// topology packs to 0 (every other one owns at least one core).
    #[inline]
    pub const fn to_bits(self) -> u32 {
        let size = (self.lnc_size as u32).saturating_sub(1);
        let per_device = (self.cores_per_device as u32).saturating_sub(1);
        (self.first_lnc as u32 & 0x1ff)
            | (self.lnc_count as u32 & 0x3ff) << 9
            | (size & 0x7) << 19
            | (per_device & 0x3ff) << 22
    }

    /// Unpacks [`Topology::to_bits`] (0 gives the default, empty topology).
    #[inline]
    pub const fn from_bits(bits: u32) -> Self {
        if bits == 0 {
            return Self {
                first_lnc: 0,
                lnc_count: 0,
                lnc_size: 0,
                cores_per_device: 0,
            };
        }
        Self {
            first_lnc: (bits & 0x1ff) as u16,
            lnc_count: (bits >> 9 & 0x3ff) as u16,
            lnc_size: (bits >> 19 & 0x7) as u16 + 1,
            cores_per_device: (bits >> 22 & 0x3ff) as u16 + 1,
        }
    }
}

/// A reservation request: `count` consecutive physical cores anywhere in `[start, end]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ReserveRequest {
    /// Number of consecutive physical cores wanted.
    pub count: u32,
    /// First physical core that may be used.
    pub start: u32,
    /// Last physical core that may be used (inclusive).
    pub end: u32,
}

/// The logical cores a runtime owns and the physical cores reserved for them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Allocation {
    /// Where the logical cores are.
    pub topology: Topology,
    /// The physical cores reserved.
    pub reserved: CoreBitmap,
    /// Whether the reservation was made through the driver (and must be released there) or
    /// marked locally (funtime).
    pub driver_reserved: bool,
}

/// How the logical cores are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// `NEURON_RT_NUM_CORES` (0 = all): the first free run anywhere.
    Implicit,
    /// `NEURON_RT_VISIBLE_CORES`: exactly logical cores `first..=last`.
    Explicit { first: u32, last: u32 },
}

/// Which physical cores to reserve for the process, before anything is reserved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocationPlan {
    mode: Mode,
    /// Physical cores per logical core.
    lnc_size: u32,
    /// Logical cores wanted.
    lnc_count: u32,
    /// Physical cores on the machine.
    total_pnc: u32,
    /// Physical cores per device.
    cores_per_device: u32,
    /// The request the driver gets.
    request: ReserveRequest,
}

/// Plans the allocation of `config` on the machine `device` describes (`nrt_init` step 8,
/// before the reservation): the logical core size (`NEURON_RT_VIRTUAL_CORE_SIZE` or the
/// architecture's default), how many logical cores, and the driver request. Errors carry
/// libnrt's statuses and messages.
pub fn plan(device: &DeviceInfo, config: &Config) -> Result<AllocationPlan> {
    let total_pnc = device.total_physical_cores();
    if total_pnc > MAX_CORES {
        return Err(err!(
            Invalid,
            "Found {total_pnc} NeuronCores, more than the {MAX_CORES} this runtime supports"
        ));
    }
    let vsize = config
        .virtual_core_size
        .unwrap_or(device.arch.default_lnc_size());
    let max_vsize = device.arch.max_lnc_size();
    if vsize == 0 || vsize > max_vsize || device.cores_per_device % vsize != 0 {
        return Err(err!(
            Invalid,
            "Invalid value for {}: \"{vsize}\": this instance supports logical core sizes up to \
             {max_vsize}",
            vars::VIRTUAL_CORE_SIZE
        ));
    }
    let total_lnc = total_pnc / vsize;
    match &config.visible_cores {
        None => {
            let num = if config.num_cores == 0 {
                total_lnc
            } else {
                config.num_cores
            };
            let pcount = num.saturating_mul(vsize);
            if device.arch > Arch::V2 && vsize != pcount && pcount % device.cores_per_device != 0 {
                return Err(err!(
                    Invalid,
                    "`NEURON_RT_NUM_CORES` must request one core, or the whole device (multiple \
                     of {})",
                    device.cores_per_device / vsize
                ));
            }
            Ok(AllocationPlan {
                mode: Mode::Implicit,
                lnc_size: vsize,
                lnc_count: num,
                total_pnc,
                cores_per_device: device.cores_per_device,
                request: ReserveRequest {
                    count: pcount,
                    start: 0,
                    end: total_pnc.saturating_sub(1),
                },
            })
        }
        Some(set) => {
            if !set.is_contiguous() {
                return Err(err!(
                    Invalid,
                    "Logical Neuron cores are not contiguous: {}={set}",
                    vars::VISIBLE_CORES
                ));
            }
            let (Some(first), Some(last)) = (set.first(), set.last()) else {
                return Err(err!(Invalid, "Logical Neuron cores are not contiguous"));
            };
            let n = set.len();
            let plan = AllocationPlan {
                mode: Mode::Explicit { first, last },
                lnc_size: vsize,
                lnc_count: n,
                total_pnc,
                cores_per_device: device.cores_per_device,
                request: ReserveRequest {
                    count: n.saturating_mul(vsize),
                    start: first.saturating_mul(vsize),
                    end: last.saturating_mul(vsize).saturating_add(vsize - 1),
                },
            };
            if plan.request.end >= total_pnc {
                return Err(plan.unavailable(total_pnc));
            }
            Ok(plan)
        }
    }
}

impl AllocationPlan {
    /// Physical cores per logical core.
    pub fn lnc_size(&self) -> u32 {
        self.lnc_size
    }

    /// The request to give the driver.
    pub fn request(&self) -> ReserveRequest {
        self.request
    }

    /// What funtime marks locally (no driver): the requested cores from the first physical
    /// core, or the "not available" error when the machine is too small.
    pub fn funtime_reservation(&self) -> Result<CoreBitmap> {
        match self.mode {
            Mode::Implicit if self.request.count > self.total_pnc => {
                Err(self.unavailable(self.total_pnc))
            }
            Mode::Implicit => Ok(CoreBitmap::range(0, self.request.count)),
            Mode::Explicit { .. } => Ok(self.expected()),
        }
    }

    fn expected(&self) -> CoreBitmap {
        CoreBitmap::range(self.request.start, self.request.count)
    }

    /// The "Logical Neuron Core(s) not available" error, given the longest run of free
    /// physical cores.
    pub fn unavailable(&self, free_pnc: u32) -> Error {
        let available = free_pnc / self.lnc_size.max(1);
        match self.mode {
            Mode::Implicit => err!(
                Failure,
                "Logical Neuron Core(s) not available - Requested:{} Available:{} Logical Core \
                 size {}",
                self.lnc_count,
                available,
                self.lnc_size
            ),
            Mode::Explicit { first, last } => err!(
                Failure,
                "Logical Neuron Core(s) not available - Requested:lnc{}-lnc{} Available:{} \
                 Logical Core size {}",
                first,
                last,
                available,
                self.lnc_size
            ),
        }
    }

    /// Checks what was reserved (never trusted blindly: it must be exactly the cores the plan
    /// asked for, aligned to the logical core size) and returns the allocation. On error the
    /// caller gives the reservation back.
    pub fn accept(&self, reserved: CoreBitmap, driver_reserved: bool) -> Result<Allocation> {
        let (vsize, pcount) = (self.lnc_size, self.request.count);
        let first_lnc = match self.mode {
            Mode::Implicit => {
                let start_pnc = match reserved.first() {
                    Some(s)
                        if reserved.len() == pcount
                            && reserved.is_contiguous()
                            && reserved.last().is_some_and(|l| l < self.total_pnc) =>
                    {
                        s
                    }
                    _ => {
                        return Err(err!(
                            Failure,
                            "Driver returned an invalid core reservation {reserved:?} for \
                             {pcount} cores"
                        ));
                    }
                };
                if start_pnc % vsize != 0 {
                    let first = start_pnc.div_ceil(vsize);
                    return Err(err!(
                        Invalid,
                        "Cannot start process with LNC Size of {vsize}. The first free physical \
                         NeuronCore {start_pnc} is not aligned to the LNC size; free aligned \
                         cores or select them with NEURON_RT_VISIBLE_CORES={}-{}",
                        first,
                        (first + self.lnc_count).saturating_sub(1)
                    ));
                }
                start_pnc / vsize
            }
            Mode::Explicit { first, last } => {
                if reserved != self.expected() {
                    return Err(err!(
                        Failure,
                        "Driver returned an invalid core reservation {reserved:?} for \
                         lnc{first}-lnc{last}"
                    ));
                }
                first
            }
        };
        let Some(topology) = Topology::new(first_lnc, self.lnc_count, vsize, self.cores_per_device)
        else {
            return Err(err!(
                Failure,
                "Logical cores lnc{first_lnc} and {} after it do not fit the runtime's core \
                 numbering",
                self.lnc_count
            ));
        };
        Ok(Allocation {
            topology,
            reserved,
            driver_reserved,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Platform;

    #[test]
    fn topology_maps_relative_absolute_physical_and_device() {
        let t = Topology::new(3, 2, 2, 8).unwrap();
        assert_eq!(t.absolute_lnc(0), Some(3));
        assert_eq!(t.absolute_lnc(1), Some(4));
        assert_eq!(t.absolute_lnc(2), None);
        assert_eq!(t.relative_lnc(4), Some(1));
        assert_eq!(t.relative_lnc(2), None);
        assert_eq!(t.relative_lnc(5), None);
        assert_eq!(t.pnc(4, 1), 9);
        assert_eq!(t.device_of_lnc(3), 0);
        assert_eq!(t.device_of_lnc(4), 1);
        assert_eq!(locate_pnc(13, 8), (1, 5));
        assert_eq!(locate_pnc(13, 0), (13, 0));
        assert_eq!(device_pncs(1, 8), CoreBitmap::range(8, 8));
        assert_eq!(t.pnc_range(), 6..10);
        assert_eq!(t.physical_cores(), CoreBitmap::range(6, 4));
        assert_eq!(t.last_lnc(), 4);
        assert_eq!(Topology::from_bits(t.to_bits()), t);
    }

    #[test]
    fn topology_refuses_values_it_cannot_hold() {
        assert!(Topology::new(0, MAX_CORES, 1, MAX_CORES).is_some());
        assert!(Topology::new(MAX_CORES, 1, 1, 2).is_none());
        assert!(Topology::new(0, MAX_CORES + 1, 1, 2).is_none());
        assert!(Topology::new(0, 0, 1, 2).is_none());
        assert!(Topology::new(0, 1, 0, 2).is_none());
        assert!(Topology::new(0, 1, MAX_LNC_SIZE + 1, 8).is_none());
        assert!(Topology::new(0, 1, 1, 0).is_none());
        assert!(Topology::new(0, 1, 1, MAX_CORES + 1).is_none());
    }

    #[test]
    fn topology_round_trips_through_32_bits_at_every_limit() {
        for (first, count, size, per_device) in [
            (0, 1, 1, 1),
            (MAX_CORES - 1, MAX_CORES, MAX_LNC_SIZE, MAX_CORES),
            (511, 1, 2, 8),
            (3, 2, 2, 8),
        ] {
            let t = Topology::new(first, count, size, per_device).unwrap();
            assert_eq!(Topology::from_bits(t.to_bits()), t, "{t:?}");
        }
        assert_eq!(
            Topology::from_bits(Topology::default().to_bits()),
            Topology::default()
        );
    }

    fn trn2() -> DeviceInfo {
        DeviceInfo {
            device_count: 2,
            cores_per_device: 8,
            arch: Arch::V3,
            platform: Platform::Simulator,
        }
    }

    #[test]
    fn implicit_plan_asks_for_the_first_free_run_and_checks_alignment() {
        let config = Config {
            num_cores: 1,
            ..Config::default()
        };
        let p = plan(&trn2(), &config).unwrap();
        assert_eq!(
            p.request(),
            ReserveRequest {
                count: 2,
                start: 0,
                end: 15
            }
        );
        let a = p.accept(CoreBitmap::range(4, 2), true).unwrap();
        let t = a.topology;
        assert_eq!((t.first_lnc(), t.lnc_count(), t.lnc_size()), (2, 1, 2));
        let e = p.accept(CoreBitmap::range(3, 2), true).unwrap_err();
        assert!(
            e.message()
                .starts_with("Cannot start process with LNC Size of 2.")
        );
        let e = p.accept(CoreBitmap::range(4, 3), true).unwrap_err();
        assert!(
            e.message()
                .starts_with("Driver returned an invalid core reservation")
        );
    }

    #[test]
    fn explicit_plan_is_the_exact_range() {
        let mut set = CoreBitmap::new();
        set.insert(1);
        set.insert(2);
        let config = Config {
            visible_cores: Some(set),
            ..Config::default()
        };
        let p = plan(&trn2(), &config).unwrap();
        assert_eq!(
            p.request(),
            ReserveRequest {
                count: 4,
                start: 2,
                end: 5
            }
        );
        assert_eq!(p.funtime_reservation().unwrap(), CoreBitmap::range(2, 4));
        assert!(p.accept(CoreBitmap::range(2, 4), false).is_ok());
        assert!(p.accept(CoreBitmap::range(0, 4), false).is_err());
        assert_eq!(
            p.unavailable(3).message(),
            "Logical Neuron Core(s) not available - Requested:lnc1-lnc2 Available:1 Logical \
             Core size 2"
        );
    }
}

//! What discovery finds: the chip architecture, the platform and the device count. A leaf
//! module (the driver trait reports it, the topology plans with it).

/// Chip architecture, as the kernel driver numbers it (`NEURON_ARCH_V*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Arch {
    /// No device, or one the runtime cannot drive.
    Invalid = 0,
    /// Inferentia (inf1, NeuronCore-v1). Not supported by the 2.x runtime.
    V1 = 1,
    /// Trainium1 / Inferentia2 (NeuronCore-v2); `SUNDA` in the runtime's own naming.
    V2 = 2,
    /// Trainium2 (NeuronCore-v3); logical cores of 2 physical cores by default.
    V3 = 3,
    /// The generation after Trainium2 (the runtime's "arch 4").
    V4 = 4,
}

impl Arch {
    /// Whether the 2.x runtime can drive this architecture.
    pub const fn is_supported(self) -> bool {
        matches!(self, Arch::V2 | Arch::V3 | Arch::V4)
    }

    /// The runtime's compatibility ids `(vtpb, v25)` for this architecture: `(6, 6)` for SUNDA
    /// (V2), `(10, 11)` otherwise. The driver must advertise a range `[min, max]` with
    /// `vtpb >= min` and `max >= v25`.
    pub const fn compat_ids(self) -> (u32, u32) {
        match self {
            Arch::V2 => (6, 6),
            _ => (10, 11),
        }
    }

    /// Default logical-core (LNC) size when `NEURON_RT_VIRTUAL_CORE_SIZE` is unset.
    pub const fn default_lnc_size(self) -> u32 {
        match self {
            Arch::V3 | Arch::V4 => 2,
            _ => 1,
        }
    }

    /// Largest logical-core size the architecture supports.
    pub const fn max_lnc_size(self) -> u32 {
        match self {
            Arch::V3 | Arch::V4 => 2,
            _ => 1,
        }
    }
}

/// Where the device lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Platform {
    /// Real hardware.
    Hardware,
    /// A simulator or emulator: the runtime overrides the hardware revision to REV_A.
    Simulator,
}

/// Hardware revisions the runtime may force on a non-hardware platform.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum HwRevision {
    /// Revision A.
    A,
    /// Revision B.
    B,
}

/// What discovery found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DeviceInfo {
    /// Number of Neuron devices (chips).
    pub device_count: u32,
    /// Physical NeuronCores per device.
    pub cores_per_device: u32,
    /// Chip architecture.
    pub arch: Arch,
    /// Hardware or simulator.
    pub platform: Platform,
}

impl DeviceInfo {
    /// Physical cores over all devices (saturating).
    pub const fn total_physical_cores(&self) -> u32 {
        self.device_count.saturating_mul(self.cores_per_device)
    }
}

//! What a simulated machine is: the instance family ([`Instance`]), the device count and
//! whether the machine runs in funtime mode or emulates a kernel driver ([`SimConfig`],
//! [`DriverEmulation`]).

use nrt_core::driver::{Arch, CompatRange, DriverVersion};

/// An EC2 instance family the simulator can model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Instance {
    /// Inferentia2: 2 NeuronCore-v2 per device.
    Inf2,
    /// Trainium1: 2 NeuronCore-v2 per device.
    Trn1,
    /// Trainium2: 8 physical NeuronCore-v3 per device, LNC 2 by default.
    Trn2,
}

impl Instance {
    /// Physical cores per device.
    pub const fn cores_per_device(self) -> u32 {
        match self {
            Instance::Inf2 | Instance::Trn1 => 2,
            Instance::Trn2 => 8,
        }
    }

    /// Chip architecture.
    pub const fn arch(self) -> Arch {
        match self {
            Instance::Inf2 | Instance::Trn1 => Arch::V2,
            Instance::Trn2 => Arch::V3,
        }
    }

    /// The published figures of this family's NeuronCore generation.
    pub const fn core_spec(self) -> &'static crate::engine::CoreSpec {
        match self {
            Instance::Inf2 | Instance::Trn1 => &crate::engine::NEURONCORE_V2,
            Instance::Trn2 => &crate::engine::NEURONCORE_V3,
        }
    }

    /// HBM per device, bytes.
    pub const fn hbm_bytes_per_device(self) -> u64 {
        match self {
            Instance::Inf2 | Instance::Trn1 => 32 << 30,
            Instance::Trn2 => 96 << 30,
        }
    }

    /// The compatibility-id range the real driver advertises for this architecture (driver
    /// 2.24: V2 min 5 / max 7, V3 min 10 / max 11).
    pub const fn driver_compat_range(self) -> CompatRange {
        match self.arch() {
            Arch::V2 => CompatRange { min: 5, max: 7 },
            _ => CompatRange { min: 10, max: 11 },
        }
    }

    /// Lower-case name (`"inf2"`, `"trn1"`, `"trn2"`).
    pub const fn name(self) -> &'static str {
        match self {
            Instance::Inf2 => "inf2",
            Instance::Trn1 => "trn1",
            Instance::Trn2 => "trn2",
        }
    }

    /// Parses a name as [`Instance::name`] writes it.
    pub fn from_name(s: &str) -> Option<Self> {
        [Instance::Inf2, Instance::Trn1, Instance::Trn2]
            .into_iter()
            .find(|i| i.name() == s)
    }
}

/// How a simulated machine behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimConfig {
    /// Instance family.
    pub instance: Instance,
    /// Number of devices (chips).
    pub device_count: u32,
    /// `None`: funtime mode (no driver). `Some`: emulate a kernel driver.
    pub emulate_driver: Option<DriverEmulation>,
    /// Refuse to stage NEFFs without a simulator program (compiler NEFFs) instead of running
    /// them in plumbing mode.
    pub refuse_plumbing: bool,
}

/// The kernel driver a simulated machine pretends to have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DriverEmulation {
    /// Reported driver version; `None` makes the version unreadable.
    pub version: Option<DriverVersion>,
    /// Reported compatibility-id range; `None` makes it unreadable.
    pub compat: Option<CompatRange>,
}

impl SimConfig {
    /// A funtime machine of `device_count` devices of `instance`.
    pub const fn funtime(instance: Instance, device_count: u32) -> Self {
        Self {
            instance,
            device_count,
            emulate_driver: None,
            refuse_plumbing: false,
        }
    }

    /// A machine that emulates the driver shipped with Runtime 2.31 (2.27) and the
    /// compatibility range the real driver advertises for the instance's architecture.
    pub const fn emulate_driver(instance: Instance, device_count: u32) -> Self {
        Self {
            instance,
            device_count,
            emulate_driver: Some(DriverEmulation {
                version: Some(DriverVersion {
                    major: 2,
                    minor: 27,
                }),
                compat: Some(instance.driver_compat_range()),
            }),
            refuse_plumbing: false,
        }
    }

    /// Physical cores over all devices.
    pub const fn total_cores(&self) -> u32 {
        self.device_count
            .saturating_mul(self.instance.cores_per_device())
    }
}

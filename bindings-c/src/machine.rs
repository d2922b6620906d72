//! What the machine is, for `nrt_get_instance_info` and `nrt_get_vnc_memory_stats`: the
//! instance family and size, and the HBM capacity of a device, on every backend.
//!
//! On the simulator they come from the simulated instance and its device count. On the Linux
//! driver the instance type is the one the firmware names (`/sys/class/dmi/id/product_name`,
//! e.g. `trn1.32xlarge`); when it names none, the family follows from the chip architecture
//! where that is unambiguous (Trainium2), and the size is unknown.

use nrt_core::device::{Arch, DeviceInfo};

/// `NRT_INSTANCE_SIZE_UNKNOWN`.
pub(crate) const SIZE_UNKNOWN: u32 = 9;

/// The `nrt_instance_info_t` fields: family, size, architecture name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Identity {
    pub(crate) family: u32,
    pub(crate) size: u32,
    pub(crate) arch_name: &'static str,
}

/// The `NRT_INSTANCE_*` family of an instance family name (`trn1`, `inf2`, ...); 0
/// (`NRT_INSTANCE_UNKNOWN`) for others.
pub(crate) fn family_code(name: &str) -> u32 {
    const FAMILIES: [(&str, u32); 15] = [
        ("inf1", 1),
        ("trn1", 2),
        ("trn1n", 3),
        ("inf2", 4),
        ("trn2", 5),
        ("trn2n", 6),
        ("inf2e", 7),
        ("trn2p", 8),
        ("trn2u", 9),
        ("trn2e", 10),
        ("trn2eu", 11),
        ("trn2ac", 12),
        ("trn2uac", 13),
        ("trn3", 14),
        ("trn3pds98", 15),
    ];
    FAMILIES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map_or(0, |(_, c)| *c)
}

/// The `NRT_INSTANCE_SIZE_*` of an instance size name (`xlarge`, `32xlarge`, ...).
pub(crate) fn size_code(name: &str) -> u32 {
    const SIZES: [(&str, u32); 9] = [
        ("xlarge", 0),
        ("2xlarge", 1),
        ("4xlarge", 2),
        ("6xlarge", 3),
        ("8xlarge", 4),
        ("24xlarge", 5),
        ("32xlarge", 6),
        ("48xlarge", 7),
        ("3xlarge", 8),
    ];
    SIZES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map_or(SIZE_UNKNOWN, |(_, c)| *c)
}

/// The name of an architecture, as `arch_name` reports it.
pub(crate) fn arch_name(arch: Arch) -> &'static str {
    match arch {
        Arch::V1 => "inf1",
        Arch::V2 => "trn1",
        Arch::V3 => "trn2",
        Arch::V4 => "trn3",
        Arch::Invalid => "unknown",
    }
}

/// The identity of an instance of type `instance_type` (`family.size`, as EC2 names it), on
/// a machine whose devices `device` describes.
pub(crate) fn from_instance_type(instance_type: &str, device: &DeviceInfo) -> Identity {
    let (family, size) = instance_type
        .trim()
        .split_once('.')
        .unwrap_or((instance_type.trim(), ""));
    let code = family_code(family);
    if code == 0 {
        return from_arch(device);
    }
    let arch_name = match code {
        1 => "inf1",
        2 | 3 => "trn1",
        4 | 7 => "inf2",
        14 | 15 => "trn3",
        _ => "trn2",
    };
    Identity {
        family: code,
        size: size_code(size),
        arch_name,
    }
}

/// The identity when no instance type is known: the family of the architecture where only one
/// family has it (Trainium2, Trainium3), the size unknown.
pub(crate) fn from_arch(device: &DeviceInfo) -> Identity {
    let family = match device.arch {
        Arch::V1 => 1,
        Arch::V3 => 5,
        Arch::V4 => 14,
        Arch::V2 | Arch::Invalid => 0,
    };
    Identity {
        family,
        size: SIZE_UNKNOWN,
        arch_name: arch_name(device.arch),
    }
}

/// The EC2 instance type of a simulated instance of `family` with `devices` devices (the
/// sizes of that family with this many devices; the smallest when several have it).
pub(crate) fn simulated_instance_type(family: &str, devices: u32) -> &'static str {
    match (family, devices) {
        ("trn1", 1) => "trn1.2xlarge",
        ("trn1", 16) => "trn1.32xlarge",
        ("inf2", 1) => "inf2.xlarge",
        ("inf2", 6) => "inf2.24xlarge",
        ("inf2", 12) => "inf2.48xlarge",
        ("trn2", 1) => "trn2.3xlarge",
        ("trn2", 16) => "trn2.48xlarge",
        ("trn1", _) => "trn1",
        ("inf2", _) => "inf2",
        ("trn2", _) => "trn2",
        _ => "",
    }
}

/// HBM of one device of architecture `arch`, in bytes (public instance specifications: 32 GiB
/// per Trainium1 / Inferentia2 chip, 96 GiB per Trainium2 chip, 144 GiB per Trainium3 chip).
pub(crate) fn hbm_bytes_per_device(arch: Arch) -> u64 {
    match arch {
        Arch::V1 => 8 << 30,
        Arch::V2 => 32 << 30,
        Arch::V3 => 96 << 30,
        Arch::V4 => 144 << 30,
        Arch::Invalid => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nrt_core::device::Platform;

    fn device(arch: Arch, devices: u32) -> DeviceInfo {
        DeviceInfo {
            device_count: devices,
            cores_per_device: 2,
            arch,
            platform: Platform::Hardware,
        }
    }

    #[test]
    fn instance_types_give_the_header_codes() {
        let d = device(Arch::V2, 16);
        assert_eq!(
            from_instance_type("trn1.32xlarge\n", &d),
            Identity {
                family: 2,
                size: 6,
                arch_name: "trn1"
            }
        );
        assert_eq!(from_instance_type("inf2.xlarge", &d).family, 4);
        assert_eq!(from_instance_type("inf2.xlarge", &d).arch_name, "inf2");
        assert_eq!(from_instance_type("inf2.xlarge", &d).size, 0);
        assert_eq!(from_instance_type("trn1n.32xlarge", &d).family, 3);
        assert_eq!(
            from_instance_type("trn2.3xlarge", &device(Arch::V3, 1)).size,
            8
        );
        assert_eq!(
            from_instance_type("trn2.48xlarge", &device(Arch::V3, 16)).size,
            7
        );
        assert_eq!(from_instance_type("trn1.9xlarge", &d).size, SIZE_UNKNOWN);
    }

    #[test]
    fn an_unknown_instance_type_falls_back_to_the_architecture() {
        assert_eq!(
            from_instance_type("m5.large", &device(Arch::V3, 16)),
            Identity {
                family: 5,
                size: SIZE_UNKNOWN,
                arch_name: "trn2"
            }
        );
        assert_eq!(from_instance_type("", &device(Arch::V2, 1)).family, 0);
    }

    #[test]
    fn simulated_instances_name_their_ec2_type() {
        assert_eq!(simulated_instance_type("trn1", 16), "trn1.32xlarge");
        assert_eq!(simulated_instance_type("inf2", 12), "inf2.48xlarge");
        assert_eq!(simulated_instance_type("trn2", 16), "trn2.48xlarge");
        assert_eq!(
            from_instance_type(simulated_instance_type("trn1", 3), &device(Arch::V2, 3)).size,
            SIZE_UNKNOWN
        );
    }
}

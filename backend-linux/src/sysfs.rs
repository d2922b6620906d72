//! Parsers for what the driver exposes as files: device node names and sysfs attributes.
//! Pure functions, so they can be tested without a device.

use nrt_core::driver::{Arch, DriverVersion};

use crate::sys;

/// The index `N` of a device node or sysfs directory named `neuronN` (decimal, no sign, no
/// leading `+`, below [`sys::MAX_NEURON_DEVICE_COUNT`]).
pub(crate) fn node_index(name: &str) -> Option<u32> {
    let digits = name.strip_prefix("neuron")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits
        .parse::<u32>()
        .ok()
        .filter(|&n| n < sys::MAX_NEURON_DEVICE_COUNT)
}

/// Parses the module version string (`/sys/module/neuron/version`, e.g. `2.24.7.0`): the first
/// two dot-separated components are the major and minor version, later ones are ignored.
/// Surrounding whitespace (the trailing newline) is ignored.
pub fn parse_driver_version(text: &str) -> Option<DriverVersion> {
    let mut parts = text.trim().split('.');
    let major = parse_decimal(parts.next()?)?;
    let minor = parse_decimal(parts.next()?)?;
    Some(DriverVersion { major, minor })
}

/// Most cores per device this backend accepts from sysfs: the width of the per-device
/// `nc_map` of `NC_RESET`.
pub(crate) const MAX_CORES_PER_DEVICE: u32 = u32::BITS;

/// Parses sysfs `core_count` (the driver prints `nc_per_device` without a newline): a decimal
/// in `1..=32`.
pub(crate) fn parse_core_count(text: &str) -> Option<u32> {
    parse_decimal(text.trim()).filter(|&n| n > 0 && n <= MAX_CORES_PER_DEVICE)
}

fn parse_decimal(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// The architecture as the driver numbers it (`NEURON_ARCH_*`; 4 is the generation after
/// Trainium2, not in the public driver yet). Anything else is [`Arch::Invalid`].
pub(crate) fn arch_from_driver(arch: u32) -> Arch {
    match arch {
        sys::NEURON_ARCH_V1 => Arch::V1,
        sys::NEURON_ARCH_V2 => Arch::V2,
        sys::NEURON_ARCH_V3 => Arch::V3,
        4 => Arch::V4,
        _ => Arch::Invalid,
    }
}

/// The architecture from the sysfs metrics strings `info/architecture/device_name`
/// (`Inferentia`, `Trainium1`, `Inferentia2`, `Trainium2`) or `instance_type` (`Inf1`,
/// `Trn1`, `Inf2`, `Trn2`).
pub(crate) fn arch_from_name(text: &str) -> Option<Arch> {
    match text.trim() {
        "Inferentia" | "Inf1" => Some(Arch::V1),
        "Trainium1" | "Inferentia2" | "Trn1" | "Inf2" => Some(Arch::V2),
        "Trainium2" | "Trn2" => Some(Arch::V3),
        _ => None,
    }
}

/// Physical cores per device of an architecture when sysfs `core_count` cannot be read
/// (`V*_NC_PER_DEVICE`).
pub(crate) fn default_cores_per_device(arch: Arch) -> Option<u32> {
    match arch {
        Arch::V1 => Some(4),
        Arch::V2 => Some(2),
        Arch::V3 => Some(8),
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn driver_version_takes_major_and_minor() {
        let v = |major, minor| Some(DriverVersion { major, minor });
        assert_eq!(parse_driver_version("2.24.7.0"), v(2, 24));
        assert_eq!(parse_driver_version("2.24.7.0\n"), v(2, 24));
        assert_eq!(parse_driver_version("  2.18\n"), v(2, 18));
        assert_eq!(parse_driver_version("1.0.0"), v(1, 0));
        assert_eq!(parse_driver_version("2.27.4.0-dkms"), v(2, 27));
    }

    #[test]
    fn driver_version_rejects_garbage() {
        for bad in [
            "",
            "\n",
            "2",
            "2.",
            ".24",
            "v2.24",
            "2.x",
            "-2.24",
            "+2.24",
            "99999999999.1",
        ] {
            assert_eq!(parse_driver_version(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn node_names() {
        assert_eq!(node_index("neuron0"), Some(0));
        assert_eq!(node_index("neuron63"), Some(63));
        assert_eq!(node_index("neuron64"), None);
        assert_eq!(node_index("neuron"), None);
        assert_eq!(node_index("neuron_device"), None);
        assert_eq!(node_index("neuron+1"), None);
        assert_eq!(node_index("neuronx0"), None);
        assert_eq!(node_index("xneuron0"), None);
    }

    #[test]
    fn core_count_and_arch_names() {
        assert_eq!(parse_core_count("2"), Some(2));
        assert_eq!(parse_core_count("8\n"), Some(8));
        assert_eq!(parse_core_count("0"), None);
        assert_eq!(parse_core_count("32"), Some(32));
        assert_eq!(parse_core_count("33"), None);
        assert_eq!(parse_core_count("two"), None);
        assert_eq!(arch_from_name("Trainium2\n"), Some(Arch::V3));
        assert_eq!(arch_from_name("Inf2"), Some(Arch::V2));
        assert_eq!(arch_from_name("Inferentia"), Some(Arch::V1));
        assert_eq!(arch_from_name("Gaudi"), None);
        assert_eq!(arch_from_driver(2), Arch::V2);
        assert_eq!(arch_from_driver(0), Arch::Invalid);
        assert_eq!(arch_from_driver(9), Arch::Invalid);
        assert_eq!(default_cores_per_device(Arch::V1), Some(4));
        assert_eq!(default_cores_per_device(Arch::V2), Some(2));
        assert_eq!(default_cores_per_device(Arch::V3), Some(8));
        assert_eq!(default_cores_per_device(Arch::V4), None);
    }
}

//! The files an emulated machine exposes under its root: `dev/neuronN` (sparse regular files,
//! each the backing store of its device's host-memory chunks) and the `sys/` entries the
//! backend's discovery reads.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::Path;

use nrt_sim::Instance;

/// The module version the emulated driver reports (`/sys/module/neuron/version`).
pub const DRIVER_VERSION: &str = "2.24.7.0";

/// The sysfs `device_name` and `instance_type` strings of an instance family.
pub(crate) fn arch_names(instance: Instance) -> (&'static str, &'static str) {
    match instance {
        Instance::Trn1 => ("Trainium1", "Trn1"),
        Instance::Inf2 => ("Inferentia2", "Inf2"),
        Instance::Trn2 => ("Trainium2", "Trn2"),
    }
}

fn write(path: &Path, content: &str) -> io::Result<()> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    fs::write(path, content)
}

/// Creates `root/sys/…` for `devices` devices of `instance`.
pub(crate) fn create_sysfs(root: &Path, instance: Instance, devices: u32) -> io::Result<()> {
    let sys = root.join("sys");
    write(
        &sys.join("module/neuron/version"),
        &format!("{DRIVER_VERSION}\n"),
    )?;
    let (device_name, instance_type) = arch_names(instance);
    for i in 0..devices {
        let dir = sys.join(format!("class/neuron_device/neuron{i}"));
        // The driver prints `nc_per_device` without a newline.
        write(
            &dir.join("core_count"),
            &instance.cores_per_device().to_string(),
        )?;
        write(
            &dir.join("info/architecture/device_name"),
            &format!("{device_name}\n"),
        )?;
        write(
            &dir.join("info/architecture/instance_type"),
            &format!("{instance_type}\n"),
        )?;
    }
    Ok(())
}

/// Creates (or empties) `root/dev/neuron{index}` and opens it read/write.
pub(crate) fn create_node(root: &Path, index: u32) -> io::Result<File> {
    let dev = root.join("dev");
    fs::create_dir_all(&dev)?;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(dev.join(format!("neuron{index}")))?;
    Ok(file)
}

//! A throw-away fake `/dev` + `/sys` tree under the system temp directory.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use nrt_linux::LinuxDriver;

/// A temp directory holding `dev/` and `sys/`, removed on drop.
pub(crate) struct FakeTree {
    root: PathBuf,
}

impl FakeTree {
    /// An empty tree (both directories exist, nothing in them).
    pub(crate) fn new(name: &str) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let root = std::env::temp_dir().join(format!(
            "nrt-linux-test-{}-{}-{name}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("dev")).unwrap();
        std::fs::create_dir_all(root.join("sys")).unwrap();
        Self { root }
    }

    pub(crate) fn dev(&self) -> PathBuf {
        self.root.join("dev")
    }

    pub(crate) fn sys(&self) -> PathBuf {
        self.root.join("sys")
    }

    /// A `dev/neuronN` node (a regular file: every ioctl on it fails with `ENOTTY`).
    pub(crate) fn node(&self, index: u32) -> &Self {
        std::fs::write(self.dev().join(format!("neuron{index}")), b"").unwrap();
        self
    }

    /// Writes `sys/<rel>`, creating its directories.
    pub(crate) fn sys_file(&self, rel: &str, content: &str) -> &Self {
        write(&self.sys().join(rel), content);
        self
    }

    /// A `sys/class/neuron_device/neuronN` entry with a device name and, optionally, a
    /// `core_count`.
    pub(crate) fn class_device(
        &self,
        index: u32,
        device_name: &str,
        core_count: Option<&str>,
    ) -> &Self {
        let dir = format!("class/neuron_device/neuron{index}");
        self.sys_file(&format!("{dir}/info/architecture/device_name"), device_name);
        if let Some(count) = core_count {
            self.sys_file(&format!("{dir}/core_count"), count);
        }
        self
    }

    pub(crate) fn driver(&self) -> LinuxDriver {
        LinuxDriver::with_roots(self.dev(), self.sys())
    }
}

fn write(path: &Path, content: &str) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(path, content).unwrap();
}

impl Drop for FakeTree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

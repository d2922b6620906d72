//! [`LinuxDriver`]: the [`Driver`] over `/dev/neuronN` and sysfs.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use nrt_core::bitmap::{CoreBitmap, MAX_CORES};
use nrt_core::driver::{
    Arch, CompatRange, CoreInitParams, DeviceInfo, Driver, DriverVersion, HwRevision, Platform,
    Reservation, ReserveRequest, SoftIncompatCallback,
};
use nrt_core::topology;

use crate::error::LinuxError;
use crate::sys::{self, DeviceFd, OpenMode};
use crate::sysfs;

/// Where device nodes live on a real system.
pub const DEFAULT_DEV_DIR: &str = "/dev";
/// Where sysfs is mounted on a real system.
pub const DEFAULT_SYSFS_ROOT: &str = "/sys";

// The extended reservation bitmap and the runtime's core bitmap are the same 512 bits.
const _: () = assert!(sys::CRWL_NC_MAP_EXT_WORDS * 64 == MAX_CORES as usize);

/// Which reservation ioctls the driver serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Crwl {
    /// Not tried yet: try `*_EXT0`, fall back to the legacy request on `EINVAL`/`ENOTTY`.
    Unknown,
    /// `CRWL_NC_RANGE_{MARK,UNMARK}_EXT0` (512 cores).
    Ext,
    /// `CRWL_NC_RANGE_{MARK,UNMARK}` (64 cores; drivers without `BIG_CORE_MAPS`).
    Legacy,
}

/// What discovery found, kept for the per-device steps.
#[derive(Clone, Copy, Debug)]
struct Discovered {
    /// Index of the lowest device node: the misc fd is opened on it, so reservation core
    /// numbers are relative to its first core.
    base: u32,
    info: DeviceInfo,
}

#[derive(Debug)]
struct State {
    // Field order is drop order: the attached (`O_RDWR`) fds close before the misc fd, whose
    // close unmarks every core range of the process.
    /// `O_RDWR` fds opened by `init_cores`, by device node index.
    attached: Vec<(u32, DeviceFd)>,
    /// The `O_WRONLY` fd on the base node, open from first use to drop.
    misc: Option<DeviceFd>,
    discovered: Option<Discovered>,
    crwl: Crwl,
    /// Cores this driver reserved and has not released (relative to the base node).
    reserved: CoreBitmap,
}

/// The Neuron kernel driver through `/dev/neuronN` ioctls and sysfs.
///
/// One instance per process: the driver ties core reservations to the process, and closing
/// any `O_WRONLY` fd of the process — which dropping a `LinuxDriver` does — unmarks all of
/// them.
#[derive(Debug)]
pub struct LinuxDriver {
    dev_dir: PathBuf,
    sysfs_root: PathBuf,
    soft_incompat: Mutex<Option<SoftIncompatCallback>>,
    state: Mutex<State>,
}

impl Default for LinuxDriver {
    fn default() -> Self {
        Self::new()
    }
}

impl LinuxDriver {
    /// A driver over `/dev` and `/sys`. Opens nothing until first used.
    pub fn new() -> Self {
        Self::with_roots(DEFAULT_DEV_DIR, DEFAULT_SYSFS_ROOT)
    }

    /// A driver whose device nodes are `dev_dir/neuronN` and whose sysfs tree is under
    /// `sysfs_root` (`class/neuron_device/neuronN/…`, `module/neuron/version`).
    pub fn with_roots(dev_dir: impl Into<PathBuf>, sysfs_root: impl Into<PathBuf>) -> Self {
        Self {
            dev_dir: dev_dir.into(),
            sysfs_root: sysfs_root.into(),
            soft_incompat: Mutex::new(None),
            state: Mutex::new(State {
                attached: Vec::new(),
                misc: None,
                discovered: None,
                crwl: Crwl::Unknown,
                reserved: CoreBitmap::new(),
            }),
        }
    }

    /// The device-node directory.
    pub fn dev_dir(&self) -> &Path {
        &self.dev_dir
    }

    /// The sysfs root.
    pub fn sysfs_root(&self) -> &Path {
        &self.sysfs_root
    }

    /// The cores this driver has reserved and not released, numbered from the first core of
    /// the lowest device node.
    pub fn reserved(&self) -> CoreBitmap {
        self.state().reserved
    }

    /// `NEURON_IOCTL_DRIVER_INFO_GET`: architecture, revision and `NEURON_DRIVER_FEATURE_*`
    /// flags (drivers older than the request fail it with `EINVAL`).
    pub fn driver_info(&self) -> Result<sys::DeviceDriverInfo, LinuxError> {
        let mut st = self.state();
        let fd = self.misc(&mut st)?;
        let mut info = sys::DeviceDriverInfo::default();
        sys::ioctl(fd, sys::DRIVER_INFO_GET, &mut info)
            .map_err(|e| LinuxError::io("DRIVER_INFO_GET", e))?;
        Ok(info)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The state stays consistent at every unlock, so a panic elsewhere leaves it usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn warn(&self, message: &str) {
        let callback = *self
            .soft_incompat
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(callback) = callback {
            callback(message);
        }
    }

    fn node_path(&self, index: u32) -> PathBuf {
        self.dev_dir.join(format!("neuron{index}"))
    }

    fn class_dir(&self, index: u32) -> PathBuf {
        self.sysfs_root
            .join("class/neuron_device")
            .join(format!("neuron{index}"))
    }

    /// The indices of the `neuronN` nodes in the device directory, sorted; never empty.
    fn scan_nodes(&self) -> Result<Vec<u32>, LinuxError> {
        const OP: &str = "scan device nodes";
        let entries = fs::read_dir(&self.dev_dir).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                LinuxError::no_device(OP, &self.dev_dir)
            } else {
                LinuxError::io_at(OP, &self.dev_dir, e)
            }
        })?;
        let mut nodes = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| LinuxError::io_at(OP, &self.dev_dir, e))?;
            if let Some(index) = entry.file_name().to_str().and_then(sysfs::node_index) {
                nodes.push(index);
            }
        }
        nodes.sort_unstable();
        nodes.dedup();
        if nodes.is_empty() {
            return Err(LinuxError::no_device(OP, &self.dev_dir));
        }
        Ok(nodes)
    }

    fn base_node(&self, st: &State) -> Result<u32, LinuxError> {
        match st.discovered {
            Some(t) => Ok(t.base),
            None => self
                .scan_nodes()?
                .first()
                .copied()
                .ok_or_else(|| LinuxError::no_device("scan device nodes", &self.dev_dir)),
        }
    }

    /// The misc (`O_WRONLY`) fd on the base node, opened on first use and kept open.
    fn misc<'a>(&self, st: &'a mut State) -> Result<&'a DeviceFd, LinuxError> {
        let fd = match st.misc.take() {
            Some(fd) => fd,
            None => {
                let path = self.node_path(self.base_node(st)?);
                DeviceFd::open(&path, OpenMode::Misc)
                    .map_err(|e| LinuxError::io_at("open device (O_WRONLY)", &path, e))?
            }
        };
        Ok(st.misc.insert(fd))
    }

    /// Architecture from the sysfs metrics strings of a device, if present.
    fn arch_from_sysfs(&self, index: u32) -> Option<Arch> {
        let dir = self.class_dir(index).join("info/architecture");
        ["device_name", "instance_type"]
            .iter()
            .filter_map(|name| fs::read_to_string(dir.join(name)).ok())
            .find_map(|text| sysfs::arch_from_name(&text))
    }

    /// Discovery under the state lock; also returns a soft-incompatibility warning to report
    /// once the lock is released.
    fn discover_locked(
        &self,
        st: &mut State,
    ) -> Result<(Discovered, Option<&'static str>), LinuxError> {
        let nodes = self.scan_nodes()?;
        let Some(&base) = nodes.first() else {
            return Err(LinuxError::no_device("discover", &self.dev_dir));
        };
        // Reservation and attach number devices from the base node on, so only the run of
        // consecutive nodes starting there is usable.
        let mut device_count = 0u32;
        for &index in &nodes {
            if index != base.saturating_add(device_count) {
                break;
            }
            device_count += 1;
        }
        let warning = (nodes.len() > device_count as usize).then_some(
            "Neuron device nodes are not numbered consecutively; only the first consecutive \
             run of devices is used",
        );

        // Architecture and revision: DEVICE_BASIC_INFO on the misc fd, else sysfs strings.
        let basic = self.misc(st).and_then(|fd| {
            let mut info = sys::DeviceBasicInfo::default();
            sys::ioctl(fd, sys::DEVICE_BASIC_INFO, &mut info)
                .map(|_| info)
                .map_err(|e| LinuxError::io("DEVICE_BASIC_INFO", e))
        });
        let (arch, revision) = match basic {
            Ok(info) => (
                sysfs::arch_from_driver(info.architecture),
                Some(info.revision),
            ),
            Err(e) => match self.arch_from_sysfs(base) {
                Some(arch) => (arch, None),
                None => return Err(e),
            },
        };

        let core_count = fs::read_to_string(self.class_dir(base).join("core_count"))
            .ok()
            .and_then(|text| sysfs::parse_core_count(&text));
        let cores_per_device = match core_count.or_else(|| sysfs::default_cores_per_device(arch)) {
            Some(n) => n,
            None => return Err(LinuxError::unknown_core_count("discover", arch)),
        };

        let platform = match revision {
            Some(sys::REVID_QEMU | sys::REVID_EMU) => Platform::Simulator,
            _ => Platform::Hardware,
        };
        let discovered = Discovered {
            base,
            info: DeviceInfo {
                device_count,
                cores_per_device,
                arch,
                platform,
            },
        };
        st.discovered = Some(discovered);
        Ok((discovered, warning))
    }

    fn discovered(&self, st: &mut State) -> Result<Discovered, LinuxError> {
        match st.discovered {
            Some(t) => Ok(t),
            None => self.discover_locked(st).map(|(t, _)| t),
        }
    }
}

enum MarkOutcome {
    Reserved(CoreBitmap),
    Busy { available: u32 },
}

fn is_variant_unsupported(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::EINVAL | libc::ENOTTY))
}

fn legacy_bitmap(bitmap: u64) -> CoreBitmap {
    let mut words = [0u64; sys::CRWL_NC_MAP_EXT_WORDS];
    words[0] = bitmap;
    CoreBitmap::from_words(words)
}

/// Marks a core range, choosing (and learning) the request variant. Returns the variant now
/// known to work.
fn mark(
    fd: &DeviceFd,
    crwl: Crwl,
    request: ReserveRequest,
) -> (Result<MarkOutcome, LinuxError>, Crwl) {
    if crwl != Crwl::Legacy {
        let mut arg = sys::CrwlNcMapExt {
            nc_count: request.count,
            start_nc_index: request.start,
            end_nc_index: request.end,
            ..Default::default()
        };
        match sys::ioctl(fd, sys::CRWL_NC_RANGE_MARK_EXT0, &mut arg) {
            Ok(_) => {
                return (
                    Ok(MarkOutcome::Reserved(CoreBitmap::from_words(arg.bitmap))),
                    Crwl::Ext,
                );
            }
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                let available = arg.max_nc_available;
                return (Ok(MarkOutcome::Busy { available }), Crwl::Ext);
            }
            Err(e) if crwl == Crwl::Unknown && is_variant_unsupported(&e) => {}
            Err(e) => return (Err(LinuxError::io("CRWL_NC_RANGE_MARK_EXT0", e)), crwl),
        }
    }
    let mut arg = sys::CrwlNcMap {
        nc_count: request.count,
        start_nc_index: request.start,
        end_nc_index: request.end,
        ..Default::default()
    };
    match sys::ioctl(fd, sys::CRWL_NC_RANGE_MARK, &mut arg) {
        Ok(_) => (
            Ok(MarkOutcome::Reserved(legacy_bitmap(arg.bitmap))),
            Crwl::Legacy,
        ),
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
            let available = arg.max_nc_available;
            (Ok(MarkOutcome::Busy { available }), Crwl::Legacy)
        }
        Err(e) => (Err(LinuxError::io("CRWL_NC_RANGE_MARK", e)), crwl),
    }
}

/// Unmarks the cores of `bitmap`, choosing (and learning) the request variant.
fn unmark(fd: &DeviceFd, crwl: Crwl, bitmap: &CoreBitmap) -> (Result<(), LinuxError>, Crwl) {
    let nc_count = bitmap.len();
    let start_nc_index = bitmap.first().unwrap_or(0);
    let end_nc_index = bitmap.last().unwrap_or(0);
    if crwl != Crwl::Legacy {
        let mut arg = sys::CrwlNcMapExt {
            nc_count,
            start_nc_index,
            end_nc_index,
            max_nc_available: 0,
            bitmap: *bitmap.words(),
        };
        match sys::ioctl(fd, sys::CRWL_NC_RANGE_UNMARK_EXT0, &mut arg) {
            Ok(_) => return (Ok(()), Crwl::Ext),
            Err(e) if crwl == Crwl::Unknown && is_variant_unsupported(&e) => {}
            Err(e) => return (Err(LinuxError::io("CRWL_NC_RANGE_UNMARK_EXT0", e)), crwl),
        }
    }
    let words = bitmap.words();
    if words.iter().skip(1).any(|&w| w != 0) {
        return (
            Err(LinuxError::bitmap_too_wide("CRWL_NC_RANGE_UNMARK")),
            crwl,
        );
    }
    let mut arg = sys::CrwlNcMap {
        nc_count,
        start_nc_index,
        end_nc_index,
        max_nc_available: 0,
        bitmap: words[0],
    };
    match sys::ioctl(fd, sys::CRWL_NC_RANGE_UNMARK, &mut arg) {
        Ok(_) => (Ok(()), Crwl::Legacy),
        Err(e) => (Err(LinuxError::io("CRWL_NC_RANGE_UNMARK", e)), crwl),
    }
}

/// `NC_RESET` of the cores in `nc_map`, then `NC_RESET_READY` until the reset is over.
fn reset_cores(fd: &DeviceFd, node: u32, nc_map: u32) -> Result<(), LinuxError> {
    let mut reset = sys::DeviceReset {
        nc_map,
        request_id: 0,
    };
    // A return of 1 means a reset of this process is already pending: wait for it all the same.
    sys::ioctl(fd, sys::NC_RESET, &mut reset).map_err(|e| LinuxError::io("NC_RESET", e))?;
    // The driver keys reset requests by the caller's tgid.
    let request_id = match reset.request_id {
        0 => std::process::id(),
        id => id,
    };
    let mut ready = sys::DeviceReady {
        request_id,
        result: 0,
    };
    loop {
        match sys::ioctl(fd, sys::NC_RESET_READY, &mut ready) {
            Ok(_) => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(LinuxError::io("NC_RESET_READY", e)),
        }
    }
    if ready.result != 0 {
        return Err(LinuxError::reset("NC_RESET_READY", node, ready.result));
    }
    Ok(())
}

impl Driver for LinuxDriver {
    type Error = LinuxError;

    /// Always `false`: this backend negotiates with a real driver.
    fn is_funtime(&self) -> bool {
        false
    }

    /// Stores the callback; the backend reports through it when it falls back to older
    /// driver requests or ignores device nodes. (The kernel driver itself has no such hook.)
    fn register_soft_incompat_callback(
        &self,
        callback: SoftIncompatCallback,
    ) -> Result<(), LinuxError> {
        *self
            .soft_incompat
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(callback);
        Ok(())
    }

    /// Counts the `neuronN` device nodes, reads architecture and PCI revision with
    /// `DEVICE_BASIC_INFO` on the misc fd of the lowest node (sysfs `device_name` /
    /// `instance_type` when the ioctl fails), and cores per device from sysfs `core_count`
    /// (root-only before driver 2.28) or the architecture.
    fn discover(&self) -> Result<DeviceInfo, LinuxError> {
        let (discovered, warning) = {
            let mut st = self.state();
            self.discover_locked(&mut st)?
        };
        if let Some(warning) = warning {
            self.warn(warning);
        }
        Ok(discovered.info)
    }

    /// A no-op: the revision override belongs to simulator platforms (QEMU / emulator PCI
    /// revisions), and the driver offers no request for it.
    fn override_hw_revision(&self, _revision: HwRevision) -> Result<(), LinuxError> {
        Ok(())
    }

    /// Parses `<sysfs>/module/neuron/version` (no ioctl returns the version).
    fn driver_version(&self) -> Result<DriverVersion, LinuxError> {
        const OP: &str = "read driver version";
        let path = self.sysfs_root.join("module/neuron/version");
        let text = fs::read_to_string(&path).map_err(|e| LinuxError::io_at(OP, &path, e))?;
        sysfs::parse_driver_version(&text).ok_or_else(|| LinuxError::parse(OP, &path, &text))
    }

    /// `COMPATIBLE_VERSION` on the misc fd.
    fn compatible_version(&self) -> Result<CompatRange, LinuxError> {
        let mut st = self.state();
        let fd = self.misc(&mut st)?;
        let mut v = sys::CompatibleVersion::default();
        sys::ioctl(fd, sys::COMPATIBLE_VERSION, &mut v)
            .map_err(|e| LinuxError::io("COMPATIBLE_VERSION", e))?;
        Ok(CompatRange {
            min: v.min,
            max: v.max,
        })
    }

    /// `CRWL_NC_RANGE_MARK_EXT0` on the misc fd (the legacy 64-core `CRWL_NC_RANGE_MARK` when
    /// the driver rejects it with `EINVAL`/`ENOTTY`). `EBUSY` is
    /// [`Reservation::Unavailable`] with the driver's longest free run.
    fn reserve_cores(&self, request: ReserveRequest) -> Result<Reservation, LinuxError> {
        let (result, fell_back) = {
            let mut st = self.state();
            let before = st.crwl;
            let fd = self.misc(&mut st)?;
            let (result, crwl) = mark(fd, before, request);
            st.crwl = crwl;
            if let Ok(MarkOutcome::Reserved(bitmap)) = &result {
                st.reserved = st.reserved.union(bitmap);
            }
            (result, before == Crwl::Unknown && crwl == Crwl::Legacy)
        };
        if fell_back {
            self.warn(
                "Neuron driver does not support 512-core reservation maps (BIG_CORE_MAPS); \
                 using the legacy 64-core reservation ioctls",
            );
        }
        match result? {
            MarkOutcome::Reserved(bitmap) => Ok(Reservation::Reserved(bitmap)),
            MarkOutcome::Busy { available } => Ok(Reservation::Unavailable { available }),
        }
    }

    /// `CRWL_NC_RANGE_UNMARK_EXT0` (or the legacy request) on the misc fd.
    fn release_cores(&self, bitmap: &CoreBitmap) -> Result<(), LinuxError> {
        if bitmap.is_empty() {
            return Ok(());
        }
        let mut st = self.state();
        let before = st.crwl;
        let fd = self.misc(&mut st)?;
        let (result, crwl) = unmark(fd, before, bitmap);
        st.crwl = crwl;
        result?;
        st.reserved = st.reserved.difference(bitmap);
        Ok(())
    }

    /// Opens every device holding the process's cores `O_RDWR` (attaching the process) and,
    /// with `reset_cores`, resets its cores (`NC_RESET` + `NC_RESET_READY`). On failure the
    /// fds opened by this call are closed again.
    fn init_cores(&self, params: &CoreInitParams) -> Result<(), LinuxError> {
        let mut st = self.state();
        let discovered = self.discovered(&mut st)?;
        // (node index, nc_map) per device, in core order.
        let mut devices: Vec<(u32, u32)> = Vec::new();
        for core in params.topology.pnc_range() {
            let (device, in_device) =
                topology::locate_pnc(core, params.topology.cores_per_device());
            let node = discovered.base.saturating_add(device);
            let bit = 1u32.checked_shl(in_device).unwrap_or(0);
            match devices.last_mut() {
                Some((n, map)) if *n == node => *map |= bit,
                _ => devices.push((node, bit)),
            }
        }
        let mut opened: Vec<(u32, DeviceFd)> = Vec::new();
        for &(node, _) in &devices {
            if st.attached.iter().any(|(n, _)| *n == node) {
                continue;
            }
            let path = self.node_path(node);
            let fd = DeviceFd::open(&path, OpenMode::Attach)
                .map_err(|e| LinuxError::io_at("open device (O_RDWR)", &path, e))?;
            opened.push((node, fd));
        }
        if params.reset_cores {
            for &(node, nc_map) in &devices {
                let fd = st
                    .attached
                    .iter()
                    .chain(opened.iter())
                    .find(|(n, _)| *n == node)
                    .map(|(_, fd)| fd);
                if let Some(fd) = fd {
                    reset_cores(fd, node, nc_map)?;
                }
            }
        }
        st.attached.extend(opened);
        Ok(())
    }

    /// Nothing to do yet: the exec-ready program is loaded with the staging capability (device
    /// memory, DMA rings), which this backend does not implement yet.
    fn start_exec_ready(&self, _params: &CoreInitParams) -> Result<(), LinuxError> {
        Ok(())
    }

    /// Closes the `O_RDWR` fds opened by [`Driver::init_cores`]; the driver then tears down the
    /// process's per-device state. Reservations stay until released.
    fn shutdown_cores(&self, _params: &CoreInitParams) -> Result<(), LinuxError> {
        self.state().attached.clear();
        Ok(())
    }

    // Staging, device memory and submission keep the trait's defaults: not implemented by
    // this backend yet ("not implemented by the Linux backend yet", `ErrorKind::Unsupported`).
}

//! [`LinuxDriver`]: the [`Driver`] over `/dev/neuronN` and sysfs.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use nrt_core::bitmap::CoreBitmap;
use nrt_core::driver::{
    Arch, CompatRange, CoreInitParams, DeviceBuffer, DeviceInfo, Driver, DriverVersion,
    ExecRequest, HwRevision, Platform, Reservation, ReserveRequest, SoftIncompatCallback,
    StagedModel, SubgraphImage,
};

use crate::error::LinuxError;
use crate::reserve::{self, MarkOutcome};
use crate::resources::{Chunk, CoreSlot, Staged};
use crate::sys::{self, DeviceFd, DriverFeatures, MemForm, OpenMode};
use crate::sysfs;

/// Where device nodes live on a real system.
pub const DEFAULT_DEV_DIR: &str = "/dev";
/// Where sysfs is mounted on a real system.
pub const DEFAULT_SYSFS_ROOT: &str = "/sys";

/// What discovery found, kept for the per-device steps.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Discovered {
    /// Index of the lowest device node: the misc fd is opened on it, so reservation core
    /// numbers are relative to its first core.
    pub(crate) base: u32,
    pub(crate) info: DeviceInfo,
}

#[derive(Debug)]
pub(crate) struct State {
    // Field order is drop order: the core mappings go first, then the attached (`O_RDWR`) fds
    // (shared with memory chunks and staged models, so a device stays attached while any of
    // them lives), then the misc fd, whose close unmarks every core range of the process.
    /// Per-core bring-up state, by physical core (relative to the base node).
    pub(crate) cores: Vec<Arc<CoreSlot>>,
    /// `O_RDWR` fds, by device node index.
    pub(crate) attached: Vec<(u32, Arc<DeviceFd>)>,
    /// The `O_WRONLY` fd on the base node, open from first use to drop.
    misc: Option<DeviceFd>,
    discovered: Option<Discovered>,
    /// `DRIVER_INFO_GET` feature flags, read once.
    features: Option<DriverFeatures>,
    /// The process's id as the driver sees it (written back by `NC_RESET`).
    pub(crate) kernel_tgid: Option<u32>,
    /// The legacy-reservation warning was given.
    warned_legacy: bool,
    /// Cores this driver reserved and has not released (relative to the base node).
    pub(crate) reserved: CoreBitmap,
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
    /// Staged subgraphs by handle.
    pub(crate) staged: Mutex<HashMap<u64, Arc<Staged>>>,
    pub(crate) next_model: AtomicU64,
    /// Device memory by (device, PA).
    pub(crate) memory: Mutex<HashMap<(u32, u64), Chunk>>,
    /// Boxed: the driver stays small beside the other backends (`nrt-backend`'s enum).
    state: Mutex<Box<State>>,
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
            staged: Mutex::new(HashMap::new()),
            next_model: AtomicU64::new(1),
            memory: Mutex::new(HashMap::new()),
            state: Mutex::new(Box::new(State {
                cores: Vec::new(),
                attached: Vec::new(),
                misc: None,
                discovered: None,
                features: None,
                kernel_tgid: None,
                warned_legacy: false,
                reserved: CoreBitmap::new(),
            })),
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

    /// The driver's feature flags (`DRIVER_INFO_GET` on the misc fd, read once). A driver
    /// older than that request (it fails with `EINVAL` / `ENOTTY`) has none: it serves only
    /// the oldest request forms.
    pub(crate) fn features(&self, st: &mut State) -> Result<DriverFeatures, LinuxError> {
        if let Some(f) = st.features {
            return Ok(f);
        }
        let fd = self.misc(st)?;
        let mut info = sys::DeviceDriverInfo::default();
        let features = match sys::ioctl(fd, sys::DRIVER_INFO_GET, &mut info) {
            Ok(_) => info.features(),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOTTY)) => {
                DriverFeatures::empty()
            }
            Err(e) => return Err(LinuxError::io("DRIVER_INFO_GET", e)),
        };
        st.features = Some(features);
        Ok(features)
    }

    /// The memory request forms the driver serves.
    pub(crate) fn mem_form(&self) -> Result<MemForm, LinuxError> {
        let mut st = self.state();
        self.features(&mut st).map(MemForm::from_features)
    }

    /// The `O_RDWR` fd of device node `node`, opened (attaching the process) if needed.
    pub(crate) fn attach(&self, st: &mut State, node: u32) -> Result<Arc<DeviceFd>, LinuxError> {
        if let Some((_, fd)) = st.attached.iter().find(|(n, _)| *n == node) {
            return Ok(Arc::clone(fd));
        }
        let path = self.node_path(node);
        let fd = Arc::new(
            DeviceFd::open(&path, OpenMode::Attach)
                .map_err(|e| LinuxError::io_at("open device (O_RDWR)", &path, e))?,
        );
        st.attached.push((node, Arc::clone(&fd)));
        Ok(fd)
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, Box<State>> {
        // The state stays consistent at every unlock, so a panic elsewhere leaves it usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn warn(&self, message: &str) {
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
    pub(crate) fn misc<'a>(&self, st: &'a mut State) -> Result<&'a DeviceFd, LinuxError> {
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

    pub(crate) fn discovered(&self, st: &mut State) -> Result<Discovered, LinuxError> {
        match st.discovered {
            Some(t) => Ok(t),
            None => self.discover_locked(st).map(|(t, _)| t),
        }
    }
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

    /// `CRWL_NC_RANGE_MARK_EXT0` on the misc fd when the driver's `DRIVER_INFO_GET` feature
    /// flags include `BIG_CORE_MAPS`, else the legacy 64-core `CRWL_NC_RANGE_MARK` (chosen from
    /// the flags, never from an `EINVAL`, which also means "bad range"). `EBUSY` is
    /// [`Reservation::Unavailable`] with the driver's longest free run.
    fn reserve_cores(&self, request: ReserveRequest) -> Result<Reservation, LinuxError> {
        let (result, warn) = {
            let mut st = self.state();
            let big = self
                .features(&mut st)?
                .contains(DriverFeatures::BIG_CORE_MAPS);
            let warn = !big && !st.warned_legacy;
            st.warned_legacy |= !big;
            let fd = self.misc(&mut st)?;
            let result = reserve::mark(fd, big, request);
            if let Ok(MarkOutcome::Reserved(bitmap)) = &result {
                st.reserved = st.reserved.union(bitmap);
            }
            (result, warn)
        };
        if warn {
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

    /// `CRWL_NC_RANGE_UNMARK_EXT0` (or the legacy request, per `BIG_CORE_MAPS`) on the misc fd.
    fn release_cores(&self, bitmap: &CoreBitmap) -> Result<(), LinuxError> {
        if bitmap.is_empty() {
            return Ok(());
        }
        let mut st = self.state();
        let big = self
            .features(&mut st)?
            .contains(DriverFeatures::BIG_CORE_MAPS);
        let fd = self.misc(&mut st)?;
        reserve::unmark(fd, big, bitmap)?;
        st.reserved = st.reserved.difference(bitmap);
        Ok(())
    }

    /// Opens every device holding the process's cores `O_RDWR` (attaching the process); with
    /// `reset_cores`, resets its cores (`NC_RESET` + `NC_RESET_READY`); then per core
    /// `CINIT_SET_STATE` STARTED, the notification queue (`NOTIFICATIONS_INIT_V2`, mapped),
    /// the mailbox (a host chunk, mapped), its PA in semaphores 250/251 (`SEMAPHORE_WRITE`)
    /// and `CINIT_SET_STATE` COMPLETED. On failure what this call built is undone.
    fn init_cores(&self, params: &CoreInitParams) -> Result<(), LinuxError> {
        let mut st = self.state();
        self.init_locked(&mut st, params)
    }

    /// Nothing to do: the launch convention needs no exec-ready program (see
    /// docs/LINUX_BACKEND.md).
    fn start_exec_ready(&self, _params: &CoreInitParams) -> Result<(), LinuxError> {
        Ok(())
    }

    /// Unmaps each core's queue and mailbox, frees the mailbox (`MEM_FREE`) and closes the
    /// device fds nothing else (device memory, staged models) still uses; the driver tears
    /// down the process's per-device state at the last close. Reservations stay until
    /// released.
    fn shutdown_cores(&self, params: &CoreInitParams) -> Result<(), LinuxError> {
        let mut st = self.state();
        let error = self.teardown(&mut st, params.topology.pnc_range());
        let nodes: Vec<u32> = st.cores.iter().map(|c| c.node).collect();
        st.attached.retain(|(node, _)| nodes.contains(node));
        error.map_or(Ok(()), Err)
    }

    fn stop_model(&self, model: StagedModel) -> Result<(), LinuxError> {
        self.stop(model)
    }

    fn unstage_model(&self, model: StagedModel) -> Result<(), LinuxError> {
        self.unstage(model)
    }

    /// Under the core's model lock (`CRWL_WRITER_ENTER` … `WRITER_DOWNGRADE`, then
    /// `READER_EXIT`), writes the stage image into a `CODE_DEVICE` chunk (`MEM_ALLOC*`,
    /// `MEM_BUF_COPY*`). A compiler NEFF (no simulator program) only takes the lock.
    fn stage_subgraph(&self, image: &SubgraphImage<'_>) -> Result<StagedModel, LinuxError> {
        self.stage(image)
    }

    /// `MEM_ALLOC_V2MT64` (`TENSORS_DEVICE`, HBM 0) and `MEM_GET_EXTENDED_INFO`: the buffer's
    /// address is the chunk's PA.
    fn alloc_device(&self, device: u32, size: u64) -> Result<DeviceBuffer, LinuxError> {
        self.alloc(device, size)
    }

    /// `MEM_FREE`.
    fn free_device(&self, buffer: DeviceBuffer) -> Result<(), LinuxError> {
        self.free(buffer)
    }

    /// `MEM_BUF_COPY64`, buffer to chunk.
    fn write_device(
        &self,
        buffer: DeviceBuffer,
        offset: u64,
        data: &[u8],
    ) -> Result<(), LinuxError> {
        self.write(buffer, offset, data)
    }

    /// `MEM_BUF_COPY64`, chunk to buffer.
    fn read_device(
        &self,
        buffer: DeviceBuffer,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), LinuxError> {
        self.read(buffer, offset, out)
    }

    /// `MEM_COPY64` (through host memory between devices).
    fn copy_device(
        &self,
        src: DeviceBuffer,
        src_offset: u64,
        dst: DeviceBuffer,
        dst_offset: u64,
        len: u64,
    ) -> Result<(), LinuxError> {
        self.copy(src, src_offset, dst, dst_offset, len)
    }

    /// `MEMSET64`.
    fn memset_device(
        &self,
        buffer: DeviceBuffer,
        offset: u64,
        value: u8,
        len: u64,
    ) -> Result<(), LinuxError> {
        self.fill(buffer, offset, value, len)
    }

    /// The launch convention per subgraph: descriptor into the mailbox, `SEMAPHORE_INCREMENT`
    /// of the doorbell, the notification slot polled, all under `CRWL_READER_ENTER` / `EXIT`.
    /// A compiler NEFF is [`ErrorKind::Unsupported`](nrt_core::driver::ErrorKind::Unsupported).
    fn submit(&self, request: &ExecRequest<'_>) -> Result<(), LinuxError> {
        self.run(request)
    }
}

//! `nrt-sim`: simulated Neuron devices behind the [`nrt_core::Driver`] trait.
//!
//! This first slice covers bring-up: discovery of a configurable instance (trn1 and inf2: two
//! NeuronCore-v2 per device; trn2: eight physical cores per device, logical cores of two by
//! default) and, by default, **funtime mode** — the runtime's functional-simulation mode, in
//! which there is no driver to negotiate with and the runtime marks its core reservation
//! locally. Models load and execute on it in later capabilities.
//!
//! For testing the paths funtime skips, a simulated machine can also **emulate the kernel
//! driver** ([`SimConfig::emulate_driver`]): a driver version, a compatibility-id range, and a
//! machine-wide core reservation table shared by every [`SimDriver`] attached to the same
//! [`SimMachine`] (so two runtimes can conflict over cores exactly as two processes would).
//!
//! ```
//! use nrt_core::{FrameworkType, Runtime};
//! use nrt_sim::{Instance, SimDriver};
//!
//! let rt = Runtime::new(SimDriver::new(Instance::Trn2, 1));
//! rt.init(FrameworkType::NoFw, "", "", &[("NEURON_RT_NUM_CORES", "0")]).unwrap();
//! assert_eq!(rt.visible_lnc_count().unwrap(), 4); // 8 physical cores, LNC 2
//! rt.close();
//! ```
#![forbid(unsafe_code)]

pub mod engine;
pub mod neff;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use nrt_core::bitmap::{CoreBitmap, MAX_CORES};
use nrt_core::driver::{
    Arch, Binding, CompatRange, CoreInitParams, DeviceBuffer, DeviceInfo, Driver, DriverError,
    DriverVersion, ErrorKind, ExecRequest, HwRevision, Platform, Reservation, ReserveRequest,
    SoftIncompatCallback, StagedModel, SubgraphImage,
};
use nrt_core::io::TensorUsage;

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

/// Errors of the simulated driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimError {
    kind: ErrorKind,
    what: &'static str,
    detail: Option<String>,
}

impl SimError {
    const fn new(kind: ErrorKind, what: &'static str) -> Self {
        Self {
            kind,
            what,
            detail: None,
        }
    }

    fn with_detail(kind: ErrorKind, what: &'static str, detail: &nrt_core::Error) -> Self {
        Self {
            kind,
            what,
            detail: Some(detail.message().to_string()),
        }
    }
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "simulated driver: {}", self.what)?;
        if let Some(d) = &self.detail {
            write!(f, ": {d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SimError {}

impl DriverError for SimError {
    fn kind(&self) -> ErrorKind {
        self.kind
    }

    fn unsupported(operation: &'static str) -> Self {
        Self::new(ErrorKind::Unsupported, operation)
    }
}

/// State of one simulated physical core.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CoreState {
    /// The driver handle that reserved it.
    pub owner: Option<u64>,
    /// Brought up by `init_cores` and not yet shut down.
    pub initialized: bool,
    /// Times it was reset.
    pub resets: u32,
    /// Whether the exec-ready program runs on it.
    pub exec_ready: bool,
}

/// One device's HBM and the driver handle owning each allocation.
type DeviceState = (engine::Device, BTreeMap<u64, u64>);

/// A model staged on a simulated core.
#[derive(Clone, Debug)]
pub struct StagedState {
    /// The driver handle that staged it.
    pub owner: u64,
    /// Absolute logical core.
    pub lnc: u32,
    /// Absolute physical core.
    pub pnc: u32,
    /// Stopped on its engine (ready to be unstaged).
    pub stopped: bool,
    /// The simulator program loaded on the core (its tensors in the device's HBM); `None` for
    /// a compiler NEFF (plumbing mode).
    pub loaded: Option<engine::LoadedProgram>,
    /// Per input I/O index of the model: the program tensor it binds to (`None`: the program
    /// does not use that input). Built once, at stage time.
    pub input_slots: Vec<Option<usize>>,
    /// Per output I/O index: the program tensor it binds to.
    pub output_slots: Vec<Option<usize>>,
}

/// A simulated machine: devices, cores, the reservation table and the staged models, shared
/// by the drivers attached to it.
#[derive(Debug)]
pub struct SimMachine {
    config: SimConfig,
    cores: Mutex<Vec<CoreState>>,
    staged: Mutex<BTreeMap<u64, StagedState>>,
    /// Per device: its HBM, and which driver handle owns each allocation.
    hbm: Vec<Mutex<DeviceState>>,
    executions: AtomicU64,
    last_ticks: AtomicU64,
    next_owner: AtomicU64,
    next_model: AtomicU64,
}

impl SimMachine {
    /// A machine with `config`; the core count is clipped to what the runtime can address.
    pub fn new(config: SimConfig) -> Arc<Self> {
        let n = config.total_cores().min(MAX_CORES) as usize;
        Arc::new(Self {
            config,
            cores: Mutex::new(vec![CoreState::default(); n]),
            staged: Mutex::new(BTreeMap::new()),
            hbm: (0..config.device_count.min(64))
                .map(|_| Mutex::new((engine::Device::new(config.instance), BTreeMap::new())))
                .collect(),
            executions: AtomicU64::new(0),
            last_ticks: AtomicU64::new(0),
            next_owner: AtomicU64::new(1),
            next_model: AtomicU64::new(1),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    fn lock(&self) -> MutexGuard<'_, Vec<CoreState>> {
        // A poisoned table is still consistent: every update is a single field store.
        self.cores.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn staged_table(&self) -> MutexGuard<'_, BTreeMap<u64, StagedState>> {
        self.staged.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Device memory allocated on device `device`, in bytes (whole pages).
    pub fn device_bytes_allocated(&self, device: u32) -> u64 {
        self.device(device).map_or(0, |d| d.0.hbm().allocated())
    }

    /// Device memory allocated over all devices, in bytes.
    pub fn total_device_bytes_allocated(&self) -> u64 {
        (0..self.hbm.len() as u32)
            .map(|d| self.device_bytes_allocated(d))
            .sum()
    }

    /// Simulated ticks (1 tick = 1 cycle at 1.4 GHz) of the last program run.
    pub fn last_ticks(&self) -> u64 {
        self.last_ticks.load(Ordering::Relaxed)
    }

    /// Executions run so far.
    pub fn executions(&self) -> u64 {
        self.executions.load(Ordering::Relaxed)
    }

    fn device(&self, device: u32) -> Option<MutexGuard<'_, DeviceState>> {
        self.hbm
            .get(device as usize)
            .map(|m| m.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The models staged on the machine, by backend handle.
    pub fn staged_models(&self) -> BTreeMap<u64, StagedState> {
        self.staged_table().clone()
    }

    /// A snapshot of every core.
    pub fn cores(&self) -> Vec<CoreState> {
        self.lock().clone()
    }

    /// Physical cores reserved by anyone.
    pub fn reserved(&self) -> CoreBitmap {
        let mut b = CoreBitmap::new();
        for (i, c) in self.lock().iter().enumerate() {
            if c.owner.is_some() {
                b.insert(i as u32);
            }
        }
        b
    }
}

/// A driver handle onto a [`SimMachine`] — what one process's open of the device would be.
/// Dropping it releases its reservations, as closing the device file does.
#[derive(Debug)]
pub struct SimDriver {
    machine: Arc<SimMachine>,
    owner: u64,
    soft_incompat: Mutex<Option<SoftIncompatCallback>>,
}

impl SimDriver {
    /// A funtime driver on a fresh machine of `device_count` devices of `instance`.
    pub fn new(instance: Instance, device_count: u32) -> Self {
        Self::attach(&SimMachine::new(SimConfig::funtime(instance, device_count)))
    }

    /// A driver on a fresh machine with `config`.
    pub fn with_config(config: SimConfig) -> Self {
        Self::attach(&SimMachine::new(config))
    }

    /// A new driver handle (a new "process") on an existing machine.
    pub fn attach(machine: &Arc<SimMachine>) -> Self {
        Self {
            machine: Arc::clone(machine),
            owner: machine.next_owner.fetch_add(1, Ordering::Relaxed),
            soft_incompat: Mutex::new(None),
        }
    }

    /// The machine.
    pub fn machine(&self) -> &Arc<SimMachine> {
        &self.machine
    }

    /// This handle's owner id in the reservation table.
    pub fn owner(&self) -> u64 {
        self.owner
    }

    /// Physical cores this handle holds.
    pub fn reserved(&self) -> CoreBitmap {
        let mut b = CoreBitmap::new();
        for (i, c) in self.machine.lock().iter().enumerate() {
            if c.owner == Some(self.owner) {
                b.insert(i as u32);
            }
        }
        b
    }

    fn emulation(&self) -> Result<DriverEmulation, SimError> {
        self.machine.config.emulate_driver.ok_or(SimError::new(
            ErrorKind::Unsupported,
            "funtime mode has no kernel driver",
        ))
    }

    /// Runs `f` on the process's physical cores of `p`, which this handle must have reserved.
    fn with_own_cores(
        &self,
        p: &CoreInitParams,
        f: impl FnOnce(&mut [CoreState]) -> Result<(), SimError>,
    ) -> Result<(), SimError> {
        self.emulation()?;
        let range = p.topology.pnc_range();
        let range = range.start as usize..range.end as usize;
        let mut cores = self.machine.lock();
        let Some(slice) = cores.get_mut(range) else {
            return Err(SimError::new(
                ErrorKind::InvalidArgument,
                "cores out of range",
            ));
        };
        if slice.iter().any(|c| c.owner != Some(self.owner)) {
            return Err(SimError::new(
                ErrorKind::PermissionDenied,
                "cores not reserved",
            ));
        }
        f(slice)
    }

    /// Frees a core this handle owns, keeping its reset count.
    fn free_if_owned(&self, c: &mut CoreState) {
        if c.owner == Some(self.owner) {
            *c = CoreState {
                resets: c.resets,
                ..CoreState::default()
            };
        }
    }
}

impl Drop for SimDriver {
    fn drop(&mut self) {
        let mine: Vec<StagedState> = {
            let mut table = self.machine.staged_table();
            let keys: Vec<u64> = table
                .iter()
                .filter(|(_, m)| m.owner == self.owner)
                .map(|(k, _)| *k)
                .collect();
            keys.iter().filter_map(|k| table.remove(k)).collect()
        };
        for state in mine {
            if let Some(lp) = state.loaded {
                if let Some(mut dev) = self.machine.device(self.device_of_pnc(state.pnc)) {
                    let _ = dev.0.unload(lp);
                }
            }
        }
        for d in 0..self.machine.hbm.len() as u32 {
            if let Some(mut dev) = self.machine.device(d) {
                let (hbm, owners) = &mut *dev;
                let mine: Vec<u64> = owners
                    .iter()
                    .filter(|(_, o)| **o == self.owner)
                    .map(|(a, _)| *a)
                    .collect();
                for a in mine {
                    owners.remove(&a);
                    let _ = hbm.hbm_mut().free(a);
                }
            }
        }
        for c in self.machine.lock().iter_mut() {
            self.free_if_owned(c);
        }
    }
}

impl Driver for SimDriver {
    type Error = SimError;

    fn is_funtime(&self) -> bool {
        self.machine.config.emulate_driver.is_none()
    }

    fn register_soft_incompat_callback(&self, cb: SoftIncompatCallback) -> Result<(), SimError> {
        *self.soft_incompat.lock().unwrap_or_else(|p| p.into_inner()) = Some(cb);
        Ok(())
    }

    fn discover(&self) -> Result<DeviceInfo, SimError> {
        let c = &self.machine.config;
        if c.device_count == 0 {
            return Err(SimError::new(ErrorKind::NotFound, "no simulated devices"));
        }
        Ok(DeviceInfo {
            device_count: c.device_count,
            cores_per_device: c.instance.cores_per_device(),
            arch: c.instance.arch(),
            platform: Platform::Simulator,
        })
    }

    fn override_hw_revision(&self, _revision: HwRevision) -> Result<(), SimError> {
        // The simulator models one revision; the override changes nothing.
        Ok(())
    }

    fn driver_version(&self) -> Result<DriverVersion, SimError> {
        self.emulation()?.version.ok_or(SimError::new(
            ErrorKind::NotFound,
            "driver version unreadable",
        ))
    }

    fn compatible_version(&self) -> Result<CompatRange, SimError> {
        self.emulation()?.compat.ok_or(SimError::new(
            ErrorKind::Io,
            "compatible version unreadable",
        ))
    }

    fn reserve_cores(&self, r: ReserveRequest) -> Result<Reservation, SimError> {
        self.emulation()?;
        let mut cores = self.machine.lock();
        let n = cores.len() as u32;
        if r.count == 0 || r.start > r.end || r.end >= n {
            return Err(SimError::new(
                ErrorKind::InvalidArgument,
                "reservation range out of bounds",
            ));
        }
        // First run of `count` consecutive free cores in [start, end], as the driver scans.
        let mut run_start = r.start;
        let mut longest = 0u32;
        for i in r.start..=r.end {
            let free = cores.get(i as usize).is_some_and(|c| c.owner.is_none());
            if !free {
                run_start = i + 1;
                continue;
            }
            let len = i - run_start + 1;
            longest = longest.max(len);
            if len == r.count {
                let mut b = CoreBitmap::new();
                for j in run_start..=i {
                    if let Some(c) = cores.get_mut(j as usize) {
                        c.owner = Some(self.owner);
                    }
                    b.insert(j);
                }
                return Ok(Reservation::Reserved(b));
            }
        }
        Ok(Reservation::Unavailable { available: longest })
    }

    fn release_cores(&self, bitmap: &CoreBitmap) -> Result<(), SimError> {
        self.emulation()?;
        let mut cores = self.machine.lock();
        for i in bitmap.iter() {
            if let Some(c) = cores.get_mut(i as usize) {
                self.free_if_owned(c);
            }
        }
        Ok(())
    }

    fn init_cores(&self, p: &CoreInitParams) -> Result<(), SimError> {
        self.with_own_cores(p, |cores| {
            for c in cores {
                if p.reset_cores {
                    c.resets = c.resets.saturating_add(1);
                }
                c.initialized = true;
            }
            Ok(())
        })
    }

    fn start_exec_ready(&self, p: &CoreInitParams) -> Result<(), SimError> {
        self.with_own_cores(p, |cores| {
            if cores.iter().any(|c| !c.initialized) {
                return Err(SimError::new(
                    ErrorKind::InvalidArgument,
                    "cores not initialized",
                ));
            }
            for c in cores {
                c.exec_ready = true;
            }
            Ok(())
        })
    }

    fn shutdown_cores(&self, p: &CoreInitParams) -> Result<(), SimError> {
        self.with_own_cores(p, |cores| {
            for c in cores {
                c.initialized = false;
                c.exec_ready = false;
            }
            Ok(())
        })
    }

    fn stop_model(&self, model: StagedModel) -> Result<(), SimError> {
        let mut table = self.machine.staged_table();
        match table.get_mut(&model.handle) {
            Some(m) if m.owner == self.owner && m.lnc == model.lnc => {
                m.stopped = true;
                Ok(())
            }
            _ => Err(SimError::new(
                ErrorKind::InvalidArgument,
                "no such staged model",
            )),
        }
    }

    fn unstage_model(&self, model: StagedModel) -> Result<(), SimError> {
        let removed = {
            let mut table = self.machine.staged_table();
            match table.get(&model.handle) {
                // Unstaging frees the model whether or not its stop succeeded.
                Some(m) if m.owner == self.owner && m.lnc == model.lnc => {
                    table.remove(&model.handle)
                }
                _ => None,
            }
        };
        let Some(state) = removed else {
            return Err(SimError::new(
                ErrorKind::InvalidArgument,
                "no such staged model",
            ));
        };
        if let Some(lp) = state.loaded {
            let device = self.device_of_pnc(state.pnc);
            if let Some(mut dev) = self.machine.device(device) {
                dev.0
                    .unload(lp)
                    .map_err(|e| SimError::with_detail(ErrorKind::Other, "unload failed", &e))?;
            }
        }
        Ok(())
    }

    fn stage_subgraph(&self, image: &SubgraphImage<'_>) -> Result<StagedModel, SimError> {
        if image.pnc >= self.machine.config.total_cores() {
            return Err(SimError::new(
                ErrorKind::InvalidArgument,
                "no such physical core",
            ));
        }
        let loaded = match image.program {
            None if self.machine.config.refuse_plumbing => {
                return Err(SimError::new(
                    ErrorKind::Unsupported,
                    "this NEFF carries no simulator program and plumbing mode is disabled \
                     (NEURON_RT_SIM_PLUMBING=0)",
                ));
            }
            None => None,
            Some(bytes) => {
                let program = engine::Program::from_bytes(bytes).map_err(|e| {
                    SimError::with_detail(
                        ErrorKind::InvalidArgument,
                        "invalid simulator program",
                        &e,
                    )
                })?;
                let per_device = self.machine.config.instance.cores_per_device();
                let mut dev = self
                    .machine
                    .device(self.device_of_pnc(image.pnc))
                    .ok_or(SimError::new(ErrorKind::InvalidArgument, "no such device"))?;
                let lp = dev.0.load(image.pnc % per_device, program).map_err(|e| {
                    let kind = if e.status() == nrt_core::NrtStatus::Resource {
                        ErrorKind::OutOfMemory
                    } else {
                        ErrorKind::InvalidArgument
                    };
                    SimError::with_detail(kind, "cannot load the simulator program", &e)
                })?;
                Some(lp)
            }
        };
        let handle = self.machine.next_model.fetch_add(1, Ordering::Relaxed);
        let plumbing = loaded.is_none();
        // Each I/O index of the model → the program tensor of that name (by kind), once.
        let slots = |usage: TensorUsage, kind: engine::TensorKind| -> Vec<Option<usize>> {
            image
                .io
                .tensors(usage)
                .iter()
                .map(|t| {
                    let program = loaded.as_ref()?.program();
                    program
                        .tensors
                        .iter()
                        .position(|p| p.kind == kind && p.name == t.name)
                })
                .collect()
        };
        let input_slots = slots(TensorUsage::Input, engine::TensorKind::Input);
        let output_slots = slots(TensorUsage::Output, engine::TensorKind::Output);
        self.machine.staged_table().insert(
            handle,
            StagedState {
                owner: self.owner,
                lnc: image.lnc,
                pnc: image.pnc,
                stopped: false,
                loaded,
                input_slots,
                output_slots,
            },
        );
        Ok(StagedModel {
            lnc: image.lnc,
            handle,
            plumbing,
        })
    }

    fn alloc_device(&self, device: u32, size: u64) -> Result<DeviceBuffer, SimError> {
        let mut dev = self
            .machine
            .device(device)
            .ok_or(SimError::new(ErrorKind::InvalidArgument, "no such device"))?;
        let (hbm, owners) = &mut *dev;
        let addr = hbm
            .hbm_mut()
            .alloc(size)
            .map_err(|_| SimError::new(ErrorKind::OutOfMemory, "device memory exhausted"))?;
        owners.insert(addr, self.owner);
        Ok(DeviceBuffer { device, addr, size })
    }

    fn free_device(&self, buffer: DeviceBuffer) -> Result<(), SimError> {
        let mut dev = self.own_buffer(buffer)?;
        let (hbm, owners) = &mut *dev;
        owners.remove(&buffer.addr);
        hbm.hbm_mut()
            .free(buffer.addr)
            .map_err(|_| SimError::new(ErrorKind::InvalidArgument, "not allocated"))
    }

    fn write_device(&self, b: DeviceBuffer, offset: u64, data: &[u8]) -> Result<(), SimError> {
        let mut dev = self.own_buffer(b)?;
        let addr = range(b, offset, data.len() as u64)?;
        dev.0
            .hbm_mut()
            .write(addr, data)
            .map_err(|_| out_of_range())
    }

    fn read_device(&self, b: DeviceBuffer, offset: u64, out: &mut [u8]) -> Result<(), SimError> {
        let dev = self.own_buffer(b)?;
        let addr = range(b, offset, out.len() as u64)?;
        dev.0.hbm().read(addr, out).map_err(|_| out_of_range())
    }

    fn copy_device(
        &self,
        src: DeviceBuffer,
        src_offset: u64,
        dst: DeviceBuffer,
        dst_offset: u64,
        len: u64,
    ) -> Result<(), SimError> {
        let from = range(src, src_offset, len)?;
        let to = range(dst, dst_offset, len)?;
        // Chunked through a bounce buffer so buffers on different devices work too.
        let mut chunk = [0u8; 4096];
        let mut done = 0u64;
        while done < len {
            let n = (len - done).min(chunk.len() as u64) as usize;
            let buf = chunk.get_mut(..n).unwrap_or(&mut []);
            self.own_buffer(src)?
                .0
                .hbm()
                .read(from + done, buf)
                .map_err(|_| out_of_range())?;
            self.own_buffer(dst)?
                .0
                .hbm_mut()
                .write(to + done, buf)
                .map_err(|_| out_of_range())?;
            done += n as u64;
        }
        Ok(())
    }

    fn memset_device(
        &self,
        b: DeviceBuffer,
        offset: u64,
        value: u8,
        len: u64,
    ) -> Result<(), SimError> {
        let mut dev = self.own_buffer(b)?;
        let addr = range(b, offset, len)?;
        if value == 0 {
            // Zero pages read as zero: drop them instead of writing (no allocation).
            dev.0.hbm_mut().zero_range(addr, len);
            return Ok(());
        }
        let chunk = [value; 4096];
        let mut done = 0u64;
        while done < len {
            let n = (len - done).min(chunk.len() as u64) as usize;
            dev.0
                .hbm_mut()
                .write(addr + done, chunk.get(..n).unwrap_or(&[]))
                .map_err(|_| out_of_range())?;
            done += n as u64;
        }
        Ok(())
    }

    fn submit(&self, request: &ExecRequest<'_>) -> Result<(), SimError> {
        let mut plumbing = false;
        for s in request.subgraphs {
            // Take what is needed out of the table: the program runs without it locked.
            let (pnc, bound) = {
                let table = self.machine.staged_table();
                match table.get(&s.handle) {
                    Some(m) if m.owner == self.owner && !m.stopped => match &m.loaded {
                        None => (m.pnc, None),
                        Some(lp) => (m.pnc, Some((lp.clone(), self.bind(m, lp, request)?))),
                    },
                    _ => {
                        return Err(SimError::new(
                            ErrorKind::InvalidArgument,
                            "model not staged",
                        ));
                    }
                }
            };
            match bound {
                None => plumbing = true,
                Some((lp, bound)) => self.run_program(pnc, &lp, &bound, request)?,
            }
        }
        if plumbing {
            // Plumbing mode (no program): outputs are zero-filled, inputs are not read.
            for o in request.outputs {
                self.memset_device(o.buffer, o.offset, 0, o.size)?;
            }
        }
        self.machine.executions.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

impl SimDriver {
    fn device_of_pnc(&self, pnc: u32) -> u32 {
        pnc / self.machine.config.instance.cores_per_device().max(1)
    }

    /// The program tensors `request` binds, with the HBM address of each: every binding whose
    /// I/O index maps to a tensor of this subgraph's program (the map was built at stage time).
    fn bind(
        &self,
        staged: &StagedState,
        lp: &engine::LoadedProgram,
        request: &ExecRequest<'_>,
    ) -> Result<Vec<(usize, u64)>, SimError> {
        let device = self.device_of_pnc(staged.pnc);
        let mut bound = Vec::with_capacity(request.inputs.len() + request.outputs.len());
        for (slots, bindings) in [
            (&staged.input_slots, request.inputs),
            (&staged.output_slots, request.outputs),
        ] {
            for b in bindings {
                let Some(&Some(i)) = slots.get(b.index as usize) else {
                    continue;
                };
                bound.push((i, self.bound_address(lp, i, b, device)?));
            }
        }
        Ok(bound)
    }

    /// The address of binding `b` of program tensor `i`, checked against the device and the
    /// program's size for the tensor.
    fn bound_address(
        &self,
        lp: &engine::LoadedProgram,
        i: usize,
        b: &Binding,
        device: u32,
    ) -> Result<u64, SimError> {
        if b.buffer.device != device {
            return Err(SimError::new(
                ErrorKind::InvalidArgument,
                "tensor on another device than the model",
            ));
        }
        let size = lp.program().tensors.get(i).and_then(|t| t.size_bytes());
        if Some(b.size) != size {
            return Err(SimError::new(
                ErrorKind::InvalidArgument,
                "tensor size differs from the program's",
            ));
        }
        range(b.buffer, b.offset, b.size)
    }

    /// Runs one subgraph's program with its I/O tensors bound to the request's buffers.
    fn run_program(
        &self,
        pnc: u32,
        lp: &engine::LoadedProgram,
        bound: &[(usize, u64)],
        request: &ExecRequest<'_>,
    ) -> Result<(), SimError> {
        let device = self.device_of_pnc(pnc);
        let max_ticks = request
            .timeout_secs
            .map_or(engine::ExecOptions::default().max_ticks, |s| {
                u64::from(s).saturating_mul(engine::TICKS_PER_SECOND)
            });
        let opts = engine::ExecOptions {
            max_ticks,
            record_events: false,
            ..Default::default()
        };
        let report = {
            let mut dev = self
                .machine
                .device(device)
                .ok_or(SimError::new(ErrorKind::InvalidArgument, "no such device"))?;
            dev.0.execute_bound(lp, bound, &opts).map_err(|e| {
                SimError::with_detail(ErrorKind::InvalidArgument, "cannot run the program", &e)
            })?
        };
        self.machine
            .last_ticks
            .store(report.ticks, Ordering::Relaxed);
        report.result().map_err(|e| {
            let kind = match e.status() {
                nrt_core::NrtStatus::Timeout => ErrorKind::Timeout,
                _ => ErrorKind::Execution,
            };
            SimError::with_detail(kind, "execution failed", &e)
        })
    }
}

fn out_of_range() -> SimError {
    SimError::new(
        ErrorKind::InvalidArgument,
        "device memory access out of range",
    )
}

/// The device address of `[offset, offset + len)` of `b`, checked against the buffer.
fn range(b: DeviceBuffer, offset: u64, len: u64) -> Result<u64, SimError> {
    match offset.checked_add(len) {
        Some(end) if end <= b.size => Ok(b.addr + offset),
        _ => Err(out_of_range()),
    }
}

impl SimDriver {
    /// The device of `b`, locked, if `b` is an allocation of this handle.
    fn own_buffer(&self, b: DeviceBuffer) -> Result<MutexGuard<'_, DeviceState>, SimError> {
        let dev = self
            .machine
            .device(b.device)
            .ok_or(SimError::new(ErrorKind::InvalidArgument, "no such device"))?;
        if dev.1.get(&b.addr) != Some(&self.owner) {
            return Err(SimError::new(
                ErrorKind::InvalidArgument,
                "not an allocation of this process",
            ));
        }
        Ok(dev)
    }
}

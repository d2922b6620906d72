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
//! assert_eq!(rt.visible_vnc_count().unwrap(), 4); // 8 physical cores, LNC 2
//! rt.close();
//! ```
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use nrt_core::driver::{
    Arch, CompatRange, CoreInitParams, DeviceInfo, Driver, DriverError, DriverVersion, ErrorKind,
    HwRevision, Platform, ReserveError, ReserveRequest, SoftIncompatCallback, StagedModel,
};
use nrt_core::lnc::{CoreBitmap, MAX_CORES};

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
}

impl SimError {
    const fn new(kind: ErrorKind, what: &'static str) -> Self {
        Self { kind, what }
    }
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "simulated driver: {}", self.what)
    }
}

impl std::error::Error for SimError {}

impl DriverError for SimError {
    fn kind(&self) -> ErrorKind {
        self.kind
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

/// A model staged on a simulated core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StagedState {
    /// The driver handle that staged it.
    pub owner: u64,
    /// Absolute logical core.
    pub vnc: u32,
    /// Stopped on its engine (ready to be unstaged).
    pub stopped: bool,
}

/// A simulated machine: devices, cores, the reservation table and the staged models, shared
/// by the drivers attached to it.
#[derive(Debug)]
pub struct SimMachine {
    config: SimConfig,
    cores: Mutex<Vec<CoreState>>,
    staged: Mutex<BTreeMap<u64, StagedState>>,
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

    /// Stages an (empty) model on absolute logical core `vnc`: the device-side record the load
    /// pipeline creates, here without a program. Staging proper (programs carried in NEFFs)
    /// arrives with the load capability.
    pub fn stage_model(&self, vnc: u32) -> Result<StagedModel, SimError> {
        let c = &self.machine.config;
        let lnc_size = c.instance.arch().default_lnc_size();
        if vnc.saturating_mul(lnc_size) >= c.total_cores() {
            return Err(SimError::new(
                ErrorKind::InvalidArgument,
                "no such logical core",
            ));
        }
        let handle = self.machine.next_model.fetch_add(1, Ordering::Relaxed);
        self.machine.staged_table().insert(
            handle,
            StagedState {
                owner: self.owner,
                vnc,
                stopped: false,
            },
        );
        Ok(StagedModel { vnc, handle })
    }

    fn emulation(&self) -> Result<DriverEmulation, SimError> {
        self.machine.config.emulate_driver.ok_or(SimError::new(
            ErrorKind::Unsupported,
            "funtime mode has no kernel driver",
        ))
    }

    fn physical_range(&self, p: &CoreInitParams) -> std::ops::Range<usize> {
        let first = p.first_vnc.saturating_mul(p.lnc_size) as usize;
        let count = p.vnc_count.saturating_mul(p.lnc_size) as usize;
        first..first.saturating_add(count)
    }

    /// Runs `f` on the process's physical cores of `p`, which this handle must have reserved.
    fn with_own_cores(
        &self,
        p: &CoreInitParams,
        f: impl FnOnce(&mut [CoreState]) -> Result<(), SimError>,
    ) -> Result<(), SimError> {
        self.emulation()?;
        let range = self.physical_range(p);
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
        self.machine
            .staged_table()
            .retain(|_, m| m.owner != self.owner);
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

    fn reserve_cores(&self, r: ReserveRequest) -> Result<CoreBitmap, ReserveError<SimError>> {
        self.emulation().map_err(ReserveError::Driver)?;
        let mut cores = self.machine.lock();
        let n = cores.len() as u32;
        if r.count == 0 || r.start > r.end || r.end >= n {
            return Err(ReserveError::Driver(SimError::new(
                ErrorKind::InvalidArgument,
                "reservation range out of bounds",
            )));
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
                return Ok(b);
            }
        }
        Err(ReserveError::Unavailable { available: longest })
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
            Some(m) if m.owner == self.owner && m.vnc == model.vnc => {
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
        let mut table = self.machine.staged_table();
        match table.get(&model.handle) {
            Some(m) if m.owner == self.owner && m.vnc == model.vnc => {
                if !m.stopped {
                    return Err(SimError::new(
                        ErrorKind::InvalidArgument,
                        "model not stopped",
                    ));
                }
                table.remove(&model.handle);
                Ok(())
            }
            _ => Err(SimError::new(
                ErrorKind::InvalidArgument,
                "no such staged model",
            )),
        }
    }
}

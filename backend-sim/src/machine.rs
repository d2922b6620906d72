//! The shared state of a simulated machine ([`SimMachine`]): the physical cores and their
//! reservation table ([`CoreState`]), the staged models ([`StagedState`]), each device's HBM
//! with the driver handle owning each allocation, and — when asked for ([`Reports`]) — each
//! physical core's last execution report.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use nrt_core::bitmap::{CoreBitmap, MAX_CORES};

use crate::engine::{self, ExecReport};
use crate::instance::SimConfig;

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

/// One simulated device of a machine: the engine's device (HBM and cores, shared by the
/// threads driving its cores) and the driver handle owning each raw allocation.
#[derive(Debug)]
pub(crate) struct SimDevice {
    pub(crate) engine: engine::Device,
    /// Allocation base → the driver handle that made it.
    pub(crate) owners: Mutex<BTreeMap<u64, u64>>,
}

impl SimDevice {
    /// The owners table, locked.
    pub(crate) fn owners(&self) -> MutexGuard<'_, BTreeMap<u64, u64>> {
        lock(&self.owners)
    }
}

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

/// What a machine keeps of each execution's [`ExecReport`] (per physical core: the last one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Reports {
    /// Nothing: the report is dropped after the execution's status is read, and the execute
    /// path allocates nothing for it (the default).
    #[default]
    Off = 0,
    /// The last report of each core, with its ticks, counters, notifications and hazards; the
    /// engine records no event log.
    Counters = 1,
    /// As [`Reports::Counters`], with the event log (instruction slices, waits, DMA
    /// transfers) for a timeline trace ([`engine::trace::chrome_trace_json`]).
    Events = 2,
    /// As [`Reports::Events`] without one event per DMA descriptor (a trace then has no DMA
    /// engine tracks): enough for per-node timing, at a fraction of the events.
    Transfers = 3,
}

impl Reports {
    /// Whether the engine records the event log.
    pub const fn records_events(self) -> bool {
        matches!(self, Reports::Events | Reports::Transfers)
    }

    /// Whether the event log has one event per DMA descriptor.
    pub const fn records_descriptors(self) -> bool {
        matches!(self, Reports::Events)
    }

    const fn from_u8(v: u8) -> Self {
        match v {
            1 => Reports::Counters,
            2 => Reports::Events,
            3 => Reports::Transfers,
            _ => Reports::Off,
        }
    }
}

/// A simulated machine: devices, cores, the reservation table and the staged models, shared
/// by the drivers attached to it.
#[derive(Debug)]
pub struct SimMachine {
    pub(crate) config: SimConfig,
    cores: Mutex<Vec<CoreState>>,
    staged: Mutex<BTreeMap<u64, StagedState>>,
    /// The devices: each one's HBM and cores, and which driver handle owns each allocation.
    /// No lock is held over a device for an execution: executions on different cores of one
    /// device run at the same time.
    pub(crate) devices: Vec<SimDevice>,
    pub(crate) executions: AtomicU64,
    /// A [`Reports`] value.
    reports: AtomicU8,
    /// Per physical core: the report of its last program run, kept as `reports` says.
    last_reports: Vec<Mutex<Option<Arc<ExecReport>>>>,
    pub(crate) next_owner: AtomicU64,
    pub(crate) next_model: AtomicU64,
}

impl SimMachine {
    /// A machine with `config`, keeping no reports; the core count is clipped to what the
    /// runtime can address.
    pub fn new(config: SimConfig) -> Arc<Self> {
        let n = config.total_cores().min(MAX_CORES) as usize;
        Arc::new(Self {
            config,
            cores: Mutex::new(vec![CoreState::default(); n]),
            staged: Mutex::new(BTreeMap::new()),
            devices: (0..config.device_count.min(64))
                .map(|_| SimDevice {
                    engine: engine::Device::new(config.instance),
                    owners: Mutex::default(),
                })
                .collect(),
            executions: AtomicU64::new(0),
            reports: AtomicU8::new(Reports::Off as u8),
            last_reports: (0..n).map(|_| Mutex::new(None)).collect(),
            next_owner: AtomicU64::new(1),
            next_model: AtomicU64::new(1),
        })
    }

    /// A machine with `config` that keeps each core's last report as `reports` says.
    pub fn with_reports(config: SimConfig, reports: Reports) -> Arc<Self> {
        let m = Self::new(config);
        m.set_reports(reports);
        m
    }

    /// The configuration.
    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    /// What the machine keeps of each execution's report.
    pub fn reports(&self) -> Reports {
        Reports::from_u8(self.reports.load(Ordering::Relaxed))
    }

    /// Changes what the machine keeps of the executions that start from now on. Turning
    /// reports off forgets the ones kept.
    pub fn set_reports(&self, reports: Reports) {
        self.reports.store(reports as u8, Ordering::Relaxed);
        if reports == Reports::Off {
            for slot in &self.last_reports {
                *lock(slot) = None;
            }
        }
    }

    /// The report of the last program run on physical core `pnc` (absolute), when the
    /// machine keeps reports ([`SimMachine::set_reports`]). `None`: reports are off, nothing
    /// ran on that core since they were turned on, or its last execution ran a model without
    /// a program (plumbing mode).
    pub fn last_report(&self, pnc: u32) -> Option<Arc<ExecReport>> {
        self.last_reports
            .get(pnc as usize)
            .and_then(|slot| lock(slot).clone())
    }

    /// Records (or, with `None`, forgets) the last report of core `pnc`; does nothing when
    /// reports are off.
    pub(crate) fn record_report(&self, pnc: u32, report: Option<ExecReport>) {
        if self.reports() == Reports::Off {
            return;
        }
        if let Some(slot) = self.last_reports.get(pnc as usize) {
            *lock(slot) = report.map(Arc::new);
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Vec<CoreState>> {
        // A poisoned table is still consistent: every update is a single field store.
        lock(&self.cores)
    }

    pub(crate) fn staged_table(&self) -> MutexGuard<'_, BTreeMap<u64, StagedState>> {
        lock(&self.staged)
    }

    /// Device memory allocated on device `device`, in bytes (whole pages).
    pub fn device_bytes_allocated(&self, device: u32) -> u64 {
        self.device(device)
            .map_or(0, |d| d.engine.hbm().allocated())
    }

    /// Device memory allocated over all devices, in bytes.
    pub fn total_device_bytes_allocated(&self) -> u64 {
        (0..self.devices.len() as u32)
            .map(|d| self.device_bytes_allocated(d))
            .sum()
    }

    /// Executions run so far.
    pub fn executions(&self) -> u64 {
        self.executions.load(Ordering::Relaxed)
    }

    pub(crate) fn device(&self, device: u32) -> Option<&SimDevice> {
        self.devices.get(device as usize)
    }

    /// The models staged on the machine, by backend handle.
    pub fn staged_models(&self) -> BTreeMap<u64, StagedState> {
        self.staged_table().clone()
    }

    /// The absolute physical core of the staged model with backend handle `handle`
    /// ([`StagedModel::handle`](nrt_core::driver::StagedModel::handle)), if it is staged.
    pub fn staged_pnc(&self, handle: u64) -> Option<u32> {
        self.staged_table().get(&handle).map(|m| m.pnc)
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

/// Locks `m`, taking over a poisoned lock: every table here stays consistent between
/// statements.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

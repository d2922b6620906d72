//! The emulated driver's state: per device, the attached processes, memory chunks and their
//! handles, semaphores, events, core-init states, notification queues, per-core locks and
//! pending resets; machine-wide, the core-range table (`ncrwl_range_pids`) and the counters.

use nrt_core::driver::{DeviceBuffer, StagedModel};
use nrt_sim::{Instance, SimDriver};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;

use crate::config::FaultPlan;
use crate::crwl::{CoreLock, RangeTable};
use crate::target::FileId;

/// Semaphores and events per core (V2 and V3).
pub(crate) const SEMAPHORES: usize = 256;
/// Events per core.
pub(crate) const EVENTS: usize = 256;
/// `NEURON_MAX_PROCESS_PER_DEVICE`.
pub(crate) const MAX_PROCESSES: usize = 16;
/// `MAX_NC_PER_DEVICE`: per-core tables are this long whatever the instance.
pub(crate) const MAX_NC_PER_DEVICE: u32 = 8;
/// Device chunks get PAs from here on (host chunks' PAs are offsets in the node's file, far
/// below).
pub(crate) const DEVICE_PA_BASE: u64 = 1 << 48;
/// Where the cores' semaphore blocks (`RESOURCE_MMAP_INFO`) start in the node's file: far
/// above any host chunk (host allocation stops below it).
pub(crate) const SEM_BLOCK_BASE: u64 = 1 << 40;
/// `PAGE_SIZE`: chunk sizes are rounded up to it, host chunks are aligned to it.
pub(crate) const PAGE: u64 = 4096;

/// `NEURON_CINIT_STATE_*`.
pub(crate) const CINIT_STARTED: u32 = 1;
pub(crate) const CINIT_COMPLETED: u32 = 2;
pub(crate) const CINIT_INVALID: u32 = 3;

/// Where a chunk's bytes live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Backing {
    /// Host memory: bytes `[pa, pa + size)` of the device node's file.
    Host,
    /// Device memory: bytes `[offset, offset + size)` of an HBM allocation of the owner's
    /// simulated driver.
    Device { buffer: DeviceBuffer, offset: u64 },
}

/// One memory chunk (`struct mem_chunk`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Chunk {
    /// Thread group that allocated it.
    pub(crate) owner: u32,
    pub(crate) backing: Backing,
    pub(crate) pa: u64,
    /// Bytes, rounded up to whole pages as the driver does.
    pub(crate) size: u64,
    /// Freed with the device's last opener rather than with the owner (notification queues).
    pub(crate) device_lifespan: bool,
    /// The `mem_type` it was allocated with, where the request carries one.
    pub(crate) mem_type: Option<u32>,
}

impl Chunk {
    pub(crate) fn is_host(&self) -> bool {
        self.backing == Backing::Host
    }

    /// `offset + size <= self.size` without overflow (`mc_access_is_within_bounds`).
    pub(crate) fn within(&self, offset: u64, size: u64) -> bool {
        offset.checked_add(size).is_some_and(|end| end <= self.size)
    }
}

/// A program staged through the launch convention, cached by its image's PA.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Staged {
    /// The process whose simulated driver staged it.
    pub(crate) owner: u32,
    pub(crate) model: StagedModel,
}

/// One emulated device.
#[derive(Debug)]
pub(crate) struct Device {
    pub(crate) index: u32,
    pub(crate) cores: u32,
    /// The node's backing file (host chunks, notification queues).
    pub(crate) file: File,
    pub(crate) file_id: FileId,
    /// Page-rounded host ranges in the file: start → end.
    pub(crate) host_ranges: BTreeMap<u64, u64>,
    pub(crate) chunks: BTreeMap<u64, Chunk>,
    pub(crate) next_handle: u64,
    /// Attach count per thread group (`npid_attach`).
    pub(crate) attached: BTreeMap<u32, u32>,
    /// The simulated driver of each attached process.
    pub(crate) sims: BTreeMap<u32, SimDriver>,
    pub(crate) semaphores: Vec<[u32; SEMAPHORES]>,
    pub(crate) events: Vec<[u32; EVENTS]>,
    pub(crate) cinit: Vec<u32>,
    pub(crate) model_started: Vec<u64>,
    /// (core, engine, type) → handle of the queue's chunk.
    pub(crate) nqs: BTreeMap<(u32, u32, u32), u64>,
    pub(crate) locks: Vec<CoreLock>,
    /// Reset requests started and not yet waited for, by request id.
    pub(crate) resets: BTreeSet<u32>,
    /// Launch-convention stages by image PA.
    pub(crate) staged: BTreeMap<u64, Staged>,
    /// DMA queues initialised by processes, by (engine, queue).
    pub(crate) dma_queues: BTreeMap<(u32, u32), DmaQueue>,
}

/// One DMA queue as `DMA_QUEUE_INIT` left it: its rings are chunks of the owner (handles
/// that named no chunk leave the ring unset, as the driver's lookup does).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DmaQueue {
    pub(crate) owner: u32,
    pub(crate) tx_desc_count: u32,
    pub(crate) rx_desc_count: u32,
    pub(crate) tx: Option<u64>,
    pub(crate) rx: Option<u64>,
}

impl Device {
    pub(crate) fn new(index: u32, cores: u32, file: File, file_id: FileId) -> Self {
        let n = MAX_NC_PER_DEVICE as usize;
        Self {
            index,
            cores,
            file,
            file_id,
            host_ranges: BTreeMap::new(),
            chunks: BTreeMap::new(),
            next_handle: 1,
            attached: BTreeMap::new(),
            sims: BTreeMap::new(),
            semaphores: vec![[0; SEMAPHORES]; n],
            events: vec![[0; EVENTS]; n],
            cinit: vec![CINIT_INVALID; n],
            model_started: vec![0; n],
            nqs: BTreeMap::new(),
            locks: vec![CoreLock::default(); n],
            resets: BTreeSet::new(),
            staged: BTreeMap::new(),
            dma_queues: BTreeMap::new(),
        }
    }

    /// Whether process `tgid` is attached (`npid_is_attached`).
    pub(crate) fn is_attached(&self, tgid: u32) -> bool {
        self.attached.get(&tgid).is_some_and(|&n| n > 0)
    }

    /// The chunk whose range `[pa, pa + size)` holds `pa`, with its handle.
    pub(crate) fn chunk_at(&self, pa: u64) -> Option<(u64, Chunk)> {
        self.chunks
            .iter()
            .find(|(_, c)| pa >= c.pa && pa - c.pa < c.size)
            .map(|(h, c)| (*h, *c))
    }
}

/// Counters of what was served.
#[derive(Clone, Debug, Default)]
pub(crate) struct Counters {
    pub(crate) served: u64,
    pub(crate) failed: u64,
    pub(crate) launches: u64,
    pub(crate) launch_failures: u64,
    pub(crate) per_request: BTreeMap<u32, u64>,
}

/// Everything the emulator holds, behind one lock.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) instance: Instance,
    pub(crate) devices: Vec<Device>,
    pub(crate) ranges: RangeTable,
    pub(crate) faults: FaultPlan,
    pub(crate) counters: Counters,
}

impl State {
    /// The device whose node is the file `id`.
    pub(crate) fn device_of(&self, id: FileId) -> Option<u32> {
        self.devices
            .iter()
            .find(|d| d.file_id == id)
            .map(|d| d.index)
    }

    pub(crate) fn device(&mut self, index: u32) -> Option<&mut Device> {
        self.devices.get_mut(index as usize)
    }
}

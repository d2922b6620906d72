//! The runtime value: `init` / `close` orchestration over a [`Driver`] and a [`Host`].
//!
//! The order of `init` follows libnrt 2.31 `nrt_init` step by step (see
//! `docs/ARCHITECTURE.md`); every failure after a resource was taken gives it back, so a failed
//! `init` leaves the runtime in START with nothing reserved and a corrected retry succeeds.

use core::fmt;
use core::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, Ordering};

use crate::config::{Config, LogLevel, VarSource, vars, write_core_list};
use crate::driver::{
    CoreInitParams, DeviceInfo, Driver, DriverError, HwRevision, Platform, ReserveError,
    ReserveRequest,
};
use crate::error::{Error, Message, Result};
use crate::fmt::Level;
use crate::host::{Host, NoHost};
use crate::lnc::{Allocation, CoreBitmap, MAX_CORES};
use crate::state::{InitState, StateCell};
use crate::version::{GIT_HASH, IMPLEMENTATION, RT_VERSION};

/// `nrt_framework_type_t`: who is calling the runtime (used only by the Neuron tools).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum FrameworkType {
    /// `NRT_FRAMEWORK_TYPE_INVALID`.
    Invalid = 0,
    /// `NRT_FRAMEWORK_TYPE_NO_FW`: an application calling the runtime directly.
    NoFw = 1,
    /// `NRT_FRAMEWORK_TYPE_TENSORFLOW`.
    Tensorflow = 2,
    /// `NRT_FRAMEWORK_TYPE_PYTORCH`.
    Pytorch = 3,
    /// `NRT_FRAMEWORK_TYPE_MXNET`.
    Mxnet = 4,
    /// `NRT_FRAMEWORK_TYPE_PRECHECK`.
    Precheck = 5,
}

impl FrameworkType {
    /// The framework type with this C value.
    pub fn from_raw(v: u32) -> Option<Self> {
        [
            Self::Invalid,
            Self::NoFw,
            Self::Tensorflow,
            Self::Pytorch,
            Self::Mxnet,
            Self::Precheck,
        ]
        .into_iter()
        .find(|f| *f as u32 == v)
    }
}

/// Longest framework / FAL version string kept (longer ones are truncated).
pub const MAX_FRAMEWORK_VERSION: usize = 64;

/// What `init` recorded about the calling framework (`kmgr_register_framework`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameworkInfo {
    /// The framework.
    pub kind: FrameworkType,
    /// Its version string.
    pub version: heapless::String<MAX_FRAMEWORK_VERSION>,
    /// The framework-abstraction-layer version string.
    pub fal_version: heapless::String<MAX_FRAMEWORK_VERSION>,
}

fn truncated<const N: usize>(s: &str) -> heapless::String<N> {
    let mut cut = s.len().min(N);
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut out = heapless::String::new();
    let _ = out.push_str(s.get(..cut).unwrap_or(""));
    out
}

/// Everything `init` brought up; present exactly while the state is INIT.
#[derive(Clone, Debug)]
struct Session {
    config: Config,
    device: DeviceInfo,
    allocation: Allocation,
    core_params: CoreInitParams,
    framework: FrameworkInfo,
}

/// Session values the execute path needs, readable without the lifecycle lock; written by
/// `init` before the state becomes INIT.
#[derive(Debug, Default)]
struct ExecConfig {
    /// `NEURON_RT_EXEC_TIMEOUT` (0 = backend default).
    timeout_secs: core::sync::atomic::AtomicU32,
    /// Implicit async mode (`NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS` > 0).
    implicit_async: AtomicBool,
    /// First logical core, logical core size and cores per device of the session.
    first_lnc: core::sync::atomic::AtomicU32,
    lnc_size: core::sync::atomic::AtomicU32,
    lnc_count: core::sync::atomic::AtomicU32,
    cores_per_device: core::sync::atomic::AtomicU32,
}

/// First of the two troubleshooting links printed when no device is found.
pub const TROUBLESHOOT_URL: &str =
    "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/neuron-runtime/nrt-troubleshoot.html";
/// Second troubleshooting link.
pub const SETUP_URL: &str =
    "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/setup/index.html";

/// Packages named when the runtime is older than the driver accepts.
pub const RUNTIME_PACKAGES: &str = "aws-neuronx-runtime-lib and aws-neuronx-collectives";
/// Package named when the driver is older than the runtime needs.
pub const DRIVER_PACKAGE: &str = "aws-neuronx-dkms";

fn soft_incompat_warning(msg: &str) {
    crate::fmt::forward(
        Level::Warning,
        format_args!("Neuron driver soft incompatibility: {msg}"),
    );
}

/// Construction-time settings of a [`Runtime`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuntimeOptions {
    /// Models that can be loaded at once (the registry's fixed capacity). Loading one more
    /// fails with `NRT_RESOURCE`.
    pub max_models: u32,
    /// While `unload` waits for references to drain it logs "still waiting for model[%u] ref
    /// count 0" every this many relax periods (100 000 × 1 ms ≈ 100 s on a std host).
    pub unload_warn_every: u64,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        Self {
            max_models: 256,
            unload_warn_every: 100_000,
        }
    }
}

/// A Neuron runtime over driver `D`, with host services from `H`.
///
/// A runtime is a value: tests may create as many as they like. All methods take `&self`; the
/// lifecycle (`init`, `close`) is serialised internally and the state word is read lock-free.
pub struct Runtime<D: Driver, H: Host = NoHost> {
    driver: D,
    host: H,
    state: StateCell,
    /// Encoded [`LogLevel`]: 0 = quiet, otherwise the `Level` discriminant.
    log_level: AtomicU8,
    fork_handlers_registered: AtomicBool,
    fork_generation_at_registration: AtomicU32,
    session: spin::Mutex<Option<Session>>,
    /// Copies of session values the execute path reads without the lifecycle lock.
    exec_config: ExecConfig,
    options: RuntimeOptions,
    #[cfg(feature = "alloc")]
    models: crate::registry::Registry<crate::model::Model>,
    /// Staged subgraphs whose unstage failed; `close` retries them so nothing stays staged.
    #[cfg(feature = "alloc")]
    unstage_retry: spin::Mutex<alloc::vec::Vec<crate::driver::StagedModel>>,
    /// Async queues, present while INIT.
    #[cfg(feature = "alloc")]
    async_state: spin::Mutex<Option<async_exec::AsyncState>>,
}

#[cfg(feature = "alloc")]
mod async_exec;
#[cfg(feature = "alloc")]
mod exec;
#[cfg(feature = "alloc")]
mod models;
#[cfg(feature = "alloc")]
pub use async_exec::{
    AsyncExecCallback, CompletionHook, EXPLICIT_QUEUE_DEPTH, QueuedCount, SEQ_NUM_MAX, XU_TYPES,
    Xu, seq_id, seq_number, seq_xu_id,
};
#[cfg(feature = "alloc")]
pub use exec::ExecMode;
#[cfg(feature = "alloc")]
pub use models::{ModelHandle, ModelRef};

impl<D: Driver + fmt::Debug, H: Host + fmt::Debug> fmt::Debug for Runtime<D, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("driver", &self.driver)
            .field("host", &self.host)
            .field("state", &self.state.get())
            .finish_non_exhaustive()
    }
}

fn encode_level(l: LogLevel) -> u8 {
    match l {
        LogLevel::Quiet => 0,
        LogLevel::Level(l) => l as u8,
    }
}

fn decode_level(v: u8) -> LogLevel {
    match v {
        0 => LogLevel::Quiet,
        1 => LogLevel::Level(Level::Error),
        2 => LogLevel::Level(Level::Warning),
        3 => LogLevel::Level(Level::Info),
        4 => LogLevel::Level(Level::Debug),
        _ => LogLevel::Level(Level::Trace),
    }
}

impl<D: Driver> Runtime<D, NoHost> {
    /// A runtime in START over `driver`, with no host services.
    pub fn new(driver: D) -> Self {
        Self::with_host(driver, NoHost)
    }
}

impl<D: Driver, H: Host> Runtime<D, H> {
    /// A runtime in START over `driver`, with `host` services.
    pub fn with_host(driver: D, host: H) -> Self {
        Self::with_options(driver, host, RuntimeOptions::default())
    }

    /// A runtime in START with explicit [`RuntimeOptions`]. Every table the runtime needs
    /// (the model registry) is allocated here, once.
    pub fn with_options(driver: D, host: H, options: RuntimeOptions) -> Self {
        #[cfg(feature = "alloc")]
        let models =
            crate::registry::Registry::with_heavy_barrier(options.max_models, host.heavy_barrier());
        Self {
            driver,
            host,
            state: StateCell::new(),
            log_level: AtomicU8::new(encode_level(LogLevel::Level(Level::Error))),
            fork_handlers_registered: AtomicBool::new(false),
            fork_generation_at_registration: AtomicU32::new(0),
            session: spin::Mutex::new(None),
            exec_config: ExecConfig::default(),
            options,
            #[cfg(feature = "alloc")]
            models,
            #[cfg(feature = "alloc")]
            unstage_retry: spin::Mutex::new(alloc::vec::Vec::new()),
            #[cfg(feature = "alloc")]
            async_state: spin::Mutex::new(None),
        }
    }

    /// The construction-time options.
    pub fn options(&self) -> &RuntimeOptions {
        &self.options
    }

    /// The driver.
    pub fn driver(&self) -> &D {
        &self.driver
    }

    /// The host.
    pub fn host(&self) -> &H {
        &self.host
    }

    /// The lifecycle state.
    pub fn state(&self) -> InitState {
        self.observe_fork();
        self.state.get()
    }

    /// Emits a log record through the host if the configured level lets it through.
    pub fn log(&self, level: Level, args: fmt::Arguments<'_>) {
        if decode_level(self.log_level.load(Ordering::Relaxed)).allows(level) {
            self.host.log(level, args);
        }
    }

    pub(crate) fn fail(&self, e: Error) -> Error {
        self.log(Level::Error, format_args!("{}", e.message()));
        e
    }

    /// Enters CHILD if the host reports a fork since the fork handlers were registered.
    #[inline]
    fn observe_fork(&self) {
        if self.forked() {
            self.state.set(InitState::Child);
        }
    }

    /// Puts the runtime in the terminal CHILD state: what the fork-child handler does. Safe to
    /// call from an `atfork` child handler (one atomic store, no lock).
    pub fn mark_forked_child(&self) {
        self.state.set(InitState::Child);
    }

    /// The guard every public entry runs first: `Ok` only when INIT, otherwise the exact status
    /// and message of the current state (logged: CLOSED as a warning, the others as errors).
    #[inline]
    pub fn guard(&self) -> Result<()> {
        if self.state.get() == InitState::Init && !self.forked() {
            return Ok(());
        }
        self.guard_slow()
    }

    /// Whether the host reports a fork since the fork handlers were registered.
    #[inline]
    fn forked(&self) -> bool {
        self.fork_handlers_registered.load(Ordering::Acquire)
            && self.host.fork_generation()
                != self.fork_generation_at_registration.load(Ordering::Acquire)
    }

    #[cold]
    #[inline(never)]
    fn guard_slow(&self) -> Result<()> {
        self.observe_fork();
        let s = self.state.get();
        s.guard().inspect_err(|e| {
            let level = if s == InitState::Closed {
                Level::Warning
            } else {
                Level::Error
            };
            self.log(level, format_args!("{}", e.message()));
        })
    }

    /// `nrt_init`: brings the runtime from START to INIT. Idempotent while INIT.
    ///
    /// `vars` supplies the `NEURON_RT_*` configuration (the process environment on a std host).
    pub fn init(
        &self,
        framework: FrameworkType,
        fw_version: &str,
        fal_version: &str,
        vars: &dyn VarSource,
    ) -> Result<()> {
        self.observe_fork();
        // (0) Idempotent fast path.
        if self.state.get() == InitState::Init {
            self.log(
                Level::Debug,
                format_args!("API:IN: nrt_init (already initialized)"),
            );
            self.log(Level::Debug, format_args!("API:OUT: (ret=0)"));
            return Ok(());
        }
        let r = self.init_slow(framework, fw_version, fal_version, vars);
        let code = r.as_ref().err().map_or(0, |e| e.status().code());
        self.log(Level::Debug, format_args!("API:OUT: (ret={code})"));
        r
    }

    /// The init guard: only START may proceed. Returns `Ok(true)` when another `init` finished
    /// first (the idempotent case).
    fn init_state_guard(&self) -> Result<bool> {
        match self.state.get() {
            InitState::Start => Ok(false),
            InitState::Init => Ok(true),
            InitState::Closed => {
                let e = err!(Closed, "NRT already closed");
                self.log(Level::Warning, format_args!("{}", e.message()));
                Err(e)
            }
            s => Err(self.fail(err!(Failure, "Incompatible runtime state: {}", s.name()))),
        }
    }

    fn init_slow(
        &self,
        framework: FrameworkType,
        fw_version: &str,
        fal_version: &str,
        vars: &dyn VarSource,
    ) -> Result<()> {
        // (1) Soft-incompatibility callback.
        if self
            .driver
            .register_soft_incompat_callback(soft_incompat_warning)
            .is_err()
        {
            return Err(self.fail(err!(
                Invalid,
                "Failed to register nrt_soft_incompat_callback"
            )));
        }
        // (2) State guard, before waiting for the lifecycle lock (so an init racing a close
        // sees CLOSED), and again under it (so two racing inits bring the runtime up once).
        if self.init_state_guard()? {
            return Ok(());
        }
        let mut session = self.session.lock();
        if self.init_state_guard()? {
            return Ok(());
        }
        let s = self.bring_up(framework, fw_version, fal_version, vars)?;
        let ec = &self.exec_config;
        ec.timeout_secs
            .store(s.config.exec_timeout_secs.unwrap_or(0), Ordering::Relaxed);
        ec.implicit_async
            .store(s.config.implicit_async(), Ordering::Relaxed);
        ec.first_lnc
            .store(s.allocation.first_lnc, Ordering::Relaxed);
        ec.lnc_size.store(s.allocation.lnc_size, Ordering::Relaxed);
        ec.lnc_count
            .store(s.allocation.lnc_count, Ordering::Relaxed);
        ec.cores_per_device
            .store(s.device.cores_per_device, Ordering::Relaxed);
        #[cfg(feature = "alloc")]
        {
            *self.async_state.lock() = Some(async_exec::AsyncState::new(
                s.allocation.first_lnc,
                s.allocation.lnc_count,
                s.config.async_exec_max_inflight,
            ));
        }
        *session = Some(s);
        self.state.set(InitState::Init);
        Ok(())
    }

    /// Steps (3)-(9) of `init`, run under the lifecycle lock.
    fn bring_up(
        &self,
        framework: FrameworkType,
        fw_version: &str,
        fal_version: &str,
        vars: &dyn VarSource,
    ) -> Result<Session> {
        // (3) Device discovery.
        let device = match self.driver.discover() {
            Ok(d) if d.arch.is_supported() && d.device_count > 0 && d.cores_per_device > 0 => d,
            _ => {
                return Err(self.fail(err!(
                    Invalid,
                    "Cannot find Neuron devices. Please make sure the Neuron driver \
                     (aws-neuronx-dkms) is installed and loaded, and that this is an inf2 or trn1 \
                     instance. Troubleshooting: {} Setup: {}",
                    TROUBLESHOOT_URL,
                    SETUP_URL
                )));
            }
        };

        // (4) Configuration.
        let config = Config::parse(vars).map_err(|e| self.fail(e))?;
        self.log_level
            .store(encode_level(config.log_level), Ordering::Relaxed);

        // (5) Hardware-revision override off real hardware.
        if device.platform != Platform::Hardware {
            if let Err(e) = self.driver.override_hw_revision(HwRevision::A) {
                self.log(
                    Level::Warning,
                    format_args!("Failed to override hw revision: {e}"),
                );
            }
        }

        // (6) Configuration copy, with the DMA packet-size clamp.
        if config.dbg_cc_dma_packet_size_ignored > 0 {
            self.log(
                Level::Warning,
                format_args!(
                    "NEURON_RT_DBG_CC_DMA_PACKET_SIZE has more items than the maximum of {} \
                     (4 streams x 4 architectures), ignoring extra {} item(s)",
                    crate::config::MAX_DMA_PACKET_SIZES,
                    config.dbg_cc_dma_packet_size_ignored
                ),
            );
        }
        self.log(
            Level::Info,
            format_args!("Neuron Runtime {RT_VERSION} ({IMPLEMENTATION}, git {GIT_HASH})"),
        );

        // (7) Driver compatibility, skipped in funtime.
        let funtime = self.driver.is_funtime();
        if !funtime {
            self.negotiate_driver(&device)?;
        }

        // (8) Logical-core allocation.
        let allocation = self.allocate_cores(&device, &config, funtime)?;

        // (9) Subsystems, in order; undo the reservation on any failure.
        let core_params = CoreInitParams {
            first_vnc: allocation.first_lnc,
            vnc_count: allocation.lnc_count,
            lnc_size: allocation.lnc_size,
            reset_cores: config.reset_cores,
            implicit_async: config.implicit_async(),
            async_max_inflight: config.async_exec_max_inflight,
        };
        let framework = FrameworkInfo {
            kind: framework,
            version: truncated(fw_version),
            fal_version: truncated(fal_version),
        };
        if let Err(e) = self.start_subsystems(&core_params, funtime) {
            self.release_allocation(&allocation);
            return Err(e);
        }
        Ok(Session {
            config,
            device,
            allocation,
            core_params,
            framework,
        })
    }

    /// Step (7): driver version and the compatibility-id range test.
    fn negotiate_driver(&self, device: &DeviceInfo) -> Result<()> {
        let version = self.driver.driver_version().map_err(|e| {
            self.fail(err!(
                Invalid,
                "Unable to determine Neuron Driver version ({e}). Please check that the \
                 aws-neuronx-dkms package is installed."
            ))
        })?;
        self.log(
            Level::Info,
            format_args!("Found neuron driver: {}.{}", version.major, version.minor),
        );
        if version.major <= 1 {
            return Err(self.fail(err!(
                Invalid,
                "Neuron Runtime 2.x requires Neuron driver(aws-neuron-dkms) version 2.1 or above."
            )));
        }
        let (vtpb, v25) = device.arch.compat_ids();
        let range = self.driver.compatible_version().map_err(|e| {
            self.fail(err!(
                Invalid,
                "Unable to read compatible Driver version ({e}). Please update the \
                 aws-neuronx-dkms package."
            ))
        })?;
        if vtpb < range.min {
            return Err(self.fail(compat_error(vtpb, range.min, range.max, RUNTIME_PACKAGES)));
        }
        if range.max < v25 {
            return Err(self.fail(compat_error(v25, range.min, range.max, DRIVER_PACKAGE)));
        }
        Ok(())
    }

    /// Step (8): logical-core allocation, implicit (`NEURON_RT_NUM_CORES`) or explicit
    /// (`NEURON_RT_VISIBLE_CORES`).
    fn allocate_cores(
        &self,
        device: &DeviceInfo,
        config: &Config,
        funtime: bool,
    ) -> Result<Allocation> {
        self.log(
            Level::Info,
            format_args!(
                "Instance info:: device count:{} cores per device:{} architecture:TRN",
                device.device_count, device.cores_per_device
            ),
        );
        let total_pnc = device.total_physical_cores();
        if total_pnc > MAX_CORES {
            return Err(self.fail(err!(
                Invalid,
                "Found {total_pnc} NeuronCores, more than the {MAX_CORES} this runtime supports"
            )));
        }
        let vsize = config
            .virtual_core_size
            .unwrap_or(device.arch.default_lnc_size());
        let max_vsize = device.arch.max_lnc_size();
        if vsize > max_vsize || device.cores_per_device % vsize != 0 {
            return Err(self.fail(err!(
                Invalid,
                "Invalid value for {}: \"{vsize}\": this instance supports logical core sizes \
                 up to {max_vsize}",
                vars::VIRTUAL_CORE_SIZE
            )));
        }
        let total_lnc = total_pnc / vsize;
        match &config.visible_cores {
            None => self.allocate_implicit(device, config, funtime, vsize, total_pnc, total_lnc),
            Some(set) => self.allocate_explicit(config, set, funtime, vsize, total_pnc, total_lnc),
        }
    }

    fn allocate_implicit(
        &self,
        device: &DeviceInfo,
        config: &Config,
        funtime: bool,
        vsize: u32,
        total_pnc: u32,
        total_lnc: u32,
    ) -> Result<Allocation> {
        let num = if config.num_cores == 0 {
            total_lnc
        } else {
            config.num_cores
        };
        let pcount = num.saturating_mul(vsize);
        let lnc_per_device = device.cores_per_device / vsize;
        if device.arch > crate::driver::Arch::V2
            && vsize != pcount
            && pcount % device.cores_per_device != 0
        {
            return Err(self.fail(err!(
                Invalid,
                "`NEURON_RT_NUM_CORES` must request one core, or the whole device (multiple of {})",
                lnc_per_device
            )));
        }
        let unavailable = |available: u32| {
            err!(
                Failure,
                "Logical Neuron Core(s) not available - Requested:{} Available:{} Logical Core \
                 size {}",
                num,
                available,
                vsize
            )
        };
        let (reserved, driver_reserved) = if funtime {
            if pcount > total_pnc {
                return Err(self.fail(unavailable(total_lnc)));
            }
            (CoreBitmap::range(0, pcount), false)
        } else {
            let request = ReserveRequest {
                count: pcount,
                start: 0,
                end: total_pnc.saturating_sub(1),
            };
            match self.driver.reserve_cores(request) {
                Ok(b) => (b, true),
                Err(ReserveError::Unavailable { available }) => {
                    return Err(self.fail(unavailable(available / vsize)));
                }
                Err(ReserveError::Driver(e)) => {
                    self.log(Level::Error, format_args!("Core reservation failed: {e}"));
                    return Err(self.fail(unavailable(0)));
                }
            }
        };
        // Never trust the bitmap blindly: it must be exactly `pcount` consecutive cores.
        let start_pnc = match reserved.first() {
            Some(s)
                if reserved.len() == pcount
                    && reserved.is_contiguous()
                    && reserved.last().is_some_and(|l| l < total_pnc) =>
            {
                s
            }
            _ => {
                if driver_reserved {
                    self.release_bitmap(&reserved);
                }
                return Err(self.fail(err!(
                    Failure,
                    "Driver returned an invalid core reservation {reserved:?} for {pcount} cores"
                )));
            }
        };
        if start_pnc % vsize != 0 {
            if driver_reserved {
                self.release_bitmap(&reserved);
            }
            let first = start_pnc.div_ceil(vsize);
            return Err(self.fail(err!(
                Invalid,
                "Cannot start process with LNC Size of {vsize}. The first free physical \
                 NeuronCore {start_pnc} is not aligned to the LNC size; free aligned cores or \
                 select them with NEURON_RT_VISIBLE_CORES={}-{}",
                first,
                (first + num).saturating_sub(1)
            )));
        }
        Ok(Allocation {
            lnc_size: vsize,
            first_lnc: start_pnc / vsize,
            lnc_count: num,
            reserved,
            driver_reserved,
        })
    }

    fn allocate_explicit(
        &self,
        config: &Config,
        set: &CoreBitmap,
        funtime: bool,
        vsize: u32,
        total_pnc: u32,
        total_lnc: u32,
    ) -> Result<Allocation> {
        if config.num_cores != 0 {
            self.log(
                Level::Warning,
                format_args!(
                    "Using NEURON_RT_VISIBLE_CORES to allocate Logical Neuron Cores; \
                     NEURON_RT_NUM_CORES={} is ignored",
                    config.num_cores
                ),
            );
        }
        if !set.is_contiguous() {
            let mut list = Message::new();
            let _ = write_core_list(&mut list, set);
            return Err(self.fail(err!(
                Invalid,
                "Logical Neuron cores are not contiguous: NEURON_RT_VISIBLE_CORES={}",
                list
            )));
        }
        let (Some(first), Some(last)) = (set.first(), set.last()) else {
            return Err(self.fail(err!(Invalid, "Logical Neuron cores are not contiguous")));
        };
        let n = set.len();
        let start_pnc = first.saturating_mul(vsize);
        let end_pnc = last.saturating_mul(vsize).saturating_add(vsize - 1);
        let pcount = n.saturating_mul(vsize);
        let unavailable = |available: u32| {
            err!(
                Failure,
                "Logical Neuron Core(s) not available - Requested:lnc{}-lnc{} Available:{} \
                 Logical Core size {}",
                first,
                last,
                available,
                vsize
            )
        };
        if end_pnc >= total_pnc {
            return Err(self.fail(unavailable(total_lnc)));
        }
        let expected = CoreBitmap::range(start_pnc, pcount);
        let (reserved, driver_reserved) = if funtime {
            (expected, false)
        } else {
            let request = ReserveRequest {
                count: pcount,
                start: start_pnc,
                end: end_pnc,
            };
            match self.driver.reserve_cores(request) {
                Ok(b) => (b, true),
                Err(ReserveError::Unavailable { available }) => {
                    return Err(self.fail(unavailable(available / vsize)));
                }
                Err(ReserveError::Driver(e)) => {
                    self.log(Level::Error, format_args!("Core reservation failed: {e}"));
                    return Err(self.fail(unavailable(0)));
                }
            }
        };
        if reserved != expected {
            if driver_reserved {
                self.release_bitmap(&reserved);
            }
            return Err(self.fail(err!(
                Failure,
                "Driver returned an invalid core reservation {reserved:?} for lnc{first}-lnc{last}"
            )));
        }
        self.log(
            Level::Info,
            format_args!(
                "LNC info: first lnc {first} last lnc {last} first pnc {start_pnc} last pnc {end_pnc}"
            ),
        );
        Ok(Allocation {
            lnc_size: vsize,
            first_lnc: first,
            lnc_count: n,
            reserved,
            driver_reserved,
        })
    }

    /// Step (9): per-core bring-up, fork handlers, exec-ready. Undoes its own steps on failure
    /// (the caller releases the reservation).
    fn start_subsystems(&self, params: &CoreInitParams, funtime: bool) -> Result<()> {
        if !funtime {
            if let Err(e) = self.driver.init_cores(params) {
                let status = e.status();
                return Err(self.fail(Error::new(
                    status,
                    format_args!(
                        "Failed to initialize devices, error:{} ({e})",
                        status.code()
                    ),
                )));
            }
        }
        let undo_cores = |rt: &Self| {
            if !funtime {
                if let Err(e) = rt.driver.shutdown_cores(params) {
                    rt.log(Level::Error, format_args!("Failed to shut down cores: {e}"));
                }
            }
        };
        match self.host.register_fork_handlers() {
            Ok(()) => {
                if !self.fork_handlers_registered.load(Ordering::Acquire) {
                    self.fork_generation_at_registration
                        .store(self.host.fork_generation(), Ordering::Release);
                    self.fork_handlers_registered.store(true, Ordering::Release);
                }
            }
            Err(ret) => {
                undo_cores(self);
                return Err(self.fail(err!(Failure, "Failed to set atfork handlers, ret={ret}")));
            }
        }
        if funtime {
            return Ok(());
        }
        if let Err(e) = self.driver.start_exec_ready(params) {
            undo_cores(self);
            let status = e.status();
            return Err(self.fail(Error::new(
                status,
                format_args!("Failed to start the exec-ready program: {e}"),
            )));
        }
        Ok(())
    }

    fn release_bitmap(&self, bitmap: &CoreBitmap) {
        if let Err(e) = self.driver.release_cores(bitmap) {
            self.log(
                Level::Error,
                format_args!("Failed to release NeuronCores {bitmap:?}: {e}"),
            );
        }
    }

    fn release_allocation(&self, allocation: &Allocation) {
        if allocation.driver_reserved {
            self.release_bitmap(&allocation.physical_cores());
        }
    }

    /// `nrt_close`: tears down everything `init` brought up and returns to START. Does nothing
    /// unless the runtime is INIT.
    pub fn close(&self) {
        self.observe_fork();
        self.log(Level::Debug, format_args!("API:IN: nrt_close()"));
        let mut session = self.session.lock();
        if self.state.get() != InitState::Init {
            self.log(
                Level::Debug,
                format_args!("API:OUT: nrt_close() (not initialized)"),
            );
            return;
        }
        // CLOSED before the heavy teardown: concurrent entries see a deterministic non-INIT.
        self.state.set(InitState::Closed);
        #[cfg(feature = "alloc")]
        self.drain_all_async();
        self.unload_all_models();
        #[cfg(feature = "alloc")]
        {
            *self.async_state.lock() = None;
        }
        if let Some(s) = session.take() {
            if !self.driver.is_funtime() {
                if let Err(e) = self.driver.shutdown_cores(&s.core_params) {
                    self.log(Level::Error, format_args!("Failed to shut down cores: {e}"));
                }
            }
            self.release_allocation(&s.allocation);
        }
        self.state.set(InitState::Start);
        self.log(Level::Debug, format_args!("API:OUT: nrt_close()"));
    }

    /// Without the `alloc` feature there is no model registry, so nothing to unload.
    #[cfg(not(feature = "alloc"))]
    fn unload_all_models(&self) {}

    fn with_session<R>(&self, f: impl FnOnce(&Session) -> R) -> Result<R> {
        self.guard()?;
        let s = self.session.lock();
        match s.as_ref() {
            Some(s) => Ok(f(s)),
            // INIT is set only after the session is stored, and close takes it under the lock
            // after leaving INIT: seeing INIT without a session means close is under way.
            None => Err(self.fail(err!(Closed, "NRT already closed"))),
        }
    }

    /// The logical cores this process owns (guarded).
    pub fn allocation(&self) -> Result<Allocation> {
        self.with_session(|s| s.allocation)
    }

    /// `nrt_get_visible_vnc_count` once initialised: logical cores owned by the process.
    pub fn visible_vnc_count(&self) -> Result<u32> {
        self.with_session(|s| s.allocation.lnc_count)
    }

    /// The absolute logical core for a process-relative index, `NRT_INVALID` if not owned.
    pub fn absolute_vnc(&self, relative: u32) -> Result<u32> {
        let a = self.allocation()?;
        a.absolute_lnc(relative).ok_or_else(|| {
            self.fail(err!(
                Invalid,
                "Logical Neuron Core {relative} is not visible to this process (visible: 0-{})",
                a.lnc_count.saturating_sub(1)
            ))
        })
    }

    /// What discovery found at `init` (guarded).
    pub fn device_info(&self) -> Result<DeviceInfo> {
        self.with_session(|s| s.device)
    }

    /// The configuration parsed at `init` (guarded).
    pub fn config(&self) -> Result<Config> {
        self.with_session(|s| s.config.clone())
    }

    /// The framework registered at `init` (guarded).
    pub fn framework(&self) -> Result<FrameworkInfo> {
        self.with_session(|s| s.framework.clone())
    }
}

impl<D: Driver, H: Host> Drop for Runtime<D, H> {
    /// A runtime dropped while INIT closes itself, so no reservation outlives it.
    fn drop(&mut self) {
        self.close();
    }
}

/// `nrt_display_compat_msg`: the message for a compatibility id outside the driver's range.
fn compat_error(id: u32, min: u32, max: u32, packages: &str) -> Error {
    err!(
        Invalid,
        "Neuron Runtime compatibility id {id} is not within the range [{min}, {max}] supported \
         by the installed Neuron driver. Please update {packages}."
    )
}

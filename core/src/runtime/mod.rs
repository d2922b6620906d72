//! The runtime value: its state, the lifecycle guard, and the session's values.
//!
//! A [`Runtime`] is a value over a [`Driver`] and a [`Host`]; its `impl` is split by concern:
//! `init.rs` (`init` / `close` in libnrt's order), `models.rs` (the registry facade and unload),
//! `load.rs` (load and the stage seam), `tensors.rs` (tensor allocation, device memory),
//! `bind.rs` (resolving tensor sets to I/O indices once per call), `exec.rs` (the synchronous
//! execute fork), `queues.rs` (the async queues' data) and `async_exec.rs` (the implicit-async
//! mode and the explicit `nrta` API).

use crate::sync::{AtomicBool, AtomicU8, AtomicU32, Mutex, Ordering};
use core::fmt;

use crate::config::{Config, LogLevel};
use crate::driver::{CoreInitParams, DeviceInfo, Driver};
use crate::error::{Error, Result};
use crate::fmt::Level;
use crate::host::{Host, NoHost, Platform as _};
use crate::state::{InitState, StateCell};
use crate::topology::{Allocation, Topology};

/// [`Runtime`]'s `ready_gate` outside INIT: no fork generation reaches it (it counts fork depth).
const NOT_READY: u32 = u32::MAX;

#[cfg(feature = "alloc")]
mod async_exec;
#[cfg(feature = "alloc")]
mod bind;
#[cfg(feature = "alloc")]
mod exec;
mod init;
#[cfg(feature = "alloc")]
mod load;
#[cfg(feature = "alloc")]
mod models;
#[cfg(feature = "alloc")]
mod queues;
#[cfg(feature = "alloc")]
mod tensors;

#[cfg(feature = "alloc")]
pub use exec::ExecMode;
pub use init::{DRIVER_PACKAGE, RUNTIME_PACKAGES, SETUP_URL, TROUBLESHOOT_URL};
#[cfg(feature = "alloc")]
pub use models::{ModelHandle, ModelRef};
#[cfg(feature = "alloc")]
pub use queues::{
    AsyncExecCallback, CompletionHook, EXPLICIT_QUEUE_DEPTH, SEQ_NUM_MAX, XU_TYPES, Xu, seq_id,
    seq_number, seq_xu_id,
};

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

/// Everything `init` brought up; present exactly while the state is INIT.
#[derive(Clone, Debug)]
struct Session {
    config: Config,
    device: DeviceInfo,
    allocation: Allocation,
    core_params: CoreInitParams,
    framework: FrameworkInfo,
}

/// Session values the hot paths read without the lifecycle lock, published by `init` before
/// the state becomes INIT. The topology is one atomic word, so one load gives a consistent one.
#[derive(Debug, Default)]
struct Published {
    /// The session's [`Topology`] ([`Topology::to_bits`]).
    topology: AtomicU32,
    /// The topology's logical-core size, decoded once (the C hot path's answer).
    lnc_size: AtomicU32,
    /// `NEURON_RT_EXEC_TIMEOUT` in seconds (0 = the backend's default).
    timeout_secs: AtomicU32,
    /// The implicit async mode is on.
    implicit_async: AtomicBool,
}

impl Published {
    fn publish(&self, topology: Topology, config: &Config) {
        self.topology.store(topology.to_bits(), Ordering::Release);
        self.lnc_size.store(topology.lnc_size(), Ordering::Release);
        self.timeout_secs
            .store(config.exec_timeout_secs.unwrap_or(0), Ordering::Release);
        self.implicit_async
            .store(config.implicit_async(), Ordering::Release);
    }

    /// The published topology's logical-core size (one load).
    #[cfg(feature = "alloc")]
    #[inline]
    fn lnc_size(&self) -> u32 {
        self.lnc_size.load(Ordering::Acquire)
    }

    #[inline]
    fn topology(&self) -> Topology {
        Topology::from_bits(self.topology.load(Ordering::Acquire))
    }

    /// `NEURON_RT_EXEC_TIMEOUT`, `None` for the backend's default.
    #[cfg(feature = "alloc")]
    fn timeout_secs(&self) -> Option<u32> {
        let t = self.timeout_secs.load(Ordering::Acquire);
        (t > 0).then_some(t)
    }

    #[cfg(feature = "alloc")]
    fn implicit_async(&self) -> bool {
        self.implicit_async.load(Ordering::Acquire)
    }
}

/// Construction-time settings of a [`Runtime`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuntimeOptions {
    /// Models that can be loaded at once: the upper bound of the model registry, which grows
    /// on demand a chunk of [`crate::registry::CHUNK_SLOTS`] models at a time (only a table of
    /// one pointer per chunk is allocated up front). Loading one more fails with
    /// `NRT_RESOURCE`. The default, [`RuntimeOptions::DEFAULT_MAX_MODELS`] (65,536), is far
    /// above what a process loads in practice (libnrt has no limit); firmware may set it small.
    pub max_models: u32,
    /// While `unload` waits for references to drain it logs "still waiting for model[%u] ref
    /// count 0" every this many relax periods (100 000 × 1 ms ≈ 100 s on a std host).
    pub unload_warn_every: u64,
    /// A word the runtime sets to 1 when its hot-path gate opens (entering INIT) and to 0
    /// when it closes (any other state), so that a process-global front end (the C library)
    /// can test "the guard would pass" with one load from a static. It does not follow forks
    /// by itself: its owner closes it in a fork-child handler of its own.
    pub ready_mirror: Option<ReadyMirror>,
    /// The NEFF parser's decompression window for gzipped NEFFs, in bytes
    /// ([`crate::neff::ParseOptions::inflate_window`]; without `alloc` unused): the heap a load
    /// of a gzipped NEFF takes for it. Firmware sets it small (1 KiB costs nothing in speed
    /// on small models); the default is [`crate::neff::DEFAULT_INFLATE_WINDOW`] (64 KiB).
    pub inflate_window: usize,
}

/// The word of [`RuntimeOptions::ready_mirror`] (compared by address).
#[derive(Clone, Copy, Debug)]
pub struct ReadyMirror(pub &'static core::sync::atomic::AtomicU32);

impl PartialEq for ReadyMirror {
    fn eq(&self, other: &Self) -> bool {
        core::ptr::eq(self.0, other.0)
    }
}

impl Eq for ReadyMirror {}

impl RuntimeOptions {
    /// The default upper bound on loaded models.
    pub const DEFAULT_MAX_MODELS: u32 = 65_536;
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        Self {
            max_models: Self::DEFAULT_MAX_MODELS,
            unload_warn_every: 100_000,
            ready_mirror: None,
            inflate_window: 64 * 1024,
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
    /// The hot paths' one-word guard: the fork generation at registration while the state is
    /// INIT, [`NOT_READY`] otherwise. The guard passes when it equals the host's current fork
    /// generation, which folds "INIT" and "not in a forked child" into one comparison.
    ready_gate: AtomicU32,
    session: Mutex<Option<Session>>,
    /// Session values the execute path reads without the lifecycle lock.
    published: Published,
    options: RuntimeOptions,
    #[cfg(feature = "alloc")]
    models: crate::registry::Registry<crate::model::Model>,
    /// Staged subgraphs whose unstage failed; `close` retries them so nothing stays staged.
    #[cfg(feature = "alloc")]
    unstage_retry: Mutex<alloc::vec::Vec<crate::driver::StagedModel>>,
    /// Async queues, present while INIT.
    #[cfg(feature = "alloc")]
    async_state: Mutex<Option<queues::AsyncState>>,
    /// Model registrations past their announcement (see [`Runtime::register_model`]): `close`
    /// waits for none before it sweeps the registry.
    #[cfg(feature = "alloc")]
    registering: AtomicU32,
    /// The event observer (profilers, system traces).
    #[cfg(feature = "alloc")]
    events: crate::events::EventSeam,
}

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

    /// A runtime in START with explicit [`RuntimeOptions`]. The model registry's chunk table is
    /// allocated here; its chunks are allocated as models are loaded, never on a lookup.
    pub fn with_options(driver: D, host: H, options: RuntimeOptions) -> Self {
        #[cfg(feature = "alloc")]
        let models = crate::registry::Registry::with_heavy_barrier(
            options.max_models,
            host.platform().heavy_barrier(),
        );
        Self {
            driver,
            host,
            state: StateCell::new(),
            log_level: AtomicU8::new(encode_level(LogLevel::Level(Level::Error))),
            fork_handlers_registered: AtomicBool::new(false),
            fork_generation_at_registration: AtomicU32::new(0),
            ready_gate: AtomicU32::new(NOT_READY),
            session: Mutex::new(None),
            published: Published::default(),
            options,
            #[cfg(feature = "alloc")]
            models,
            #[cfg(feature = "alloc")]
            unstage_retry: Mutex::new(alloc::vec::Vec::new()),
            #[cfg(feature = "alloc")]
            async_state: Mutex::new(None),
            #[cfg(feature = "alloc")]
            registering: AtomicU32::new(0),
            #[cfg(feature = "alloc")]
            events: crate::events::EventSeam::new(),
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

    /// Emits a log record through the host if the configured level lets it through. Errors and
    /// warnings also reach [`Host::record_error`] at any level.
    pub fn log(&self, level: Level, args: fmt::Arguments<'_>) {
        if level <= Level::Warning {
            self.host.record_error(level, args);
        }
        if decode_level(self.log_level.load(Ordering::Relaxed)).allows(level) {
            self.host.log(level, args);
        }
    }

    pub(crate) fn fail(&self, e: Error) -> Error {
        self.log(Level::Error, format_args!("{}", e.message()));
        #[cfg(feature = "alloc")]
        self.events.emit(|| crate::events::RuntimeEvent::Error {
            status: e.status(),
            message: e.message(),
        });
        e.mark_logged()
    }

    /// Installs (or, with `None`, removes) the observer of the runtime's events
    /// ([`crate::events`]).
    #[cfg(feature = "alloc")]
    pub fn set_event_hook(&self, hook: Option<crate::events::EventHook>) {
        self.events.set(hook);
    }

    /// Enters CHILD if the host reports a fork since the fork handlers were registered.
    #[inline]
    fn observe_fork(&self) {
        if self.forked() {
            self.set_state(InitState::Child);
        }
    }

    /// Puts the runtime in the terminal CHILD state: what the fork-child handler does. Safe to
    /// call from an `atfork` child handler (two atomic stores, no lock).
    pub fn mark_forked_child(&self) {
        self.set_state(InitState::Child);
    }

    /// Sets the state word and the hot paths' gate with it. Leaving INIT closes the gate
    /// before the state changes, entering INIT opens it after, so the gate never passes
    /// where the state word would not.
    pub(crate) fn set_state(&self, s: InitState) {
        // Sequentially consistent: `register_model` and `close` pair a store and a load of it.
        let gate = |v: u32| {
            self.ready_gate.store(v, Ordering::SeqCst);
            if let Some(ReadyMirror(mirror)) = self.options.ready_mirror {
                mirror.store(u32::from(v != NOT_READY), Ordering::Release);
            }
        };
        if s == InitState::Init {
            self.state.set(s);
            gate(self.fork_generation_at_registration.load(Ordering::Acquire));
        } else {
            gate(NOT_READY);
            self.state.set(s);
        }
    }

    /// The guard every public entry runs first: `Ok` only when INIT, otherwise the exact status
    /// and message of the current state (logged: CLOSED as a warning, the others as errors).
    #[inline]
    pub fn guard(&self) -> Result<()> {
        if self.is_ready() {
            return Ok(());
        }
        self.guard_slow()
    }

    /// Whether the guard would pass (INIT, not in a forked child), without logging or building
    /// an error: the test of the C hot paths, which fall back to [`Runtime::guard`] to report.
    #[inline]
    pub fn is_ready(&self) -> bool {
        // INIT is entered only after the fork handlers are registered, so the gate holds the
        // generation at registration; a forked child's host reports a later one.
        self.ready_gate.load(Ordering::Acquire) == self.host.platform().fork_generation()
    }

    /// Whether the host reports a fork since the fork handlers were registered.
    #[inline]
    fn forked(&self) -> bool {
        self.fork_handlers_registered.load(Ordering::Acquire)
            && self.host.platform().fork_generation()
                != self.fork_generation_at_registration.load(Ordering::Acquire)
    }

    /// The error of a call that passed the guard but finds the runtime no longer INIT at its
    /// commit point (a `close` began meanwhile): the guard's error now, or CLOSED.
    #[cfg(feature = "alloc")]
    #[cold]
    fn refused_at_commit(&self) -> Error {
        match self.guard_slow() {
            Err(e) => e,
            Ok(()) => self.fail(err!(Closed, "NRT already closed")),
        }
    }

    #[cold]
    #[inline(never)]
    fn guard_slow(&self) -> Result<()> {
        self.observe_fork();
        let s = self.state.get();
        s.guard()
            .inspect_err(|e| {
                let level = if s == InitState::Closed {
                    Level::Warning
                } else {
                    Level::Error
                };
                self.log(level, format_args!("{}", e.message()));
            })
            .map_err(Error::mark_logged)
    }

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

    /// The logical cores this process owns and the physical cores reserved for them (guarded).
    pub fn allocation(&self) -> Result<Allocation> {
        self.with_session(|s| s.allocation)
    }

    /// Where the process's logical cores are (guarded).
    pub fn topology(&self) -> Result<Topology> {
        self.with_session(|s| s.allocation.topology)
    }

    /// `nrt_get_visible_vnc_count` once initialised: logical cores owned by the process.
    pub fn visible_lnc_count(&self) -> Result<u32> {
        self.with_session(|s| s.allocation.topology.lnc_count())
    }

    /// The absolute logical core of a process-relative index (guarded); `NRT_INVALID` if the
    /// process does not own it.
    pub fn absolute_lnc(&self, relative: i64) -> Result<u32> {
        self.guard()?;
        self.resolve_lnc(relative)
    }

    /// The absolute logical core of a process-relative index, from the published topology
    /// (callers have passed the guard).
    pub(crate) fn resolve_lnc(&self, relative: i64) -> Result<u32> {
        let t = self.published.topology();
        match u32::try_from(relative).ok().and_then(|r| t.absolute_lnc(r)) {
            Some(abs) => Ok(abs),
            None => Err(self.fail(err!(
                Invalid,
                "Logical Neuron Core {relative} is not visible to this process (visible: 0-{})",
                t.lnc_count().saturating_sub(1)
            ))),
        }
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

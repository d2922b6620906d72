//! The four-state lifecycle word (`NRT_INIT_STATE`) and the guard every public entry runs.

use crate::sync::{AtomicU8, Ordering};

use crate::error::Result;

/// Lifecycle state of a runtime.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum InitState {
    /// Never initialised, or closed and ready for a new `init`.
    Start = 0,
    /// Initialised: the only state in which calls do work.
    Init = 1,
    /// In a forked child of an initialised process: terminal.
    Child = 2,
    /// `close` is tearing the runtime down.
    Closed = 3,
}

impl InitState {
    /// The `NRT_STATE_*` symbol name.
    pub const fn name(self) -> &'static str {
        match self {
            InitState::Start => "NRT_STATE_START",
            InitState::Init => "NRT_STATE_INIT",
            InitState::Child => "NRT_STATE_CHILD",
            InitState::Closed => "NRT_STATE_CLOSED",
        }
    }

    const fn from_u8(v: u8) -> Self {
        match v {
            1 => InitState::Init,
            2 => InitState::Child,
            3 => InitState::Closed,
            _ => InitState::Start,
        }
    }

    /// The guard: `Ok` only in [`InitState::Init`]; otherwise the status and message a public
    /// entry returns: START → `NRT_UNINITIALIZED` "NRT uninitialized", CLOSED → `NRT_CLOSED`
    /// "NRT already closed", CHILD → `NRT_FAILURE` "Incompatible runtime state:
    /// NRT_STATE_CHILD".
    pub fn guard(self) -> Result<()> {
        match self {
            InitState::Init => Ok(()),
            InitState::Start => Err(err!(Uninitialized, "NRT uninitialized")),
            InitState::Closed => Err(err!(Closed, "NRT already closed")),
            InitState::Child => Err(err!(Failure, "Incompatible runtime state: {}", self.name())),
        }
    }
}

/// The state word: one atomic byte, readable without any lock (a fork handler may write it).
#[derive(Debug)]
pub struct StateCell(AtomicU8);

impl StateCell {
    /// A cell in [`InitState::Start`].
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self(AtomicU8::new(InitState::Start as u8))
    }

    /// A cell in [`InitState::Start`] (loom's atomics have no `const` constructor).
    #[cfg(loom)]
    pub fn new() -> Self {
        Self(AtomicU8::new(InitState::Start as u8))
    }

    /// The current state.
    #[inline]
    pub fn get(&self) -> InitState {
        InitState::from_u8(self.0.load(Ordering::Acquire))
    }

    /// Sets the state.
    #[inline]
    pub fn set(&self, s: InitState) {
        self.0.store(s as u8, Ordering::Release);
    }
}

impl Default for StateCell {
    fn default() -> Self {
        Self::new()
    }
}

//! `nrt-backend`: one place that chooses and configures the backend for every front end.
//!
//! The `nrt` command (`cli/`) and the C library (`bindings-c/`) both read the same variables
//! through [`Selection::from_vars`] and open the driver it names ([`Selection::open`]) as an
//! [`AnyDriver`] — the simulator's [`SimDriver`](nrt_sim::SimDriver) or the Linux
//! [`LinuxDriver`](nrt_linux::LinuxDriver) behind one [`Driver`](nrt_core::Driver).
//!
//! | variable | values | default |
//! | --- | --- | --- |
//! | `NEURON_RT_BACKEND` | `auto` (the Linux driver when `/dev/neuron0` exists, else none), `sim`, `linux` | per front end ([`FrontEnd::default_backend`]): `sim` for the CLI, the simulator's front end; `auto` for the C library, which stands in for libnrt |
//! | `NEURON_RT_SIM_INSTANCE` | `inf2`, `trn1`, `trn2` | `trn1` (NeuronCore-v2, whose published cost rules the simulator implements) |
//! | `NEURON_RT_SIM_DEVICES` | 1 to 64 | 1 |
//! | `NEURON_RT_SIM_PLUMBING` | `0` refuses NEFFs without a simulator program; `1` runs them in plumbing mode | `1` |
//!
//! An invalid value is an `NRT_INVALID` error naming the variable, whichever backend is
//! chosen. A front end's flags ([`Flags`]) override the variables. What the simulator keeps of
//! each execution's report ([`Reports`](nrt_sim::Reports)) is the front end's choice
//! ([`Selection::with_reports`]), not a variable.
//!
//! ```
//! use nrt_backend::{BackendChoice, FrontEnd, Selection};
//! use nrt_sim::Instance;
//!
//! let s = Selection::from_vars(FrontEnd::CLibrary, &[("NEURON_RT_BACKEND", "sim")]).unwrap();
//! assert_eq!((s.backend, s.instance, s.devices), (BackendChoice::Sim, Instance::Trn1, 1));
//! let driver = s.open().unwrap(); // the simulator: no device needed
//! assert!(driver.as_sim().is_some());
//! ```
#![forbid(unsafe_code)]

mod any;
mod selection;

pub use any::{AnyDriver, AnyError, BackendKind};
pub use selection::{
    BACKEND_VAR, BackendChoice, Flags, FrontEnd, NO_DEVICE_HINT, PLUMBING_VAR, SIM_DEVICES_VAR,
    SIM_INSTANCE_VAR, Selection, linux_device_present, lnc_hint,
};

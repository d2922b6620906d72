//! `nrt-sim`: simulated Neuron devices behind the [`nrt_core::Driver`] trait.
//!
//! A [`SimMachine`] is a configurable instance ([`SimConfig`]: trn1 and inf2 with two
//! NeuronCore-v2 per device; trn2 with eight physical NeuronCore-v3 per device, logical cores
//! of two by default) of one or more devices; each [`SimDriver`] attached to it is what one
//! process's open of the device would be. By default the machine runs in **funtime mode** —
//! the runtime's functional-simulation mode, in which there is no driver to negotiate with and
//! the runtime marks its core reservation locally.
//!
//! Models load and execute on it. Staging a subgraph loads the simulator program its NEFF
//! carries (the member [`nrt_core::neff::SIM_PROGRAM_MEMBER`], see [`neff`]) onto its physical
//! core, with the program's tensors in the device's HBM; an execution runs that program on the
//! cycle-level [`engine`] with the model's inputs and outputs bound to the caller's device
//! tensors. A NEFF without a program (compiler output) runs in **plumbing mode**: it loads and
//! reports its tensors, and executions zero-fill the outputs
//! ([`SimConfig::refuse_plumbing`] refuses such NEFFs instead).
//!
//! Each execution's [`engine::ExecReport`] (ticks, per-engine counters, hazards and, when
//! asked for, the event log) is dropped unless the machine keeps it ([`Reports`],
//! [`SimMachine::set_reports`]): then [`SimMachine::last_report`] gives each physical core's
//! last one.
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
//!
//! Executing a program through the runtime and reading the core's report:
//!
//! ```
//! use nrt_core::tensor::{TensorPlacement, TensorSet};
//! use nrt_core::{FrameworkType, Runtime};
//! use nrt_sim::engine::{DType, kernels};
//! use nrt_sim::{Instance, Reports, SimConfig, SimDriver, SimMachine};
//!
//! let add = kernels::elementwise(kernels::Elementwise::Add, 4, 8, DType::F32).unwrap();
//! let neff = nrt_sim::neff::neff_from_programs("add", &[add]).unwrap();
//! let machine = SimMachine::with_reports(SimConfig::funtime(Instance::Trn1, 1), Reports::Counters);
//! let rt = Runtime::new(SimDriver::attach(&machine));
//! rt.init(FrameworkType::NoFw, "", "", &[]).unwrap();
//! let h = rt.load(&neff, 0, -1).unwrap();
//! let (mut inputs, mut outputs) = (TensorSet::new(), TensorSet::new());
//! for name in ["a", "b"] {
//!     let t = rt.tensor_allocate(TensorPlacement::Device, 0, 128, name).unwrap();
//!     t.write(0, &[0u8; 128]).unwrap();
//!     inputs.add(name, t);
//! }
//! outputs.add("out", rt.tensor_allocate(TensorPlacement::Device, 0, 128, "out").unwrap());
//! rt.execute(h, &inputs, &outputs).unwrap();
//! let staged = rt.model(h).unwrap().staged()[0];
//! let pnc = machine.staged_pnc(staged.handle).unwrap();
//! let report = machine.last_report(pnc).unwrap();
//! assert!(report.ticks > 0 && report.events.is_empty()); // counters only, no event log
//! ```
#![deny(unsafe_code)] // two exceptions: engine/math/fast.rs (the GEMM call), engine/math/fused.rs (SIMD)

mod driver;
pub mod engine;
mod instance;
mod machine;
pub mod neff;

pub use driver::{SimDriver, SimError};
pub use instance::{DriverEmulation, Instance, SimConfig};
pub use machine::{CoreState, Reports, SimMachine, StagedState};

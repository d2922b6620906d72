//! The model record the registry holds, and its I/O tensor metadata.

use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, Ordering};

use crate::driver::StagedModel;
use crate::error::Result;

/// The model state the loader sets on success (libnrt's `READY`, which the unload guard calls
/// "stopped"): settled, no transition in flight. The only state `unload` accepts.
pub const MODEL_STATE_READY: u32 = 4;

/// Longest tensor name, in bytes (`NRT_TENSOR_NAME_MAX` is 256 with the NUL).
pub const MAX_TENSOR_NAME: usize = 255;

/// `nrt_dtype_t`: element types, with the libnrt 2.28+ ("hardware") codes.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Dtype {
    /// `NRT_DTYPE_UNKNOWN` / `NRT_DTYPE_INVALID`.
    Unknown = 0x0,
    /// `NRT_DTYPE_UINT64`.
    Uint64 = 0x1,
    /// `NRT_DTYPE_INT8`.
    Int8 = 0x2,
    /// `NRT_DTYPE_UINT8`.
    Uint8 = 0x3,
    /// `NRT_DTYPE_INT16`.
    Int16 = 0x4,
    /// `NRT_DTYPE_UINT16`.
    Uint16 = 0x5,
    /// `NRT_DTYPE_BFLOAT16`.
    Bfloat16 = 0x6,
    /// `NRT_DTYPE_FLOAT16`.
    Float16 = 0x7,
    /// `NRT_DTYPE_INT32`.
    Int32 = 0x8,
    /// `NRT_DTYPE_UINT32`.
    Uint32 = 0x9,
    /// `NRT_DTYPE_FLOAT32`.
    Float32 = 0xA,
    /// `NRT_DTYPE_FP32R`.
    Fp32r = 0xB,
    /// `NRT_DTYPE_INT64`.
    Int64 = 0xC,
    /// `NRT_DTYPE_FP8_E3`.
    Fp8E3 = 0xD,
    /// `NRT_DTYPE_FP8_E4`.
    Fp8E4 = 0xE,
    /// `NRT_DTYPE_FP8_E5`.
    Fp8E5 = 0xF,
}

impl Dtype {
    /// The `nrt_dtype_t` value.
    pub const fn code(self) -> u32 {
        self as u32
    }

    /// Bytes per element (0 for `Unknown`).
    pub const fn size(self) -> u32 {
        match self {
            Dtype::Unknown => 0,
            Dtype::Int8 | Dtype::Uint8 | Dtype::Fp8E3 | Dtype::Fp8E4 | Dtype::Fp8E5 => 1,
            Dtype::Int16 | Dtype::Uint16 | Dtype::Bfloat16 | Dtype::Float16 => 2,
            Dtype::Int32 | Dtype::Uint32 | Dtype::Float32 | Dtype::Fp32r => 4,
            Dtype::Uint64 | Dtype::Int64 => 8,
        }
    }
}

/// `nrt_tensor_usage_t`.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TensorUsage {
    /// `NRT_TENSOR_USAGE_INPUT`.
    Input = 0,
    /// `NRT_TENSOR_USAGE_OUTPUT`.
    Output = 1,
}

impl TensorUsage {
    /// `"input"` / `"output"`, for messages.
    pub const fn as_str(self) -> &'static str {
        match self {
            TensorUsage::Input => "input",
            TensorUsage::Output => "output",
        }
    }
}

/// One I/O tensor of a model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// Name (at most [`MAX_TENSOR_NAME`] bytes, no NUL).
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// Element type.
    pub dtype: Dtype,
    /// Dimensions (`ndim` = `shape.len()`).
    pub shape: Vec<u32>,
}

impl TensorInfo {
    /// Number of dimensions.
    pub fn ndim(&self) -> u32 {
        self.shape.len() as u32
    }
}

/// A model's inputs and outputs, each ordered by name (byte-wise), as libnrt's `std::map`
/// orders them: index `i` of the accessors is the `i`-th name in that order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IoTable {
    inputs: Vec<TensorInfo>,
    outputs: Vec<TensorInfo>,
}

impl IoTable {
    /// Builds a table, validating names (non-empty, at most 255 bytes, no NUL, unique within
    /// inputs and within outputs) and sorting each side by name.
    pub fn new(mut inputs: Vec<TensorInfo>, mut outputs: Vec<TensorInfo>) -> Result<Self> {
        for (usage, side) in [
            (TensorUsage::Input, &mut inputs),
            (TensorUsage::Output, &mut outputs),
        ] {
            for t in side.iter() {
                if t.name.is_empty() || t.name.len() > MAX_TENSOR_NAME || t.name.contains('\0') {
                    return Err(err!(
                        Invalid,
                        "Invalid {} tensor name of {} bytes: names are 1 to {} bytes without NUL",
                        usage.as_str(),
                        t.name.len(),
                        MAX_TENSOR_NAME
                    ));
                }
            }
            side.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
            if let Some(w) = side
                .windows(2)
                .find(|w| w.first().map(|a| &a.name) == w.get(1).map(|b| &b.name))
            {
                let name = w.first().map_or("", |t| t.name.as_str());
                return Err(err!(
                    Invalid,
                    "Duplicate {} tensor name \"{}\"",
                    usage.as_str(),
                    name
                ));
            }
        }
        Ok(Self { inputs, outputs })
    }

    /// The tensors of one side, in name order.
    pub fn tensors(&self, usage: TensorUsage) -> &[TensorInfo] {
        match usage {
            TensorUsage::Input => &self.inputs,
            TensorUsage::Output => &self.outputs,
        }
    }

    /// The input named `name`.
    pub fn input(&self, name: &str) -> Option<&TensorInfo> {
        self.inputs
            .binary_search_by(|t| t.name.as_bytes().cmp(name.as_bytes()))
            .ok()
            .and_then(|i| self.inputs.get(i))
    }
}

/// A loaded model: what the registry holds for each handle.
#[derive(Debug)]
pub struct Model {
    name: String,
    vnc: u32,
    state: AtomicU32,
    io: IoTable,
    staged: Vec<StagedModel>,
    queued: crate::runtime::QueuedCount,
}

impl Model {
    /// A model record in state READY on absolute logical core `vnc`. `staged` is what the
    /// backend staged for it, one entry per subgraph (empty for a record with nothing on the
    /// device) — the bridge between the model and its per-core device records.
    pub fn new(name: String, vnc: u32, io: IoTable, staged: Vec<StagedModel>) -> Self {
        Self {
            name,
            vnc,
            state: AtomicU32::new(MODEL_STATE_READY),
            io,
            staged,
            queued: crate::runtime::QueuedCount::default(),
        }
    }

    /// The model's name (the NEFF's name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The absolute logical core it is loaded on.
    pub fn vnc(&self) -> u32 {
        self.vnc
    }

    /// The model state (`MODEL_STATE_READY` when settled).
    pub fn state(&self) -> u32 {
        self.state.load(Ordering::Acquire)
    }

    /// Sets the model state (transitions in flight, e.g. a stage or a stop in progress).
    pub fn set_state(&self, state: u32) {
        self.state.store(state, Ordering::Release);
    }

    /// The I/O tensors.
    pub fn io(&self) -> &IoTable {
        &self.io
    }

    /// What the backend staged, one entry per subgraph.
    pub fn staged(&self) -> &[StagedModel] {
        &self.staged
    }

    /// Its queued asynchronous executions.
    pub(crate) fn queued(&self) -> &crate::runtime::QueuedCount {
        &self.queued
    }

    /// Whether the backend runs this model in plumbing mode (no computation).
    pub fn is_plumbing(&self) -> bool {
        self.staged.iter().any(|s| s.plumbing)
    }
}

impl IoTable {
    /// The I/O table of a parsed NEFF.
    pub fn from_neff(neff: &crate::neff::Neff) -> Result<Self> {
        let info = |t: &crate::neff::NeffTensor| TensorInfo {
            name: t.name.clone(),
            size: t.size,
            dtype: t.dtype,
            shape: t.shape.clone(),
        };
        Self::new(
            neff.tensors_of(TensorUsage::Input).map(info).collect(),
            neff.tensors_of(TensorUsage::Output).map(info).collect(),
        )
    }
}

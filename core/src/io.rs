//! The I/O vocabulary of a model: element types, tensor usage, tensor info and the I/O table.
//!
//! This is a leaf module: it imports nothing else of the crate but errors, so the NEFF parser,
//! the model record, the runtime and the backends can all speak it without importing each other.
//!
//! # I/O index
//!
//! A model's inputs and outputs are each ordered by name (byte-wise), as libnrt's `std::map`
//! orders them. A tensor's *I/O index* is its position on its side of that order: input `i` is
//! the `i`-th input name. The index is the currency below the runtime's entry points: names are
//! resolved to indices once per call ([`IoTable::index_of`]), and bindings, async jobs and the
//! backends carry the index.

use core::fmt;
#[cfg(feature = "alloc")]
use core::hash::BuildHasher;

#[cfg(feature = "alloc")]
use alloc::{boxed::Box, string::String, vec::Vec};

#[cfg(feature = "alloc")]
use crate::error::Result;

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

/// `nrt_tensor_usage_t`: which side of a model's I/O a tensor is on. A single value, not a set.
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
    /// Both sides, inputs first.
    pub const BOTH: [TensorUsage; 2] = [TensorUsage::Input, TensorUsage::Output];

    /// `"input"` / `"output"`, for messages.
    pub const fn as_str(self) -> &'static str {
        match self {
            TensorUsage::Input => "input",
            TensorUsage::Output => "output",
        }
    }
}

impl fmt::Display for TensorUsage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One I/O tensor of a model.
#[cfg(feature = "alloc")]
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

#[cfg(feature = "alloc")]
impl TensorInfo {
    /// Number of dimensions.
    pub fn ndim(&self) -> u32 {
        self.shape.len() as u32
    }
}

/// A table with more tensors than this (both sides together) gets a hash index of its names;
/// smaller ones are searched by bisection, which is as fast for them.
#[cfg(feature = "alloc")]
pub const HASH_INDEX_FROM: usize = 32;

/// Name → I/O index for large tables: entries are `index << 1 | side` (side 1 = output).
#[cfg(feature = "alloc")]
#[derive(Clone, Default)]
struct NameIndex {
    table: hashbrown::HashTable<u32>,
    hasher: hashbrown::DefaultHashBuilder,
}

#[cfg(feature = "alloc")]
impl fmt::Debug for NameIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NameIndex")
            .field("entries", &self.table.len())
            .finish()
    }
}

#[cfg(feature = "alloc")]
fn side_bit(usage: TensorUsage) -> u32 {
    match usage {
        TensorUsage::Input => 0,
        TensorUsage::Output => 1,
    }
}

/// A model's inputs and outputs, each ordered by name (byte-wise), as libnrt's `std::map`
/// orders them: index `i` of the accessors is the `i`-th name in that order (the *I/O index*).
#[cfg(feature = "alloc")]
#[derive(Clone, Debug, Default)]
pub struct IoTable {
    /// The inputs, then the outputs, each side in name order (one allocation, and a small
    /// record: the registry holds model records inline).
    tensors: Vec<TensorInfo>,
    /// How many of `tensors` are inputs.
    inputs: u32,
    /// Present for tables of more than [`HASH_INDEX_FROM`] tensors.
    index: Option<Box<NameIndex>>,
}

#[cfg(feature = "alloc")]
impl PartialEq for IoTable {
    fn eq(&self, other: &Self) -> bool {
        self.inputs == other.inputs && self.tensors == other.tensors
    }
}

#[cfg(feature = "alloc")]
impl Eq for IoTable {}

#[cfg(feature = "alloc")]
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
        let n_inputs = inputs.len() as u32;
        let mut tensors = inputs;
        tensors.extend(outputs);
        let mut table = Self {
            tensors,
            inputs: n_inputs,
            index: None,
        };
        if table.tensors.len() > HASH_INDEX_FROM {
            table.index = Some(Box::new(table.build_index()));
        }
        Ok(table)
    }

    fn build_index(&self) -> NameIndex {
        let mut index = NameIndex::default();
        let NameIndex { table, hasher } = &mut index;
        for usage in TensorUsage::BOTH {
            for (i, t) in self.tensors(usage).iter().enumerate() {
                let entry = (i as u32) << 1 | side_bit(usage);
                let hash = hasher.hash_one((side_bit(usage), t.name.as_str()));
                table.insert_unique(hash, entry, |&e| {
                    hasher.hash_one((e & 1, self.entry_name(e)))
                });
            }
        }
        index
    }

    fn entry_name(&self, entry: u32) -> &str {
        let usage = if entry & 1 == 0 {
            TensorUsage::Input
        } else {
            TensorUsage::Output
        };
        self.tensors(usage)
            .get((entry >> 1) as usize)
            .map_or("", |t| t.name.as_str())
    }

    /// The tensors of one side, in name order.
    pub fn tensors(&self, usage: TensorUsage) -> &[TensorInfo] {
        let (inputs, outputs) = self
            .tensors
            .split_at_checked(self.inputs as usize)
            .unwrap_or((&self.tensors, &[]));
        match usage {
            TensorUsage::Input => inputs,
            TensorUsage::Output => outputs,
        }
    }

    /// Number of tensors on one side.
    pub fn len(&self, usage: TensorUsage) -> usize {
        self.tensors(usage).len()
    }

    /// Whether the model has no I/O tensor at all.
    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }

    /// The I/O index of the `usage` tensor called `name`.
    pub fn index_of(&self, usage: TensorUsage, name: &str) -> Option<u32> {
        match &self.index {
            Some(index) => {
                let side = side_bit(usage);
                let hash = index.hasher.hash_one((side, name));
                index
                    .table
                    .find(hash, |&e| e & 1 == side && self.entry_name(e) == name)
                    .map(|&e| e >> 1)
            }
            None => self
                .tensors(usage)
                .binary_search_by(|t| t.name.as_bytes().cmp(name.as_bytes()))
                .ok()
                .map(|i| i as u32),
        }
    }

    /// The `usage` tensor at I/O index `index`.
    pub fn get(&self, usage: TensorUsage, index: u32) -> Option<&TensorInfo> {
        self.tensors(usage).get(index as usize)
    }

    /// The input named `name`.
    pub fn input(&self, name: &str) -> Option<&TensorInfo> {
        self.index_of(TensorUsage::Input, name)
            .and_then(|i| self.get(TensorUsage::Input, i))
    }
}

#[cfg(all(test, feature = "alloc"))]
mod tests {
    use alloc::format;

    use super::*;

    fn info(name: &str, size: u64) -> TensorInfo {
        TensorInfo {
            name: name.into(),
            size,
            dtype: Dtype::Uint8,
            shape: alloc::vec![size as u32],
        }
    }

    #[test]
    fn io_index_is_the_position_in_name_order_small_and_large_tables() {
        for n in [3usize, HASH_INDEX_FROM + 5, 300] {
            let ins: Vec<_> = (0..n)
                .rev()
                .map(|i| info(&format!("in{i:04}"), 4))
                .collect();
            let outs: Vec<_> = (0..n).map(|i| info(&format!("in{i:04}"), 8)).collect();
            let t = IoTable::new(ins, outs).unwrap();
            assert_eq!(t.index.is_some(), 2 * n > HASH_INDEX_FROM);
            for i in 0..n {
                let name = format!("in{i:04}");
                assert_eq!(t.index_of(TensorUsage::Input, &name), Some(i as u32));
                assert_eq!(t.index_of(TensorUsage::Output, &name), Some(i as u32));
                assert_eq!(t.get(TensorUsage::Output, i as u32).unwrap().size, 8);
            }
            assert_eq!(t.index_of(TensorUsage::Input, "nope"), None);
            assert_eq!(t.index_of(TensorUsage::Output, ""), None);
            assert_eq!(t.clone(), t);
        }
    }

    #[test]
    fn a_name_on_one_side_is_not_found_on_the_other() {
        let ins: Vec<_> = (0..40).map(|i| info(&format!("x{i}"), 1)).collect();
        let t = IoTable::new(ins, alloc::vec![info("y", 1)]).unwrap();
        assert_eq!(t.index_of(TensorUsage::Output, "x3"), None);
        assert_eq!(t.index_of(TensorUsage::Input, "y"), None);
        assert_eq!(t.index_of(TensorUsage::Output, "y"), Some(0));
    }
}

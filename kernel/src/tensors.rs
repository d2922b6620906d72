//! HBM tensors: the [`Tensor`] handle and the declarations of a [`Kernel`] (inputs,
//! outputs, constants with their bytes, scratch), checked against the program format's rules.

use core::ops::Deref;
use std::sync::Arc;

use nrt_core::{Error, err};
use nrt_sim::engine::{DType, MAX_NAME_BYTES, MAX_RANK, MAX_TENSOR_BYTES, TensorDecl, TensorKind};

use crate::handle::{Base, Memory, Placement};
use crate::kernel::Kernel;
use crate::view::{View, shape_str};

/// An HBM tensor of a kernel (a program tensor): dereferences to its full [`View`].
#[derive(Clone, Debug)]
pub struct Tensor {
    view: View,
    kind: TensorKind,
}

impl Tensor {
    /// Input, output, constant or scratch.
    pub fn kind(&self) -> TensorKind {
        self.kind
    }

    /// The full view.
    pub fn view(&self) -> &View {
        &self.view
    }
}

impl Deref for Tensor {
    type Target = View;
    fn deref(&self) -> &View {
        &self.view
    }
}

impl Kernel {
    /// Declares an HBM tensor of `kind`. Constants take their bytes from `data`
    /// (little-endian elements, exactly the tensor's size); other kinds take none.
    pub fn tensor(
        &mut self,
        name: &str,
        kind: TensorKind,
        dtype: DType,
        shape: &[usize],
        data: Vec<u8>,
    ) -> Result<Tensor, Error> {
        if name.is_empty() || name.len() > MAX_NAME_BYTES {
            return Err(err!(
                Invalid,
                "tensor name '{name}' must be 1..={MAX_NAME_BYTES} bytes"
            ));
        }
        if self.tensors.iter().any(|t| t.name == name) {
            return Err(err!(Invalid, "tensor '{name}' is already declared"));
        }
        if shape.len() > MAX_RANK {
            return Err(err!(
                Invalid,
                "tensor '{name}': rank {} exceeds {MAX_RANK}",
                shape.len()
            ));
        }
        let size = shape
            .iter()
            .try_fold(dtype.size() as u64, |a, &d| a.checked_mul(d as u64))
            .filter(|&s| s <= MAX_TENSOR_BYTES)
            .ok_or_else(|| {
                err!(
                    Invalid,
                    "tensor '{name}': size exceeds {MAX_TENSOR_BYTES} bytes"
                )
            })?;
        let is_const = kind == TensorKind::Const;
        if is_const && data.len() as u64 != size {
            return Err(err!(
                Invalid,
                "tensor '{name}': constant data is {} bytes, the shape {} of {dtype} needs {size}",
                data.len(),
                shape_str(shape)
            ));
        }
        if !is_const && !data.is_empty() {
            return Err(err!(Invalid, "tensor '{name}': only constants carry data"));
        }
        let id = u32::try_from(self.tensors.len())
            .map_err(|_| err!(Invalid, "tensor '{name}': too many tensors"))?;
        self.tensors.push(TensorDecl {
            name: name.to_owned(),
            kind,
            dtype,
            shape: shape.iter().map(|&d| d as u64).collect(),
            data,
        });
        let base = Base {
            kernel: self.id,
            mem: Memory::Hbm,
            id,
            name: Arc::from(name),
            pitch: 0,
            placement: Placement::default(),
        };
        Ok(Tensor {
            view: View::full(base, dtype, shape),
            kind,
        })
    }

    /// An input tensor (written by the caller before execution).
    pub fn input(&mut self, name: &str, dtype: DType, shape: &[usize]) -> Result<Tensor, Error> {
        self.tensor(name, TensorKind::Input, dtype, shape, Vec::new())
    }

    /// An output tensor (zeroed before each execution, read by the caller after).
    pub fn output(&mut self, name: &str, dtype: DType, shape: &[usize]) -> Result<Tensor, Error> {
        self.tensor(name, TensorKind::Output, dtype, shape, Vec::new())
    }

    /// A constant tensor with its bytes.
    pub fn constant(
        &mut self,
        name: &str,
        dtype: DType,
        shape: &[usize],
        data: Vec<u8>,
    ) -> Result<Tensor, Error> {
        self.tensor(name, TensorKind::Const, dtype, shape, data)
    }

    /// A scratch tensor (device memory, zeroed before each execution).
    pub fn scratch(&mut self, name: &str, dtype: DType, shape: &[usize]) -> Result<Tensor, Error> {
        self.tensor(name, TensorKind::Scratch, dtype, shape, Vec::new())
    }
}

//! Elementwise operations: `tensor_tensor` (VectorE; `engine` may choose GpSimdE, or ScalarE
//! in a format-1.0 kernel; `power` runs on GpSimdE), `tensor_copy` (VectorE; ScalarE or
//! GpSimdE allowed), `scalar_tensor_tensor` and `reciprocal` (VectorE, as in NKI).
//!
//! Operands are SBUF or PSUM tiles with the destination's partition count and elements per
//! partition (their dimensions may differ). Arithmetic is fp32, rounded once to the
//! destination type; int32 when every operand is int32.

use nrt_core::Error;
use nrt_sim::engine::{AluOp, EngineId, Instr, ScalarStep};

use super::operand::Scalar;
use super::{Op, engine_for, on_chip, same_size};
use crate::kernel::Kernel;
use crate::view::View;

const VSG: [EngineId; 3] = [EngineId::Vector, EngineId::Scalar, EngineId::GpSimd];

/// `dst = data1 op data2` (`nki.isa.tensor_tensor`).
#[derive(Clone, Copy, Debug)]
pub struct TensorTensor<'a> {
    /// Destination.
    pub dst: &'a View,
    /// First input.
    pub data1: &'a View,
    /// Second input.
    pub data2: &'a View,
    /// Operation.
    pub op: AluOp,
    /// Engine: VectorE by default (GpSimdE for `power`, which only it runs); GpSimdE for
    /// every operation but the bitvec ones (VectorE only); ScalarE in a format-1.0 kernel
    /// (add, subtract, multiply, maximum).
    pub engine: Option<EngineId>,
}

impl Op for TensorTensor<'_> {
    fn name(&self) -> &'static str {
        "tensor_tensor"
    }

    fn lower(&self, k: &mut Kernel) -> Result<(), Error> {
        let n = self.name();
        let default = if self.op == AluOp::Power {
            EngineId::GpSimd
        } else {
            EngineId::Vector
        };
        let e = engine_for(n, self.engine, default, &VSG)?;
        let out = on_chip(k, self.dst, n, "dst")?;
        let a = on_chip(k, self.data1, n, "data1")?;
        let b = on_chip(k, self.data2, n, "data2")?;
        same_size(n, "data1", self.data1, &a, self.dst, &out)?;
        same_size(n, "data2", self.data2, &b, self.dst, &out)?;
        let ins = Instr::TensorTensor {
            op: self.op,
            a,
            b,
            out,
        };
        k.record(n, e, &[ins])
    }
}

/// `dst = src`, converting the dtype (`nki.isa.tensor_copy`).
#[derive(Clone, Copy, Debug)]
pub struct TensorCopy<'a> {
    /// Destination.
    pub dst: &'a View,
    /// Source.
    pub src: &'a View,
    /// Engine (VectorE by default; ScalarE or GpSimdE allowed, GpSimdE in SBUF only).
    pub engine: Option<EngineId>,
}

impl Op for TensorCopy<'_> {
    fn name(&self) -> &'static str {
        "tensor_copy"
    }

    fn lower(&self, k: &mut Kernel) -> Result<(), Error> {
        let n = self.name();
        let e = engine_for(n, self.engine, EngineId::Vector, &VSG)?;
        let out = on_chip(k, self.dst, n, "dst")?;
        let src = on_chip(k, self.src, n, "src")?;
        same_size(n, "src", self.src, &src, self.dst, &out)?;
        k.record(n, e, &[Instr::TensorCopy { src, out }])
    }
}

/// `dst = (data op0 operand0) op1 operand1` on VectorE, `operand0` a scalar or `[P, 1]`
/// operand and `operand1` a tensor like `data` (`nki.isa.scalar_tensor_tensor`); arithmetic
/// operations only; `data` and `operand1` not both in PSUM.
#[derive(Clone, Copy, Debug)]
pub struct ScalarTensorTensor<'a> {
    /// Destination.
    pub dst: &'a View,
    /// Input.
    pub data: &'a View,
    /// First operation.
    pub op0: AluOp,
    /// Its scalar operand.
    pub operand0: Scalar<'a>,
    /// `operand0 op0 data` instead of `data op0 operand0`.
    pub reverse0: bool,
    /// Second operation.
    pub op1: AluOp,
    /// Its tensor operand, shaped like `data`.
    pub operand1: &'a View,
    /// `operand1 op1 (…)` instead of `(…) op1 operand1`.
    pub reverse1: bool,
}

impl Op for ScalarTensorTensor<'_> {
    fn name(&self) -> &'static str {
        "scalar_tensor_tensor"
    }

    fn lower(&self, k: &mut Kernel) -> Result<(), Error> {
        let n = self.name();
        let out = on_chip(k, self.dst, n, "dst")?;
        let data = on_chip(k, self.data, n, "data")?;
        let data2 = on_chip(k, self.operand1, n, "operand1")?;
        same_size(n, "data", self.data, &data, self.dst, &out)?;
        same_size(n, "operand1", self.operand1, &data2, self.dst, &out)?;
        let operand = self.operand0.lower(k, n, "operand0", out.partitions)?;
        let ins = Instr::ScalarTensorTensor {
            data,
            first: ScalarStep {
                op: self.op0,
                operand,
                reverse: self.reverse0,
            },
            op1: self.op1,
            data2,
            reverse1: self.reverse1,
            out,
        };
        k.record(n, EngineId::Vector, &[ins])
    }
}

/// `dst = 1 / data` on VectorE, correctly rounded fp32 (`nki.isa.reciprocal`).
#[derive(Clone, Copy, Debug)]
pub struct Reciprocal<'a> {
    /// Destination.
    pub dst: &'a View,
    /// Input.
    pub data: &'a View,
}

impl Op for Reciprocal<'_> {
    fn name(&self) -> &'static str {
        "reciprocal"
    }

    fn lower(&self, k: &mut Kernel) -> Result<(), Error> {
        let n = self.name();
        let out = on_chip(k, self.dst, n, "dst")?;
        let src = on_chip(k, self.data, n, "data")?;
        same_size(n, "data", self.data, &src, self.dst, &out)?;
        k.record(n, EngineId::Vector, &[Instr::Reciprocal { src, out }])
    }
}

impl Kernel {
    /// `dst = data1 op data2` on VectorE, or GpSimdE for `power` (`nki.isa.tensor_tensor`).
    pub fn tensor_tensor(
        &mut self,
        dst: &View,
        data1: &View,
        data2: &View,
        op: AluOp,
    ) -> Result<(), Error> {
        self.emit(TensorTensor {
            dst,
            data1,
            data2,
            op,
            engine: None,
        })
    }

    /// `dst = src` with dtype conversion, on VectorE (`nki.isa.tensor_copy`).
    pub fn tensor_copy(&mut self, dst: &View, src: &View) -> Result<(), Error> {
        self.emit(TensorCopy {
            dst,
            src,
            engine: None,
        })
    }

    /// `dst = (data op0 operand0) op1 operand1` on VectorE (`nki.isa.scalar_tensor_tensor`;
    /// the reversed forms through [`ScalarTensorTensor`]).
    pub fn scalar_tensor_tensor<'a>(
        &mut self,
        dst: &'a View,
        data: &'a View,
        op0: AluOp,
        operand0: impl Into<Scalar<'a>>,
        op1: AluOp,
        operand1: &'a View,
    ) -> Result<(), Error> {
        self.emit(ScalarTensorTensor {
            dst,
            data,
            op0,
            operand0: operand0.into(),
            reverse0: false,
            op1,
            operand1,
            reverse1: false,
        })
    }

    /// `dst = 1 / data` on VectorE (`nki.isa.reciprocal`).
    pub fn reciprocal(&mut self, dst: &View, data: &View) -> Result<(), Error> {
        self.emit(Reciprocal { dst, data })
    }
}

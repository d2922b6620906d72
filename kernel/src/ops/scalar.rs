//! `tensor_scalar`: up to two operations, each with a scalar or per-partition operand,
//! `dst = (data op0 operand0) op1 operand1` (`nki.isa.tensor_scalar`), on VectorE by default;
//! ScalarE runs multiply, add, or multiply then add (and, in a format-1.0 kernel, format
//! 1.0's one-operation forms).
//!
//! [`TensorScalar`] is the one-operation form with an immediate (format 1.0's instruction);
//! [`TensorScalarChain`] is NKI's full form. A chain of one unreversed operation with an fp32
//! immediate is recorded as the former, so kernels that use only that stay format 1.0.

use nrt_core::Error;
use nrt_sim::engine::{AluOp, EngineId, Instr, ScalarStep};

use super::operand::Scalar;
use super::{Op, engine_for, on_chip, same_size};
use crate::kernel::Kernel;
use crate::view::View;

const VS: [EngineId; 2] = [EngineId::Vector, EngineId::Scalar];

/// `dst = data op operand` with an fp32 immediate (`nki.isa.tensor_scalar`, one operation).
#[derive(Clone, Copy, Debug)]
pub struct TensorScalar<'a> {
    /// Destination.
    pub dst: &'a View,
    /// Input.
    pub data: &'a View,
    /// Operation.
    pub op: AluOp,
    /// Scalar operand.
    pub operand: f32,
    /// Engine (VectorE by default; ScalarE allowed).
    pub engine: Option<EngineId>,
}

impl Op for TensorScalar<'_> {
    fn name(&self) -> &'static str {
        "tensor_scalar"
    }

    fn lower(&self, k: &mut Kernel) -> Result<(), Error> {
        TensorScalarChain {
            engine: self.engine,
            ..TensorScalarChain::new(self.dst, self.data, self.op, self.operand)
        }
        .lower(k)
    }
}

/// `dst = (data op0 operand0) op1 operand1` (`nki.isa.tensor_scalar`): `op1` optional,
/// each operand an immediate or a `[P, 1]` view, each operation optionally reversed
/// (`operand op x`). Both operations are arithmetic, or both bitvec (int32 tiles, VectorE).
#[derive(Clone, Copy, Debug)]
pub struct TensorScalarChain<'a> {
    /// Destination.
    pub dst: &'a View,
    /// Input.
    pub data: &'a View,
    /// First operation.
    pub op0: AluOp,
    /// Its operand.
    pub operand0: Scalar<'a>,
    /// `operand0 op0 data` instead of `data op0 operand0`.
    pub reverse0: bool,
    /// Optional second operation and its operand.
    pub op1: Option<(AluOp, Scalar<'a>)>,
    /// `operand1 op1 (…)` instead of `(…) op1 operand1`.
    pub reverse1: bool,
    /// Engine: VectorE by default; ScalarE for multiply, add, or multiply then add.
    pub engine: Option<EngineId>,
}

impl<'a> TensorScalarChain<'a> {
    /// `dst = data op0 operand0`, unreversed, on the default engine.
    pub fn new(dst: &'a View, data: &'a View, op0: AluOp, operand0: impl Into<Scalar<'a>>) -> Self {
        Self {
            dst,
            data,
            op0,
            operand0: operand0.into(),
            reverse0: false,
            op1: None,
            reverse1: false,
            engine: None,
        }
    }

    /// Adds the second operation, `(…) op1 operand1`.
    pub fn then(mut self, op1: AluOp, operand1: impl Into<Scalar<'a>>) -> Self {
        self.op1 = Some((op1, operand1.into()));
        self
    }
}

impl Op for TensorScalarChain<'_> {
    fn name(&self) -> &'static str {
        "tensor_scalar"
    }

    fn lower(&self, k: &mut Kernel) -> Result<(), Error> {
        let n = self.name();
        let e = engine_for(n, self.engine, EngineId::Vector, &VS)?;
        let out = on_chip(k, self.dst, n, "dst")?;
        let src = on_chip(k, self.data, n, "data")?;
        same_size(n, "data", self.data, &src, self.dst, &out)?;
        let ins = match (self.operand0, self.reverse0, self.op1) {
            (Scalar::F32(scalar), false, None) => Instr::TensorScalar {
                op: self.op0,
                src,
                scalar,
                out,
            },
            _ => {
                let first = ScalarStep {
                    op: self.op0,
                    operand: self.operand0.lower(k, n, "operand0", out.partitions)?,
                    reverse: self.reverse0,
                };
                let second = match self.op1 {
                    Some((op, s)) => Some(ScalarStep {
                        op,
                        operand: s.lower(k, n, "operand1", out.partitions)?,
                        reverse: self.reverse1,
                    }),
                    None => None,
                };
                Instr::TensorScalarChain {
                    src,
                    out,
                    first,
                    second,
                }
            }
        };
        k.record(n, e, &[ins])
    }
}

impl Kernel {
    /// `dst = data op operand` on VectorE (`nki.isa.tensor_scalar` with one operation);
    /// `operand` an `f32`, an `i32` or a `[P, 1]` view or tile.
    pub fn tensor_scalar<'a>(
        &mut self,
        dst: &'a View,
        data: &'a View,
        op: AluOp,
        operand: impl Into<Scalar<'a>>,
    ) -> Result<(), Error> {
        self.emit(TensorScalarChain::new(dst, data, op, operand))
    }

    /// `dst = (data op0 operand0) op1 operand1` on VectorE (`nki.isa.tensor_scalar` with two
    /// operations; reversed operands and ScalarE through [`TensorScalarChain`]).
    pub fn tensor_scalar_chain<'a>(
        &mut self,
        dst: &'a View,
        data: &'a View,
        op0: AluOp,
        operand0: impl Into<Scalar<'a>>,
        op1: AluOp,
        operand1: impl Into<Scalar<'a>>,
    ) -> Result<(), Error> {
        self.emit(TensorScalarChain::new(dst, data, op0, operand0).then(op1, operand1))
    }
}

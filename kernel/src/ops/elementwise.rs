//! Elementwise operations on VectorE / ScalarE: `tensor_tensor`, `tensor_scalar`,
//! `tensor_copy` (VectorE by default; `engine` may choose ScalarE, the other engine this ISA
//! runs them on) and `activation` (ScalarE, as in NKI).
//!
//! Operands are SBUF or PSUM tiles with the destination's partition count and elements per
//! partition (their dimensions may differ). Arithmetic is fp32, rounded once to the
//! destination type; int32 when every operand is int32.

use nrt_core::Error;
use nrt_sim::engine::{ActFunc, AluOp, Bias, EngineId, Instr};

use super::{Op, engine_for, on_chip, psum_written, require_float, same_size};
use crate::kernel::Kernel;
use crate::sync::Access;
use crate::view::View;

const VS: [EngineId; 2] = [EngineId::Vector, EngineId::Scalar];

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
    /// Engine (VectorE by default; ScalarE allowed).
    pub engine: Option<EngineId>,
}

impl Op for TensorTensor<'_> {
    fn name(&self) -> &'static str {
        "tensor_tensor"
    }

    fn lower(&self, k: &mut Kernel) -> Result<(), Error> {
        let n = self.name();
        let e = engine_for(n, self.engine, EngineId::Vector, &VS)?;
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
        let acc = [
            Access::of_pattern(&a, false),
            Access::of_pattern(&b, false),
            Access::of_pattern(&out, true),
        ];
        psum_written(k, &out);
        k.emit_engine(e, &[ins], &acc);
        Ok(())
    }
}

/// `dst = data op operand` (`nki.isa.tensor_scalar`, one operation).
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
        let n = self.name();
        let e = engine_for(n, self.engine, EngineId::Vector, &VS)?;
        let out = on_chip(k, self.dst, n, "dst")?;
        let src = on_chip(k, self.data, n, "data")?;
        same_size(n, "data", self.data, &src, self.dst, &out)?;
        let ins = Instr::TensorScalar {
            op: self.op,
            src,
            scalar: self.operand,
            out,
        };
        let acc = [
            Access::of_pattern(&src, false),
            Access::of_pattern(&out, true),
        ];
        psum_written(k, &out);
        k.emit_engine(e, &[ins], &acc);
        Ok(())
    }
}

/// `dst = src`, converting the dtype (`nki.isa.tensor_copy`).
#[derive(Clone, Copy, Debug)]
pub struct TensorCopy<'a> {
    /// Destination.
    pub dst: &'a View,
    /// Source.
    pub src: &'a View,
    /// Engine (VectorE by default; ScalarE allowed).
    pub engine: Option<EngineId>,
}

impl Op for TensorCopy<'_> {
    fn name(&self) -> &'static str {
        "tensor_copy"
    }

    fn lower(&self, k: &mut Kernel) -> Result<(), Error> {
        let n = self.name();
        let e = engine_for(n, self.engine, EngineId::Vector, &VS)?;
        let out = on_chip(k, self.dst, n, "dst")?;
        let src = on_chip(k, self.src, n, "src")?;
        same_size(n, "src", self.src, &src, self.dst, &out)?;
        let acc = [
            Access::of_pattern(&src, false),
            Access::of_pattern(&out, true),
        ];
        psum_written(k, &out);
        k.emit_engine(e, &[Instr::TensorCopy { src, out }], &acc);
        Ok(())
    }
}

/// The bias of an [`Activation`]: none, one value, or one value per partition (a `[P, 1]`
/// view with the input's partitions).
#[derive(Clone, Copy, Debug)]
pub enum ActBias<'a> {
    /// No bias (0).
    None,
    /// The same value for every element.
    Scalar(f32),
    /// One value per partition.
    Tile(&'a View),
}

impl From<f32> for ActBias<'_> {
    fn from(v: f32) -> Self {
        ActBias::Scalar(v)
    }
}

impl<'a> From<&'a View> for ActBias<'a> {
    fn from(v: &'a View) -> Self {
        ActBias::Tile(v)
    }
}

impl<'a> From<&'a crate::tiles::Tile> for ActBias<'a> {
    fn from(v: &'a crate::tiles::Tile) -> Self {
        ActBias::Tile(v.view())
    }
}

/// `dst = op(data · scale + bias)` on ScalarE (`nki.isa.activation`).
#[derive(Clone, Copy, Debug)]
pub struct Activation<'a> {
    /// Destination (float).
    pub dst: &'a View,
    /// Function.
    pub op: ActFunc,
    /// Input (float).
    pub data: &'a View,
    /// Bias.
    pub bias: ActBias<'a>,
    /// Scale.
    pub scale: f32,
}

impl Op for Activation<'_> {
    fn name(&self) -> &'static str {
        "activation"
    }

    fn lower(&self, k: &mut Kernel) -> Result<(), Error> {
        let n = self.name();
        let out = on_chip(k, self.dst, n, "dst")?;
        let src = on_chip(k, self.data, n, "data")?;
        same_size(n, "data", self.data, &src, self.dst, &out)?;
        require_float(self.data, n, "data")?;
        require_float(self.dst, n, "dst")?;
        let mut acc = vec![Access::of_pattern(&src, false)];
        let bias = match self.bias {
            ActBias::None => Bias::Imm(0.0),
            ActBias::Scalar(v) => Bias::Imm(v),
            ActBias::Tile(b) => {
                let ap = on_chip(k, b, n, "bias")?;
                require_float(b, n, "bias")?;
                if ap.partitions != out.partitions || ap.free_elems() != 1 {
                    return Err(nrt_core::err!(
                        Invalid,
                        "{n}: bias {} must be [{}, 1] (one value per partition of dst)",
                        b.describe(),
                        out.partitions
                    ));
                }
                acc.push(Access::of_pattern(&ap, false));
                Bias::PerPartition(ap)
            }
        };
        acc.push(Access::of_pattern(&out, true));
        let ins = Instr::Activation {
            func: self.op,
            src,
            out,
            scale: self.scale,
            bias,
        };
        psum_written(k, &out);
        k.emit_engine(EngineId::Scalar, &[ins], &acc);
        Ok(())
    }
}

impl Kernel {
    /// `dst = data1 op data2` on VectorE (`nki.isa.tensor_tensor`).
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

    /// `dst = data op operand` on VectorE (`nki.isa.tensor_scalar`).
    pub fn tensor_scalar(
        &mut self,
        dst: &View,
        data: &View,
        op: AluOp,
        operand: f32,
    ) -> Result<(), Error> {
        self.emit(TensorScalar {
            dst,
            data,
            op,
            operand,
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

    /// `dst = op(data · scale + bias)` on ScalarE (`nki.isa.activation`); `bias` is
    /// `ActBias::None`, an `f32` or a `[P, 1]` tile view.
    pub fn activation<'a>(
        &mut self,
        dst: &View,
        op: ActFunc,
        data: &View,
        bias: impl Into<ActBias<'a>>,
        scale: f32,
    ) -> Result<(), Error> {
        self.emit(Activation {
            dst,
            op,
            data,
            bias: bias.into(),
            scale,
        })
    }
}

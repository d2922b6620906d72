//! ONNX's element-wise operators that are not one instruction, over HBM views of any rank with
//! NumPy broadcasting (the tiling of the `nary` module: matching blocks of every operand,
//! loads, compute and stores of consecutive blocks overlapping):
//!
//! * [`unary`] — [`Unary`]: `Neg`, `Sign`, `LeakyRelu`, `Elu`, `Selu`, `HardSigmoid`,
//!   `HardSwish`, `Clip`, `Shrink`, `Softsign` (the others — `Relu`, `Sigmoid`, `Tanh`,
//!   `Exp`, `Log`, `Sqrt`, `Abs`, `Reciprocal`, `Erf`, `Gelu`, `Softplus` — are one
//!   [`ActFn`] of [`activation`](super::activation));
//! * [`binary_any`] — `out = a op b` for every [`AluOp`], any rank (`Pow` runs on GpSimdE,
//!   the only engine with `power`);
//! * [`variadic`] — `Sum`, `Max`, `Min`, `Mean` of one or more broadcasting inputs;
//! * [`prelu`] — `PRelu` with a broadcasting slope;
//! * [`where_`] — `Where(cond, a, b)`, an exact bit select.
//!
//! # Order of operations (fp32 unless stated; every step one rounding; the last step writes
//! `out`'s dtype)
//!
//! | op | steps |
//! |---|---|
//! | Neg | `x · (−1)` (exact) |
//! | Sign | `(x > 0) − (x < 0)`; NaN gives 0 (ONNX: NaN) |
//! | LeakyRelu(α) | `max(x, 0) + min(x, 0)·α` |
//! | PRelu | `max(x, 0) + min(x, 0)·slope` |
//! | Elu(α) | `e = exp(min(x, 0))` (ScalarE), `max(x, 0) + (e − 1)·α` |
//! | Selu(α, γ) | `e = exp(min(x, 0))`, `(max(x, 0) + (e·α − α))·γ` |
//! | HardSigmoid(α, β) | `min(max(x·α + β, 0), 1)` (exact fp32 sequence) |
//! | HardSwish | `x · HardSigmoid(1/6, 1/2)` |
//! | Clip(lo, hi) | `min(max(x, lo), hi)` (maximumNumber: a NaN gives `lo`, ONNX: NaN) |
//! | Shrink(λ, b) | `x − b` where `x > λ`, `x + b` where `x < −λ`, else +0, selected on the bits |
//! | Softsign | `x / (|x| + 1)` |
//! | Sum/Max/Min | left fold `((x₀ op x₁) op x₂) …`; Mean: the sum ÷ n |
//! | Where | `b ^ ((a ^ b) & m)` on the bit patterns, `m` all ones where `cond ≠ 0` |
//!
//! NaN: the engines' maximum and minimum are IEEE maximumNumber / minimumNumber, so the
//! forms built on `max(x, 0)` / `min(x, 0)` (LeakyRelu, PRelu, Elu, Selu, Clip, HardSigmoid)
//! turn a NaN input into a number (0, or `lo` for Clip) where ONNX runtimes propagate it.
//!
//! `exp` is the ISA's (within 1 ULP); everything else is IEEE arithmetic, so the tests check
//! the results bit for bit (Elu / Selu against the simulator's documented exp, bounded).

use nrt_core::{Error, err};
use nrt_sim::engine::{ActFn, AluOp, DType};

use super::nary::{Block, MapSpec, map, retype};
use crate::kernel::Kernel;
use crate::ops::{Activation, ScalarTensorTensor, TensorScalarChain, TensorTensor};
use crate::view::View;

/// An ONNX unary operator built from several instructions (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Unary {
    /// `−x`.
    Neg,
    /// −1, 0 or 1.
    Sign,
    /// `x` for `x ≥ 0`, `α·x` otherwise.
    LeakyRelu {
        /// Slope below 0.
        alpha: f32,
    },
    /// `x` for `x ≥ 0`, `α·(eˣ − 1)` otherwise.
    Elu {
        /// ONNX default 1.
        alpha: f32,
    },
    /// `γ·x` for `x > 0`, `γ·(α·eˣ − α)` otherwise.
    Selu {
        /// ONNX default 1.67326319217681884765625.
        alpha: f32,
        /// ONNX default 1.05070102214813232421875.
        gamma: f32,
    },
    /// `max(0, min(1, α·x + β))`.
    HardSigmoid {
        /// ONNX default 0.2.
        alpha: f32,
        /// ONNX default 0.5.
        beta: f32,
    },
    /// `x · HardSigmoid(1/6, 1/2)(x)`.
    HardSwish,
    /// `min(max(x, lo), hi)` (±∞ for an absent bound).
    Clip {
        /// Lower bound.
        lo: f32,
        /// Upper bound.
        hi: f32,
    },
    /// `x − bias` where `x > λ`, `x + bias` where `x < −λ`, 0 elsewhere.
    Shrink {
        /// ONNX default 0.5.
        lambd: f32,
        /// ONNX default 0.
        bias: f32,
    },
    /// `x / (1 + |x|)`.
    Softsign,
}

fn chain(
    k: &mut Kernel,
    dst: &View,
    src: &View,
    (op0, s0): (AluOp, f32),
    second: Option<(AluOp, f32)>,
) -> Result<(), Error> {
    let mut c = TensorScalarChain::new(dst, src, op0, s0);
    if let Some((op1, s1)) = second {
        c = c.then(op1, s1);
    }
    k.emit(c)
}

/// `dst = (data op0 s) op1 t` (VectorE), `reverse1`: `t op1 (data op0 s)`.
#[allow(clippy::too_many_arguments)]
fn stt(
    k: &mut Kernel,
    dst: &View,
    data: &View,
    op0: AluOp,
    s: f32,
    op1: AluOp,
    t: &View,
    reverse1: bool,
) -> Result<(), Error> {
    k.emit(ScalarTensorTensor {
        dst,
        data,
        op0,
        operand0: s.into(),
        reverse0: false,
        op1,
        operand1: t,
        reverse1,
    })
}

fn tt(k: &mut Kernel, dst: &View, a: &View, b: &View, op: AluOp) -> Result<(), Error> {
    k.emit(TensorTensor {
        dst,
        data1: a,
        data2: b,
        op,
        engine: None,
    })
}

fn float_in_out(f: &str, x: &View, out: &View) -> Result<(), Error> {
    for (v, role) in [(x, "x"), (out, "out")] {
        if !v.dtype().is_float() {
            return Err(err!(
                Invalid,
                "{f}: {role} {} must have a float dtype",
                v.describe()
            ));
        }
    }
    Ok(())
}

fn same_shape(f: &str, x: &View, out: &View) -> Result<(), Error> {
    if x.shape() != out.shape() {
        return Err(err!(
            Invalid,
            "{f}: out {} must have x {}'s shape",
            out.describe(),
            x.describe()
        ));
    }
    Ok(())
}

/// Emits `out = op(x)` element-wise (see the module documentation): `x` and `out` HBM views
/// of one shape (any rank), float dtypes.
pub fn unary(k: &mut Kernel, out: &View, x: &View, op: Unary) -> Result<(), Error> {
    let f = "unary";
    float_in_out(f, x, out)?;
    same_shape(f, x, out)?;
    let spec = MapSpec {
        name: f,
        load: vec![DType::F32],
        out_tile: DType::F32,
        store_as: DType::F32,
    };
    map(k, &spec, out, &[x], &mut |k, b: &Block| {
        let (o, x, [t0, t1]) = (&b.out, &b.ins[0], &b.tmp);
        match op {
            Unary::Neg => chain(k, o, x, (AluOp::Mul, -1.0), None),
            Unary::Sign => {
                chain(k, t0, x, (AluOp::Greater, 0.0), None)?;
                stt(k, o, x, AluOp::Less, 0.0, AluOp::Sub, t0, true)
            }
            Unary::LeakyRelu { alpha } => {
                chain(k, t0, x, (AluOp::Min, 0.0), Some((AluOp::Mul, alpha)))?;
                stt(k, o, x, AluOp::Max, 0.0, AluOp::Add, t0, false)
            }
            Unary::Elu { alpha } => {
                chain(k, t0, x, (AluOp::Min, 0.0), None)?;
                k.emit(Activation::new(t0, ActFn::Exp, t0))?;
                chain(k, t0, t0, (AluOp::Sub, 1.0), Some((AluOp::Mul, alpha)))?;
                stt(k, o, x, AluOp::Max, 0.0, AluOp::Add, t0, false)
            }
            Unary::Selu { alpha, gamma } => {
                chain(k, t0, x, (AluOp::Min, 0.0), None)?;
                k.emit(Activation::new(t0, ActFn::Exp, t0))?;
                chain(k, t0, t0, (AluOp::Mul, alpha), Some((AluOp::Sub, alpha)))?;
                stt(k, t1, x, AluOp::Max, 0.0, AluOp::Add, t0, false)?;
                chain(k, o, t1, (AluOp::Mul, gamma), None)
            }
            Unary::HardSigmoid { alpha, beta } => {
                chain(k, t0, x, (AluOp::Mul, alpha), Some((AluOp::Add, beta)))?;
                chain(k, o, t0, (AluOp::Max, 0.0), Some((AluOp::Min, 1.0)))
            }
            Unary::HardSwish => {
                chain(k, t0, x, (AluOp::Mul, 1.0 / 6.0), Some((AluOp::Add, 0.5)))?;
                chain(k, t0, t0, (AluOp::Max, 0.0), Some((AluOp::Min, 1.0)))?;
                tt(k, o, x, t0, AluOp::Mul)
            }
            Unary::Clip { lo, hi } => chain(k, o, x, (AluOp::Max, lo), Some((AluOp::Min, hi))),
            Unary::Shrink { lambd, bias } => {
                let (m, a0, a1) = (
                    retype(o, DType::I32),
                    retype(t0, DType::I32),
                    retype(t1, DType::I32),
                );
                chain(k, &m, x, (AluOp::Greater, lambd), Some((AluOp::Mul, -1.0)))?;
                chain(k, t0, x, (AluOp::Sub, bias), None)?;
                tt(k, &a0, &a0, &m, AluOp::BitwiseAnd)?;
                chain(k, &m, x, (AluOp::Less, -lambd), Some((AluOp::Mul, -1.0)))?;
                chain(k, t1, x, (AluOp::Add, bias), None)?;
                tt(k, &a1, &a1, &m, AluOp::BitwiseAnd)?;
                tt(k, &m, &a0, &a1, AluOp::BitwiseOr)
            }
            Unary::Softsign => {
                k.emit(Activation::new(t0, ActFn::Abs, x))?;
                stt(k, o, t0, AluOp::Add, 1.0, AluOp::Divide, x, true)
            }
        }
    })
}

/// Emits `out = a op b` with NumPy broadcasting, any rank (see the module documentation):
/// operands read in their own dtypes, fp32 arithmetic unless all are int32, one rounding to
/// `out`'s dtype; `power` on GpSimdE.
pub fn binary_any(k: &mut Kernel, out: &View, a: &View, b: &View, op: AluOp) -> Result<(), Error> {
    let spec = MapSpec {
        name: "binary",
        load: vec![a.dtype(), b.dtype()],
        out_tile: out.dtype(),
        store_as: out.dtype(),
    };
    map(k, &spec, out, &[a, b], &mut |k, blk: &Block| {
        tt(k, &blk.out, &blk.ins[0], &blk.ins[1], op)
    })
}

/// A variadic ONNX reduction of tensors: `Sum`, `Max`, `Min`, `Mean`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variadic {
    /// Σ.
    Sum,
    /// Maximum (maximumNumber).
    Max,
    /// Minimum (minimumNumber).
    Min,
    /// Σ ÷ n.
    Mean,
}

/// Emits `out = x₀ op x₁ op …` (left to right; see the module documentation): one or more
/// HBM views broadcasting to `out`'s shape; int32 arithmetic when every operand is int32,
/// fp32 otherwise.
pub fn variadic(k: &mut Kernel, out: &View, ins: &[&View], op: Variadic) -> Result<(), Error> {
    let f = "variadic";
    if ins.is_empty() {
        return Err(err!(Invalid, "{f}: needs at least one input"));
    }
    let int = out.dtype() == DType::I32 && ins.iter().all(|v| v.dtype() == DType::I32);
    let acc = if int { DType::I32 } else { DType::F32 };
    let alu = match op {
        Variadic::Sum | Variadic::Mean => AluOp::Add,
        Variadic::Max => AluOp::Max,
        Variadic::Min => AluOp::Min,
    };
    let spec = MapSpec {
        name: f,
        load: vec![acc; ins.len()],
        out_tile: acc,
        store_as: acc,
    };
    let n = ins.len();
    map(k, &spec, out, ins, &mut |k, b: &Block| {
        let t = retype(&b.tmp[0], acc);
        let mean = op == Variadic::Mean;
        if n == 1 {
            return if mean {
                chain(k, &b.out, &b.ins[0], (AluOp::Divide, 1.0), None)
            } else {
                k.tensor_copy(&b.out, &b.ins[0])
            };
        }
        let mut prev = b.ins[0].clone();
        for i in 1..n {
            let last = i == n - 1 && !mean;
            let dst = if last { &b.out } else { &t };
            tt(k, dst, &prev, &b.ins[i], alu)?;
            prev = dst.clone();
        }
        if mean {
            let d = if int {
                crate::ops::Scalar::I32(i32::try_from(n).unwrap_or(i32::MAX))
            } else {
                crate::ops::Scalar::F32(n as f32)
            };
            k.emit(TensorScalarChain::new(&b.out, &t, AluOp::Divide, d))?;
        }
        Ok(())
    })
}

/// Emits `out = PRelu(x, slope)`: `max(x, 0) + min(x, 0)·slope`, `slope` broadcasting to
/// `x`'s shape (ONNX's unidirectional broadcast); float dtypes.
pub fn prelu(k: &mut Kernel, out: &View, x: &View, slope: &View) -> Result<(), Error> {
    let f = "prelu";
    float_in_out(f, x, out)?;
    same_shape(f, x, out)?;
    let spec = MapSpec {
        name: f,
        load: vec![DType::F32, DType::F32],
        out_tile: DType::F32,
        store_as: DType::F32,
    };
    map(k, &spec, out, &[x, slope], &mut |k, b: &Block| {
        let (x, s, t0) = (&b.ins[0], &b.ins[1], &b.tmp[0]);
        chain(k, t0, x, (AluOp::Min, 0.0), None)?;
        tt(k, t0, t0, s, AluOp::Mul)?;
        stt(k, &b.out, x, AluOp::Max, 0.0, AluOp::Add, t0, false)
    })
}

/// Emits `out = cond ? a : b` element-wise with broadcasting (ONNX `Where`): `cond` any
/// dtype (true where ≠ 0; NaN is true), `a`, `b` and `out` one dtype. The selection is on
/// the bit patterns (`b ^ ((a ^ b) & m)`, VectorE), so every value — ±0, ±∞, NaN payloads
/// (for 2-byte types: through fp32, exact) — comes through unchanged.
pub fn where_(k: &mut Kernel, out: &View, cond: &View, a: &View, b: &View) -> Result<(), Error> {
    let f = "where";
    if a.dtype() != out.dtype() || b.dtype() != out.dtype() {
        return Err(err!(
            Invalid,
            "{f}: a {} and b {} must have out {}'s dtype",
            a.describe(),
            b.describe(),
            out.describe()
        ));
    }
    let wide = out.dtype().size() == 4;
    let (av, bv) = if wide {
        (retype(a, DType::I32), retype(b, DType::I32))
    } else {
        (a.clone(), b.clone())
    };
    let ld = if wide { DType::I32 } else { DType::F32 };
    let store = match out.dtype() {
        DType::I32 => DType::I32,
        _ => DType::F32,
    };
    let cond_dt = if cond.dtype() == DType::I32 {
        DType::I32
    } else {
        DType::F32
    };
    let spec = MapSpec {
        name: f,
        load: vec![cond_dt, ld, ld],
        out_tile: DType::I32,
        store_as: store,
    };
    let out_v = if wide {
        retype(out, store)
    } else {
        out.clone()
    };
    map(
        k,
        &spec,
        &out_v,
        &[cond, &av, &bv],
        &mut |k, blk: &Block| {
            let m = retype(&blk.tmp[0], DType::I32);
            let (x, y) = (
                retype(&blk.ins[1], DType::I32),
                retype(&blk.ins[2], DType::I32),
            );
            k.emit(TensorScalarChain {
                reverse1: true,
                ..TensorScalarChain::new(&m, &blk.ins[0], AluOp::NotEqual, 0.0)
                    .then(AluOp::Sub, 0.0)
            })?;
            let d = &retype(&blk.tmp[1], DType::I32);
            tt(k, d, &x, &y, AluOp::BitwiseXor)?;
            tt(k, d, d, &m, AluOp::BitwiseAnd)?;
            tt(k, &blk.out, d, &y, AluOp::BitwiseXor)
        },
    )
}

/// Emits `out = Cast(x)` (ONNX): between fp32, bf16, fp16 and int32. Float to int32
/// truncates toward zero as ONNX does (`|x|`, rounded to nearest even, less one where that
/// went up, the sign put back; saturating at the int32 range, NaN → 0); every other pair is
/// [`activation::copy`](super::activation::copy)'s conversion (nearest even, exact where
/// representable).
pub fn cast(k: &mut Kernel, out: &View, x: &View) -> Result<(), Error> {
    if !(x.dtype().is_float() && out.dtype() == DType::I32) {
        return super::activation::copy(k, out, x);
    }
    same_shape("cast", x, out)?;
    let spec = MapSpec {
        name: "cast",
        load: vec![DType::F32],
        out_tile: DType::I32,
        store_as: DType::I32,
    };
    map(k, &spec, out, &[x], &mut |k, b: &Block| {
        let (x, o, [t0, t1]) = (&b.ins[0], &b.out, &b.tmp);
        stt(k, t0, x, AluOp::Mul, -1.0, AluOp::Max, x, false)?;
        k.tensor_copy(o, t0)?;
        k.tensor_copy(t1, o)?;
        tt(k, o, t1, t0, AluOp::Greater)?;
        tt(k, t1, t1, o, AluOp::Sub)?;
        chain(k, t0, x, (AluOp::Less, 0.0), Some((AluOp::Mul, -2.0)))?;
        stt(k, o, t0, AluOp::Add, 1.0, AluOp::Mul, t1, false)
    })
}

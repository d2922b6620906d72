//! Row kernels of the element-wise instructions: the operation (an [`AluOp`] step or an
//! activation function) is chosen once per row and the element loop runs with it fixed, so
//! the common operations compile to a straight loop without per-element dispatch. Each arm
//! computes exactly what [`AluOp::eval_f32`] / [`activate`] compute for that operation (they
//! are called with the operation constant), so results are the same bit for bit.

use crate::engine::isa::{ActFn, AluOp, activate};

/// `u ← u op s` (`u ← s op u` when `reverse`) on every element of `row`.
pub(super) fn step_row(op: AluOp, reverse: bool, row: &mut [f32], s: f32) {
    #[inline(always)]
    fn go(row: &mut [f32], s: f32, reverse: bool, f: impl Fn(f32, f32) -> f32) {
        if reverse {
            row.iter_mut().for_each(|u| *u = f(s, *u));
        } else {
            row.iter_mut().for_each(|u| *u = f(*u, s));
        }
    }
    match op {
        AluOp::Add => go(row, s, reverse, |a, b| AluOp::Add.eval_f32(a, b)),
        AluOp::Sub => go(row, s, reverse, |a, b| AluOp::Sub.eval_f32(a, b)),
        AluOp::Mul => go(row, s, reverse, |a, b| AluOp::Mul.eval_f32(a, b)),
        AluOp::Max => go(row, s, reverse, |a, b| AluOp::Max.eval_f32(a, b)),
        AluOp::Min => go(row, s, reverse, |a, b| AluOp::Min.eval_f32(a, b)),
        AluOp::Divide => go(row, s, reverse, |a, b| AluOp::Divide.eval_f32(a, b)),
        _ => go(row, s, reverse, |a, b| op.eval_f32(a, b)),
    }
}

/// `u ← activate(func, u·s + b)` on every element of `row` ([`activate`]'s result is
/// already canonical: no further NaN canonicalisation).
pub(super) fn activate_row(func: ActFn, row: &mut [f32], s: f32, b: f32) {
    #[inline(always)]
    fn go(row: &mut [f32], s: f32, b: f32, f: impl Fn(f32) -> f32) {
        row.iter_mut().for_each(|u| *u = f(*u * s + b));
    }
    match func {
        ActFn::Exp => go(row, s, b, |t| activate(ActFn::Exp, t)),
        ActFn::Identity => go(row, s, b, |t| activate(ActFn::Identity, t)),
        ActFn::Square => go(row, s, b, |t| activate(ActFn::Square, t)),
        ActFn::Rsqrt => go(row, s, b, |t| activate(ActFn::Rsqrt, t)),
        ActFn::Relu => go(row, s, b, |t| activate(ActFn::Relu, t)),
        _ => go(row, s, b, |t| activate(func, t)),
    }
}

//! Row kernels of the element-wise instructions: the operation (an [`AluOp`] step or an
//! activation function) is chosen once per row and the element loop runs with it fixed, so
//! the common operations compile to a straight loop without per-element dispatch. Each arm
//! computes exactly what [`AluOp::eval_f32`] / [`activate`] compute for that operation (they
//! are called with the operation constant), so results are the same bit for bit.

use crate::engine::isa::{ActFn, AluOp, activate};
use crate::engine::math::exp_f32_x4;

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

/// `u ← u op v` element by element over `x` and `y` (the shorter length).
pub(super) fn binary_rows(op: AluOp, x: &mut [f32], y: &[f32]) {
    #[inline(always)]
    fn go(x: &mut [f32], y: &[f32], f: impl Fn(f32, f32) -> f32) {
        x.iter_mut().zip(y).for_each(|(u, &v)| *u = f(*u, v));
    }
    match op {
        AluOp::Add => go(x, y, |a, b| AluOp::Add.eval_f32(a, b)),
        AluOp::Sub => go(x, y, |a, b| AluOp::Sub.eval_f32(a, b)),
        AluOp::Mul => go(x, y, |a, b| AluOp::Mul.eval_f32(a, b)),
        AluOp::Max => go(x, y, |a, b| AluOp::Max.eval_f32(a, b)),
        AluOp::Min => go(x, y, |a, b| AluOp::Min.eval_f32(a, b)),
        _ => go(x, y, |a, b| op.eval_f32(a, b)),
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
        ActFn::Exp => {
            // Four elements at a time, their `exp` polynomials interleaved (the same bits).
            let mut quads = row.chunks_exact_mut(4);
            for q in &mut quads {
                let t = [q[0] * s + b, q[1] * s + b, q[2] * s + b, q[3] * s + b];
                q.copy_from_slice(&exp_f32_x4(t));
            }
            go(quads.into_remainder(), s, b, |t| activate(ActFn::Exp, t));
        }
        ActFn::Identity => go(row, s, b, |t| activate(ActFn::Identity, t)),
        ActFn::Square => go(row, s, b, |t| activate(ActFn::Square, t)),
        ActFn::Rsqrt => go(row, s, b, |t| activate(ActFn::Rsqrt, t)),
        ActFn::Relu => go(row, s, b, |t| activate(ActFn::Relu, t)),
        _ => go(row, s, b, |t| activate(func, t)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The four-lane `exp` gives the scalar `activate`'s bits on every lane, across the fast
    /// path's bounds (±690), the clamps (709, −745), NaN, zeros and a dense sweep.
    #[test]
    fn exp_row_matches_scalar_activate_bit_for_bit() {
        let mut xs: Vec<f32> = (-8000..8000).map(|i| i as f32 * 0.0931).collect();
        xs.extend([
            690.0,
            -690.0,
            690.0001,
            -690.0001,
            709.0,
            709.5,
            -745.0,
            -746.0,
            0.0,
            -0.0,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1e-40,
            88.72,
            -103.97,
        ]);
        for (s, b) in [(1.0f32, 0.0f32), (-1.0, 0.5), (0.37, -2.0)] {
            // Each value in each lane position and with a ragged tail.
            for shift in 0..4 {
                let mut row: Vec<f32> = xs.iter().copied().skip(shift).collect();
                let want: Vec<u32> = row
                    .iter()
                    .map(|&u| activate(ActFn::Exp, u * s + b).to_bits())
                    .collect();
                activate_row(ActFn::Exp, &mut row, s, b);
                let got: Vec<u32> = row.iter().map(|v| v.to_bits()).collect();
                assert_eq!(got, want, "scale {s}, bias {b}, shift {shift}");
            }
        }
    }
}

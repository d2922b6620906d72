//! Functional effects of the format-1.1 elementwise instructions — tensor–scalar chains,
//! scalar–tensor–tensor, `Activate` (with its optional reduction), `Reciprocal` and the
//! tensor–tensor scan — and the dispatch of every format-1.1 instruction to its effect.
//!
//! Arithmetic is binary32 ([`AluOp::eval_f32`]: one rounding per operation, canonical NaN);
//! when every tensor operand is int32 the tensor–scalar and scalar–tensor–tensor forms compute
//! in int32 instead (as format 1.0's elementwise instructions do).

use super::Executor;
use super::effects::{all_int, gather_f32, gather_i32, mem, mem_mut, scatter_f32, scatter_i32};
use super::rowops::{activate_row, step_row};
use crate::engine::dtype::{DType, f32_to_i32};
use crate::engine::isa::{AluOp, Bias, Instr, Operand, max_num};
use crate::engine::memory::OnChip;
use crate::engine::nan::canon;

impl Executor<'_, '_> {
    /// Applies a format-1.1 data-path instruction.
    pub(super) fn apply_1_1(&mut self, ins: Instr) {
        let sbuf = &mut *self.env.sbuf;
        let psum = &mut *self.env.psum;
        match ins {
            Instr::TensorScalarChain {
                src,
                out,
                first,
                second,
            } => {
                let parts = usize::from(out.partitions);
                let f = out.free_elems() as usize;
                let ops = [Some(first), second];
                let mut dts = vec![src.dtype, out.dtype];
                dts.extend(
                    ops.iter()
                        .flatten()
                        .filter_map(|s| s.operand.pattern())
                        .map(|a| a.dtype),
                );
                if all_int(&dts) {
                    let mut x = Vec::new();
                    gather_i32(mem(sbuf, psum, src.space), &src, &mut x);
                    let s: Vec<Vec<i32>> = ops
                        .iter()
                        .flatten()
                        .map(|st| operand_i32(sbuf, psum, &st.operand, parts))
                        .collect();
                    for (p, row) in x.chunks_mut(f.max(1)).enumerate() {
                        for u in row.iter_mut() {
                            for (st, sv) in ops.iter().flatten().zip(&s) {
                                *u = st.i32(*u, sv.get(p).copied().unwrap_or(0));
                            }
                        }
                    }
                    scatter_i32(mem_mut(sbuf, psum, out.space), &out, &x);
                } else {
                    let mut x = Vec::new();
                    gather_f32(mem(sbuf, psum, src.space), &src, &mut x);
                    let s: Vec<Vec<f32>> = ops
                        .iter()
                        .flatten()
                        .map(|st| operand_f32(sbuf, psum, &st.operand, parts))
                        .collect();
                    let at = |i: usize, p: usize| {
                        s.get(i).and_then(|v| v.get(p)).copied().unwrap_or(0.0)
                    };
                    // The first step, then the second, on each element: the steps are
                    // element-wise, so the first over the row and then the second over the
                    // row give each element the same chain; the per-row operands fetched
                    // once per row, each step's operation chosen once per row.
                    for (p, row) in x.chunks_mut(f.max(1)).enumerate() {
                        step_row(first.op, first.reverse, row, at(0, p));
                        if let Some(sec) = second {
                            step_row(sec.op, sec.reverse, row, at(1, p));
                        }
                    }
                    scatter_f32(mem_mut(sbuf, psum, out.space), &out, &x);
                }
            }
            Instr::ScalarTensorTensor {
                data,
                first,
                op1,
                data2,
                reverse1,
                out,
            } => {
                let parts = usize::from(out.partitions);
                let f = out.free_elems() as usize;
                let mut dts = vec![data.dtype, data2.dtype, out.dtype];
                dts.extend(first.operand.pattern().map(|a| a.dtype));
                if all_int(&dts) {
                    let (mut x, mut y) = (Vec::new(), Vec::new());
                    gather_i32(mem(sbuf, psum, data.space), &data, &mut x);
                    gather_i32(mem(sbuf, psum, data2.space), &data2, &mut y);
                    let s = operand_i32(sbuf, psum, &first.operand, parts);
                    for (p, (row, row2)) in
                        x.chunks_mut(f.max(1)).zip(y.chunks(f.max(1))).enumerate()
                    {
                        let sv = s.get(p).copied().unwrap_or(0);
                        for (u, &v) in row.iter_mut().zip(row2) {
                            let t = first.i32(*u, sv);
                            *u = if reverse1 {
                                op1.apply_i32(v, t)
                            } else {
                                op1.apply_i32(t, v)
                            };
                        }
                    }
                    scatter_i32(mem_mut(sbuf, psum, out.space), &out, &x);
                } else {
                    let (mut x, mut y) = (Vec::new(), Vec::new());
                    gather_f32(mem(sbuf, psum, data.space), &data, &mut x);
                    gather_f32(mem(sbuf, psum, data2.space), &data2, &mut y);
                    let s = operand_f32(sbuf, psum, &first.operand, parts);
                    for (p, (row, row2)) in
                        x.chunks_mut(f.max(1)).zip(y.chunks(f.max(1))).enumerate()
                    {
                        let sv = s.get(p).copied().unwrap_or(0.0);
                        for (u, &v) in row.iter_mut().zip(row2) {
                            let t = first.f32(*u, sv);
                            *u = if reverse1 {
                                op1.eval_f32(v, t)
                            } else {
                                op1.eval_f32(t, v)
                            };
                        }
                    }
                    scatter_f32(mem_mut(sbuf, psum, out.space), &out, &x);
                }
            }
            Instr::Activate {
                func,
                src,
                out,
                scale,
                bias,
                reduce,
            } => {
                let parts = usize::from(out.partitions);
                let f = out.free_elems() as usize;
                let mut x = Vec::new();
                gather_f32(mem(sbuf, psum, src.space), &src, &mut x);
                let sc = operand_f32(sbuf, psum, &scale, parts);
                let bi = match bias {
                    Bias::Imm(b) => vec![b; parts],
                    Bias::PerPartition(ap) => {
                        operand_f32(sbuf, psum, &Operand::PerPartition(ap), parts)
                    }
                };
                let rop = reduce.map(|r| r.op);
                let mut acc = Vec::with_capacity(parts);
                for (p, row) in x.chunks_mut(f.max(1)).enumerate() {
                    let (s, b) = (
                        sc.get(p).copied().unwrap_or(0.0),
                        bi.get(p).copied().unwrap_or(0.0),
                    );
                    // The reduction registers reset to 0 for add (NKI activation) and to −∞
                    // for max (as VectorE's accumulators do, NKI tensor_scalar_cumulative).
                    let mut a = if rop == Some(AluOp::Max) {
                        f32::NEG_INFINITY
                    } else {
                        0.0
                    };
                    activate_row(func, row, s, b);
                    // The fold, in element order, after the row (one dispatch per row).
                    match rop {
                        None => {}
                        Some(AluOp::Max) => a = row.iter().fold(a, |a, &u| max_num(a, u)),
                        Some(_) => a = row.iter().fold(a, |a, &u| AluOp::Add.eval_f32(a, u)),
                    }
                    acc.push(a);
                }
                scatter_f32(mem_mut(sbuf, psum, out.space), &out, &x);
                if let Some(r) = reduce {
                    scatter_f32(mem_mut(sbuf, psum, r.out.space), &r.out, &acc);
                }
            }
            Instr::Reciprocal { src, out } => {
                let mut x = Vec::new();
                gather_f32(mem(sbuf, psum, src.space), &src, &mut x);
                for u in x.iter_mut() {
                    *u = canon(1.0 / *u);
                }
                scatter_f32(mem_mut(sbuf, psum, out.space), &out, &x);
            }
            Instr::TensorTensorScan {
                data0,
                data1,
                out,
                initial,
                op0,
                op1,
                reverse0,
                reverse1,
            } => {
                let parts = usize::from(out.partitions);
                let f = out.free_elems() as usize;
                let (mut x, mut y) = (Vec::new(), Vec::new());
                gather_f32(mem(sbuf, psum, data0.space), &data0, &mut x);
                gather_f32(mem(sbuf, psum, data1.space), &data1, &mut y);
                let init = operand_f32(sbuf, psum, &initial, parts);
                for (p, (row, row1)) in x.chunks_mut(f.max(1)).zip(y.chunks(f.max(1))).enumerate() {
                    let mut state = init.get(p).copied().unwrap_or(0.0);
                    for (u, &b) in row.iter_mut().zip(row1) {
                        let t = if reverse0 {
                            op0.eval_f32(state, *u)
                        } else {
                            op0.eval_f32(*u, state)
                        };
                        state = if reverse1 {
                            op1.eval_f32(b, t)
                        } else {
                            op1.eval_f32(t, b)
                        };
                        *u = state;
                    }
                }
                scatter_f32(mem_mut(sbuf, psum, out.space), &out, &x);
            }
            Instr::TensorReduce { .. }
            | Instr::BnStats { .. }
            | Instr::BnAggr { .. }
            | Instr::Max8 { .. }
            | Instr::FindIndex8 { .. } => self.apply_reduce(ins),
            Instr::AffineSelect { .. } | Instr::RangeSelect { .. } | Instr::Transpose { .. } => {
                self.apply_select(ins)
            }
            _ => {}
        }
    }
}

/// One binary32 value per partition of an operand (an int32 immediate converts with RNE).
pub(super) fn operand_f32(sbuf: &OnChip, psum: &OnChip, o: &Operand, parts: usize) -> Vec<f32> {
    match o {
        Operand::Imm(v) => vec![*v; parts],
        Operand::Int(i) => vec![*i as f32; parts],
        Operand::PerPartition(ap) => {
            let mut v = Vec::with_capacity(parts);
            gather_f32(mem(sbuf, psum, ap.space), ap, &mut v);
            v.resize(parts, 0.0);
            v
        }
    }
}

/// One int32 value per partition of an operand (a binary32 immediate converts with RNE and
/// saturation, NaN → 0).
fn operand_i32(sbuf: &OnChip, psum: &OnChip, o: &Operand, parts: usize) -> Vec<i32> {
    match o {
        Operand::Imm(v) => vec![f32_to_i32(*v); parts],
        Operand::Int(i) => vec![*i; parts],
        Operand::PerPartition(ap) => {
            let mut v = Vec::with_capacity(parts);
            if ap.dtype == DType::I32 {
                gather_i32(mem(sbuf, psum, ap.space), ap, &mut v);
            } else {
                let mut fv = Vec::new();
                gather_f32(mem(sbuf, psum, ap.space), ap, &mut fv);
                v.extend(fv.into_iter().map(f32_to_i32));
            }
            v.resize(parts, 0);
            v
        }
    }
}

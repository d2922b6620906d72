//! The writer of instructions and access patterns, and the little-endian primitives the
//! section writer shares.

use super::op;
use crate::engine::isa::{AccessPattern, Bias, Instr, Operand, ScalarStep, SemCmp, Space};

pub(super) fn put_u16(w: &mut Vec<u8>, v: u16) {
    w.extend_from_slice(&v.to_le_bytes());
}
pub(super) fn put_u32(w: &mut Vec<u8>, v: u32) {
    w.extend_from_slice(&v.to_le_bytes());
}
pub(super) fn put_u64(w: &mut Vec<u8>, v: u64) {
    w.extend_from_slice(&v.to_le_bytes());
}

fn put_ap(w: &mut Vec<u8>, ap: &AccessPattern) {
    w.push(match ap.space {
        Space::Sbuf => 0,
        Space::Psum => 1,
    });
    w.push(ap.dtype.code());
    w.push(ap.start_partition);
    w.push(ap.partitions);
    put_u32(w, ap.offset);
    w.push(ap.ndims);
    for d in ap.used_dims() {
        put_u16(w, d.size);
        w.extend_from_slice(&d.stride.to_le_bytes());
    }
}

pub(super) fn put_instr(w: &mut Vec<u8>, ins: &Instr) {
    match *ins {
        Instr::SemWait { sem, cmp, value } => {
            w.push(op::SEM_WAIT);
            w.push(sem);
            w.push(match cmp {
                SemCmp::Ge => 0,
                SemCmp::Eq => 1,
            });
            put_u32(w, value);
        }
        Instr::SemInc { sem, value } => {
            w.push(op::SEM_INC);
            w.push(sem);
            put_u32(w, value);
        }
        Instr::SemSet { sem, value } => {
            w.push(op::SEM_SET);
            w.push(sem);
            put_u32(w, value);
        }
        Instr::DmaTrigger {
            dma,
            queue,
            first,
            count,
            sem,
            inc,
        } => {
            w.push(op::DMA_TRIGGER);
            w.push(dma);
            w.push(queue);
            put_u32(w, first);
            put_u32(w, count);
            w.push(sem);
            put_u32(w, inc);
        }
        Instr::Notify { payload } => {
            w.push(op::NOTIFY);
            put_u32(w, payload);
        }
        Instr::Halt => w.push(op::HALT),
        Instr::LoopBegin { reg, count } => {
            w.push(op::LOOP_BEGIN);
            w.push(reg);
            put_u32(w, count);
        }
        Instr::LoopEnd { reg } => {
            w.push(op::LOOP_END);
            w.push(reg);
        }
        Instr::LoadStationary { src } => {
            w.push(op::LOAD_STATIONARY);
            put_ap(w, &src);
        }
        Instr::MultiplyMoving {
            moving,
            dst,
            accumulate,
        } => {
            w.push(op::MULTIPLY_MOVING);
            put_ap(w, &moving);
            put_ap(w, &dst);
            w.push(u8::from(accumulate));
        }
        Instr::TensorTensor { op: o, a, b, out } => {
            w.push(op::TENSOR_TENSOR);
            w.push(o.code());
            put_ap(w, &a);
            put_ap(w, &b);
            put_ap(w, &out);
        }
        Instr::TensorScalar {
            op: o,
            src,
            scalar,
            out,
        } => {
            w.push(op::TENSOR_SCALAR);
            w.push(o.code());
            put_ap(w, &src);
            put_u32(w, scalar.to_bits());
            put_ap(w, &out);
        }
        Instr::Activation {
            func,
            src,
            out,
            scale,
            bias,
        } => {
            w.push(op::ACTIVATION);
            w.push(func.code());
            put_ap(w, &src);
            put_ap(w, &out);
            put_u32(w, scale.to_bits());
            put_bias(w, &bias);
        }
        Instr::TensorCopy { src, out } => {
            w.push(op::TENSOR_COPY);
            put_ap(w, &src);
            put_ap(w, &out);
        }
        Instr::Memset { out, bits } => {
            w.push(op::MEMSET);
            put_ap(w, &out);
            put_u32(w, bits);
        }
        Instr::Iota {
            out,
            base,
            partition_step,
            free_step,
        } => {
            w.push(op::IOTA);
            put_ap(w, &out);
            w.extend_from_slice(&base.to_le_bytes());
            w.extend_from_slice(&partition_step.to_le_bytes());
            w.extend_from_slice(&free_step.to_le_bytes());
        }
        _ => put_instr_1_1(w, ins),
    }
}

/// The format-1.1 instructions.
fn put_instr_1_1(w: &mut Vec<u8>, ins: &Instr) {
    match *ins {
        Instr::TensorScalarChain {
            src,
            out,
            first,
            second,
        } => {
            w.push(op::TENSOR_SCALAR_CHAIN);
            put_ap(w, &src);
            put_ap(w, &out);
            put_step(w, &first);
            match second {
                None => w.push(0),
                Some(s) => {
                    w.push(1);
                    put_step(w, &s);
                }
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
            w.push(op::SCALAR_TENSOR_TENSOR);
            put_ap(w, &data);
            put_step(w, &first);
            w.push(op1.code());
            put_ap(w, &data2);
            w.push(u8::from(reverse1));
            put_ap(w, &out);
        }
        Instr::TensorReduce {
            op: o,
            src,
            out,
            axes,
            negate,
        } => {
            w.push(op::TENSOR_REDUCE);
            w.push(o.code());
            put_ap(w, &src);
            put_ap(w, &out);
            w.push(axes);
            w.push(u8::from(negate));
        }
        Instr::Activate {
            func,
            src,
            out,
            scale,
            bias,
            reduce,
        } => {
            w.push(op::ACTIVATE);
            w.push(func.code());
            put_ap(w, &src);
            put_ap(w, &out);
            put_operand(w, &scale);
            put_bias(w, &bias);
            match reduce {
                None => w.push(0),
                Some(r) => {
                    w.push(1);
                    w.push(r.op.code());
                    put_ap(w, &r.out);
                }
            }
        }
        Instr::Reciprocal { src, out } => {
            w.push(op::RECIPROCAL);
            put_ap(w, &src);
            put_ap(w, &out);
        }
        Instr::Transpose { src, out } => {
            w.push(op::TRANSPOSE);
            put_ap(w, &src);
            put_ap(w, &out);
        }
        Instr::AffineSelect {
            on_true,
            out,
            on_false,
            cmp,
            offset,
            channel_multiplier,
            steps,
        } => {
            w.push(op::AFFINE_SELECT);
            put_ap(w, &on_true);
            put_ap(w, &out);
            put_u32(w, on_false.to_bits());
            w.push(cmp.code());
            w.extend_from_slice(&offset.to_le_bytes());
            w.extend_from_slice(&channel_multiplier.to_le_bytes());
            for s in steps {
                w.extend_from_slice(&s.to_le_bytes());
            }
        }
        Instr::RangeSelect {
            on_true,
            out,
            cmp0,
            bound0,
            cmp1,
            bound1,
            range_start,
            on_false,
            reduce_max,
        } => {
            w.push(op::RANGE_SELECT);
            put_ap(w, &on_true);
            put_ap(w, &out);
            w.push(cmp0.code());
            put_ap(w, &bound0);
            w.push(cmp1.code());
            put_ap(w, &bound1);
            w.extend_from_slice(&range_start.to_le_bytes());
            put_u32(w, on_false.to_bits());
            put_opt_ap(w, reduce_max.as_ref());
        }
        Instr::BnStats { src, out } => {
            w.push(op::BN_STATS);
            put_ap(w, &src);
            put_ap(w, &out);
        }
        Instr::BnAggr { src, out } => {
            w.push(op::BN_AGGR);
            put_ap(w, &src);
            put_ap(w, &out);
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
            w.push(op::TENSOR_TENSOR_SCAN);
            put_ap(w, &data0);
            put_ap(w, &data1);
            put_ap(w, &out);
            put_operand(w, &initial);
            w.push(op0.code());
            w.push(op1.code());
            w.push(u8::from(reverse0));
            w.push(u8::from(reverse1));
        }
        Instr::Max8 { src, out } => {
            w.push(op::MAX8);
            put_ap(w, &src);
            put_ap(w, &out);
        }
        Instr::FindIndex8 { data, vals, out } => {
            w.push(op::FIND_INDEX8);
            put_ap(w, &data);
            put_ap(w, &vals);
            put_ap(w, &out);
        }
        // The format-1.0 instructions are written by `put_instr`.
        _ => {}
    }
}

fn put_operand(w: &mut Vec<u8>, o: &Operand) {
    match *o {
        Operand::Imm(v) => {
            w.push(0);
            put_u32(w, v.to_bits());
        }
        Operand::PerPartition(ap) => {
            w.push(1);
            put_ap(w, &ap);
        }
        Operand::Int(v) => {
            w.push(2);
            w.extend_from_slice(&v.to_le_bytes());
        }
    }
}

fn put_bias(w: &mut Vec<u8>, b: &Bias) {
    match *b {
        Bias::Imm(v) => {
            w.push(0);
            put_u32(w, v.to_bits());
        }
        Bias::PerPartition(ap) => {
            w.push(1);
            put_ap(w, &ap);
        }
    }
}

fn put_step(w: &mut Vec<u8>, s: &ScalarStep) {
    w.push(s.op.code());
    put_operand(w, &s.operand);
    w.push(u8::from(s.reverse));
}

fn put_opt_ap(w: &mut Vec<u8>, ap: Option<&AccessPattern>) {
    match ap {
        None => w.push(0),
        Some(ap) => {
            w.push(1);
            put_ap(w, ap);
        }
    }
}

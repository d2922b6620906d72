//! Operand rules of the data-path instructions, independent of the engine and the format
//! version: partition rules and bounds of every access, shapes, element types, operation
//! classes. The engine- and version-dependent rules are in `rules.rs`.

use nrt_core::{Error, err};

use super::alu::AluOp;
use super::instr::Instr;
use super::ops::{Bias, Operand, ScalarStep};
use super::pattern::{AccessPattern, Space};
use crate::engine::dtype::DType;
use crate::engine::memory::PSUM_BANK_BYTES;

/// Largest input free size of `BnStats` (NKI `bn_stats_fmax`).
pub const BN_STATS_FMAX: u64 = 512;
/// Free-size range of the `Max8` / `FindIndex8` inputs.
pub const TOP8_FREE_RANGE: (u64, u64) = (8, 16_384);

impl Instr {
    /// Validates the operands of a data-path instruction (partition rules, bounds, shapes,
    /// dtypes, operation classes). Control instructions are checked against the program in
    /// [`Program::validate`](crate::engine::Program::validate), and the rules that depend on
    /// the engine or the format version there too.
    pub fn validate_operands(&self) -> Result<(), Error> {
        match self {
            Instr::LoadStationary { src } => {
                src.validate("LoadStationary source")?;
                require_space(src, Space::Sbuf, "LoadStationary source")?;
                require_float(src, "LoadStationary source")?;
                if src.free_elems() > 128 {
                    return Err(err!(
                        Invalid,
                        "LoadStationary: stationary free size {} exceeds 128",
                        src.free_elems()
                    ));
                }
                Ok(())
            }
            Instr::MultiplyMoving { moving, dst, .. } => {
                moving.validate("MultiplyMoving moving")?;
                dst.validate("MultiplyMoving destination")?;
                require_space(moving, Space::Sbuf, "MultiplyMoving moving")?;
                require_float(moving, "MultiplyMoving moving")?;
                require_space(dst, Space::Psum, "MultiplyMoving destination")?;
                if dst.dtype != DType::F32 {
                    return Err(err!(
                        Invalid,
                        "MultiplyMoving destination: PSUM accumulation is fp32, not {}",
                        dst.dtype
                    ));
                }
                if moving.free_elems() > 512 {
                    return Err(err!(
                        Invalid,
                        "MultiplyMoving: moving free size {} exceeds 512",
                        moving.free_elems()
                    ));
                }
                if !dst.is_contiguous() || dst.free_elems() != moving.free_elems() {
                    return Err(err!(
                        Invalid,
                        "MultiplyMoving destination: must be {} contiguous fp32 per partition",
                        moving.free_elems()
                    ));
                }
                in_one_bank(dst, "MultiplyMoving destination")
            }
            Instr::TensorTensor { op, a, b, out } => {
                a.validate("TensorTensor input a")?;
                b.validate("TensorTensor input b")?;
                out.validate("TensorTensor output")?;
                same_shape(a, out, "TensorTensor input a")?;
                same_shape(b, out, "TensorTensor input b")?;
                bitvec_needs_int(*op, &[(a, "input a"), (b, "input b"), (out, "output")])
            }
            Instr::TensorScalar { op, src, out, .. } => {
                src.validate("TensorScalar input")?;
                out.validate("TensorScalar output")?;
                same_shape(src, out, "TensorScalar input")?;
                bitvec_needs_int(*op, &[(src, "input"), (out, "output")])
            }
            Instr::Activation { src, out, bias, .. } => {
                src.validate("Activation input")?;
                out.validate("Activation output")?;
                same_shape(src, out, "Activation input")?;
                require_float(src, "Activation input")?;
                require_float(out, "Activation output")?;
                if let Bias::PerPartition(b) = bias {
                    b.validate("Activation bias")?;
                    if b.partitions != out.partitions || b.free_elems() != 1 {
                        return Err(err!(
                            Invalid,
                            "Activation bias: must be [{}, 1], got [{}, {}]",
                            out.partitions,
                            b.partitions,
                            b.free_elems()
                        ));
                    }
                    require_float(b, "Activation bias")?;
                }
                Ok(())
            }
            Instr::TensorCopy { src, out } => {
                src.validate("TensorCopy input")?;
                out.validate("TensorCopy output")?;
                same_shape(src, out, "TensorCopy input")
            }
            Instr::Memset { out, .. } => out.validate("Memset output"),
            Instr::Iota { out, .. } => out.validate("Iota output"),
            Instr::SemWait { .. }
            | Instr::SemInc { .. }
            | Instr::SemSet { .. }
            | Instr::DmaTrigger { .. }
            | Instr::Notify { .. }
            | Instr::Halt
            | Instr::LoopBegin { .. }
            | Instr::LoopEnd { .. } => Ok(()),
            _ => self.validate_1_1(),
        }
    }

    /// The operand rules of the format-1.1 instructions.
    fn validate_1_1(&self) -> Result<(), Error> {
        match self {
            Instr::TensorScalarChain {
                src,
                out,
                first,
                second,
            } => {
                src.validate("TensorScalarChain input")?;
                out.validate("TensorScalarChain output")?;
                same_shape(src, out, "TensorScalarChain input")?;
                step_operand(first, out, "TensorScalarChain operand0")?;
                let mut tensors = vec![(src, "input"), (out, "output")];
                let p0 = first.operand.pattern();
                if let Some(ap) = &p0 {
                    tensors.push((ap, "operand0"));
                }
                if let Some(s) = second {
                    step_operand(s, out, "TensorScalarChain operand1")?;
                    if s.op.is_bitvec() != first.op.is_bitvec() {
                        return Err(err!(
                            Invalid,
                            "TensorScalarChain: op0 {} and op1 {} must both be bitvec or both \
                             arithmetic",
                            first.op.name(),
                            s.op.name()
                        ));
                    }
                }
                let p1 = second.and_then(|s| s.operand.pattern());
                if let Some(ap) = &p1 {
                    tensors.push((ap, "operand1"));
                }
                bitvec_needs_int(first.op, &tensors)
            }
            Instr::ScalarTensorTensor {
                data,
                first,
                op1,
                data2,
                out,
                ..
            } => {
                data.validate("ScalarTensorTensor data")?;
                data2.validate("ScalarTensorTensor data2")?;
                out.validate("ScalarTensorTensor output")?;
                same_shape(data, out, "ScalarTensorTensor data")?;
                same_shape(data2, out, "ScalarTensorTensor data2")?;
                step_operand(first, out, "ScalarTensorTensor operand0")?;
                arithmetic(first.op, "ScalarTensorTensor op0")?;
                arithmetic(*op1, "ScalarTensorTensor op1")
            }
            Instr::TensorReduce {
                op,
                src,
                out,
                axes,
                negate,
            } => {
                src.validate("TensorReduce input")?;
                out.validate("TensorReduce output")?;
                if !op.is_reduction() {
                    return Err(err!(
                        Invalid,
                        "TensorReduce: {} is not a reduction operation",
                        op.name()
                    ));
                }
                if *axes == 0 || *axes > src.ndims {
                    return Err(err!(
                        Invalid,
                        "TensorReduce: reduces {axes} innermost free dimensions, the input has {}",
                        src.ndims
                    ));
                }
                let kept: u64 = src
                    .used_dims()
                    .iter()
                    .take(usize::from(src.ndims - axes))
                    .map(|d| u64::from(d.size))
                    .product();
                if out.partitions != src.partitions || out.free_elems() != kept {
                    return Err(err!(
                        Invalid,
                        "TensorReduce output: must be [{}, {kept}], got [{}, {}]",
                        src.partitions,
                        out.partitions,
                        out.free_elems()
                    ));
                }
                if *negate && op.is_bitvec() {
                    return Err(err!(
                        Invalid,
                        "TensorReduce: negate applies to arithmetic operations, not {}",
                        op.name()
                    ));
                }
                bitvec_needs_int(*op, &[(src, "input"), (out, "output")])
            }
            Instr::Activate {
                src,
                out,
                scale,
                bias,
                reduce,
                ..
            } => {
                src.validate("Activate input")?;
                out.validate("Activate output")?;
                same_shape(src, out, "Activate input")?;
                if let Operand::PerPartition(s) = scale {
                    per_partition(s, out, "Activate scale")?;
                    if s.dtype != DType::F32 {
                        return Err(err!(
                            Invalid,
                            "Activate scale: must be fp32, not {}",
                            s.dtype
                        ));
                    }
                }
                if let Bias::PerPartition(b) = bias {
                    per_partition(b, out, "Activate bias")?;
                }
                if let Some(r) = reduce {
                    if !matches!(r.op, AluOp::Add | AluOp::Max) {
                        return Err(err!(
                            Invalid,
                            "Activate reduce: {} is not add or maximum",
                            r.op.name()
                        ));
                    }
                    per_partition(&r.out, out, "Activate reduce result")?;
                }
                Ok(())
            }
            Instr::Reciprocal { src, out } => {
                src.validate("Reciprocal input")?;
                out.validate("Reciprocal output")?;
                same_shape(src, out, "Reciprocal input")
            }
            Instr::Transpose { src, out } => {
                src.validate("Transpose input")?;
                out.validate("Transpose output")?;
                if out.dtype != src.dtype {
                    return Err(err!(
                        Invalid,
                        "Transpose output: dtype {} differs from the input's {}",
                        out.dtype,
                        src.dtype
                    ));
                }
                if u64::from(out.partitions) != src.free_elems()
                    || out.free_elems() != u64::from(src.partitions)
                {
                    return Err(err!(
                        Invalid,
                        "Transpose output: must be [{}, {}], got [{}, {}]",
                        src.free_elems(),
                        src.partitions,
                        out.partitions,
                        out.free_elems()
                    ));
                }
                Ok(())
            }
            Instr::AffineSelect {
                on_true, out, cmp, ..
            } => {
                on_true.validate("AffineSelect on_true")?;
                out.validate("AffineSelect output")?;
                same_shape(on_true, out, "AffineSelect on_true")?;
                if !cmp.is_comparison() {
                    return Err(err!(
                        Invalid,
                        "AffineSelect: {} is not a comparison",
                        cmp.name()
                    ));
                }
                Ok(())
            }
            Instr::RangeSelect {
                on_true,
                out,
                cmp0,
                bound0,
                cmp1,
                bound1,
                reduce_max,
                ..
            } => {
                on_true.validate("RangeSelect on_true")?;
                out.validate("RangeSelect output")?;
                same_shape(on_true, out, "RangeSelect on_true")?;
                require_float(on_true, "RangeSelect on_true")?;
                require_float(out, "RangeSelect output")?;
                for (cmp, bound, what) in [
                    (cmp0, bound0, "RangeSelect bound0"),
                    (cmp1, bound1, "RangeSelect bound1"),
                ] {
                    if !cmp.is_comparison() || *cmp == AluOp::NotEqual {
                        return Err(err!(
                            Invalid,
                            "{what}: {} is not one of equal, less, less_equal, greater, \
                             greater_equal",
                            cmp.name()
                        ));
                    }
                    per_partition(bound, out, what)?;
                    if bound.dtype != DType::F32 {
                        return Err(err!(Invalid, "{what}: must be fp32, not {}", bound.dtype));
                    }
                }
                if let Some(r) = reduce_max {
                    per_partition(r, out, "RangeSelect reduce result")?;
                }
                Ok(())
            }
            Instr::BnStats { src, out } => {
                src.validate("BnStats input")?;
                out.validate("BnStats output")?;
                if src.free_elems() > BN_STATS_FMAX {
                    return Err(err!(
                        Invalid,
                        "BnStats input: free size {} exceeds {BN_STATS_FMAX}",
                        src.free_elems()
                    ));
                }
                fixed_out(src, out, 6, "BnStats output")
            }
            Instr::BnAggr { src, out } => {
                src.validate("BnAggr input")?;
                out.validate("BnAggr output")?;
                if src.free_elems() % 3 != 0 {
                    return Err(err!(
                        Invalid,
                        "BnAggr input: free size {} is not a multiple of 3",
                        src.free_elems()
                    ));
                }
                fixed_out(src, out, 2, "BnAggr output")
            }
            Instr::TensorTensorScan {
                data0,
                data1,
                out,
                initial,
                op0,
                op1,
                ..
            } => {
                data0.validate("TensorTensorScan data0")?;
                data1.validate("TensorTensorScan data1")?;
                out.validate("TensorTensorScan output")?;
                same_shape(data0, out, "TensorTensorScan data0")?;
                same_shape(data1, out, "TensorTensorScan data1")?;
                if let Operand::PerPartition(i) = initial {
                    per_partition(i, out, "TensorTensorScan initial")?;
                }
                arithmetic(*op0, "TensorTensorScan op0")?;
                arithmetic(*op1, "TensorTensorScan op1")
            }
            Instr::Max8 { src, out } => {
                src.validate("Max8 input")?;
                out.validate("Max8 output")?;
                top8_input(src, "Max8 input")?;
                fixed_out(src, out, 8, "Max8 output")
            }
            Instr::FindIndex8 { data, vals, out } => {
                data.validate("FindIndex8 data")?;
                vals.validate("FindIndex8 vals")?;
                out.validate("FindIndex8 output")?;
                top8_input(data, "FindIndex8 data")?;
                fixed_out(data, vals, 8, "FindIndex8 vals")?;
                fixed_out(data, out, 8, "FindIndex8 output")?;
                if out.dtype != DType::I32 {
                    return Err(err!(
                        Invalid,
                        "FindIndex8 output: indices are int32, not {}",
                        out.dtype
                    ));
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

pub(crate) fn require_space(ap: &AccessPattern, space: Space, what: &str) -> Result<(), Error> {
    if ap.space != space {
        return Err(err!(
            Invalid,
            "{what}: must be in {}, not {}",
            space.name(),
            ap.space.name()
        ));
    }
    Ok(())
}

fn require_float(ap: &AccessPattern, what: &str) -> Result<(), Error> {
    if !ap.dtype.is_float() {
        return Err(err!(Invalid, "{what}: {} is not a float type", ap.dtype));
    }
    Ok(())
}

fn same_shape(a: &AccessPattern, out: &AccessPattern, what: &str) -> Result<(), Error> {
    if a.partitions != out.partitions || a.free_elems() != out.free_elems() {
        return Err(err!(
            Invalid,
            "{what}: shape [{}, {}] does not match the output's [{}, {}]",
            a.partitions,
            a.free_elems(),
            out.partitions,
            out.free_elems()
        ));
    }
    Ok(())
}

/// A PSUM access contiguous and inside one 2 KiB bank.
pub(crate) fn in_one_bank(dst: &AccessPattern, what: &str) -> Result<(), Error> {
    let (lo, hi) = dst.byte_range();
    if lo / PSUM_BANK_BYTES as i64 != (hi - 1) / PSUM_BANK_BYTES as i64 {
        return Err(err!(
            Invalid,
            "{what}: bytes [{lo}, {hi}) cross a 2 KiB PSUM bank"
        ));
    }
    Ok(())
}

/// A valid `[out.partitions, 1]` access.
fn per_partition(ap: &AccessPattern, out: &AccessPattern, what: &str) -> Result<(), Error> {
    ap.validate(what)?;
    if ap.partitions != out.partitions || ap.free_elems() != 1 {
        return Err(err!(
            Invalid,
            "{what}: must be [{}, 1], got [{}, {}]",
            out.partitions,
            ap.partitions,
            ap.free_elems()
        ));
    }
    Ok(())
}

fn step_operand(step: &ScalarStep, out: &AccessPattern, what: &str) -> Result<(), Error> {
    match &step.operand {
        Operand::PerPartition(ap) => per_partition(ap, out, what),
        Operand::Imm(_) | Operand::Int(_) => Ok(()),
    }
}

/// `out` has `src`'s partitions and `n` elements per partition.
fn fixed_out(src: &AccessPattern, out: &AccessPattern, n: u64, what: &str) -> Result<(), Error> {
    if out.partitions != src.partitions || out.free_elems() != n {
        return Err(err!(
            Invalid,
            "{what}: must be [{}, {n}], got [{}, {}]",
            src.partitions,
            out.partitions,
            out.free_elems()
        ));
    }
    Ok(())
}

fn top8_input(src: &AccessPattern, what: &str) -> Result<(), Error> {
    let (lo, hi) = TOP8_FREE_RANGE;
    if !(lo..=hi).contains(&src.free_elems()) {
        return Err(err!(
            Invalid,
            "{what}: free size {} is outside {lo}..={hi}",
            src.free_elems()
        ));
    }
    Ok(())
}

fn arithmetic(op: AluOp, what: &str) -> Result<(), Error> {
    if op.is_bitvec() {
        return Err(err!(
            Invalid,
            "{what}: {} is a bitvec operation; this instruction takes arithmetic operations only",
            op.name()
        ));
    }
    Ok(())
}

/// A bitvec operation acts on int32 bit patterns: every tensor operand must be int32.
fn bitvec_needs_int(op: AluOp, tensors: &[(&AccessPattern, &str)]) -> Result<(), Error> {
    if !op.is_bitvec() {
        return Ok(());
    }
    for (ap, what) in tensors {
        if ap.dtype != DType::I32 {
            return Err(err!(
                Invalid,
                "{} is a bitvec operation: the {what} must be int32, not {}",
                op.name(),
                ap.dtype
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn mm_destination_stays_in_one_bank() {
        let mm = Instr::MultiplyMoving {
            moving: AccessPattern::sbuf(DType::Bf16, 0, 128, 0, 512),
            dst: AccessPattern::psum(DType::F32, 0, 128, 1024, 512),
            accumulate: false,
        };
        assert!(
            mm.validate_operands()
                .unwrap_err()
                .message()
                .contains("bank")
        );
    }
}

//! Engine assignment and format versions: the lowest format minor that can express an
//! instruction on an engine, and the checks that depend on the engine and on the program's
//! format (which engines NKI lets run each instruction, the operations ScalarE's tensor–scalar
//! path has, GpSimdE's lack of PSUM access, the transpose limits of each engine).
//!
//! A format-1.0 program (one that uses nothing of 1.1) keeps the 1.0 assignments — VectorE or
//! ScalarE for `TensorTensor`, `TensorScalar`, `Activation` and `TensorCopy` — so every
//! existing program, builder and kernel stays valid with the same results and ticks. A
//! format-1.1 program follows NKI: `Activation` on ScalarE only, `TensorTensor` on VectorE or
//! GpSimdE (`power` on GpSimdE only), `TensorScalar` on VectorE, or on ScalarE for multiply,
//! add, or multiply then add.

use nrt_core::{Error, err};

use super::alu::AluOp;
use super::instr::{EngineId, Instr};
use super::pattern::Space;
use super::validate::{in_one_bank, require_space};

/// Whether format 1.0 accepted `ins` on `engine` (its instructions, operation codes and
/// engine assignments).
fn in_format_1_0(ins: &Instr, engine: EngineId) -> bool {
    match ins {
        Instr::SemWait { .. }
        | Instr::SemInc { .. }
        | Instr::SemSet { .. }
        | Instr::DmaTrigger { .. }
        | Instr::Notify { .. }
        | Instr::Halt => true,
        Instr::LoadStationary { .. } | Instr::MultiplyMoving { .. } => engine == EngineId::Tensor,
        Instr::TensorTensor { op, .. } | Instr::TensorScalar { op, .. } => {
            op.in_format_1_0() && matches!(engine, EngineId::Vector | EngineId::Scalar)
        }
        Instr::Activation { .. } | Instr::TensorCopy { .. } => {
            matches!(engine, EngineId::Vector | EngineId::Scalar)
        }
        Instr::Memset { .. } | Instr::Iota { .. } => engine == EngineId::GpSimd,
        _ => false,
    }
}

/// The lowest format minor that can express `ins` on `engine`: 0 when format 1.0 accepted it,
/// 1 otherwise (also for an assignment no version accepts: such a program is checked, and
/// refused, under the 1.1 rules).
pub(crate) fn required_minor(ins: &Instr, engine: EngineId) -> u16 {
    if in_format_1_0(ins, engine) { 0 } else { 1 }
}

/// The engine and memory rules of `ins` on `engine` in a program of format minor `minor`.
/// The message is completed with the engine and pc by the caller.
pub(crate) fn check_engine(ins: &Instr, engine: EngineId, minor: u16) -> Result<(), Error> {
    let name = ins.name();
    if minor == 0 {
        return if in_format_1_0(ins, engine) {
            Ok(())
        } else {
            Err(err!(Invalid, "{name} cannot run on {engine}"))
        };
    }
    let allowed: &[EngineId] = match ins {
        Instr::SemWait { .. }
        | Instr::SemInc { .. }
        | Instr::SemSet { .. }
        | Instr::DmaTrigger { .. }
        | Instr::Notify { .. }
        | Instr::Halt
        | Instr::LoopBegin { .. }
        | Instr::LoopEnd { .. } => return Ok(()),
        Instr::LoadStationary { .. } | Instr::MultiplyMoving { .. } => &[EngineId::Tensor],
        Instr::TensorTensor { op, a, b, .. } => {
            if a.space == Space::Psum && b.space == Space::Psum {
                return Err(err!(
                    Invalid,
                    "{name}: inputs a and b cannot both be in PSUM (NKI tensor_tensor)"
                ));
            }
            if *op == AluOp::Power {
                &[EngineId::GpSimd]
            } else if op.is_bitvec() {
                &[EngineId::Vector]
            } else {
                &[EngineId::Vector, EngineId::GpSimd]
            }
        }
        Instr::TensorScalar { op, .. } => {
            if engine == EngineId::Scalar && !matches!(op, AluOp::Mul | AluOp::Add) {
                return Err(scalar_ops(name, op.name(), op.in_format_1_0()));
            }
            &[EngineId::Vector, EngineId::Scalar]
        }
        Instr::TensorScalarChain { first, second, .. } => {
            let combo_ok = matches!(
                (first.op, second.map(|s| s.op)),
                (AluOp::Mul | AluOp::Add, None) | (AluOp::Mul, Some(AluOp::Add))
            );
            if engine == EngineId::Scalar && !combo_ok {
                let ops = match second {
                    Some(s) => format!("{} then {}", first.op.name(), s.op.name()),
                    None => first.op.name().to_owned(),
                };
                return Err(scalar_ops(name, &ops, false));
            }
            &[EngineId::Vector, EngineId::Scalar]
        }
        Instr::Activation { .. } | Instr::Activate { .. } => &[EngineId::Scalar],
        Instr::TensorCopy { .. } => &[EngineId::Vector, EngineId::Scalar, EngineId::GpSimd],
        Instr::Memset { .. } | Instr::Iota { .. } | Instr::AffineSelect { .. } => {
            &[EngineId::GpSimd]
        }
        Instr::Transpose { src, out } => {
            if engine == EngineId::Tensor {
                require_space(src, Space::Sbuf, "Transpose input on TensorE")?;
                require_space(out, Space::Psum, "Transpose output on TensorE")?;
                if !out.is_contiguous() {
                    return Err(err!(
                        Invalid,
                        "Transpose output on TensorE: must be contiguous in each partition"
                    ));
                }
                in_one_bank(out, "Transpose output on TensorE")?;
            } else if engine == EngineId::Vector && (src.partitions > 32 || src.free_elems() > 32) {
                return Err(err!(
                    Invalid,
                    "Transpose on VectorE: input [{}, {}] exceeds one 32x32 block",
                    src.partitions,
                    src.free_elems()
                ));
            }
            &[EngineId::Tensor, EngineId::Vector]
        }
        Instr::ScalarTensorTensor { data, data2, .. } => {
            both_psum(name, data.space, data2.space, "data and data2")?;
            &[EngineId::Vector]
        }
        Instr::TensorTensorScan { data0, data1, .. } => {
            both_psum(name, data0.space, data1.space, "data0 and data1")?;
            &[EngineId::Vector]
        }
        Instr::TensorReduce { .. }
        | Instr::Reciprocal { .. }
        | Instr::RangeSelect { .. }
        | Instr::BnStats { .. }
        | Instr::BnAggr { .. }
        | Instr::Max8 { .. }
        | Instr::FindIndex8 { .. } => &[EngineId::Vector],
    };
    if !allowed.contains(&engine) {
        // TensorTensor's engines depend on the operation: name it.
        let name = match ins {
            Instr::TensorTensor { op, .. } if *op == AluOp::Power || op.is_bitvec() => {
                format!("{name} {}", op.name())
            }
            _ => name.to_owned(),
        };
        let list = allowed
            .iter()
            .map(|e| e.name())
            .collect::<Vec<_>>()
            .join(" or ");
        return Err(if in_format_1_0(ins, engine) {
            err!(
                Invalid,
                "{name} cannot run on {engine} in a format 1.1 program (NKI runs it on \
                 {list}; the format-1.0 assignment is accepted only in programs that use \
                 nothing of format 1.1)"
            )
        } else {
            err!(
                Invalid,
                "{name} cannot run on {engine} (NKI runs it on {list})"
            )
        });
    }
    if engine == EngineId::GpSimd {
        let (acc, n) = ins.accesses();
        if acc
            .iter()
            .take(n)
            .flatten()
            .any(|(ap, _)| ap.space == Space::Psum)
        {
            return Err(err!(
                Invalid,
                "{name} on GpSimdE: GpSimdE cannot access PSUM"
            ));
        }
    }
    Ok(())
}

fn scalar_ops(name: &str, ops: &str, legacy: bool) -> Error {
    let note = if legacy {
        "; the format-1.0 assignment is accepted only in programs that use nothing of format 1.1"
    } else {
        ""
    };
    err!(
        Invalid,
        "{name} on ScalarE: {ops} is not one of ScalarE's tensor-scalar operations in a format \
         1.1 program (NKI: multiply, add, or multiply then add; use VectorE{note})"
    )
}

fn both_psum(name: &str, a: Space, b: Space, what: &str) -> Result<(), Error> {
    if a == Space::Psum && b == Space::Psum {
        return Err(err!(Invalid, "{name}: {what} cannot both be in PSUM"));
    }
    Ok(())
}

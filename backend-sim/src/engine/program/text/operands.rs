//! The assembler's instructions: a mnemonic, then `key=value` for every field in field
//! order; and the operand forms (access patterns, floats, integers, ALU operations,
//! activation functions, scalar steps, biases, optional operands).

use nrt_core::Error;

use super::lex::{Line, Tok};
use super::names::{actfn_named, actfunc_named, alu_named};
use crate::engine::dtype::DType;
use crate::engine::isa::{
    AccessPattern, ActReduce, AluOp, Bias, Dim, Instr, MAX_DIMS, Operand, ScalarStep, SemCmp,
    Space, TermSlot,
};

const MNEMONICS: &str = "an instruction (sem_wait, sem_inc, sem_set, dma_trigger, notify, halt, \
     loop_begin, loop_end, \
     load_stationary, nc_matmul, tensor_tensor, tensor_scalar, activation, tensor_copy, memset, \
     iota, tensor_scalar_chain, scalar_tensor_tensor, tensor_reduce, activate, reciprocal, \
     nc_transpose, affine_select, range_select, bn_stats, bn_aggr, tensor_tensor_scan, max8, \
     nc_find_index8)";

/// `fp32`, `bf16`, `fp16` or `int32`.
pub(super) fn dtype(l: &mut Line) -> Result<DType, Error> {
    const WHAT: &str = "a dtype (fp32, bf16, fp16 or int32)";
    let name = l.ident(WHAT)?;
    DType::ALL
        .into_iter()
        .find(|d| d.name() == name)
        .ok_or_else(|| {
            l.back();
            l.expected(WHAT)
        })
}

/// `true` or `false`.
pub(super) fn boolean(l: &mut Line) -> Result<bool, Error> {
    match l.peek() {
        Some(Tok::Ident(s)) if s == "true" || s == "false" => {
            let v = s == "true";
            l.next();
            Ok(v)
        }
        _ => Err(l.expected("`true` or `false`")),
    }
}

fn alu(l: &mut Line) -> Result<AluOp, Error> {
    const WHAT: &str = "an ALU operation (add, subtract, multiply, maximum, ...)";
    let name = l.ident(WHAT)?;
    alu_named(&name).ok_or_else(|| {
        l.back();
        l.expected(WHAT)
    })
}

/// `space.dtype[p0:p1][offset; [stride,size], ...]`.
pub(super) fn ap(l: &mut Line) -> Result<AccessPattern, Error> {
    const WHAT: &str = "an access pattern (sbuf.DTYPE[P0:P1][OFFSET; [STRIDE,SIZE], ...])";
    let space = match l.peek() {
        Some(Tok::Ident(s)) if s == "sbuf" => Space::Sbuf,
        Some(Tok::Ident(s)) if s == "psum" => Space::Psum,
        _ => return Err(l.expected(WHAT)),
    };
    l.next();
    l.punct('.')?;
    let dtype = dtype(l)?;
    l.punct('[')?;
    let p0 = l.uint::<u8>("the first partition")?;
    l.punct(':')?;
    let p1 = l.int(
        "one past the last partition",
        i128::from(p0),
        i128::from(p0) + 255,
    )?;
    l.punct(']')?;
    l.punct('[')?;
    let offset = l.uint::<u32>("a byte offset")?;
    l.punct(';')?;
    let mut dims = [Dim::default(); MAX_DIMS];
    let mut ndims = 0u8;
    loop {
        let Some(slot) = dims.get_mut(usize::from(ndims)) else {
            return Err(l.expected(&format!("`]` (at most {MAX_DIMS} free dimensions)")));
        };
        l.punct('[')?;
        let stride = l.int("a stride", i128::from(i16::MIN), i128::from(i16::MAX))?;
        l.punct(',')?;
        let size = l.uint::<u16>("a size")?;
        l.punct(']')?;
        *slot = Dim {
            size,
            stride: i16::try_from(stride).unwrap_or(0),
        };
        ndims += 1;
        if l.eat(']') {
            break;
        }
        l.punct(',')?;
    }
    Ok(AccessPattern {
        space,
        dtype,
        start_partition: p0,
        partitions: u8::try_from(p1 - i128::from(p0)).unwrap_or(0),
        offset,
        ndims,
        dims,
    })
}

fn int32(l: &mut Line, what: &str) -> Result<i32, Error> {
    let v = l.int(what, i128::from(i32::MIN), i128::from(i32::MAX))?;
    Ok(i32::try_from(v).unwrap_or(0))
}

/// A float immediate, an int32 immediate (an integer literal) or a per-partition pattern.
fn operand(l: &mut Line) -> Result<Operand, Error> {
    if matches!(l.peek(), Some(Tok::Ident(s)) if s == "sbuf" || s == "psum") {
        return Ok(Operand::PerPartition(ap(l)?));
    }
    if l.next_is_float() {
        return Ok(Operand::Imm(l.float("a scalar")?));
    }
    if matches!(l.peek(), Some(Tok::Num(_))) {
        return Ok(Operand::Int(int32(l, "an int32 scalar")?));
    }
    Err(l.expected(
        "a scalar operand (a float such as 1.0, an int32 such as 1, or an access pattern)",
    ))
}

fn bias(l: &mut Line) -> Result<Bias, Error> {
    if matches!(l.peek(), Some(Tok::Ident(s)) if s == "sbuf" || s == "psum") {
        return Ok(Bias::PerPartition(ap(l)?));
    }
    Ok(Bias::Imm(l.float("a bias (a float or an access pattern)")?))
}

/// `(op operand reverse=BOOL)`.
fn step(l: &mut Line) -> Result<ScalarStep, Error> {
    l.punct('(')?;
    let op = alu(l)?;
    let operand = operand(l)?;
    l.key("reverse")?;
    let reverse = boolean(l)?;
    l.punct(')')?;
    Ok(ScalarStep {
        op,
        operand,
        reverse,
    })
}

/// `none`, or what `f` reads.
fn opt<T>(l: &mut Line, f: impl FnOnce(&mut Line) -> Result<T, Error>) -> Result<Option<T>, Error> {
    if matches!(l.peek(), Some(Tok::Ident(s)) if s == "none") {
        l.next();
        return Ok(None);
    }
    f(l).map(Some)
}

/// Reads `key=` then an access pattern.
fn kap(l: &mut Line, key: &str) -> Result<AccessPattern, Error> {
    l.key(key)?;
    ap(l)
}

fn kalu(l: &mut Line, key: &str) -> Result<AluOp, Error> {
    l.key(key)?;
    alu(l)
}

fn kbool(l: &mut Line, key: &str) -> Result<bool, Error> {
    l.key(key)?;
    boolean(l)
}

fn kfloat(l: &mut Line, key: &str) -> Result<f32, Error> {
    l.key(key)?;
    l.float(key)
}

fn ki32(l: &mut Line, key: &str) -> Result<i32, Error> {
    l.key(key)?;
    int32(l, key)
}

fn ku8(l: &mut Line, key: &str) -> Result<u8, Error> {
    l.key(key)?;
    l.uint::<u8>(key)
}

fn ku32(l: &mut Line, key: &str) -> Result<u32, Error> {
    l.key(key)?;
    l.uint::<u32>(key)
}

/// The dynamic terms after an instruction: nothing, or `with SLOT += STEP*rREG, ...`; each
/// as `(slot, reg, step)`.
pub(super) fn terms(l: &mut Line) -> Result<Vec<(TermSlot, u8, i64)>, Error> {
    let mut v = Vec::new();
    if !matches!(l.peek(), Some(Tok::Ident(s)) if s == "with") {
        return Ok(v);
    }
    l.next();
    loop {
        const WHAT: &str =
            "a term slot (offset(K), partition(K), value, dma_src, dma_dst or dma_first)";
        let word = l.ident(WHAT)?;
        let slot = match word.as_str() {
            "offset" | "partition" => {
                l.punct('(')?;
                let k = l.uint::<u8>("a pattern operand index")?;
                l.punct(')')?;
                if word == "offset" {
                    TermSlot::Offset(k)
                } else {
                    TermSlot::Partition(k)
                }
            }
            "value" => TermSlot::Value,
            "dma_src" => TermSlot::DmaSrc,
            "dma_dst" => TermSlot::DmaDst,
            "dma_first" => TermSlot::DmaFirst,
            _ => {
                l.back();
                return Err(l.expected(WHAT));
            }
        };
        l.punct('+')?;
        l.punct('=')?;
        let step = l.int("a step", i128::from(i64::MIN), i128::from(i64::MAX))?;
        l.punct('*')?;
        let reg = match l.peek() {
            Some(Tok::Ident(s)) => s
                .strip_prefix('r')
                .filter(|d| !d.is_empty() && d.len() <= 3 && d.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|d| d.parse::<u8>().ok()),
            _ => None,
        };
        let Some(reg) = reg else {
            return Err(l.expected("an iteration register (r0, r1, ...)"));
        };
        l.next();
        v.push((slot, reg, i64::try_from(step).unwrap_or(0)));
        if !l.eat(',') {
            return Ok(v);
        }
    }
}

/// One instruction (the line's tokens from its mnemonic on).
pub(super) fn instr(l: &mut Line) -> Result<Instr, Error> {
    let m = l.ident(MNEMONICS)?;
    Ok(match m.as_str() {
        "sem_wait" => {
            let sem = ku8(l, "sem")?;
            l.key("cmp")?;
            let cmp = match l.peek() {
                Some(Tok::Ident(s)) if s == "ge" => SemCmp::Ge,
                Some(Tok::Ident(s)) if s == "eq" => SemCmp::Eq,
                _ => return Err(l.expected("a comparison (ge or eq)")),
            };
            l.next();
            Instr::SemWait {
                sem,
                cmp,
                value: ku32(l, "value")?,
            }
        }
        "sem_inc" => Instr::SemInc {
            sem: ku8(l, "sem")?,
            value: ku32(l, "value")?,
        },
        "sem_set" => Instr::SemSet {
            sem: ku8(l, "sem")?,
            value: ku32(l, "value")?,
        },
        "dma_trigger" => Instr::DmaTrigger {
            dma: ku8(l, "dma")?,
            queue: ku8(l, "queue")?,
            first: ku32(l, "first")?,
            count: ku32(l, "count")?,
            sem: ku8(l, "sem")?,
            inc: ku32(l, "inc")?,
        },
        "notify" => Instr::Notify {
            payload: ku32(l, "payload")?,
        },
        "halt" => Instr::Halt,
        "loop_begin" => Instr::LoopBegin {
            reg: ku8(l, "reg")?,
            count: ku32(l, "count")?,
        },
        "loop_end" => Instr::LoopEnd {
            reg: ku8(l, "reg")?,
        },
        "load_stationary" => Instr::LoadStationary {
            src: kap(l, "src")?,
        },
        "nc_matmul" => Instr::MultiplyMoving {
            moving: kap(l, "moving")?,
            dst: kap(l, "dst")?,
            accumulate: kbool(l, "accumulate")?,
        },
        "tensor_tensor" => Instr::TensorTensor {
            op: kalu(l, "op")?,
            a: kap(l, "a")?,
            b: kap(l, "b")?,
            out: kap(l, "out")?,
        },
        "tensor_scalar" => Instr::TensorScalar {
            op: kalu(l, "op")?,
            src: kap(l, "src")?,
            scalar: kfloat(l, "scalar")?,
            out: kap(l, "out")?,
        },
        "activation" => {
            l.key("func")?;
            const WHAT: &str = "a format-1.0 activation function (identity, relu, exp, tanh \
                                or gelu)";
            let name = l.ident(WHAT)?;
            let func = actfunc_named(&name).ok_or_else(|| {
                l.back();
                l.expected(WHAT)
            })?;
            let src = kap(l, "src")?;
            let out = kap(l, "out")?;
            let scale = kfloat(l, "scale")?;
            l.key("bias")?;
            Instr::Activation {
                func,
                src,
                out,
                scale,
                bias: bias(l)?,
            }
        }
        "tensor_copy" => Instr::TensorCopy {
            src: kap(l, "src")?,
            out: kap(l, "out")?,
        },
        "memset" => Instr::Memset {
            out: kap(l, "out")?,
            bits: ku32(l, "bits")?,
        },
        "iota" => Instr::Iota {
            out: kap(l, "out")?,
            base: ki32(l, "base")?,
            partition_step: ki32(l, "partition_step")?,
            free_step: ki32(l, "free_step")?,
        },
        _ => {
            l.back();
            return instr_1_1(l);
        }
    })
}

/// The format-1.1 instructions.
fn instr_1_1(l: &mut Line) -> Result<Instr, Error> {
    let m = l.ident(MNEMONICS)?;
    let src_out = |l: &mut Line| -> Result<(AccessPattern, AccessPattern), Error> {
        Ok((kap(l, "src")?, kap(l, "out")?))
    };
    Ok(match m.as_str() {
        "tensor_scalar_chain" => {
            let (src, out) = src_out(l)?;
            l.key("first")?;
            let first = step(l)?;
            l.key("second")?;
            Instr::TensorScalarChain {
                src,
                out,
                first,
                second: opt(l, step)?,
            }
        }
        "scalar_tensor_tensor" => {
            let data = kap(l, "data")?;
            l.key("first")?;
            Instr::ScalarTensorTensor {
                data,
                first: step(l)?,
                op1: kalu(l, "op1")?,
                data2: kap(l, "data2")?,
                reverse1: kbool(l, "reverse1")?,
                out: kap(l, "out")?,
            }
        }
        "tensor_reduce" => Instr::TensorReduce {
            op: kalu(l, "op")?,
            src: kap(l, "src")?,
            out: kap(l, "out")?,
            axes: ku8(l, "axes")?,
            negate: kbool(l, "negate")?,
        },
        "activate" => {
            l.key("func")?;
            const WHAT: &str = "an activation function (copy, relu, exp, tanh, gelu, silu, ...)";
            let name = l.ident(WHAT)?;
            let func = actfn_named(&name).ok_or_else(|| {
                l.back();
                l.expected(WHAT)
            })?;
            let (src, out) = src_out(l)?;
            l.key("scale")?;
            let scale = operand(l)?;
            l.key("bias")?;
            let bias = bias(l)?;
            l.key("reduce")?;
            let reduce = opt(l, |l| {
                l.punct('(')?;
                let op = alu(l)?;
                let out = ap(l)?;
                l.punct(')')?;
                Ok(ActReduce { op, out })
            })?;
            Instr::Activate {
                func,
                src,
                out,
                scale,
                bias,
                reduce,
            }
        }
        "reciprocal" => {
            let (src, out) = src_out(l)?;
            Instr::Reciprocal { src, out }
        }
        "nc_transpose" => {
            let (src, out) = src_out(l)?;
            Instr::Transpose { src, out }
        }
        "bn_stats" => {
            let (src, out) = src_out(l)?;
            Instr::BnStats { src, out }
        }
        "bn_aggr" => {
            let (src, out) = src_out(l)?;
            Instr::BnAggr { src, out }
        }
        "max8" => {
            let (src, out) = src_out(l)?;
            Instr::Max8 { src, out }
        }
        "affine_select" => {
            let on_true = kap(l, "on_true")?;
            let out = kap(l, "out")?;
            let on_false = kfloat(l, "on_false")?;
            let cmp = kalu(l, "cmp")?;
            let offset = ki32(l, "offset")?;
            let channel_multiplier = ki32(l, "channel_multiplier")?;
            l.key("steps")?;
            l.punct('[')?;
            let mut steps = [0i32; MAX_DIMS];
            for (i, s) in steps.iter_mut().enumerate() {
                if i > 0 {
                    l.punct(',')?;
                }
                *s = int32(l, "a step")?;
            }
            l.punct(']')?;
            Instr::AffineSelect {
                on_true,
                out,
                on_false,
                cmp,
                offset,
                channel_multiplier,
                steps,
            }
        }
        "range_select" => Instr::RangeSelect {
            on_true: kap(l, "on_true")?,
            out: kap(l, "out")?,
            cmp0: kalu(l, "cmp0")?,
            bound0: kap(l, "bound0")?,
            cmp1: kalu(l, "cmp1")?,
            bound1: kap(l, "bound1")?,
            range_start: ki32(l, "range_start")?,
            on_false: kfloat(l, "on_false")?,
            reduce_max: {
                l.key("reduce_max")?;
                opt(l, ap)?
            },
        },
        "tensor_tensor_scan" => {
            let data0 = kap(l, "data0")?;
            let data1 = kap(l, "data1")?;
            let out = kap(l, "out")?;
            l.key("initial")?;
            Instr::TensorTensorScan {
                data0,
                data1,
                out,
                initial: operand(l)?,
                op0: kalu(l, "op0")?,
                op1: kalu(l, "op1")?,
                reverse0: kbool(l, "reverse0")?,
                reverse1: kbool(l, "reverse1")?,
            }
        }
        "nc_find_index8" => Instr::FindIndex8 {
            data: kap(l, "data")?,
            vals: kap(l, "vals")?,
            out: kap(l, "out")?,
        },
        _ => {
            l.back();
            return Err(l.expected(MNEMONICS));
        }
    })
}

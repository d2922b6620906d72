//! Format 1.1: every new instruction encodes and decodes exactly; format-1.0 programs are
//! written, decoded, validated and executed exactly as before (bytes, ticks and results pinned
//! from the build before 1.1); the version gate; the engine-assignment rules with their exact
//! messages; malformed 1.1 programs never panic.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod ops_common;

use nrt_core::NrtStatus;
use nrt_sim::Instance;
use nrt_sim::engine::{
    AccessPattern, ActFn, ActFunc, ActReduce, AluOp, Bias, DType, Device, DmaBlock, DmaDescriptor,
    DmaEndpoint, EngineId, ExecOptions, FORMAT_MINOR, Instr, MemKind, Operand, Program,
    ProgramBuilder, ScalarStep, SemCmp, Space, encode_f32, kernels,
};

fn fnv(bytes: &[u8]) -> u64 {
    let mut h = 0xcbf29ce484222325u64;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

fn sb(dt: DType, parts: u8, off: u32, n: u16) -> AccessPattern {
    AccessPattern::sbuf(dt, 0, parts, off, n)
}

/// A format-1.0 program with every 1.0 instruction kind (including the 1.0-only assignments
/// TensorTensor/TensorScalar on ScalarE and Activation on VectorE).
fn legacy_program() -> Program {
    let mut b = ProgramBuilder::new("legacy");
    let x = b.input("x", DType::F32, &[4, 8]);
    let y = b.output("y", DType::F32, &[4, 8]);
    let s = b.sem().unwrap();
    let ld: Vec<DmaDescriptor> = (0..4u8)
        .map(|p| DmaDescriptor {
            src: DmaEndpoint::Hbm {
                tensor: x,
                offset: u64::from(p) * 32,
            },
            dst: DmaEndpoint::Sbuf {
                partition: p,
                offset: 0,
            },
            len: 32,
        })
        .collect();
    b.dma_on(EngineId::Sync, 0, 0, &ld, s, 1);
    b.wait(EngineId::Vector, s, 1);
    b.wait(EngineId::Scalar, s, 1);
    b.wait(EngineId::GpSimd, s, 1);
    b.wait(EngineId::Tensor, s, 1);
    let a = sb(DType::F32, 4, 0, 8);
    b.push(
        EngineId::Vector,
        Instr::TensorTensor {
            op: AluOp::Max,
            a,
            b: a,
            out: sb(DType::F32, 4, 64, 8),
        },
    );
    b.push(
        EngineId::Scalar,
        Instr::TensorTensor {
            op: AluOp::Sub,
            a,
            b: a,
            out: sb(DType::F32, 4, 128, 8),
        },
    );
    b.push(
        EngineId::Vector,
        Instr::TensorScalar {
            op: AluOp::Mul,
            src: a,
            scalar: 1.5,
            out: sb(DType::Bf16, 4, 192, 8),
        },
    );
    b.push(
        EngineId::Scalar,
        Instr::TensorScalar {
            op: AluOp::Sub,
            src: a,
            scalar: -2.0,
            out: sb(DType::F32, 4, 256, 8),
        },
    );
    b.push(
        EngineId::Vector,
        Instr::Activation {
            func: ActFunc::Tanh,
            src: a,
            out: sb(DType::F32, 4, 320, 8),
            scale: 2.0,
            bias: Bias::Imm(0.5),
        },
    );
    b.push(
        EngineId::Scalar,
        Instr::Activation {
            func: ActFunc::Gelu,
            src: a,
            out: sb(DType::F16, 4, 384, 8),
            scale: 1.0,
            bias: Bias::PerPartition(sb(DType::F32, 4, 4, 1)),
        },
    );
    b.push(
        EngineId::Scalar,
        Instr::TensorCopy {
            src: a,
            out: sb(DType::I32, 4, 448, 8),
        },
    );
    b.push(
        EngineId::GpSimd,
        Instr::Memset {
            out: sb(DType::F32, 4, 512, 8),
            bits: 0x3f80_0000,
        },
    );
    b.push(
        EngineId::GpSimd,
        Instr::Iota {
            out: AccessPattern::new(Space::Sbuf, DType::I32, 0, 4, 576, &[(2, 4), (4, 1)]),
            base: 3,
            partition_step: -2,
            free_step: 5,
        },
    );
    b.push(
        EngineId::Tensor,
        Instr::LoadStationary {
            src: sb(DType::F32, 4, 0, 4),
        },
    );
    b.push(
        EngineId::Tensor,
        Instr::MultiplyMoving {
            moving: a,
            dst: AccessPattern::psum(DType::F32, 0, 4, 0, 8),
            accumulate: true,
        },
    );
    b.push(EngineId::Tensor, Instr::Notify { payload: 9 });
    b.push(EngineId::Tensor, Instr::SemSet { sem: 5, value: 3 });
    b.push(
        EngineId::Vector,
        Instr::SemWait {
            sem: 5,
            cmp: SemCmp::Eq,
            value: 3,
        },
    );
    b.sem_init(7, 11);
    let st: Vec<DmaDescriptor> = (0..4u8)
        .map(|p| DmaDescriptor {
            src: DmaEndpoint::Sbuf {
                partition: p,
                offset: 64,
            },
            dst: DmaEndpoint::Hbm {
                tensor: y,
                offset: u64::from(p) * 32,
            },
            len: 32,
        })
        .collect();
    b.dma_on(EngineId::Vector, 1, 2, &st, 6, 1);
    b.build().unwrap()
}

/// Rule: a format-1.0 program is written byte for byte as the build before 1.1 wrote it
/// (header minor 0), decodes to the same program, and runs tick for tick and bit for bit as
/// before (figures pinned from the pre-1.1 build).
#[test]
fn format_1_0_programs_are_unchanged() {
    let p = legacy_program();
    assert_eq!(p.format_minor(), 0);
    let bytes = p.to_bytes();
    assert_eq!(
        u16::from_le_bytes([bytes[10], bytes[11]]),
        0,
        "header minor"
    );
    assert_eq!((bytes.len(), fnv(&bytes)), (846, 0xcf97_02b7_196e_ec7e));
    assert_eq!(Program::from_bytes(&bytes).unwrap(), p);
    let mlp = kernels::mlp(32, 40, 50, 10, DType::F16, ActFunc::Gelu).unwrap();
    let mb = mlp.to_bytes();
    assert_eq!((mb.len(), fnv(&mb)), (5599, 0x9617_f850_4291_c3b2));
    assert_eq!(Program::from_bytes(&mb).unwrap(), mlp);

    let dev = Device::new(Instance::Trn1);
    let lp = dev.load(0, p).unwrap();
    let x: Vec<f32> = (0..32).map(|i| (i as f32 - 13.0) * 0.37).collect();
    let xb = encode_f32(DType::F32, &x);
    let (outs, r) = dev
        .run(&lp, &[("x", &xb)], &ExecOptions::default())
        .unwrap();
    let sbuf = dev.sbuf(0).unwrap();
    let mut all = Vec::new();
    for part in 0..4 {
        all.extend_from_slice(sbuf.read(part, 0, 640));
    }
    assert_eq!(
        (r.ticks, fnv(&outs[0].1), fnv(&all)),
        (1634, 15_660_679_567_416_823_822, 4_347_409_217_373_342_985)
    );
}

/// One valid instance of every format-1.1 instruction, each on an engine NKI allows, plus a
/// block descriptor of each kind.
fn every_1_1() -> Program {
    let mut b = ProgramBuilder::new("isa11");
    let t = b.input("t", DType::Bf16, &[16, 8]);
    let f = sb(DType::F32, 4, 0, 16);
    let pp = sb(DType::F32, 4, 64, 1);
    let ip = sb(DType::I32, 4, 68, 1);
    let i = sb(DType::I32, 4, 128, 16);
    let step = |op, operand, reverse| ScalarStep {
        op,
        operand,
        reverse,
    };
    let v = EngineId::Vector;
    b.push(
        v,
        Instr::TensorScalarChain {
            src: f,
            out: sb(DType::Bf16, 4, 256, 16),
            first: step(AluOp::Sub, Operand::PerPartition(pp), true),
            second: Some(step(AluOp::Power, Operand::Imm(2.0), false)),
        },
    );
    b.push(
        v,
        Instr::TensorScalarChain {
            src: i,
            out: sb(DType::I32, 4, 320, 16),
            first: step(AluOp::BitwiseAnd, Operand::Int(0xFF), false),
            second: Some(step(AluOp::LeftShift, Operand::PerPartition(ip), false)),
        },
    );
    b.push(
        EngineId::Scalar,
        Instr::TensorScalarChain {
            src: f,
            out: sb(DType::F32, 4, 384, 16),
            first: step(AluOp::Mul, Operand::Imm(3.0), false),
            second: Some(step(AluOp::Add, Operand::Int(-1), false)),
        },
    );
    b.push(
        v,
        Instr::ScalarTensorTensor {
            data: f,
            first: step(AluOp::Mul, Operand::PerPartition(pp), false),
            op1: AluOp::Max,
            data2: AccessPattern::psum(DType::F32, 0, 4, 0, 16),
            reverse1: true,
            out: sb(DType::F32, 4, 448, 16),
        },
    );
    b.push(
        v,
        Instr::TensorReduce {
            op: AluOp::Add,
            src: AccessPattern::new(Space::Sbuf, DType::F32, 0, 4, 0, &[(2, 8), (8, 1)]),
            out: sb(DType::F32, 4, 512, 2),
            axes: 1,
            negate: true,
        },
    );
    b.push(
        EngineId::Scalar,
        Instr::Activate {
            func: ActFn::GeluErf,
            src: f,
            out: sb(DType::F16, 4, 576, 16),
            scale: Operand::PerPartition(pp),
            bias: Bias::Imm(0.25),
            reduce: Some(ActReduce {
                op: AluOp::Max,
                out: sb(DType::F32, 4, 640, 1),
            }),
        },
    );
    b.push(
        v,
        Instr::Reciprocal {
            src: f,
            out: sb(DType::F32, 4, 704, 16),
        },
    );
    b.push(
        EngineId::Tensor,
        Instr::Transpose {
            src: sb(DType::Bf16, 4, 768, 16),
            out: AccessPattern::psum(DType::Bf16, 0, 16, 2048, 4),
        },
    );
    b.push(
        v,
        Instr::Transpose {
            src: sb(DType::F32, 4, 0, 16),
            out: sb(DType::F32, 16, 832, 4),
        },
    );
    b.push(
        EngineId::GpSimd,
        Instr::AffineSelect {
            on_true: f,
            out: sb(DType::F32, 4, 896, 16),
            on_false: f32::MIN,
            cmp: AluOp::GreaterEqual,
            offset: 0,
            channel_multiplier: 1,
            steps: [-1, 0, 0, 0],
        },
    );
    b.push(
        v,
        Instr::RangeSelect {
            on_true: f,
            out: sb(DType::F32, 4, 960, 16),
            cmp0: AluOp::GreaterEqual,
            bound0: pp,
            cmp1: AluOp::Less,
            bound1: sb(DType::F32, 4, 72, 1),
            range_start: 3,
            on_false: f32::MIN,
            reduce_max: Some(sb(DType::F32, 4, 76, 1)),
        },
    );
    b.push(
        v,
        Instr::BnStats {
            src: f,
            out: sb(DType::F32, 4, 1024, 6),
        },
    );
    b.push(
        v,
        Instr::BnAggr {
            src: sb(DType::F32, 4, 1024, 6),
            out: sb(DType::F32, 4, 1056, 2),
        },
    );
    b.push(
        v,
        Instr::TensorTensorScan {
            data0: f,
            data1: sb(DType::F32, 4, 1088, 16),
            out: sb(DType::F32, 4, 1152, 16),
            initial: Operand::Imm(0.0),
            op0: AluOp::Mul,
            op1: AluOp::Add,
            reverse0: false,
            reverse1: true,
        },
    );
    b.push(
        v,
        Instr::Max8 {
            src: f,
            out: sb(DType::F32, 4, 1216, 8),
        },
    );
    b.push(
        v,
        Instr::FindIndex8 {
            data: f,
            vals: sb(DType::F32, 4, 1216, 8),
            out: sb(DType::I32, 4, 1248, 8),
        },
    );
    // 1.0 instructions with 1.1 operations and assignments.
    b.push(
        EngineId::GpSimd,
        Instr::TensorTensor {
            op: AluOp::Power,
            a: f,
            b: f,
            out: sb(DType::F32, 4, 1280, 16),
        },
    );
    b.push(
        v,
        Instr::TensorScalar {
            op: AluOp::RightShift,
            src: i,
            scalar: 3.0,
            out: sb(DType::I32, 4, 1344, 16),
        },
    );
    b.push(
        EngineId::GpSimd,
        Instr::TensorCopy {
            src: f,
            out: sb(DType::Bf16, 4, 1408, 16),
        },
    );
    let block = |mem, index, offset, dtype, rows, cols, pitch, transposed| DmaBlock {
        mem,
        index,
        offset,
        dtype,
        rows,
        cols,
        pitch,
        transposed,
    };
    b.descriptors(&[
        DmaDescriptor {
            src: DmaEndpoint::Block(block(MemKind::Hbm, t, 0, DType::Bf16, 16, 8, 8, false)),
            dst: DmaEndpoint::Block(block(MemKind::Sbuf, 0, 4096, DType::Bf16, 8, 16, 0, true)),
            len: 256,
        },
        DmaDescriptor {
            src: DmaEndpoint::Block(block(MemKind::Sbuf, 0, 0, DType::F32, 4, 16, 0, false)),
            dst: DmaEndpoint::Block(block(MemKind::Sbuf, 8, 8192, DType::Bf16, 4, 16, 0, false)),
            len: 256,
        },
    ]);
    b.build().unwrap()
}

/// Rule: every format-1.1 instruction and block descriptor survives `to_bytes` /
/// `from_bytes` exactly, the header says 1.1, and re-encoding is stable.
#[test]
fn every_1_1_instruction_round_trips() {
    let p = every_1_1();
    assert_eq!(p.format_minor(), 1);
    assert_eq!(FORMAT_MINOR, 1);
    let bytes = p.to_bytes();
    assert_eq!(
        u16::from_le_bytes([bytes[10], bytes[11]]),
        1,
        "header minor"
    );
    let q = Program::from_bytes(&bytes).unwrap();
    assert_eq!(p, q);
    assert_eq!(q.to_bytes(), bytes);
    // Each instruction alone, too (a different neighbour cannot mask an encoding slip).
    for engine in EngineId::ALL {
        for ins in p.stream(engine).iter().filter(|i| !i.is_control()) {
            let mut one = ProgramBuilder::new("one");
            one.input("t", DType::Bf16, &[16, 8]);
            one.push(engine, *ins);
            let one = one.build().unwrap();
            assert_eq!(
                Program::from_bytes(&one.to_bytes()).unwrap(),
                one,
                "{ins:?}"
            );
        }
    }
}

/// Rule: a 1.1 program runs (no hazard, no error) on the simulator.
#[test]
fn every_1_1_instruction_executes() {
    let dev = Device::new(Instance::Trn1);
    let lp = dev.load(0, every_1_1()).unwrap();
    let r = dev.execute(&lp, &ExecOptions::default()).unwrap();
    r.result().unwrap();
}

/// Rule: a 1.1 feature under a 1.0 header is refused, naming the first feature.
#[test]
fn a_1_0_header_refuses_1_1_features() {
    let mut bytes = every_1_1().to_bytes();
    bytes[10] = 0;
    let e = Program::from_bytes(&bytes).unwrap_err();
    assert_eq!(e.status(), NrtStatus::Invalid);
    assert_eq!(
        e.message(),
        "TensorE pc 0 (Transpose on TensorE) needs format 1.1; the program's header says 1.0"
    );
    // A later minor is read with the newest rules this build knows.
    let mut bytes = every_1_1().to_bytes();
    bytes[10] = 7;
    assert_eq!(Program::from_bytes(&bytes).unwrap(), every_1_1());
}

/// Rule: a 1.1 header applies the 1.1 engine rules even to a program that uses only 1.0
/// instructions.
#[test]
fn a_1_1_header_applies_nki_engine_rules() {
    let p = legacy_program();
    let mut bytes = p.to_bytes();
    bytes[10] = 1;
    let e = Program::from_bytes(&bytes).unwrap_err();
    assert_eq!(
        e.message(),
        "VectorE pc 3: Activation cannot run on VectorE in a format 1.1 program (NKI runs it on \
         ScalarE; the format-1.0 assignment is accepted only in programs that use nothing of \
         format 1.1)"
    );
}

/// A builder whose program is a 1.1 one without any instruction: one (never triggered)
/// block descriptor.
fn builder_1_1() -> ProgramBuilder {
    let mut b = ProgramBuilder::new("r");
    let blk = |offset| {
        DmaEndpoint::Block(DmaBlock {
            mem: MemKind::Sbuf,
            index: 96,
            offset,
            dtype: DType::F32,
            rows: 1,
            cols: 1,
            pitch: 0,
            transposed: false,
        })
    };
    b.descriptors(&[DmaDescriptor {
        src: blk(0),
        dst: blk(4),
        len: 4,
    }]);
    b
}

fn refusal(engine: EngineId, ins: Instr) -> String {
    let mut b = builder_1_1();
    b.push(engine, ins);
    let e = b.build().unwrap_err();
    assert_eq!(e.status(), NrtStatus::Invalid);
    e.message().to_owned()
}

fn accepted(engine: EngineId, ins: Instr) {
    let mut b = builder_1_1();
    b.push(engine, ins);
    assert_eq!(b.program().format_minor(), 1);
    b.build().unwrap();
}

/// Rule (engine assignment): each instruction runs only on the engines NKI allows in a 1.1
/// program; the 1.0-only assignments are named as such; the messages are exact.
#[test]
fn engine_assignment_refusals_are_exact() {
    let a = sb(DType::F32, 4, 0, 8);
    let o = sb(DType::F32, 4, 64, 8);
    let act = Instr::Activation {
        func: ActFunc::Exp,
        src: a,
        out: o,
        scale: 1.0,
        bias: Bias::Imm(0.0),
    };
    assert_eq!(
        refusal(EngineId::Vector, act),
        "VectorE pc 0: Activation cannot run on VectorE in a format 1.1 program (NKI runs it on \
         ScalarE; the format-1.0 assignment is accepted only in programs that use nothing of \
         format 1.1)"
    );
    accepted(EngineId::Scalar, act);
    let tt = |op| Instr::TensorTensor {
        op,
        a,
        b: a,
        out: o,
    };
    assert_eq!(
        refusal(EngineId::Vector, tt(AluOp::Power)),
        "VectorE pc 0: TensorTensor power cannot run on VectorE (NKI runs it on GpSimdE)"
    );
    accepted(EngineId::GpSimd, tt(AluOp::Power));
    accepted(EngineId::GpSimd, tt(AluOp::Divide));
    assert_eq!(
        refusal(EngineId::Scalar, tt(AluOp::Min)),
        "ScalarE pc 0: TensorTensor cannot run on ScalarE (NKI runs it on VectorE or GpSimdE)"
    );
    let ia = sb(DType::I32, 4, 0, 8);
    let io = sb(DType::I32, 4, 64, 8);
    assert_eq!(
        refusal(
            EngineId::GpSimd,
            Instr::TensorTensor {
                op: AluOp::BitwiseXor,
                a: ia,
                b: ia,
                out: io
            }
        ),
        "GpSimdE pc 0: TensorTensor bitwise_xor cannot run on GpSimdE (NKI runs it on VectorE)"
    );
    assert_eq!(
        refusal(
            EngineId::Scalar,
            Instr::TensorScalar {
                op: AluOp::Sub,
                src: a,
                scalar: 1.0,
                out: o
            }
        ),
        "ScalarE pc 0: TensorScalar on ScalarE: subtract is not one of ScalarE's tensor-scalar \
         operations in a format 1.1 program (NKI: multiply, add, or multiply then add; use \
         VectorE; the format-1.0 assignment is accepted only in programs that use nothing of \
         format 1.1)"
    );
    let step = |op| ScalarStep {
        op,
        operand: Operand::Imm(2.0),
        reverse: false,
    };
    assert_eq!(
        refusal(
            EngineId::Scalar,
            Instr::TensorScalarChain {
                src: a,
                out: o,
                first: step(AluOp::Add),
                second: Some(step(AluOp::Mul)),
            }
        ),
        "ScalarE pc 0: TensorScalarChain on ScalarE: add then multiply is not one of ScalarE's \
         tensor-scalar operations in a format 1.1 program (NKI: multiply, add, or multiply then \
         add; use VectorE)"
    );
    assert_eq!(
        refusal(
            EngineId::Vector,
            Instr::Activate {
                func: ActFn::Silu,
                src: a,
                out: o,
                scale: Operand::Imm(1.0),
                bias: Bias::Imm(0.0),
                reduce: None,
            }
        ),
        "VectorE pc 0: Activate cannot run on VectorE (NKI runs it on ScalarE)"
    );
    assert_eq!(
        refusal(EngineId::Scalar, Instr::Reciprocal { src: a, out: o }),
        "ScalarE pc 0: Reciprocal cannot run on ScalarE (NKI runs it on VectorE)"
    );
    assert_eq!(
        refusal(
            EngineId::Scalar,
            Instr::Transpose {
                src: sb(DType::F32, 4, 0, 8),
                out: sb(DType::F32, 8, 64, 4)
            }
        ),
        "ScalarE pc 0: Transpose cannot run on ScalarE (NKI runs it on TensorE or VectorE)"
    );
    assert_eq!(
        refusal(
            EngineId::Vector,
            Instr::Transpose {
                src: sb(DType::F32, 64, 0, 8),
                out: sb(DType::F32, 8, 64, 64)
            }
        ),
        "VectorE pc 0: Transpose on VectorE: input [64, 8] exceeds one 32x32 block"
    );
    assert_eq!(
        refusal(
            EngineId::Tensor,
            Instr::Transpose {
                src: sb(DType::F32, 4, 0, 8),
                out: sb(DType::F32, 8, 64, 4)
            }
        ),
        "TensorE pc 0: Transpose output on TensorE: must be in PSUM, not SBUF"
    );
    assert_eq!(
        refusal(
            EngineId::GpSimd,
            Instr::TensorCopy {
                src: AccessPattern::psum(DType::F32, 0, 4, 0, 8),
                out: o
            }
        ),
        "GpSimdE pc 0: TensorCopy on GpSimdE: GpSimdE cannot access PSUM"
    );
    assert_eq!(
        refusal(
            EngineId::Vector,
            Instr::TensorTensor {
                op: AluOp::Add,
                a: AccessPattern::psum(DType::F32, 0, 4, 0, 8),
                b: AccessPattern::psum(DType::F32, 0, 4, 64, 8),
                out: o
            }
        ),
        "VectorE pc 0: TensorTensor: inputs a and b cannot both be in PSUM (NKI tensor_tensor)"
    );
    // NKI memset runs on VectorE or GpSimdE (a 1.1 assignment: 1.0 refuses VectorE).
    accepted(EngineId::Vector, Instr::Memset { out: o, bits: 0 });
    assert_eq!(
        refusal(EngineId::Scalar, Instr::Memset { out: o, bits: 0 }),
        "ScalarE pc 0: Memset cannot run on ScalarE (NKI runs it on VectorE or GpSimdE)"
    );
    assert_eq!(
        refusal(
            EngineId::Vector,
            Instr::AffineSelect {
                on_true: a,
                out: o,
                on_false: 0.0,
                cmp: AluOp::Less,
                offset: 0,
                channel_multiplier: 1,
                steps: [0; 4]
            }
        ),
        "VectorE pc 0: AffineSelect cannot run on VectorE (NKI runs it on GpSimdE)"
    );
    assert_eq!(
        refusal(
            EngineId::Scalar,
            Instr::BnStats {
                src: a,
                out: sb(DType::F32, 4, 64, 6)
            }
        ),
        "ScalarE pc 0: BnStats cannot run on ScalarE (NKI runs it on VectorE)"
    );
}

/// Rule: the 1.0-only assignments stay accepted in a program that uses nothing of 1.1.
#[test]
fn format_1_0_programs_keep_their_assignments() {
    let p = legacy_program();
    assert!(p.validate().is_ok());
    // The same program plus one 1.1 instruction is refused (at the first 1.0-only one).
    let mut q = p.clone();
    let last = q.streams[EngineId::Vector.index()].len() - 1;
    q.streams[EngineId::Vector.index()].insert(
        last,
        Instr::Reciprocal {
            src: sb(DType::F32, 4, 4096, 4),
            out: sb(DType::F32, 4, 4160, 4),
        },
    );
    assert_eq!(q.format_minor(), 1);
    let e = q.validate().unwrap_err();
    assert!(e.message().starts_with("VectorE pc "), "{e}");
    assert!(e.message().contains("in a format 1.1 program"), "{e}");
}

/// Rule: operand rules of the new instructions (a sample, exact messages).
#[test]
fn operand_rules_are_exact() {
    let f = sb(DType::F32, 4, 0, 8);
    let msg = |engine, ins| refusal(engine, ins);
    assert_eq!(
        msg(
            EngineId::Vector,
            Instr::TensorTensor {
                op: AluOp::BitwiseAnd,
                a: f,
                b: f,
                out: sb(DType::F32, 4, 64, 8)
            }
        ),
        "VectorE pc 0 (TensorTensor): bitwise_and is a bitvec operation: the input a must be \
         int32, not fp32"
    );
    assert_eq!(
        msg(
            EngineId::Vector,
            Instr::TensorReduce {
                op: AluOp::Divide,
                src: f,
                out: sb(DType::F32, 4, 64, 1),
                axes: 1,
                negate: false
            }
        ),
        "VectorE pc 0 (TensorReduce): TensorReduce: divide is not a reduction operation"
    );
    assert_eq!(
        msg(
            EngineId::Vector,
            Instr::TensorReduce {
                op: AluOp::Add,
                src: AccessPattern::new(Space::Sbuf, DType::F32, 0, 4, 0, &[(2, 4), (4, 1)]),
                out: sb(DType::F32, 4, 64, 1),
                axes: 1,
                negate: false
            }
        ),
        "VectorE pc 0 (TensorReduce): TensorReduce output: must be [4, 2], got [4, 1]"
    );
    assert_eq!(
        msg(
            EngineId::Vector,
            Instr::BnStats {
                src: AccessPattern::new(Space::Sbuf, DType::F32, 0, 4, 0, &[(513, 1)]),
                out: sb(DType::F32, 4, 4096, 6)
            }
        ),
        "VectorE pc 0 (BnStats): BnStats input: free size 513 exceeds 512"
    );
    assert_eq!(
        msg(
            EngineId::Vector,
            Instr::Max8 {
                src: sb(DType::F32, 4, 0, 7),
                out: sb(DType::F32, 4, 64, 8)
            }
        ),
        "VectorE pc 0 (Max8): Max8 input: free size 7 is outside 8..=16384"
    );
    assert_eq!(
        msg(
            EngineId::Vector,
            Instr::FindIndex8 {
                data: f,
                vals: sb(DType::F32, 4, 64, 8),
                out: sb(DType::F32, 4, 128, 8)
            }
        ),
        "VectorE pc 0 (FindIndex8): FindIndex8 output: indices are int32, not fp32"
    );
    assert_eq!(
        msg(
            EngineId::Scalar,
            Instr::Activate {
                func: ActFn::Exp,
                src: f,
                out: sb(DType::F32, 4, 64, 8),
                scale: Operand::PerPartition(sb(DType::Bf16, 4, 128, 1)),
                bias: Bias::Imm(0.0),
                reduce: None
            }
        ),
        "ScalarE pc 0 (Activate): Activate scale: must be fp32, not bf16"
    );
    assert_eq!(
        msg(
            EngineId::Vector,
            Instr::RangeSelect {
                on_true: f,
                out: sb(DType::F32, 4, 64, 8),
                cmp0: AluOp::NotEqual,
                bound0: sb(DType::F32, 4, 128, 1),
                cmp1: AluOp::Less,
                bound1: sb(DType::F32, 4, 132, 1),
                range_start: 0,
                on_false: 0.0,
                reduce_max: None
            }
        ),
        "VectorE pc 0 (RangeSelect): RangeSelect bound0: not_equal is not one of equal, less, \
         less_equal, greater, greater_equal"
    );
    assert_eq!(
        msg(
            EngineId::Vector,
            Instr::Transpose {
                src: f,
                out: sb(DType::Bf16, 8, 64, 4)
            }
        ),
        "VectorE pc 0 (Transpose): Transpose output: dtype bf16 differs from the input's fp32"
    );
}

/// Rule: block descriptors — shapes, the byte count, transposes keep the dtype.
#[test]
fn block_descriptor_rules_are_exact() {
    let blk = |mem, index, dtype, rows, cols, transposed| {
        DmaEndpoint::Block(DmaBlock {
            mem,
            index,
            offset: 0,
            dtype,
            rows,
            cols,
            pitch: cols,
            transposed,
        })
    };
    let check = |d: DmaDescriptor| {
        let mut b = ProgramBuilder::new("d");
        b.input("x", DType::F32, &[8, 8]);
        b.descriptors(&[d]);
        b.build().unwrap_err().message().to_owned()
    };
    assert_eq!(
        check(DmaDescriptor {
            src: blk(MemKind::Hbm, 0, DType::F32, 8, 8, false),
            dst: blk(MemKind::Sbuf, 0, DType::Bf16, 8, 8, true),
            len: 256
        }),
        "DMA descriptor 0: a transposing descriptor keeps the element type (NKI \
         dma_transpose), fp32 -> bf16 casts"
    );
    assert_eq!(
        check(DmaDescriptor {
            src: blk(MemKind::Hbm, 0, DType::F32, 8, 8, false),
            dst: blk(MemKind::Sbuf, 0, DType::F32, 4, 16, false),
            len: 256
        }),
        "DMA descriptor 0: the source block holds a [8, 8] transfer, the destination a [4, 16] \
         one"
    );
    assert_eq!(
        check(DmaDescriptor {
            src: blk(MemKind::Hbm, 0, DType::F32, 8, 8, false),
            dst: blk(MemKind::Sbuf, 0, DType::F32, 8, 8, false),
            len: 255
        }),
        "DMA descriptor 0: len 255 is not the source block's 256 bytes"
    );
    assert_eq!(
        check(DmaDescriptor {
            src: blk(MemKind::Hbm, 0, DType::F32, 8, 8, false),
            dst: DmaEndpoint::Sbuf {
                partition: 0,
                offset: 0
            },
            len: 256
        }),
        "DMA descriptor 0: a block descriptor needs block endpoints at both ends"
    );
    assert_eq!(
        check(DmaDescriptor {
            src: blk(MemKind::Hbm, 0, DType::F32, 9, 8, false),
            dst: blk(MemKind::Sbuf, 0, DType::F32, 9, 8, false),
            len: 288
        }),
        "DMA descriptor 0: source block: [9, 8] fp32 at byte 0 (pitch 8) outside tensor 0 of \
         256 bytes"
    );
    assert_eq!(
        check(DmaDescriptor {
            src: blk(MemKind::Hbm, 0, DType::F32, 8, 8, false),
            dst: blk(MemKind::Psum, 0, DType::F32, 8, 8, false),
            len: 256
        }),
        "DMA descriptor 0: HBM->PSUM is not a supported direction (HBM<->SBUF, SBUF->SBUF, \
         PSUM->SBUF)"
    );
}

/// Rule: `from_bytes` never panics on mutated or truncated 1.1 programs, and whatever it
/// accepts loads and runs (or fails cleanly).
#[test]
fn mutated_1_1_programs_never_panic() {
    let bytes = every_1_1().to_bytes();
    for n in (0..bytes.len()).step_by(7) {
        assert!(Program::from_bytes(&bytes[..n]).is_err());
    }
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut accepted = 0;
    for _ in 0..3000 {
        let mut m = bytes.clone();
        for _ in 0..(next() % 4 + 1) {
            let i = (next() as usize) % m.len();
            m[i] = match next() % 3 {
                0 => next() as u8,
                1 => m[i] ^ (1 << (next() % 8)),
                _ => 0xFF,
            };
        }
        if let Ok(p) = Program::from_bytes(&m) {
            accepted += 1;
            let dev = Device::with_hbm_capacity(Instance::Trn1, 1 << 30);
            if let Ok(lp) = dev.load(0, p) {
                let opts = ExecOptions {
                    max_ticks: 2_000_000,
                    ..Default::default()
                };
                let _ = dev.execute(&lp, &opts).unwrap();
            }
        }
    }
    println!("{accepted} of 3000 mutants accepted");
}

/// Rule (cost): each new instruction's ticks follow its documented rule: N free elements per
/// streamed input (the published VectorE/ScalarE rule), + 60 access overhead, reciprocal 8N
/// (NKI engine selection), TensorE transpose as a LoadStationary plus a MultiplyMoving;
/// VectorE runs at 0.8 cycles per tick, ScalarE/GpSimdE at 1, TensorE at 2.
#[test]
fn costs_follow_the_published_rules() {
    use ops_common::{Buf, program_one, run_raw, slice_ticks};
    let big = |dt| Buf::sbuf(dt, 128, 0, &vec![0.5; 128 * 512]);
    let o = |dt, n| sb(dt, 128, 4096, n);
    let pp = sb(DType::F32, 128, 8192, 1);
    let vec_ticks = |cycles: u64| cycles * 5 / 4;
    let step = |op| ScalarStep {
        op,
        operand: Operand::PerPartition(pp),
        reverse: false,
    };
    let x = big(DType::Bf16);
    let f = x.ap;
    let cases: Vec<(EngineId, Instr, u64)> = vec![
        (
            EngineId::Vector,
            Instr::TensorScalarChain {
                src: f,
                out: o(DType::Bf16, 512),
                first: step(AluOp::Mul),
                second: Some(step(AluOp::Add)),
            },
            vec_ticks(512 + 60),
        ),
        (
            EngineId::Scalar,
            Instr::TensorScalarChain {
                src: f,
                out: o(DType::Bf16, 512),
                first: step(AluOp::Mul),
                second: Some(step(AluOp::Add)),
            },
            512 + 60,
        ),
        (
            EngineId::Vector,
            Instr::ScalarTensorTensor {
                data: f,
                first: step(AluOp::Mul),
                op1: AluOp::Add,
                data2: f,
                reverse1: false,
                out: o(DType::Bf16, 512),
            },
            vec_ticks(2 * 512 + 60),
        ),
        (
            EngineId::Vector,
            Instr::TensorReduce {
                op: AluOp::Max,
                src: f,
                out: o(DType::F32, 1),
                axes: 1,
                negate: false,
            },
            vec_ticks(512 + 60),
        ),
        (
            EngineId::Vector,
            Instr::Reciprocal {
                src: f,
                out: o(DType::Bf16, 512),
            },
            vec_ticks(8 * 512 + 60),
        ),
        (
            EngineId::GpSimd,
            Instr::AffineSelect {
                on_true: f,
                out: o(DType::Bf16, 512),
                on_false: 0.0,
                cmp: AluOp::Less,
                offset: 0,
                channel_multiplier: 1,
                steps: [-1, 0, 0, 0],
            },
            512 + 60,
        ),
        (
            EngineId::Vector,
            Instr::TensorTensorScan {
                data0: f,
                data1: f,
                out: o(DType::F32, 512),
                initial: Operand::Imm(0.0),
                op0: AluOp::Mul,
                op1: AluOp::Add,
                reverse0: false,
                reverse1: false,
            },
            vec_ticks(2 * 512 + 60),
        ),
        (
            EngineId::Vector,
            Instr::Max8 {
                src: f,
                out: o(DType::F32, 8),
            },
            vec_ticks(512 + 60),
        ),
        (
            EngineId::Vector,
            Instr::BnStats {
                src: f,
                out: o(DType::F32, 6),
            },
            vec_ticks(512 + 60),
        ),
        (
            EngineId::Tensor,
            Instr::Transpose {
                src: sb(DType::Bf16, 128, 0, 128),
                out: AccessPattern::psum(DType::Bf16, 0, 128, 0, 128),
            },
            // LS ⌈128/4⌉ = 32 + MM max(128, 64) = 128 PE cycles, 2 per tick.
            (32 + 128) / 2,
        ),
        (
            EngineId::Tensor,
            Instr::Transpose {
                src: sb(DType::F32, 64, 0, 96),
                out: AccessPattern::psum(DType::F32, 0, 96, 0, 64),
            },
            // (⌈96/4⌉ + max(64, 64)) × 4 for 4-byte elements.
            (24 + 64) * 4 / 2,
        ),
        (
            EngineId::Vector,
            Instr::Transpose {
                src: sb(DType::F32, 32, 0, 32),
                out: sb(DType::F32, 32, 4096, 32),
            },
            // Small (N ≤ 128): + 100.
            vec_ticks(32 + 60 + 100),
        ),
    ];
    for (engine, ins, want) in cases {
        let one = std::slice::from_ref(&x);
        let (_, r) = run_raw(program_one(engine, ins, one, &[]), one);
        assert_eq!(
            slice_ticks(&r, engine, ins.name()),
            want,
            "{} on {engine}",
            ins.name()
        );
    }
}

/// Runs `p` (no inputs) and returns its hazards as `(first op, second op)` names with the
/// second access's region.
fn hazards_of(p: Program) -> Vec<(String, String, nrt_sim::engine::Region)> {
    use nrt_sim::engine::Actor;
    let dev = Device::new(Instance::Trn1);
    let lp = dev.load(0, p).unwrap();
    let r = dev.execute(&lp, &ExecOptions::default()).unwrap();
    assert_eq!(r.status, NrtStatus::ExecCompletedWithErr);
    let name = |a: &Actor| match a {
        Actor::Engine { op, .. } => (*op).to_owned(),
        Actor::Dma { .. } => "DMA".to_owned(),
    };
    r.hazards
        .iter()
        .map(|h| (name(&h.first.actor), name(&h.second.actor), h.second.region))
        .collect()
}

/// Whether `h` has a hazard between `x` and `y` (in either order) with a region `want` holds
/// for (either access's region is reported as the second one's).
fn race(
    h: &[(String, String, nrt_sim::engine::Region)],
    x: &str,
    y: &str,
    want: impl Fn(&nrt_sim::engine::Region) -> bool,
) -> bool {
    h.iter()
        .any(|(a, b, r)| ((a == x && b == y) || (a == y && b == x)) && want(r))
}

/// Rule (hazard footprints): the hazard detector sees every operand of the new instructions —
/// a second output (an `Activate` reduction), a per-partition operand, and a block DMA
/// endpoint spanning partitions.
#[test]
fn hazard_footprints_cover_new_operands() {
    // ScalarE writes the reduction at partition 0..4, bytes 640..644; VectorE reads it unordered.
    let mut b = ProgramBuilder::new("h1");
    b.push(
        EngineId::Scalar,
        Instr::Activate {
            func: ActFn::Exp,
            src: sb(DType::F32, 4, 0, 16),
            out: sb(DType::F32, 4, 256, 16),
            scale: Operand::Imm(1.0),
            bias: Bias::Imm(0.0),
            reduce: Some(ActReduce {
                op: AluOp::Add,
                out: sb(DType::F32, 4, 640, 1),
            }),
        },
    );
    b.push(
        EngineId::Vector,
        Instr::TensorCopy {
            src: sb(DType::F32, 4, 640, 1),
            out: sb(DType::F32, 4, 1024, 1),
        },
    );
    let h = hazards_of(b.build().unwrap());
    assert!(race(&h, "TensorCopy", "Activate", |r| r.b0 == 640), "{h:?}");
    // GpSimdE writes a per-partition operand that VectorE's chain reads unordered.
    let mut b = ProgramBuilder::new("h2");
    b.push(
        EngineId::GpSimd,
        Instr::Memset {
            out: sb(DType::F32, 4, 64, 1),
            bits: 0,
        },
    );
    b.push(
        EngineId::Vector,
        Instr::TensorScalarChain {
            src: sb(DType::F32, 4, 0, 16),
            out: sb(DType::F32, 4, 256, 16),
            first: ScalarStep {
                op: AluOp::Add,
                operand: Operand::PerPartition(sb(DType::F32, 4, 64, 1)),
                reverse: false,
            },
            second: None,
        },
    );
    let h = hazards_of(b.build().unwrap());
    assert!(
        race(&h, "Memset", "TensorScalarChain", |r| (r.b0, r.b1)
            == (64, 68)),
        "{h:?}"
    );
    // A transposing block DMA writes partitions 0..8; VectorE reads partition 5 unordered.
    let mut b = ProgramBuilder::new("h3");
    let x = b.input("x", DType::Bf16, &[4, 8]);
    let s = b.sem().unwrap();
    let blk = |mem, index, rows, cols, transposed| {
        DmaEndpoint::Block(DmaBlock {
            mem,
            index,
            offset: 0,
            dtype: DType::Bf16,
            rows,
            cols,
            pitch: cols,
            transposed,
        })
    };
    b.dma_on(
        EngineId::Sync,
        0,
        0,
        &[DmaDescriptor {
            src: blk(MemKind::Hbm, x, 4, 8, false),
            dst: blk(MemKind::Sbuf, 0, 8, 4, true),
            len: 64,
        }],
        s,
        1,
    );
    b.push(
        EngineId::Vector,
        Instr::Reciprocal {
            src: AccessPattern::sbuf(DType::Bf16, 0, 8, 0, 4),
            out: sb(DType::F32, 8, 256, 4),
        },
    );
    b.push(EngineId::Vector, Instr::Notify { payload: 1 });
    let h = hazards_of(b.build().unwrap());
    assert!(
        race(&h, "Reciprocal", "DMA", |r| r.p1 - r.p0 == 8
            && (r.b0, r.b1) == (0, 8)),
        "{h:?}"
    );
}

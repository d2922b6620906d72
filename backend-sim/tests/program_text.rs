//! The program text format: every program the project builds (the kernels of
//! `engine::kernels`, a format-1.0 program with every 1.0 instruction, a format-1.1 program
//! with every 1.1 instruction and block descriptor, special floats and names) survives
//! `assemble(disassemble(p))` byte for byte, and `disassemble(assemble(text)) == text`; a
//! hand-written text assembles to the program built in code; malformed texts fail with exact
//! messages.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use nrt_core::NrtStatus;
use nrt_sim::engine::{
    AccessPattern, ActFn, ActFunc, ActReduce, AluOp, Bias, DType, DmaBlock, DmaDescriptor,
    DmaEndpoint, EngineId, Instr, MemKind, Operand, Program, ProgramBuilder, ScalarStep, SemCmp,
    Space, TensorKind, assemble, disassemble, kernels,
};

fn sb(dt: DType, parts: u8, off: u32, n: u16) -> AccessPattern {
    AccessPattern::sbuf(dt, 0, parts, off, n)
}

/// `assemble(disassemble(p))` encodes to the same bytes as `p` (the structural comparison
/// would fail on NaN immediates, which are never equal), and the text is a fixed point.
fn round_trip(p: &Program) -> String {
    let text = disassemble(p);
    let q = assemble(&text).unwrap_or_else(|e| panic!("{}: {e:?}\n{text}", p.name));
    assert_eq!(q.to_bytes(), p.to_bytes(), "{}", p.name);
    assert_eq!(disassemble(&q), text, "{}", p.name);
    text
}

/// A format-1.0 program with every 1.0 instruction kind (the 1.0-only assignments included),
/// a constant, a scratch tensor, an infinite scale and a name that needs escapes.
fn legacy_program() -> Program {
    let mut b = ProgramBuilder::new("legacy \"1.0\"\n\u{1F600}");
    b.constant("w \\ #", DType::F16, &[3], vec![0, 60, 0, 188, 255, 127]);
    b.tensor("scratch", TensorKind::Scratch, DType::I32, &[]);
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
            scalar: 0.1,
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
            scale: f32::INFINITY,
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
            second: Some(step(AluOp::Power, Operand::Imm(f32::from_bits(1)), false)), // least subnormal
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
            second: Some(step(AluOp::Add, Operand::Int(i32::MIN), false)),
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
            bias: Bias::Imm(-0.0),
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
            on_false: f32::from_bits(0xFFC0_1234), // a NaN: payload and sign
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
            initial: Operand::Imm(f32::NEG_INFINITY),
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

/// Rule: every kernel of `engine::kernels`, over its shapes, dtypes and functions, round-trips.
#[test]
fn every_kernel_round_trips() {
    let mut programs = Vec::new();
    for (m, k, n) in [(4, 8, 16), (192, 256, 640), (130, 129, 513)] {
        for (i, o) in [(DType::Bf16, DType::F32), (DType::F32, DType::Bf16)] {
            programs.push(kernels::matmul(m, k, n, i, o).unwrap());
        }
    }
    for op in [kernels::Elementwise::Add, kernels::Elementwise::Mul] {
        for dt in DType::ALL {
            programs.push(kernels::elementwise(op, 200, 5000, dt).unwrap());
        }
    }
    for code in 0..5 {
        let f = ActFunc::from_code(code).unwrap();
        programs.push(kernels::bias_activation(f, 130, 4100, DType::F16).unwrap());
    }
    programs.push(kernels::mlp(32, 96, 160, 10, DType::Bf16, ActFunc::Relu).unwrap());
    programs.push(kernels::mlp(512, 300, 200, 130, DType::F32, ActFunc::Gelu).unwrap());
    for p in &programs {
        let text = round_trip(p);
        assert!(text.starts_with("# nrt-sim program text"));
    }
}

/// Rule: a format-1.0 program and a format-1.1 program with every instruction, special
/// floats (NaN payload and sign, −0, ±∞, the least subnormal, 0.1) and escaped names
/// round-trip; the header says the program's format.
#[test]
fn every_instruction_round_trips() {
    let legacy = legacy_program();
    assert_eq!(legacy.format_minor(), 0);
    let text = round_trip(&legacy);
    assert!(text.contains("\n.format 1.0\n"), "{text}");
    for want in [
        ".program \"legacy \\\"1.0\\\"\\n\u{1F600}\"",
        ".tensor \"w \\\\ #\" const fp16 [3]\n.data \"w \\\\ #\" 003c00bcff7f\n",
        ".tensor \"scratch\" scratch int32 []",
        ".sem 7 init=11",
        "tensor_scalar op=multiply src=sbuf.fp32[0:4][0; [1,8]] scalar=0.1 \
         out=sbuf.bf16[0:4][192; [1,8]]",
        "activation func=tanh src=sbuf.fp32[0:4][0; [1,8]] out=sbuf.fp32[0:4][320; [1,8]] \
         scale=inf bias=0.5",
        "memset out=sbuf.fp32[0:4][512; [1,8]] bits=0x3f800000",
        "iota out=sbuf.int32[0:4][576; [4,2], [1,4]] base=3 partition_step=-2 free_step=5",
        "nc_matmul moving=sbuf.fp32[0:4][0; [1,8]] dst=psum.fp32[0:4][0; [1,8]] accumulate=true",
        "sem_wait sem=5 cmp=eq value=3",
        "# dma 1 queue 2: VectorE pc 5 runs descriptors 4..8, then sem 6 += 1",
        ".desc 4 src=sbuf:0+64 dst=hbm:\"y\"+0 len=32",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
    let every = every_1_1();
    assert_eq!(every.format_minor(), 1);
    let text = round_trip(&every);
    for want in [
        "\n.format 1.1\n",
        "first=(subtract sbuf.fp32[0:4][64; [1,1]] reverse=true) \
         second=(power 1e-45 reverse=false)",
        "first=(multiply 3.0 reverse=false) second=(add -2147483648 reverse=false)",
        "on_false=nan:0xffc01234",
        "bias=-0.0 reduce=(maximum sbuf.fp32[0:4][640; [1,1]])",
        "initial=-inf",
        "steps=[-1, 0, 0, 0]",
        ".desc 0 src=block(hbm:\"t\"+0 bf16 [16, 8] pitch=8 transposed=false) \
         dst=block(sbuf:0+4096 bf16 [8, 16] pitch=0 transposed=true) len=256",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
    // The NaN keeps its payload and sign through the text.
    let q = assemble(&text).unwrap();
    let on_false = q
        .stream(EngineId::GpSimd)
        .iter()
        .find_map(|i| match i {
            Instr::AffineSelect { on_false, .. } => Some(on_false.to_bits()),
            _ => None,
        })
        .unwrap();
    assert_eq!(on_false, 0xFFC0_1234);
}

/// Rule: a text written by hand (comments, blank lines, extra spaces, hex integers, integer
/// floats, `nan`) assembles to the program built in code.
#[test]
fn hand_written_text_assembles_to_the_built_program() {
    let text = r#"
        # scale a [2, 4] fp32 tensor by 3 and add 1
        .format 1.1
        .program "scale"
        .tensor "x" input fp32 [2, 4]
        .tensor "y" output fp32 [2, 4]
        .desc 0 src=hbm:"x"+0 dst=sbuf:0+0 len=16
        .desc 1 src=hbm:0+16 dst=sbuf:1+0 len=16      # tensor 0 by index
        .desc 2 src=sbuf:0+64 dst=hbm:"y"+0 len=16
        .desc 3 src=sbuf:1+64 dst=hbm:"y"+16 len=0x10
        .engine SyncE
            dma_trigger dma=0 queue=0 first=0 count=2 sem=0 inc=1
            halt
        .engine VectorE
            sem_wait sem=0 cmp=ge value=1
            tensor_scalar_chain src=sbuf.fp32[0:2][0; [1,4]] out=sbuf.fp32[0:2][64; [1,4]] first=(multiply 3 reverse=false) second=(add 1.0 reverse=false)
            tensor_scalar op=maximum src=sbuf.fp32[0:2][64; [1,4]] scalar=nan out=sbuf.fp32[0:2][64; [1,4]]
            dma_trigger dma=1 queue=0 first=2 count=2 sem=1 inc=1
            halt
        .engine TensorE
            halt
        .engine ScalarE
            halt
        .engine GpSimdE
            sem_wait sem=1 cmp=ge value=1
            halt
    "#;
    let mut b = ProgramBuilder::new("scale");
    let x = b.input("x", DType::F32, &[2, 4]);
    let y = b.output("y", DType::F32, &[2, 4]);
    let d = |src, dst| DmaDescriptor { src, dst, len: 16 };
    let sbuf = |partition, offset| DmaEndpoint::Sbuf { partition, offset };
    let hbm = |tensor, offset| DmaEndpoint::Hbm { tensor, offset };
    b.descriptors(&[
        d(hbm(x, 0), sbuf(0, 0)),
        d(hbm(x, 16), sbuf(1, 0)),
        d(sbuf(0, 64), hbm(y, 0)),
        d(sbuf(1, 64), hbm(y, 16)),
    ]);
    let trig = |dma, first, sem| Instr::DmaTrigger {
        dma,
        queue: 0,
        first,
        count: 2,
        sem,
        inc: 1,
    };
    b.push(EngineId::Sync, trig(0, 0, 0));
    b.wait(EngineId::Vector, 0, 1);
    let ap = |off| sb(DType::F32, 2, off, 4);
    let step = |op, v| ScalarStep {
        op,
        operand: Operand::Imm(v),
        reverse: false,
    };
    b.push(
        EngineId::Vector,
        Instr::TensorScalarChain {
            src: ap(0),
            out: ap(64),
            first: ScalarStep {
                operand: Operand::Int(3),
                ..step(AluOp::Mul, 0.0)
            },
            second: Some(step(AluOp::Add, 1.0)),
        },
    );
    b.push(
        EngineId::Vector,
        Instr::TensorScalar {
            op: AluOp::Max,
            src: ap(64),
            scalar: f32::from_bits(0x7FC0_0000),
            out: ap(64),
        },
    );
    b.push(EngineId::Vector, trig(1, 2, 1));
    b.wait(EngineId::GpSimd, 1, 1);
    let want = b.build().unwrap();
    let got = assemble(text).unwrap();
    assert_eq!(got.to_bytes(), want.to_bytes());
    // The text is a 1.1 program (the chain), and says so.
    assert_eq!(got.format_minor(), 1);
}

fn assemble_err(text: &str) -> (NrtStatus, String) {
    let e = assemble(text).unwrap_err();
    (e.status(), e.message().to_owned())
}

/// Rule: malformed texts fail with the line, the column and what was expected; validation
/// failures are the decoder's messages with the line of the item they name.
#[test]
fn malformed_texts_fail_with_exact_messages() {
    let ok = disassemble(&legacy_program());
    let head = ".format 1.0\n.program \"p\"\n";
    let cases: Vec<(String, NrtStatus, &str)> = vec![
        (
            String::new(),
            NrtStatus::Invalid,
            "line 1, column 1: expected `.format 1.N`, found the end of the text",
        ),
        (
            ".program \"p\"\n".into(),
            NrtStatus::Invalid,
            "line 1, column 1: expected `.format 1.N` (the first line), found `.`",
        ),
        (
            ".format 2.0\n".into(),
            NrtStatus::UnsupportedNeffVersion,
            "line 1: simulator program format 2.0 is not supported (this build reads 1.x)",
        ),
        (
            format!("{head}.tensor \"a\" input fp33 [4]\n"),
            NrtStatus::Invalid,
            "line 3, column 19: expected a dtype (fp32, bf16, fp16 or int32), found `fp33`",
        ),
        (
            format!("{head}.engine VectorE\n    tensor_copy src=sbuf.fp32[0:4][0; [1,8]]\n"),
            NrtStatus::Invalid,
            "line 4, column 45: expected `out=`, found the end of the line",
        ),
        (
            format!("{head}.engine VectorE\n    tensor_copy src=sbuf.fp32[0:4][0; [1,8] out=x\n"),
            NrtStatus::Invalid,
            "line 4, column 45: expected `,`, found `out`",
        ),
        (
            format!("{head}.engine VectorE\n    sem_inc sem=256 value=1\n"),
            NrtStatus::Invalid,
            "line 4, column 17: expected sem (an integer in 0..=255), found `256`",
        ),
        (
            format!("{head}.engine VectorE\n    tensor_add a=1\n"),
            NrtStatus::Invalid,
            "line 4, column 5: expected an instruction (sem_wait, sem_inc, sem_set, \
             dma_trigger, notify, halt, loop_begin, loop_end, load_stationary, nc_matmul, tensor_tensor, \
             tensor_scalar, activation, tensor_copy, memset, iota, tensor_scalar_chain, \
             scalar_tensor_tensor, tensor_reduce, activate, reciprocal, nc_transpose, \
             affine_select, range_select, bn_stats, bn_aggr, tensor_tensor_scan, max8, \
             nc_find_index8), found `tensor_add`",
        ),
        (
            format!("{head}.desc 0 src=hbm:\"nope\"+0 dst=sbuf:0+0 len=4\n"),
            NrtStatus::Invalid,
            "line 3, column 17: no tensor 'nope' declared above",
        ),
        (
            format!("{head}.desc 1 src=sbuf:0+0 dst=sbuf:1+0 len=4\n"),
            NrtStatus::Invalid,
            "line 3, column 7: expected descriptor index 0 (an integer in 0..=0), found `1`",
        ),
        (
            format!("{head}halt\n"),
            NrtStatus::Invalid,
            "line 3, column 1: expected a directive (`.tensor`, `.engine`, ...), found `halt`",
        ),
        (
            format!("{head}.program \"unterminated\n"),
            NrtStatus::Invalid,
            "line 3, column 10: unterminated string",
        ),
        (
            format!("{head}.engine VectorE\n    halt\n.engine VectorE\n"),
            NrtStatus::Invalid,
            "line 5, column 9: a second `.engine VectorE` section",
        ),
        (
            format!("{head}.engine VectorE\n    halt\n"),
            NrtStatus::Invalid,
            "SyncE: the stream must end with Halt",
        ),
        (
            // Validation names the instruction; the assembler adds its line.
            ok.replacen(
                "sem_wait sem=5 cmp=eq value=3",
                "sem_wait sem=5 cmp=eq value=3\n    halt",
                1,
            ),
            NrtStatus::Invalid,
            "line 48: VectorE pc 5: Halt must be the last instruction",
        ),
        (
            // A 1.1 instruction makes the program 1.1, whose rules refuse 1.0's assignments.
            ok.replacen(
                "tensor_copy src=sbuf.fp32[0:4][0; [1,8]] out=sbuf.int32[0:4][448; [1,8]]",
                "reciprocal src=sbuf.fp32[0:4][0; [1,8]] out=sbuf.fp32[0:4][448; [1,8]]",
                1,
            ),
            NrtStatus::Invalid,
            "line 46: VectorE pc 3: Activation cannot run on VectorE in a format 1.1 program \
             (NKI runs it on ScalarE; the format-1.0 assignment is accepted only in programs \
             that use nothing of format 1.1)",
        ),
        (
            // A 1.1 program under a 1.0 header, as the decoder refuses it.
            disassemble(&every_1_1()).replacen(".format 1.1", ".format 1.0", 1),
            NrtStatus::Invalid,
            "line 16: TensorE pc 0 (Transpose on TensorE) needs format 1.1; the program's \
             header says 1.0",
        ),
    ];
    for (text, status, want) in cases {
        let (s, msg) = assemble_err(&text);
        assert_eq!((s, msg.as_str()), (status, want), "{text}");
    }
}

/// Rule: the assembler's validation is the decoder's: the same program under the same header
/// minor fails with the same message (the assembler adds the line).
#[test]
fn validation_is_the_decoders() {
    let mut bytes = every_1_1().to_bytes();
    bytes[10] = 0; // header minor 1.0
    let e = Program::from_bytes(&bytes).unwrap_err();
    let text = disassemble(&every_1_1()).replacen(".format 1.1", ".format 1.0", 1);
    let t = assemble(&text).unwrap_err();
    assert_eq!(t.status(), e.status());
    assert_eq!(t.message(), format!("line 16: {}", e.message()));
    // A 1.0 program may say 1.1: both then apply NKI's assignments.
    let legacy = legacy_program();
    let mut bytes = legacy.to_bytes();
    bytes[10] = 1;
    let e = Program::from_bytes(&bytes).unwrap_err();
    let text = disassemble(&legacy).replacen(".format 1.0", ".format 1.1", 1);
    let t = assemble(&text).unwrap_err();
    assert_eq!(t.message(), format!("line 46: {}", e.message()));
}

/// Rule: arbitrary edits of a valid text (every prefix, every line dropped or doubled)
/// never panic.
#[test]
fn mutated_texts_never_panic() {
    let text = disassemble(&every_1_1());
    for cut in (0..text.len())
        .filter(|&i| text.is_char_boundary(i))
        .step_by(7)
    {
        let _ = assemble(&text[..cut]);
    }
    let lines: Vec<&str> = text.lines().collect();
    for i in 0..lines.len() {
        let mut dropped = lines.clone();
        dropped.remove(i);
        let _ = assemble(&dropped.join("\n"));
        let mut doubled = lines.clone();
        doubled.insert(i, lines[i]);
        let _ = assemble(&doubled.join("\n"));
    }
}

/// The text block of `docs/SIM_ISA.md`'s "Program text" section.
fn docs_example() -> String {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/SIM_ISA.md"))
        .unwrap();
    let sec = &doc[doc.find("## Program text").unwrap()..];
    let start = sec.find("```\n").unwrap() + 4;
    let len = sec[start..].find("```\n").unwrap();
    sec[start..start + len].to_owned()
}

/// Rule: the documentation's example is a disassembly: it assembles, and disassembles to
/// itself.
#[test]
fn the_documented_example_is_a_disassembly() {
    let text = docs_example();
    let p = assemble(&text).unwrap();
    assert_eq!(disassemble(&p), text);
}

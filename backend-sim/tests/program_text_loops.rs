//! The program text format with loops (format 1.1): `loop_begin` / `loop_end` (bodies
//! indented) and dynamic terms (`with SLOT += STEP*rREG, ...` after their instruction) of
//! every slot kind round-trip byte for byte, the looped kernels too; malformed loops and terms
//! fail with the decoder's messages and the line of the instruction they name.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use nrt_sim::engine::{
    AccessPattern, AluOp, DType, DmaDescriptor, DmaEndpoint, DmaStep, EngineId, Instr, Program,
    ProgramBuilder, TermSlot, assemble, disassemble, kernels,
};

fn round_trip(p: &Program) -> String {
    let text = disassemble(p);
    let q = assemble(&text).unwrap_or_else(|e| panic!("{}: {e:?}\n{text}", p.name));
    assert_eq!(q.to_bytes(), p.to_bytes(), "{}", p.name);
    assert_eq!(&q, p);
    assert_eq!(disassemble(&q), text, "{}", p.name);
    text
}

/// Two nested loops (2 × 3) on SyncE and VectorE: row `3·o + i` of `x` is loaded, doubled and
/// stored (DMA source/destination terms, offset terms, counted waits with value terms), a
/// notification whose payload counts, a copy whose output partition moves (partition term),
/// and a trigger whose first descriptor moves (first-descriptor term).
fn nested() -> Program {
    let mut b = ProgramBuilder::new("nested");
    let x = b.input("x", DType::F32, &[6, 64]);
    let y = b.output("y", DType::F32, &[6, 64]);
    let (loaded, done, stored) = (b.sem().unwrap(), b.sem().unwrap(), b.sem().unwrap());
    let (s, v) = (EngineId::Sync, EngineId::Vector);
    let outer = b.loop_begin(&[s, v], 2).unwrap();
    let inner = b.loop_begin(&[s, v], 3).unwrap();
    let steps = [
        DmaStep {
            lp: outer,
            src: 768,
            dst: 768,
        },
        DmaStep {
            lp: inner,
            src: 256,
            dst: 256,
        },
    ];
    let load = DmaDescriptor {
        src: DmaEndpoint::Hbm {
            tensor: x,
            offset: 0,
        },
        dst: DmaEndpoint::Sbuf {
            partition: 0,
            offset: 0,
        },
        len: 256,
    };
    b.dma_looped(s, 0, 0, &[load], loaded, 1, &steps).unwrap();
    b.wait_all(v, loaded).unwrap();
    b.push(
        v,
        Instr::TensorScalar {
            op: AluOp::Mul,
            src: AccessPattern::sbuf(DType::F32, 0, 1, 0, 64),
            scalar: 2.0,
            out: AccessPattern::sbuf(DType::F32, 0, 1, 2048, 64),
        },
    );
    for k in [TermSlot::Offset(0), TermSlot::Offset(1)] {
        b.term(v, k, outer, 768).unwrap();
        b.term(v, k, inner, 256).unwrap();
    }
    b.push(v, Instr::Notify { payload: 100 });
    b.term(v, TermSlot::Value, inner, 1).unwrap();
    b.push(
        v,
        Instr::TensorCopy {
            src: AccessPattern::sbuf(DType::F32, 0, 1, 0, 4),
            out: AccessPattern::sbuf(DType::F32, 0, 1, 8192, 4),
        },
    );
    b.term(v, TermSlot::Partition(1), inner, 32).unwrap();
    b.signal(v, done, 1);
    b.wait_all(s, done).unwrap();
    let store = DmaDescriptor {
        src: DmaEndpoint::Sbuf {
            partition: 0,
            offset: 2048,
        },
        dst: DmaEndpoint::Hbm {
            tensor: y,
            offset: 0,
        },
        len: 256,
    };
    b.dma_looped(s, 1, 0, &[store], stored, 1, &steps).unwrap();
    let copies: Vec<DmaDescriptor> = (0..3u8)
        .map(|p| DmaDescriptor {
            src: DmaEndpoint::Sbuf {
                partition: 0,
                offset: 0,
            },
            dst: DmaEndpoint::Sbuf {
                partition: 8 + p,
                offset: 0,
            },
            len: 16,
        })
        .collect();
    let first = b.descriptors(&copies);
    b.push(
        s,
        Instr::DmaTrigger {
            dma: 2,
            queue: 0,
            first,
            count: 1,
            sem: 200,
            inc: 0,
        },
    );
    b.term(s, TermSlot::DmaFirst, inner, 1).unwrap();
    b.loop_end(inner).unwrap();
    b.loop_end(outer).unwrap();
    b.wait_all(s, stored).unwrap();
    b.build().unwrap()
}

/// Rule: loops and terms of every slot kind round-trip, and read as documented.
#[test]
fn loops_and_terms_round_trip() {
    let text = round_trip(&nested());
    assert!(text.contains("\n.format 1.1\n"));
    for want in [
        "\n    loop_begin reg=0 count=2\n      loop_begin reg=1 count=3\n",
        "dma_trigger dma=0 queue=0 first=0 count=1 sem=0 inc=1 with dma_src += 768*r0, \
         dma_src += 256*r1, dma_dst += 768*r0, dma_dst += 256*r1\n",
        " out=sbuf.fp32[0:1][2048; [1,64]] with offset(0) += 768*r0, offset(0) += 256*r1, \
         offset(1) += 768*r0, offset(1) += 256*r1\n",
        "        notify payload=100 with value += 1*r1\n",
        "out=sbuf.fp32[0:1][8192; [1,4]] with partition(1) += 32*r1\n",
        "first=2 count=1 sem=200 inc=0 with dma_first += 1*r1\n",
        "\n      loop_end reg=1\n    loop_end reg=0\n",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
}

/// Rule: the looped matmul kernel round-trips.
#[test]
fn looped_kernels_round_trip() {
    for (m, k, n) in [(256, 256, 512), (700, 600, 1300)] {
        round_trip(&kernels::matmul_looped(m, k, n, DType::Bf16, DType::F32).unwrap());
    }
}

/// Rule: malformed loops and terms fail as the decoder refuses them, with the line of the
/// instruction named; term syntax errors name the line and column.
#[test]
fn malformed_loops_and_terms_fail_with_exact_messages() {
    let text = disassemble(&nested());
    let line_of = |needle: &str| text.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let cases = [
        (
            text.replacen("      loop_end reg=1", "      loop_end reg=0", 1),
            format!(
                "line {}: SyncE pc 6: LoopEnd of register 0 does not close the innermost loop \
                 (register 1, opened at pc 1)",
                line_of("      loop_end reg=1")
            ),
        ),
        (
            text.replacen("value += 1*r1", "value += 1*r3", 1),
            format!(
                "line {}: dynamic term on SyncE pc 3 (SemWait): register 3 is not the \
                 iteration register of an enclosing loop",
                line_of("value += 1*r1")
            ),
        ),
        (
            text.replacen(
                "with offset(0) += 768*r0, offset(0) += 256*r1",
                "with offset(0) += 256*r1, offset(0) += 768*r0",
                1,
            ),
            format!(
                "line {}: dynamic term 14: the table must be sorted by engine, pc, slot and \
                 register, each combination at most once",
                line_of("tensor_scalar op=multiply")
            ),
        ),
        (
            text.replacen("value += 1*r1", "value += 1*x1", 1),
            format!(
                "line {}, column {}: expected an iteration register (r0, r1, ...), found `x1`",
                line_of("value += 1*r1"),
                text.lines()
                    .find(|l| l.contains("value += 1*r1"))
                    .unwrap()
                    .find("value += 1*r1")
                    .unwrap()
                    + "value += 1*".len()
                    + 1
            ),
        ),
        (
            text.replacen("value += 1*r1", "valeur += 1*r1", 1),
            format!(
                "line {}, column {}: expected a term slot (offset(K), partition(K), value, \
                 dma_src, dma_dst or dma_first), found `valeur`",
                line_of("value += 1*r1"),
                text.lines()
                    .find(|l| l.contains("value += 1*r1"))
                    .unwrap()
                    .find("value += 1*r1")
                    .unwrap()
                    + 1
            ),
        ),
    ];
    for (t, want) in cases {
        let e = assemble(&t).unwrap_err();
        assert_eq!(e.message(), want);
    }
}

/// Rule: disassembling a program that does not validate never panics: a term of a missing
/// instruction becomes a comment, a tensor index out of range is written as a number, a
/// pattern with more dimension slots claimed than exist shows the four there are.
#[test]
fn invalid_programs_disassemble_without_panicking() {
    use nrt_sim::engine::DynTerm;
    let mut p = Program::default();
    p.streams[2].push(Instr::TensorCopy {
        src: AccessPattern {
            ndims: 9,
            partitions: 0,
            ..AccessPattern::sbuf(DType::F32, 200, 1, 0, 4)
        },
        out: AccessPattern::sbuf(DType::F32, 0, 255, 0, 4),
    });
    p.terms.push(DynTerm {
        engine: EngineId::Vector,
        pc: 7,
        slot: TermSlot::DmaFirst,
        reg: 9,
        step: i64::MIN,
    });
    p.descriptors.push(DmaDescriptor {
        src: DmaEndpoint::Hbm {
            tensor: 4,
            offset: u64::MAX,
        },
        dst: DmaEndpoint::Sbuf {
            partition: 0,
            offset: 0,
        },
        len: 0,
    });
    let text = disassemble(&p);
    for want in [
        "    tensor_copy src=sbuf.fp32[200:200][0; [1,4], [0,0], [0,0], [0,0]] \
         out=sbuf.fp32[0:255][0; [1,4]]\n",
        "    # dynamic term of missing pc 7: dma_first += -9223372036854775808*r9\n",
        ".desc 0 src=hbm:4+18446744073709551615 dst=sbuf:0+0 len=0\n",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
    assert!(assemble(&text).is_err());
}

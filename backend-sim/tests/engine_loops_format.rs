//! Loops (format 1.1): encode/decode round trips of looped programs, the load-time rules of
//! loops and dynamic terms (exact refusals, through `validate` and through `from_bytes`),
//! mutated looped programs, and a looped program bit-identical to its unrolled equivalent.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use nrt_core::NrtStatus;
use nrt_sim::Instance;
use nrt_sim::engine::{
    AccessPattern, AluOp, DType, Device, DmaStep, DynTerm, EngineId, ExecOptions, Instr, LOOP_REGS,
    MAX_LOOP_COUNT, Program, ProgramBuilder, TermSlot, kernels,
};

const COLS: u64 = 256;
const ROW: i64 = (COLS * 4) as i64;
/// SBUF byte offset of the results (the loads land below it).
const OUT_BASE: u32 = 64 * 1024;

/// `y[r] = 2 · x[r]` for `rows` rows of 256 fp32, one row per iteration: SyncE loads row `r`
/// to SBUF partition 0 at `r · 1 KiB`, VectorE doubles it into `OUT_BASE + r · 1 KiB`, SyncE
/// stores it. With `looped` the row loop is a loop (DMA source/destination terms, access
/// pattern offset terms, semaphore waits counted through the loop); otherwise it is unrolled
/// with the same instructions and operands.
fn doubling(rows: u32, looped: bool) -> Program {
    let mut b = ProgramBuilder::new("doubling");
    let x = b.input("x", DType::F32, &[u64::from(rows), COLS]);
    let y = b.output("y", DType::F32, &[u64::from(rows), COLS]);
    let (loaded, doubled, stored) = (b.sem().unwrap(), b.sem().unwrap(), b.sem().unwrap());
    let engines = [EngineId::Sync, EngineId::Vector];
    let lp = looped.then(|| b.loop_begin(&engines, rows).unwrap());
    for r in 0..if looped { 1 } else { rows } {
        let base = if looped {
            0
        } else {
            u32::try_from(i64::from(r) * ROW).unwrap()
        };
        let load = kernels::rows_to_sbuf(x, DType::F32, COLS, u64::from(r), 0, 1, COLS, 0, base);
        let step = |src, dst| lp.map(|lp| DmaStep { lp, src, dst }).into_iter().collect();
        let steps: Vec<DmaStep> = step(ROW, ROW);
        b.dma_looped(EngineId::Sync, 0, 0, &load, loaded, 1, &steps)
            .unwrap();
        b.wait_all(EngineId::Vector, loaded).unwrap();
        b.push(
            EngineId::Vector,
            Instr::TensorScalar {
                op: AluOp::Mul,
                src: AccessPattern::sbuf(DType::F32, 0, 1, base, COLS as u16),
                scalar: 2.0,
                out: AccessPattern::sbuf(DType::F32, 0, 1, OUT_BASE + base, COLS as u16),
            },
        );
        if let Some(lp) = lp {
            b.term(EngineId::Vector, TermSlot::Offset(0), lp, ROW)
                .unwrap();
            b.term(EngineId::Vector, TermSlot::Offset(1), lp, ROW)
                .unwrap();
        }
        b.signal(EngineId::Vector, doubled, 1);
        b.wait_all(EngineId::Sync, doubled).unwrap();
        let store = kernels::sbuf_to_rows(
            y,
            DType::F32,
            COLS,
            u64::from(r),
            0,
            1,
            COLS,
            0,
            OUT_BASE + base,
        );
        b.dma_looped(EngineId::Sync, 1, 0, &store, stored, 1, &steps)
            .unwrap();
    }
    if let Some(lp) = lp {
        b.loop_end(lp).unwrap();
    }
    b.wait_all(EngineId::Sync, stored).unwrap();
    b.build().unwrap()
}

fn quiet() -> ExecOptions {
    ExecOptions {
        record_events: false,
        ..ExecOptions::default()
    }
}

/// Rule: a looped program and its unrolled equivalent give bit-identical outputs; the looped
/// one's instruction count is its body's.
#[test]
fn looped_program_matches_its_unrolled_equivalent() {
    let rows = 48;
    let xs = data(5, (rows as u64 * COLS) as usize, DType::F32);
    let looped = doubling(rows, true);
    let unrolled = doubling(rows, false);
    assert_eq!(looped.format_minor(), 1);
    assert_eq!(unrolled.format_minor(), 0);
    assert!(
        looped.instruction_count() < 20,
        "{}",
        looped.instruction_count()
    );
    assert_eq!(looped.descriptors.len(), 2);
    let (lo, lr) = run(looped, &[("x", DType::F32, &xs)]);
    let (uo, ur) = run(unrolled, &[("x", DType::F32, &xs)]);
    assert!(lr.hazards.is_empty() && ur.hazards.is_empty());
    check_counters(&lr);
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&lo[0].1), bits(&uo[0].1));
    for (g, x) in lo[0].1.iter().zip(&xs) {
        assert_eq!(g.to_bits(), (2.0 * x).to_bits());
    }
    // The executor counts concrete instances: every iteration's instructions.
    let vec_instrs = lr.engines[EngineId::Vector.index()].instructions;
    assert!(vec_instrs >= u64::from(rows) * 3, "{vec_instrs}");
    println!("looped {} ticks, unrolled {} ticks", lr.ticks, ur.ticks);
}

/// Rule: looped programs (loops, every term slot kind) encode and decode to themselves, and
/// re-encode to the same bytes.
#[test]
fn looped_programs_round_trip() {
    let mut programs = vec![
        doubling(16, true),
        kernels::matmul_looped(2048, 2048, 2048, DType::Bf16, DType::F32).unwrap(),
        kernels::matmul_looped(700, 600, 1300, DType::Bf16, DType::F32).unwrap(),
    ];
    // Partition, value and first-descriptor slots too.
    let mut p = doubling(4, true);
    let (pc, _) = vector_op(&p);
    p.terms
        .push(term(EngineId::Vector, pc, TermSlot::Partition(1), 0, 32));
    p.terms
        .sort_by_key(|t| (t.engine.index(), t.pc, t.slot, t.reg));
    p.validate().unwrap();
    programs.push(p);
    for p in programs {
        let bytes = p.to_bytes();
        let back = Program::from_bytes(&bytes).unwrap();
        assert_eq!(back, p);
        assert_eq!(back.to_bytes(), bytes);
    }
}

/// The pc of the looped `doubling`'s TensorScalar on VectorE.
fn vector_op(p: &Program) -> (u32, Instr) {
    let s = p.stream(EngineId::Vector);
    let pc = s
        .iter()
        .position(|i| matches!(i, Instr::TensorScalar { .. }))
        .unwrap();
    (pc as u32, s[pc])
}

fn term(engine: EngineId, pc: u32, slot: TermSlot, reg: u8, step: i64) -> DynTerm {
    DynTerm {
        engine,
        pc,
        slot,
        reg,
        step,
    }
}

/// Checks that `p` is refused at load with a message containing `want`, both by `validate`
/// and by `from_bytes` of its encoding.
fn refused(p: &Program, want: &str) {
    let e = p.validate().unwrap_err();
    assert_eq!(e.status(), NrtStatus::Invalid, "{e}");
    assert!(
        e.message().contains(want),
        "want {want:?}, got: {}",
        e.message()
    );
    let e = Program::from_bytes(&p.to_bytes()).unwrap_err();
    assert_eq!(e.status(), NrtStatus::Invalid, "{e}");
    assert!(
        e.message().contains(want),
        "from_bytes: want {want:?}, got: {}",
        e.message()
    );
}

/// A program with `body` between a LoopBegin/LoopEnd on register 0 (count `count`) on
/// VectorE; a Halt everywhere.
fn vector_loop(count: u32, body: &[Instr]) -> Program {
    let mut p = doubling(2, false);
    for s in &mut p.streams {
        s.clear();
        s.push(Instr::Halt);
    }
    let v = &mut p.streams[EngineId::Vector.index()];
    v.clear();
    v.push(Instr::LoopBegin { reg: 0, count });
    v.extend_from_slice(body);
    v.push(Instr::LoopEnd { reg: 0 });
    v.push(Instr::Halt);
    p
}

fn copy(off: u32, n: u16) -> Instr {
    Instr::TensorCopy {
        src: AccessPattern::sbuf(DType::F32, 0, 1, off, n),
        out: AccessPattern::sbuf(DType::F32, 0, 1, OUT_BASE, n),
    }
}

/// Rule: malformed loops are refused with exact messages, never a panic.
#[test]
fn malformed_loops_are_refused() {
    let halt = |p: &mut Program| {
        let v = &mut p.streams[EngineId::Vector.index()];
        v.retain(|i| !matches!(i, Instr::LoopEnd { .. }));
    };
    let mut p = vector_loop(3, &[copy(0, 4)]);
    p.validate().unwrap();
    halt(&mut p);
    refused(
        &p,
        "VectorE pc 2: the loop of register 0 opened at pc 0 is not closed before Halt",
    );
    let mut p = vector_loop(3, &[copy(0, 4)]);
    p.streams[EngineId::Vector.index()].remove(0);
    refused(&p, "LoopEnd without an open loop");
    let mut p = vector_loop(3, &[copy(0, 4)]);
    p.streams[EngineId::Vector.index()][2] = Instr::LoopEnd { reg: 1 };
    refused(
        &p,
        "LoopEnd of register 1 does not close the innermost loop (register 0",
    );
    refused(
        &vector_loop(0, &[copy(0, 4)]),
        "trip count 0 is outside 1..=16777216",
    );
    refused(
        &vector_loop(MAX_LOOP_COUNT + 1, &[copy(0, 4)]),
        "trip count 16777217 is outside 1..=16777216",
    );
    vector_loop(MAX_LOOP_COUNT, &[copy(0, 4)])
        .validate()
        .unwrap();
    // Register out of range, reused, nesting too deep.
    let mut p = vector_loop(2, &[copy(0, 4)]);
    p.streams[EngineId::Vector.index()][0] = Instr::LoopBegin { reg: 4, count: 2 };
    p.streams[EngineId::Vector.index()][2] = Instr::LoopEnd { reg: 4 };
    refused(&p, "iteration register 4 does not exist (registers 0-3)");
    let p = vector_loop(
        2,
        &[
            Instr::LoopBegin { reg: 0, count: 2 },
            Instr::LoopEnd { reg: 0 },
        ],
    );
    refused(
        &p,
        "register 0 is the iteration register of the enclosing loop opened at pc 0",
    );
    let mut body = Vec::new();
    for r in 1..=LOOP_REGS as u8 {
        body.push(Instr::LoopBegin {
            reg: r % 4,
            count: 2,
        });
    }
    for r in (1..=LOOP_REGS as u8).rev() {
        body.push(Instr::LoopEnd { reg: r % 4 });
    }
    refused(
        &vector_loop(2, &body),
        "VectorE pc 4: LoopBegin: loops nest at most 4 deep",
    );
    // A stream with too many dynamic instructions.
    let nested = vector_loop(
        MAX_LOOP_COUNT,
        &[
            Instr::LoopBegin {
                reg: 1,
                count: MAX_LOOP_COUNT,
            },
            copy(0, 4),
            Instr::LoopEnd { reg: 1 },
        ],
    );
    refused(
        &nested,
        "the stream's loops execute more than 4294967296 instructions",
    );
}

/// Rule: malformed dynamic terms are refused with exact messages: unknown slots, registers
/// of no enclosing loop, instructions that do not exist, an unsorted table, and accesses
/// out of bounds in the extreme iterations.
#[test]
fn malformed_terms_are_refused() {
    let with = |count: u32, terms: &[DynTerm]| {
        let mut p = vector_loop(count, &[copy(0, 4)]);
        p.terms = terms.to_vec();
        p
    };
    let v = EngineId::Vector;
    with(3, &[term(v, 1, TermSlot::Offset(0), 0, 16)])
        .validate()
        .unwrap();
    refused(
        &with(3, &[term(v, 1, TermSlot::Offset(2), 0, 16)]),
        "dynamic term on VectorE pc 1 (TensorCopy): pattern operand 2 does not exist \
         (TensorCopy has 2)",
    );
    refused(
        &with(3, &[term(v, 1, TermSlot::Value, 0, 1)]),
        "TensorCopy has no immediate value",
    );
    refused(
        &with(3, &[term(v, 1, TermSlot::DmaSrc, 0, 1)]),
        "the DMA source offset applies to DmaTrigger only",
    );
    refused(
        &with(3, &[term(v, 0, TermSlot::Offset(0), 0, 16)]),
        "VectorE pc 0 (LoopBegin): register 0 is not the iteration register of an enclosing",
    );
    refused(
        &with(3, &[term(v, 1, TermSlot::Offset(0), 1, 16)]),
        "register 1 is not the iteration register of an enclosing loop",
    );
    refused(
        &with(3, &[term(v, 2, TermSlot::Offset(0), 0, 16)]),
        "pattern operand 0 does not exist (LoopEnd has 0)",
    );
    refused(
        &with(3, &[term(v, 9, TermSlot::Offset(0), 0, 16)]),
        "dynamic term 0: VectorE has no instruction 9 (the stream has 4)",
    );
    refused(
        &with(
            3,
            &[
                term(v, 1, TermSlot::Offset(1), 0, 16),
                term(v, 1, TermSlot::Offset(0), 0, 16),
            ],
        ),
        "dynamic term 1: the table must be sorted",
    );
    // Out of bounds only in the last iteration: the largest SBUF partition is NeuronCore-v3's
    // 224 KiB (229,376 bytes); 16 B read at 100 · 2296 = 229,600 in iteration 100.
    let p = with(101, &[term(v, 1, TermSlot::Offset(0), 0, 2296)]);
    let e = p.validate().unwrap_err();
    assert!(
        e.message()
            .contains("VectorE pc 1 (TensorCopy) in iteration [r0=100]"),
        "{e}"
    );
    let p = with(100, &[term(v, 1, TermSlot::Offset(0), 0, 2296)]);
    p.validate().unwrap();
    // Iteration 99 reads up to 99 · 2296 + 16 = 227,320: inside a v3 partition, past a v2
    // one (192 KiB), so only a trn2 device loads it.
    nrt_sim::engine::Device::new(nrt_sim::Instance::Trn2)
        .load(0, p.clone())
        .unwrap();
    let e = nrt_sim::engine::Device::new(nrt_sim::Instance::Trn1)
        .load(0, p)
        .unwrap_err();
    assert_eq!(e.status(), NrtStatus::Invalid);
    assert!(e.message().contains("uses SBUF bytes up to 227320"), "{e}");
    // Negative: below zero in the last iteration.
    let mut p = vector_loop(5, &[copy(64, 4)]);
    p.terms = vec![term(v, 1, TermSlot::Offset(0), 0, -32)];
    refused(
        &p,
        "in iteration [r0=4]: the offset of pattern operand 0 would be 64 + -128",
    );
    // Partitions: 1 partition from 127 + r.
    let mut p = vector_loop(2, &[copy(0, 4)]);
    p.terms = vec![term(v, 1, TermSlot::Partition(0), 0, 127)];
    refused(&p, "in iteration [r0=1]");
    // DMA: the looped doubling's load moved past the end of `x` in the last iteration.
    let mut p = doubling(8, true);
    let pc = p
        .stream(EngineId::Sync)
        .iter()
        .position(|i| matches!(i, Instr::DmaTrigger { .. }));
    let pc = pc.unwrap() as u32;
    for t in &mut p.terms {
        if t.engine == EngineId::Sync && t.pc == pc && t.slot == TermSlot::DmaSrc {
            t.step += 1;
        }
    }
    refused(
        &p,
        "in iteration [r0=7]: DMA descriptor 0 shifted by (source 7175",
    );
    let mut p = doubling(8, true);
    p.terms
        .push(term(EngineId::Sync, pc, TermSlot::DmaFirst, 0, 1));
    p.terms
        .sort_by_key(|t| (t.engine.index(), t.pc, t.slot, t.reg));
    refused(&p, "descriptors [7, 7+1) are not in the table of 2");
}

/// Rule: an instance the extreme iterations do not cover (start partitions are not a convex
/// rule: 0 and 32 are valid starts of one partition, 16 is not) is checked as it issues: the
/// execution stops with `NRT_EXEC_OOB` naming the iteration.
#[test]
fn interior_instances_are_checked_as_they_issue() {
    let mut p = doubling(3, true);
    let (pc, _) = vector_op(&p);
    p.terms
        .push(term(EngineId::Vector, pc, TermSlot::Partition(1), 0, 16));
    p.terms
        .sort_by_key(|t| (t.engine.index(), t.pc, t.slot, t.reg));
    p.validate().unwrap();
    let dev = Device::new(Instance::Trn1);
    let lp = dev.load(0, p).unwrap();
    let report = dev.execute(&lp, &quiet()).unwrap();
    let e = report.result().unwrap_err();
    assert_eq!(e.status(), NrtStatus::ExecOob, "{e}");
    let want = format!("VectorE pc {pc} (TensorScalar) in iteration [r0=1]: ");
    assert!(e.message().contains(&want), "{e}");
}

/// Rule: `from_bytes` never panics on mutated or truncated looped programs, and whatever it
/// accepts loads and runs (or fails cleanly).
#[test]
fn mutated_looped_programs_never_panic() {
    let bytes = doubling(6, true).to_bytes();
    for n in 0..bytes.len() {
        assert!(Program::from_bytes(&bytes[..n]).is_err());
    }
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
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
                    ..quiet()
                };
                let _ = dev.execute(&lp, &opts).unwrap();
            }
        }
    }
    println!("{accepted} of 3000 mutants accepted");
}

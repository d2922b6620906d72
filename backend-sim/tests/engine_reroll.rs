//! The rerolling pass (`engine::reroll`): random small unrolled programs (deterministic seeds)
//! run bit-identically, without hazards, once rerolled; the builders' unrolled kernels shrink
//! to their loop bodies and stay bit-identical; programs that already have loops are kept;
//! the pass's speed on large streams (printed: `-- --nocapture`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Instant;

use common::*;
use nrt_sim::engine::{
    AccessPattern, AluOp, DType, EngineId, Instr, Program, ProgramBuilder, kernels, reroll,
};

const COLS: u64 = 64;
const ROW: u32 = (COLS * 4) as u32;

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// True with probability `1/n`.
    fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
}

/// A random row pipeline: SyncE loads row `r` of `x` into SBUF (partition and offset chosen
/// per row: mostly affine in `r`, sometimes not), VectorE applies one or two scalar
/// operations (operation and scalar mostly fixed, sometimes not) into a result region, SyncE
/// stores it to row `r` of `y`; semaphores count per row. Every row uses its own SBUF bytes,
/// so any order the semaphores allow is hazard-free.
fn random_program(seed: u64) -> (Program, u64) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let rows = 4 + rng.below(60);
    let mut b = ProgramBuilder::new("random");
    let x = b.input("x", DType::F32, &[rows, COLS]);
    let y = b.output("y", DType::F32, &[rows, COLS]);
    let (loaded, done, stored) = (b.sem().unwrap(), b.sem().unwrap(), b.sem().unwrap());
    let part_step = rng.below(2);
    let dma_cycle = 1 + rng.below(16);
    let ops = [AluOp::Add, AluOp::Mul, AluOp::Max];
    let op = ops[rng.below(3) as usize];
    let scalar = [0.5f32, 2.0, -1.0, 3.0][rng.below(4) as usize];
    let out_base = 128 * 1024u32;
    for r in 0..rows {
        let slot = if rng.one_in(6) { rows + r } else { r } as u32;
        // One-partition accesses start at 0, 32, 64 or 96.
        let part = if rng.one_in(8) {
            32 * rng.below(4) as u8
        } else {
            ((32 * part_step * r) % 128) as u8
        };
        let load = kernels::rows_to_sbuf(x, DType::F32, COLS, r, 0, 1, COLS, part, slot * ROW);
        let dma = (r % dma_cycle) as u8;
        b.dma_on(EngineId::Sync, dma, 0, &load, loaded, 1);
        b.wait(EngineId::Vector, loaded, r as u32 + 1);
        let twice = rng.one_in(7);
        let this_op = if rng.one_in(9) {
            ops[rng.below(3) as usize]
        } else {
            op
        };
        let this_scalar = if rng.one_in(9) { 1.25 } else { scalar };
        let src = AccessPattern::sbuf(DType::F32, part, 1, slot * ROW, COLS as u16);
        let out = AccessPattern::sbuf(DType::F32, part, 1, out_base + slot * ROW, COLS as u16);
        b.push(
            EngineId::Vector,
            Instr::TensorScalar {
                op: this_op,
                src,
                scalar: this_scalar,
                out,
            },
        );
        if twice {
            b.push(
                EngineId::Vector,
                Instr::TensorScalar {
                    op: AluOp::Add,
                    src: out,
                    scalar: -0.0,
                    out,
                },
            );
        }
        b.signal(EngineId::Vector, done, 1);
        b.wait(EngineId::Sync, done, r as u32 + 1);
        let store = kernels::sbuf_to_rows(
            y,
            DType::F32,
            COLS,
            r,
            0,
            1,
            COLS,
            part,
            out_base + slot * ROW,
        );
        b.dma_on(EngineId::Sync, dma, 1, &store, stored, 1);
    }
    b.wait(EngineId::Sync, stored, rows as u32);
    (b.build().unwrap(), rows)
}

fn bits(outs: &[(String, Vec<f32>)]) -> Vec<(String, Vec<u32>)> {
    outs.iter()
        .map(|(n, v)| (n.clone(), v.iter().map(|f| f.to_bits()).collect()))
        .collect()
}

/// Property: for 64 random programs, the rerolled program validates, is no longer, and runs
/// to bit-identical outputs with no hazards (as the unrolled one).
#[test]
fn random_programs_reroll_to_the_same_execution() {
    let (mut before, mut after) = (0, 0);
    for seed in 0..64 {
        let (p, rows) = random_program(seed);
        let q = reroll(&p);
        q.validate().unwrap();
        assert!(
            q.instruction_count() <= p.instruction_count(),
            "seed {seed}"
        );
        assert!(q.descriptors.len() <= p.descriptors.len(), "seed {seed}");
        let xs = data(seed, (rows * COLS) as usize, DType::F32);
        let (uo, ur) = run(p.clone(), &[("x", DType::F32, &xs)]);
        let (ro, rr) = run(q.clone(), &[("x", DType::F32, &xs)]);
        assert!(
            ur.hazards.is_empty() && rr.hazards.is_empty(),
            "seed {seed}"
        );
        assert_eq!(bits(&uo), bits(&ro), "seed {seed}");
        // Every instance issued: the executed instruction count grows only by the loop
        // instructions.
        let v = EngineId::Vector.index();
        assert!(
            rr.engines[v].instructions >= ur.engines[v].instructions,
            "seed {seed}"
        );
        // Idempotent on what it produced: streams with loops are kept.
        assert_eq!(reroll(&q), q, "seed {seed}");
        before += p.instruction_count();
        after += q.instruction_count();
    }
    println!("64 random programs: {before} instructions unrolled, {after} rerolled");
    // The random irregularities (about one row in four) break runs on purpose.
    assert!(after * 3 < before * 2, "{after} vs {before}");
}

/// The builders' unrolled matmul: rerolled, it nests (K inside N) and is bit-identical.
#[test]
fn builder_matmul_rerolls_with_nesting() {
    let (m, k, n) = (512u64, 1024u64, 2048u64);
    let p = kernels::matmul(m, k, n, DType::Bf16, DType::F32).unwrap();
    let t = Instant::now();
    let q = reroll(&p);
    let dt = t.elapsed();
    let depth = |s: &[Instr]| {
        let (mut d, mut max) = (0i32, 0i32);
        for i in s {
            match i {
                Instr::LoopBegin { .. } => {
                    d += 1;
                    max = max.max(d);
                }
                Instr::LoopEnd { .. } => d -= 1,
                _ => {}
            }
        }
        max
    };
    let deepest = EngineId::ALL
        .iter()
        .map(|&e| depth(q.stream(e)))
        .max()
        .unwrap();
    println!(
        "kernels::matmul {m}x{k}x{n}: {} -> {} instructions, {} -> {} descriptors, {} terms, \
         nesting {deepest}, rerolled in {:.2} ms",
        p.instruction_count(),
        q.instruction_count(),
        p.descriptors.len(),
        q.descriptors.len(),
        q.terms.len(),
        dt.as_secs_f64() * 1e3
    );
    assert!(deepest >= 2);
    assert!(q.instruction_count() * 2 < p.instruction_count());
    assert!(q.descriptors.len() * 2 < p.descriptors.len());
    let a = data(1, (k * m) as usize, DType::Bf16);
    let bm = data(2, (k * n) as usize, DType::Bf16);
    let ins = [
        ("lhs_t", DType::Bf16, &a[..]),
        ("rhs", DType::Bf16, &bm[..]),
    ];
    let (uo, ur) = run(p, &ins);
    let (ro, rr) = run(q, &ins);
    assert!(ur.hazards.is_empty() && rr.hazards.is_empty());
    assert_eq!(bits(&uo), bits(&ro));
    println!(
        "ticks: unrolled {}, rerolled {} ({:+})",
        ur.ticks,
        rr.ticks,
        rr.ticks as i64 - ur.ticks as i64
    );
}

/// Streams that already have loops are kept as they are (with their terms); the others of
/// the program may be rerolled, and the result runs bit-identically.
#[test]
fn looped_streams_are_kept() {
    let p = kernels::matmul_looped(512, 512, 512, DType::Bf16, DType::F32).unwrap();
    let q = reroll(&p);
    for e in EngineId::ALL {
        if p.stream(e).iter().any(Instr::is_loop) {
            assert_eq!(q.stream(e), p.stream(e), "{e}");
            let terms = |x: &Program| {
                x.terms
                    .iter()
                    .filter(|t| t.engine == e)
                    .copied()
                    .collect::<Vec<_>>()
            };
            assert_eq!(terms(&q), terms(&p), "{e}");
        }
    }
    let a = data(3, 512 * 512, DType::Bf16);
    let ins = [("lhs_t", DType::Bf16, &a[..]), ("rhs", DType::Bf16, &a[..])];
    let (uo, ur) = run(p, &ins);
    let (ro, rr) = run(q, &ins);
    assert!(ur.hazards.is_empty() && rr.hazards.is_empty());
    assert_eq!(bits(&uo), bits(&ro));
}

/// Speed: the pass on a large unrolled stream (printed), roughly linear in its size.
#[test]
fn speed_on_large_programs() {
    let mut rates = Vec::new();
    for rows in [1u64 << 14, 1 << 16] {
        let p = kernels::elementwise(kernels::Elementwise::Add, rows, 4096, DType::F32).unwrap();
        let t = Instant::now();
        let q = reroll(&p);
        let dt = t.elapsed().as_secs_f64();
        println!(
            "kernels::elementwise {rows}x4096: {} -> {} instructions, {} -> {} descriptors in \
             {:.1} ms ({:.2} M instructions/s)",
            p.instruction_count(),
            q.instruction_count(),
            p.descriptors.len(),
            q.descriptors.len(),
            dt * 1e3,
            p.instruction_count() as f64 / dt / 1e6
        );
        assert!(q.instruction_count() * 10 < p.instruction_count());
        rates.push(p.instruction_count() as f64 / dt);
    }
}

/// Odd inputs: an invalid program (no `Halt`), empty streams, a stream of one repeated
/// instruction at the trip-count-free extremes — returned unchanged or rerolled, never a
/// panic, always valid when the input was.
#[test]
fn odd_programs_do_not_panic() {
    let bad = Program::default();
    assert_eq!(reroll(&bad), bad);
    let mut b = ProgramBuilder::new("notify");
    for i in 0..1000u32 {
        b.push(
            EngineId::Sync,
            Instr::Notify {
                payload: i.wrapping_mul(7),
            },
        );
    }
    for _ in 0..300 {
        b.push(EngineId::GpSimd, Instr::Notify { payload: u32::MAX });
    }
    let p = b.build().unwrap();
    let q = reroll(&p);
    q.validate().unwrap();
    // SyncE and GpSimdE: LoopBegin, Notify, LoopEnd, Halt; the other three: Halt.
    assert_eq!(q.instruction_count(), 11);
    let halt_only = ProgramBuilder::new("empty").build().unwrap();
    assert_eq!(reroll(&halt_only), halt_only);
}

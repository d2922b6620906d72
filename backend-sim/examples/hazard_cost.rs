//! Runs programs whose execution time is mostly hazard checking, once each, for instruction
//! counts under callgrind (steadier than wall time on a busy machine):
//!
//! ```text
//! cargo build --release -p nrt-sim --example hazard_cost
//! valgrind --tool=callgrind target/release/examples/hazard_cost [CASE]
//! ```
//!
//! Cases: `matmul` (the matmul kernel, 256³), `dense` (VectorE and ScalarE, unordered, each
//! copying small dense tiles in its own half of SBUF), `dma` (rounds of 128 descriptors over
//! 16 DMA engines), `strided` (VectorE and ScalarE, unordered, writing the even and the odd
//! columns of one tile); no argument runs them all. Prints each case's ticks, hazards and
//! host time.

use std::time::Instant;

use nrt_sim::Instance;
use nrt_sim::engine::{
    AccessPattern, DType, Device, DmaDescriptor, DmaEndpoint, EngineId, ExecOptions, Instr,
    Program, ProgramBuilder, Space, kernels,
};

type Built = Result<Program, nrt_core::Error>;
type Case = (&'static str, fn() -> Built);

fn dense(n: u32) -> Built {
    let mut b = ProgramBuilder::new("dense");
    for i in 0..n {
        for (engine, half) in [(EngineId::Vector, 0u32), (EngineId::Scalar, 96 * 1024)] {
            let off = half + (i % 64) * 1024;
            b.push(
                engine,
                Instr::TensorCopy {
                    src: AccessPattern::sbuf(DType::F32, 0, 128, off, 64),
                    out: AccessPattern::sbuf(DType::F32, 0, 128, off + 512, 64),
                },
            );
        }
    }
    b.build()
}

fn strided(n: u32) -> Built {
    let mut b = ProgramBuilder::new("strided");
    for i in 0..n {
        for (engine, col) in [(EngineId::Vector, 0u32), (EngineId::Scalar, 4)] {
            let off = (i % 32) * 2048;
            let ap = |o: u32| {
                AccessPattern::new(Space::Sbuf, DType::F32, 0, 128, o, &[(4, 64), (32, 2)])
            };
            b.push(
                engine,
                Instr::TensorScalar {
                    op: nrt_sim::engine::AluOp::Mul,
                    src: ap(off + col),
                    scalar: 2.0,
                    out: ap(off + col),
                },
            );
        }
    }
    b.build()
}

fn dma(rounds: u32) -> Built {
    let mut b = ProgramBuilder::new("dma");
    let t = b.input("x", DType::Bf16, &[128 * 4096]);
    let s = b.sem()?;
    let descs: Vec<DmaDescriptor> = (0..128u32)
        .map(|i| DmaDescriptor {
            src: DmaEndpoint::Hbm {
                tensor: t,
                offset: u64::from(i) * 8192,
            },
            dst: DmaEndpoint::Sbuf {
                partition: i as u8,
                offset: 0,
            },
            len: 8192,
        })
        .collect();
    let mut total = 0;
    for _ in 0..rounds {
        total += b.dma_spread(EngineId::Sync, &descs, 0, s, 16);
        b.wait(EngineId::Sync, s, total);
    }
    b.build()
}

fn main() -> Result<(), nrt_core::Error> {
    let which = std::env::args().nth(1);
    let cases: [Case; 4] = [
        ("matmul", || {
            kernels::matmul(256, 256, 256, DType::Bf16, DType::F32)
        }),
        ("dense", || dense(4000)),
        ("dma", || dma(40)),
        ("strided", || strided(2000)),
    ];
    let opts = ExecOptions {
        record_events: false,
        ..ExecOptions::default()
    };
    for (name, build) in cases {
        if which.as_deref().is_some_and(|w| w != name) {
            continue;
        }
        let dev = Device::new(Instance::Trn1);
        let lp = dev.load(0, build()?)?;
        let t = Instant::now();
        let r = dev.execute(&lp, &opts)?;
        println!(
            "{name}: {} ticks, {} hazards, {:.2} ms",
            r.ticks,
            r.hazards.len(),
            t.elapsed().as_secs_f64() * 1e3
        );
    }
    Ok(())
}

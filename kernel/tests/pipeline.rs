//! A pipeline where DMA, TensorE, ScalarE and VectorE work on consecutive iterations at once:
//! `y = relu(Wᵀ·x + b) · 2` over eight column blocks, with rotating tile pools. The run has no
//! hazard, the result is exact, every pair of units overlaps in time, and the pipelined
//! kernel is faster than the same kernel single-buffered. 32 partitions: engine costs depend on
//! the free size only, DMA costs on the bytes, so the engines have work enough per byte moved
//! for their stages to overlap instead of waiting for DMA.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Rng, busy, output, overlap, run};
use nrt_kernel::{ActFunc, AluOp, DType, EngineId, Kernel, Memory, Program};
use nrt_sim::engine::{ExecReport, decode_f32, encode_f32};

const K: usize = 32;
const M: usize = 32;
const BLOCK: usize = 512;
const BLOCKS: usize = 8;

fn layer(bufs: usize) -> Program {
    let mut k = Kernel::new("layer");
    let x = k.input("x", DType::Bf16, &[K, BLOCK * BLOCKS]).unwrap();
    let w = k.input("w", DType::Bf16, &[K, M]).unwrap();
    let b = k.input("b", DType::F32, &[M]).unwrap();
    let y = k.output("y", DType::F32, &[M, BLOCK * BLOCKS]).unwrap();
    let wt = k.sbuf_tile("w", DType::Bf16, &[K, M]).unwrap();
    let bt = k.sbuf_tile("b", DType::F32, &[M, 1]).unwrap();
    k.dma_copy(&wt, &w).unwrap();
    k.dma_copy(&bt, &b).unwrap();
    let mut xs = k
        .tile_pool("x", Memory::Sbuf, DType::Bf16, &[K, BLOCK], bufs + 1)
        .unwrap();
    let mut ps = k
        .tile_pool("ps", Memory::Psum, DType::F32, &[M, BLOCK], bufs)
        .unwrap();
    let mut hs = k
        .tile_pool("h", Memory::Sbuf, DType::F32, &[M, BLOCK], bufs)
        .unwrap();
    let mut os = k
        .tile_pool("o", Memory::Sbuf, DType::F32, &[M, BLOCK], bufs)
        .unwrap();
    for i in 0..BLOCKS {
        let cols = i * BLOCK..(i + 1) * BLOCK;
        let xt = xs.next(&mut k).unwrap();
        k.dma_copy(&xt, &x.slice(1, cols.clone()).unwrap()).unwrap();
        let pt = ps.next(&mut k).unwrap();
        k.nc_matmul(&pt, &wt, &xt).unwrap();
        let ht = hs.next(&mut k).unwrap();
        k.activation(&ht, ActFunc::Relu, &pt, &bt, 1.0).unwrap();
        let ot = os.next(&mut k).unwrap();
        k.tensor_scalar(&ot, &ht, AluOp::Mul, 2.0).unwrap();
        k.dma_copy(&y.slice(1, cols).unwrap(), &ot).unwrap();
    }
    k.build().unwrap()
}

fn execute(p: &Program) -> (Vec<f32>, ExecReport, Vec<f32>) {
    let mut rng = Rng(5);
    let xv: Vec<f32> = (0..K * BLOCK * BLOCKS).map(|_| rng.small(2)).collect();
    let wv: Vec<f32> = (0..K * M).map(|_| rng.small(2)).collect();
    let bv: Vec<f32> = (0..M).map(|_| rng.small(50)).collect();
    let (outs, report) = run(
        p,
        &[
            ("x", encode_f32(DType::Bf16, &xv)),
            ("w", encode_f32(DType::Bf16, &wv)),
            ("b", encode_f32(DType::F32, &bv)),
        ],
    );
    let n = BLOCK * BLOCKS;
    let want: Vec<f32> = (0..M * n)
        .map(|idx| {
            let (i, j) = (idx / n, idx % n);
            let s: f32 = (0..K).map(|q| wv[q * M + i] * xv[q * n + j]).sum();
            (s + bv[i]).max(0.0) * 2.0
        })
        .collect();
    (decode_f32(DType::F32, output(&outs, "y")), report, want)
}

#[test]
fn dma_tensor_scalar_vector_overlap() {
    let p = layer(2);
    let (got, report, want) = execute(&p);
    assert_eq!(got, want);
    assert!(report.hazards.is_empty());
    let units = [
        ("DMA", busy(&report, None)),
        ("TensorE", busy(&report, Some(EngineId::Tensor))),
        ("ScalarE", busy(&report, Some(EngineId::Scalar))),
        ("VectorE", busy(&report, Some(EngineId::Vector))),
    ];
    for (i, (na, a)) in units.iter().enumerate() {
        let tot: u64 = a.iter().map(|(s, e)| e - s).sum();
        eprintln!("{na}: busy {tot} of {}", report.ticks);
        for (nb, b) in &units[i + 1..] {
            let t = overlap(a, b);
            eprintln!("  {na} & {nb}: {t}");
            assert!(t > 0, "{na} and {nb} never run at the same time");
        }
    }
    let serial = layer(1);
    let (got1, report1, _) = execute(&serial);
    assert_eq!(got1, want);
    eprintln!(
        "pipeline: {} ticks with double buffering, {} single-buffered",
        report.ticks, report1.ticks
    );
    assert!(report.ticks < report1.ticks);
}

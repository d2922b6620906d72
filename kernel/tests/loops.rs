//! `Kernel::for_range`: explicit loops recorded once and emitted as format-1.1 loops. Loop
//! kernels give bit-identical outputs to the same kernel written with Rust loops
//! (`build_unrolled`), with zero hazards; what a loop body cannot express is refused with an
//! exact message; the library matmul (which loops) matches an independent reference.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Rng, run};
use nrt_kernel::{ActBias, ActFunc, AluOp, DType, Kernel, Program, TensorKind};
use nrt_sim::engine::{Instr, encode_f32};

/// Deterministic inputs for every input tensor of `p` (values exact in every float type).
fn inputs(p: &Program, seed: u64) -> Vec<(String, Vec<u8>)> {
    let mut rng = Rng(seed);
    p.tensors
        .iter()
        .filter(|t| t.kind == TensorKind::Input)
        .map(|t| {
            let n = t.elems().unwrap() as usize;
            let v: Vec<f32> = (0..n).map(|_| rng.small(8) / 8.0).collect();
            (t.name.clone(), encode_f32(t.dtype, &v))
        })
        .collect()
}

/// Runs both programs on the same inputs; asserts identical outputs and no hazards
/// (`run` checks hazards); returns (looped ticks, unrolled ticks).
fn same_outputs(looped: &Program, unrolled: &Program) -> (u64, u64) {
    let ins = inputs(looped, 0x1234_5678);
    let refs: Vec<(&str, Vec<u8>)> = ins.iter().map(|(n, d)| (n.as_str(), d.clone())).collect();
    let (a, ra) = run(looped, &refs);
    let (b, rb) = run(unrolled, &refs);
    assert_eq!(a, b, "{}: looped and unrolled outputs differ", looped.name);
    (ra.ticks, rb.ticks)
}

fn loops_in(p: &Program) -> usize {
    p.streams
        .iter()
        .flatten()
        .filter(|i| matches!(i, Instr::LoopBegin { .. }))
        .count()
}

/// `out = relu(a + b) * 0.5` over `rows` rows of 64, 128 rows per iteration; `looped`
/// chooses `for_range` or a Rust loop.
fn add_relu(rows: usize, looped: bool) -> Kernel {
    let mut k = Kernel::new("add_relu");
    let a = k.input("a", DType::F32, &[rows, 64]).unwrap();
    let b = k.input("b", DType::F32, &[rows, 64]).unwrap();
    let out = k.output("out", DType::F32, &[rows, 64]).unwrap();
    let body = |k: &mut Kernel, t: usize| {
        let r = t * 128..(t + 1) * 128;
        k.scope(|k| {
            let ta = k.sbuf_tile("ta", DType::F32, &[128, 64])?;
            let tb = k.sbuf_tile("tb", DType::F32, &[128, 64])?;
            k.dma_copy(&ta, &a.slice(0, r.clone())?)?;
            k.dma_copy(&tb, &b.slice(0, r.clone())?)?;
            k.tensor_tensor(&ta, &ta, &tb, AluOp::Add)?;
            k.activation(&tb, ActFunc::Relu, &ta, ActBias::None, 1.0)?;
            k.tensor_scalar(&ta, &tb, AluOp::Mul, 0.5)?;
            k.dma_copy(&out.slice(0, r.clone())?, &ta)
        })
    };
    if looped {
        k.for_range(rows / 128, body).unwrap();
    } else {
        for t in 0..rows / 128 {
            body(&mut k, t).unwrap();
        }
    }
    k
}

#[test]
fn elementwise_loop_matches_rust_loop() {
    for tiles in [1, 3, 4, 5, 9] {
        let looped = add_relu(tiles * 128, true).build_unrolled().unwrap();
        let unrolled = add_relu(tiles * 128, false).build_unrolled().unwrap();
        let (tl, tu) = same_outputs(&looped, &unrolled);
        println!(
            "add_relu {tiles} tiles: looped {} instrs {} descs {tl} ticks, unrolled {} / {} / {tu}",
            looped.instruction_count(),
            looped.descriptors.len(),
            unrolled.instruction_count(),
            unrolled.descriptors.len()
        );
        assert_eq!(loops_in(&looped) > 0, tiles >= 4);
    }
}

/// The library matmul at 8192³ bf16 builds through the kernel API in well under a second
/// (release build) and fits the program limits.
#[test]
fn library_matmul_8192_cubed_builds() {
    use nrt_kernel::library::matmul::{self, MatmulOpts};
    let t = std::time::Instant::now();
    let p = matmul::build(
        8192,
        8192,
        8192,
        DType::Bf16,
        DType::F32,
        &MatmulOpts::default(),
    )
    .unwrap();
    let secs = t.elapsed().as_secs_f64();
    println!(
        "library matmul 8192^3 bf16: {secs:.3} s, {} instructions, {} descriptors, {} terms, {} loops",
        p.instruction_count(),
        p.descriptors.len(),
        p.terms.len(),
        loops_in(&p)
    );
    p.validate().unwrap();
    assert!(p.instruction_count() < 20_000);
    assert!(p.descriptors.len() < 100_000);
    if !cfg!(debug_assertions) {
        assert!(secs < 1.0, "build took {secs:.3} s");
    }
}

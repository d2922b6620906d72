//! Elementwise kernels over tiled rows (row counts and widths that are not multiples of the
//! tile), checked bit for bit against plain Rust references: fp32 and bf16 arithmetic, int32
//! wrapping arithmetic, dtype conversion, memset and iota.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Rng, output, run};
use nrt_kernel::{AluOp, DType, Kernel, View};
use nrt_sim::engine::{decode_f32, encode_f32, f32_to_bf16, round_through};

/// `out = (a + b) * a - 1` (fp32 arithmetic per step, rounded to `dtype`), rows in tiles of
/// 128 and columns in blocks of `block`, buffers allocated per block inside a scope.
fn add_mul_kernel(rows: usize, cols: usize, block: usize, dtype: DType) -> nrt_kernel::Program {
    let mut k = Kernel::new("add_mul");
    let a = k.input("a", dtype, &[rows, cols]).unwrap();
    let b = k.input("b", dtype, &[rows, cols]).unwrap();
    let out = k.output("out", dtype, &[rows, cols]).unwrap();
    for r0 in (0..rows).step_by(128) {
        let rh = 128.min(rows - r0);
        for c0 in (0..cols).step_by(block) {
            let cw = block.min(cols - c0);
            k.scope(|k| {
                let src = |t: &View| t.slice(0, r0..r0 + rh)?.slice(1, c0..c0 + cw);
                let ta = k.sbuf_tile("ta", dtype, &[rh, cw])?;
                let tb = k.sbuf_tile("tb", dtype, &[rh, cw])?;
                let tc = k.sbuf_tile("tc", dtype, &[rh, cw])?;
                k.dma_copy(&ta, &src(&a)?)?;
                k.dma_copy(&tb, &src(&b)?)?;
                k.tensor_tensor(&tc, &ta, &tb, AluOp::Add)?;
                k.tensor_tensor(&tc, &tc, &ta, AluOp::Mul)?;
                k.tensor_scalar(&tc, &tc, AluOp::Sub, 1.0)?;
                k.dma_copy(&src(&out)?, &tc)
            })
            .unwrap();
        }
    }
    k.build().unwrap()
}

#[test]
fn tiled_rows_fp32_and_bf16() {
    for (dtype, rows, cols, block) in [
        (DType::F32, 300, 1000, 512),
        (DType::Bf16, 130, 77, 32),
        (DType::F32, 1, 5, 8),
    ] {
        let p = add_mul_kernel(rows, cols, block, dtype);
        let mut rng = Rng(7);
        let av: Vec<f32> = (0..rows * cols)
            .map(|_| round_through(dtype, rng.unit() * 8.0))
            .collect();
        let bv: Vec<f32> = (0..rows * cols)
            .map(|_| round_through(dtype, rng.unit() * 8.0))
            .collect();
        let (outs, report) = run(
            &p,
            &[("a", encode_f32(dtype, &av)), ("b", encode_f32(dtype, &bv))],
        );
        let got = output(&outs, "out");
        let want: Vec<f32> = av
            .iter()
            .zip(&bv)
            .map(|(&x, &y)| {
                let s = round_through(dtype, x + y);
                let m = round_through(dtype, s * x);
                round_through(dtype, m - 1.0)
            })
            .collect();
        assert_eq!(got, encode_f32(dtype, &want).as_slice(), "{dtype}");
        assert!(report.ticks > 0);
        if dtype == DType::Bf16 {
            // The reference's rounding is the engine's.
            assert_eq!(f32_to_bf16(want[0]).to_le_bytes(), [got[0], got[1]]);
        }
    }
}

#[test]
fn int32_wrapping_and_conversions() {
    let (rows, cols) = (200, 40);
    let mut k = Kernel::new("int_ops");
    let a = k.input("a", DType::I32, &[rows, cols]).unwrap();
    let sum = k.output("sum", DType::I32, &[rows, cols]).unwrap();
    let ramp = k.output("ramp", DType::F32, &[rows, cols]).unwrap();
    let ones = k.output("ones", DType::Bf16, &[rows, cols]).unwrap();
    for r0 in (0..rows).step_by(128) {
        let rh = 128.min(rows - r0);
        k.scope(|k| {
            let ta = k.sbuf_tile("ta", DType::I32, &[rh, cols])?;
            let ti = k.sbuf_tile("ti", DType::I32, &[rh, cols])?;
            let tf = k.sbuf_tile("tf", DType::F32, &[rh, cols])?;
            let tb = k.sbuf_tile("tb", DType::Bf16, &[rh, cols])?;
            k.dma_copy(&ta, &a.slice(0, r0..r0 + rh)?)?;
            // ti[p, i] = r0·1000 + p·1000 + i (GpSimdE), then sum = a · 3 + ti, wrapping.
            k.iota(&ti, (r0 * 1000) as i32, 1000, 1)?;
            k.tensor_scalar(&ta, &ta, AluOp::Mul, 3.0)?;
            k.tensor_tensor(&ta, &ta, &ti, AluOp::Add)?;
            k.dma_copy(&sum.slice(0, r0..r0 + rh)?, &ta)?;
            k.tensor_copy(&tf, &ti)?;
            k.dma_copy(&ramp.slice(0, r0..r0 + rh)?, &tf)?;
            k.memset(&tb, 1.0)?;
            k.dma_copy(&ones.slice(0, r0..r0 + rh)?, &tb)
        })
        .unwrap();
    }
    let p = k.build().unwrap();
    let av: Vec<i32> = (0..rows * cols)
        .map(|i| (i as i32).wrapping_mul(0x2F3F_0101))
        .collect();
    let bytes: Vec<u8> = av.iter().flat_map(|v| v.to_le_bytes()).collect();
    let (outs, _) = run(&p, &[("a", bytes)]);
    let got: Vec<i32> = output(&outs, "sum")
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    for r in 0..rows {
        for c in 0..cols {
            let i = r * cols + c;
            let ramp = (r * 1000 + c) as i32;
            assert_eq!(got[i], av[i].wrapping_mul(3).wrapping_add(ramp), "{r},{c}");
        }
    }
    let ramp = decode_f32(DType::F32, output(&outs, "ramp"));
    assert_eq!(ramp[cols * 130 + 7], 130_007.0);
    assert!(
        decode_f32(DType::Bf16, output(&outs, "ones"))
            .iter()
            .all(|&v| v == 1.0)
    );
}

#[test]
fn strided_views_and_sbuf_to_sbuf_copies() {
    // Transpose a [64, 96] block through a strided HBM view, reverse halves SBUF -> SBUF,
    // and store every other column.
    let (r, c) = (64, 96);
    let mut k = Kernel::new("strided");
    let a = k.input("a", DType::F32, &[r, c]).unwrap();
    let t_out = k.output("t", DType::F32, &[c, r]).unwrap();
    let even = k.output("even", DType::F32, &[r, c / 2]).unwrap();
    let at = k.sbuf_tile("at", DType::F32, &[c, r]).unwrap();
    k.dma_copy(&at, &a.permute(&[1, 0]).unwrap()).unwrap();
    k.dma_copy(&t_out, &at).unwrap();
    let x = k.sbuf_tile("x", DType::F32, &[r, c]).unwrap();
    let y = k.sbuf_tile("y", DType::F32, &[r, c]).unwrap();
    k.dma_copy(&x, &a).unwrap();
    k.dma_copy(
        &y.slice(1, 0..c / 2).unwrap(),
        &x.slice(1, c / 2..c).unwrap(),
    )
    .unwrap();
    k.dma_copy(
        &y.slice(1, c / 2..c).unwrap(),
        &x.slice(1, 0..c / 2).unwrap(),
    )
    .unwrap();
    k.dma_copy(&even, &y.slice_step(1, .., 2).unwrap()).unwrap();
    let p = k.build().unwrap();
    let av: Vec<f32> = (0..r * c).map(|i| i as f32).collect();
    let (outs, _) = run(&p, &[("a", encode_f32(DType::F32, &av))]);
    let t = decode_f32(DType::F32, output(&outs, "t"));
    for i in 0..r {
        for j in 0..c {
            assert_eq!(t[j * r + i], av[i * c + j]);
        }
    }
    let e = decode_f32(DType::F32, output(&outs, "even"));
    for i in 0..r {
        for j in 0..c / 2 {
            let col = (2 * j + c / 2) % c;
            assert_eq!(e[i * (c / 2) + j], av[i * c + col], "{i},{j}");
        }
    }
}

//! The ONNX-facing emitters at model sizes (ResNet-50 and BERT-base layers, batch 1): each
//! builds, runs hazard-free, and — in the ignored `sizes_report` — prints its build and host
//! run time, its simulated ticks and the DMA floor (its HBM bytes at the 435.2 GB/s of a
//! core's 16 DMA engines at 27.2 GB/s, 2176/7 ≈ 311 bytes per tick).
//! `cargo test -p nrt-kernel --test library_onnx_sizes -- --ignored --nocapture`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Instant;

use common::run;
use nrt_kernel::library::{chnorm, data, gemm, pointwise, pool, softmax};
use nrt_kernel::{AluOp, DType, Kernel, Program, View};

type Emit = fn(&mut Kernel, &View, &[View]);
/// Name, input shapes, output shape, emitter.
type Case = (&'static str, Vec<Vec<usize>>, Vec<usize>, Emit);

fn cases() -> Vec<Case> {
    vec![
        (
            "batchnorm [1, 256, 56, 56]",
            vec![
                vec![1, 256, 56, 56],
                vec![256],
                vec![256],
                vec![256],
                vec![256],
            ],
            vec![1, 256, 56, 56],
            |k, y, x| chnorm::batchnorm(k, y, &x[0], &x[1], &x[2], &x[3], &x[4], 1e-5).unwrap(),
        ),
        (
            "maxpool 3x3/2 ceil [1, 64, 112, 112]",
            vec![vec![1, 64, 112, 112]],
            vec![1, 64, 56, 56],
            |k, y, x| {
                let cfg = pool::Pool2dConfig::new(pool::PoolKind::Max, 3, 2, 1);
                pool::pool2d_ext(k, y, &x[0], &cfg, &pool::PoolExt::default()).unwrap()
            },
        ),
        (
            "global avg pool [1, 2048, 7, 7]",
            vec![vec![1, 2048, 7, 7]],
            vec![1, 2048, 1, 1],
            |k, y, x| pool::global_pool(k, y, &x[0], false).unwrap(),
        ),
        (
            "gemm [1, 2048] x [1000, 2048]^T + c",
            vec![vec![1, 2048], vec![1000, 2048], vec![1000]],
            vec![1, 1000],
            |k, y, x| {
                let o = gemm::GemmOpts {
                    trans_b: true,
                    ..gemm::GemmOpts::default()
                };
                gemm::gemm(k, y, &x[0], &x[1], Some(&x[2]), &o).unwrap()
            },
        ),
        (
            "matmul_nd q·kT [1, 12, 128, 64] x [1, 12, 64, 128]",
            vec![vec![1, 12, 128, 64], vec![1, 12, 64, 128]],
            vec![1, 12, 128, 128],
            |k, y, x| gemm::matmul_nd(k, y, &x[0], &x[1]).unwrap(),
        ),
        (
            "permute [1, 128, 12, 64] -> [0, 2, 1, 3]",
            vec![vec![1, 128, 12, 64]],
            vec![1, 12, 128, 64],
            |k, y, x| data::permute(k, y, &x[0], &[0, 2, 1, 3]).unwrap(),
        ),
        (
            "permute [1, 12, 128, 64] -> [0, 1, 3, 2]",
            vec![vec![1, 12, 128, 64]],
            vec![1, 12, 64, 128],
            |k, y, x| data::permute(k, y, &x[0], &[0, 1, 3, 2]).unwrap(),
        ),
        (
            "add bias [1, 128, 3072] + [3072]",
            vec![vec![1, 128, 3072], vec![3072]],
            vec![1, 128, 3072],
            |k, y, x| pointwise::binary_any(k, y, &x[0], &x[1], AluOp::Add).unwrap(),
        ),
        (
            "where mask [1, 12, 128, 128]",
            vec![vec![1, 1, 128, 128], vec![1, 12, 128, 128], vec![1]],
            vec![1, 12, 128, 128],
            |k, y, x| pointwise::where_(k, y, &x[0], &x[1], &x[2]).unwrap(),
        ),
        (
            "add mask [1, 12, 128, 128] + [1, 1, 128, 128]",
            vec![vec![1, 12, 128, 128], vec![1, 1, 128, 128]],
            vec![1, 12, 128, 128],
            |k, y, x| pointwise::binary_any(k, y, &x[0], &x[1], AluOp::Add).unwrap(),
        ),
        (
            "softmax axis -1 [1, 12, 128, 128]",
            vec![vec![1, 12, 128, 128]],
            vec![1, 12, 128, 128],
            |k, y, x| softmax::softmax_axis(k, y, &x[0], 3, false).unwrap(),
        ),
        (
            "layernorm [1, 128, 768]",
            vec![vec![1, 128, 768], vec![768], vec![768]],
            vec![1, 128, 768],
            |k, y, x| {
                chnorm::layernorm_axis(k, y, &x[0], -1, Some(&x[1]), Some(&x[2]), 1e-5).unwrap()
            },
        ),
    ]
}

fn build(shapes: &[Vec<usize>], out: &[usize], f: Emit) -> Program {
    let mut k = Kernel::new("onnx_size");
    let ins: Vec<View> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| (*k.input(&format!("x{i}"), DType::F32, s).unwrap()).clone())
        .collect();
    let y = (*k.output("y", DType::F32, out).unwrap()).clone();
    f(&mut k, &y, &ins);
    k.build().unwrap()
}

fn inputs(shapes: &[Vec<usize>]) -> Vec<(String, Vec<u8>)> {
    shapes
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let n: usize = s.iter().product();
            // Positive values (variances stay valid).
            let v: Vec<u8> = (0..n)
                .flat_map(|j| (0.5 + (j % 97) as f32 / 97.0).to_le_bytes())
                .collect();
            (format!("x{i}"), v)
        })
        .collect()
}

#[test]
fn model_sizes_build_and_run() {
    for (name, shapes, out, f) in cases() {
        let p = build(&shapes, &out, f);
        let ins = inputs(&shapes);
        let ins: Vec<(&str, Vec<u8>)> = ins.iter().map(|(n, v)| (n.as_str(), v.clone())).collect();
        let (_, report) = run(&p, &ins);
        assert!(report.ticks > 0, "{name}");
    }
}

#[test]
#[ignore = "a report: prints figures"]
fn sizes_report() {
    println!("| kernel | build ms | run ms (host) | ticks | DMA floor ticks |");
    println!("|---|---|---|---|---|");
    for (name, shapes, out, f) in cases() {
        let t = Instant::now();
        let p = build(&shapes, &out, f);
        let b = t.elapsed();
        let ins = inputs(&shapes);
        let ins: Vec<(&str, Vec<u8>)> = ins.iter().map(|(n, v)| (n.as_str(), v.clone())).collect();
        let t = Instant::now();
        let (_, report) = run(&p, &ins);
        let r = t.elapsed();
        let bytes: usize = shapes
            .iter()
            .chain([&out])
            .map(|s| 4 * s.iter().product::<usize>())
            .sum();
        println!(
            "| {name} | {:.1} | {:.1} | {} | {} |",
            b.as_secs_f64() * 1e3,
            r.as_secs_f64() * 1e3,
            report.ticks,
            bytes * 7 / 2176
        );
    }
}

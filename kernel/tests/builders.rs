//! Existing hand-synchronised builders re-expressed through the kernel API:
//! `kernels::elementwise` and `kernels::bias_activation`. Same tensors, same tiling (128
//! partitions × 4096 columns, double-buffered); the outputs must be bit-identical, and both
//! tick counts are printed (`cargo test -p nrt-kernel --test builders -- --nocapture`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Rng, output, run};
use nrt_kernel::{ActFunc, AluOp, DType, DmaCopy, Kernel, Memory, Program};
use nrt_sim::engine::{encode_f32, kernels};

const C: usize = 4096;

/// `kernels::elementwise` through the API.
fn elementwise(op: kernels::Elementwise, rows: usize, cols: usize, dtype: DType) -> Program {
    let (name, alu) = match op {
        kernels::Elementwise::Add => ("add", AluOp::Add),
        kernels::Elementwise::Mul => ("mul", AluOp::Mul),
    };
    let mut k = Kernel::new(name);
    let a = k.input("a", dtype, &[rows, cols]).unwrap();
    let b = k.input("b", dtype, &[rows, cols]).unwrap();
    let out = k.output("out", dtype, &[rows, cols]).unwrap();
    let shape = [128.min(rows), C.min(cols)];
    let mut pa = k.tile_pool("a", Memory::Sbuf, dtype, &shape, 2).unwrap();
    let mut pb = k.tile_pool("b", Memory::Sbuf, dtype, &shape, 2).unwrap();
    let mut po = k.tile_pool("o", Memory::Sbuf, dtype, &shape, 2).unwrap();
    for r0 in (0..rows).step_by(128) {
        let rh = 128.min(rows - r0);
        for c0 in (0..cols).step_by(C) {
            let cw = C.min(cols - c0);
            let part = |v: &nrt_kernel::View| v.slice(0, 0..rh)?.slice(1, 0..cw);
            let block = |v: &nrt_kernel::View| v.slice(0, r0..r0 + rh)?.slice(1, c0..c0 + cw);
            let (ta, tb, to) = (
                pa.next(&mut k).unwrap(),
                pb.next(&mut k).unwrap(),
                po.next(&mut k).unwrap(),
            );
            let (ta, tb, to) = (part(&ta).unwrap(), part(&tb).unwrap(), part(&to).unwrap());
            // The builder spreads a's and b's descriptors together over 16 DMA engines.
            for (t, src) in [(&ta, &a), (&tb, &b)] {
                k.emit(DmaCopy {
                    dma_engines: 8,
                    ..DmaCopy::new(t, &block(src).unwrap())
                })
                .unwrap();
            }
            k.tensor_tensor(&to, &ta, &tb, alu).unwrap();
            k.dma_copy(&block(&out).unwrap(), &to).unwrap();
        }
    }
    k.build().unwrap()
}

/// `kernels::bias_activation` through the API.
fn bias_activation(func: ActFunc, features: usize, n: usize, dtype: DType) -> Program {
    let mut k = Kernel::new("bias_activation");
    let x = k.input("x", dtype, &[features, n]).unwrap();
    let bias = k.input("bias", dtype, &[features]).unwrap();
    let out = k.output("out", dtype, &[features, n]).unwrap();
    let fts = features.div_ceil(128);
    let bt = k
        .sbuf_tile("bias", dtype, &[128.min(features), fts])
        .unwrap();
    for ft in 0..fts {
        let (f0, fh) = (ft * 128, 128.min(features - ft * 128));
        let dst = bt.slice(0, 0..fh).unwrap().slice(1, ft..=ft).unwrap();
        k.dma_copy(&dst, &bias.slice(0, f0..f0 + fh).unwrap())
            .unwrap();
    }
    let shape = [128.min(features), C.min(n)];
    let mut px = k.tile_pool("x", Memory::Sbuf, dtype, &shape, 2).unwrap();
    let mut po = k.tile_pool("o", Memory::Sbuf, dtype, &shape, 2).unwrap();
    for ft in 0..fts {
        let (f0, fh) = (ft * 128, 128.min(features - ft * 128));
        for c0 in (0..n).step_by(C) {
            let cw = C.min(n - c0);
            let part = |v: &nrt_kernel::View| v.slice(0, 0..fh)?.slice(1, 0..cw);
            let block = |v: &nrt_kernel::View| v.slice(0, f0..f0 + fh)?.slice(1, c0..c0 + cw);
            let (tx, to) = (px.next(&mut k).unwrap(), po.next(&mut k).unwrap());
            let (tx, to) = (part(&tx).unwrap(), part(&to).unwrap());
            k.dma_copy(&tx, &block(&x).unwrap()).unwrap();
            let b = bt.slice(0, 0..fh).unwrap().slice(1, ft..=ft).unwrap();
            k.activation(&to, func, &tx, &b, 1.0).unwrap();
            k.dma_copy(&block(&out).unwrap(), &to).unwrap();
        }
    }
    k.build().unwrap()
}

fn compare(label: &str, builder: &Program, api: &Program, inputs: &[(&str, Vec<u8>)]) {
    let (o1, r1) = run(builder, inputs);
    let (o2, r2) = run(api, inputs);
    assert_eq!(
        output(&o1, "out"),
        output(&o2, "out"),
        "{label}: outputs differ"
    );
    eprintln!(
        "{label}: builder {} ticks ({} instructions), kernel API {} ticks ({} instructions)",
        r1.ticks,
        builder.instruction_count(),
        r2.ticks,
        api.instruction_count()
    );
}

#[test]
fn elementwise_matches_the_builder() {
    for (op, rows, cols, dtype) in [
        (kernels::Elementwise::Add, 300, 5000, DType::F32),
        (kernels::Elementwise::Mul, 256, 4096, DType::Bf16),
        (kernels::Elementwise::Add, 100, 3000, DType::I32),
        (kernels::Elementwise::Mul, 1024, 8192, DType::F32),
    ] {
        let builder = kernels::elementwise(op, rows as u64, cols as u64, dtype).unwrap();
        let api = elementwise(op, rows, cols, dtype);
        let mut rng = Rng(9);
        let mut data = |_: ()| -> Vec<u8> {
            if dtype == DType::I32 {
                (0..rows * cols)
                    .flat_map(|_| (rng.next() as i32).to_le_bytes())
                    .collect()
            } else {
                let v: Vec<f32> = (0..rows * cols).map(|_| rng.unit() * 100.0).collect();
                encode_f32(dtype, &v)
            }
        };
        let inputs = [("a", data(())), ("b", data(()))];
        compare(
            &format!("elementwise {op:?} {rows}x{cols} {dtype}"),
            &builder,
            &api,
            &inputs,
        );
    }
}

#[test]
fn bias_activation_matches_the_builder() {
    for (func, f, n, dtype) in [
        (ActFunc::Gelu, 200, 5000, DType::F32),
        (ActFunc::Relu, 128, 4096, DType::Bf16),
    ] {
        let builder = kernels::bias_activation(func, f as u64, n as u64, dtype).unwrap();
        let api = bias_activation(func, f, n, dtype);
        let mut rng = Rng(13);
        let xv: Vec<f32> = (0..f * n).map(|_| rng.unit() * 3.0).collect();
        let bv: Vec<f32> = (0..f).map(|_| rng.unit()).collect();
        let inputs = [
            ("x", encode_f32(dtype, &xv)),
            ("bias", encode_f32(dtype, &bv)),
        ];
        compare(
            &format!("bias_activation {} {f}x{n} {dtype}", func.name()),
            &builder,
            &api,
            &inputs,
        );
    }
}

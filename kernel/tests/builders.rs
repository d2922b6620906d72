//! The four hand-synchronised builders re-expressed through the kernel API:
//! `kernels::elementwise` and `kernels::bias_activation` (same tensors, same tiling: 128
//! partitions × 4096 columns, double-buffered), `kernels::matmul` (through the library's
//! `matmul` with `a_transposed`, which has the builder's order of accumulation) and
//! `kernels::mlp` (written with the operations in the builder's order: everything resident in
//! SBUF, K-tiles accumulated in PSUM, bias + activation on ScalarE out of PSUM). The outputs
//! must be bit-identical, and both tick counts are printed
//! (`cargo test -p nrt-kernel --release --test builders -- --nocapture`).
//!
//! Tick counts: `elementwise` and `bias_activation` are within 1% of the builders (the same
//! transfers; the API's DMA triggers and waits differ in placement). The library matmul is
//! faster on all but the smallest and the long-K narrow shapes (up to 36% fewer ticks at
//! 1024³): the builder reloads a K-tile of `lhs_t` and `rhs` for every (group of four M-tiles,
//! 512-column block), in one descriptor per row, where the library's resident schedule loads
//! `aᵀ` and `b` once in few large transfers; on 130×1000×90 it is 12% slower, probably (not traced) because its
//! `b` block (all K rows) arrives in one transfer before the first multiply, where the builder
//! overlaps the K-tile loads with the multiplies. The API's mlp is 3–23% faster: the builder makes
//! TensorE and ScalarE wait for all its loads (inputs, both weights and the biases, the biases
//! one descriptor per element) before the first multiply, where the automatic synchronisation
//! makes each multiply wait only for the tiles it reads, so layer 1 overlaps the loads of `w2`
//! and the biases.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Rng, output, run};
use nrt_kernel::library::matmul::{MatmulOpts, matmul as lib_matmul};
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

/// `kernels::matmul` through the library: `lhs_t` `[K, M]`, `rhs` `[K, N]`, `out` `[M, N]`.
fn matmul(m: usize, kd: usize, n: usize, in_dt: DType, out_dt: DType) -> Program {
    let mut k = Kernel::new("matmul");
    let lhs = k.input("lhs_t", in_dt, &[kd, m]).unwrap();
    let rhs = k.input("rhs", in_dt, &[kd, n]).unwrap();
    let out = k.output("out", out_dt, &[m, n]).unwrap();
    let opts = MatmulOpts {
        a_transposed: true,
        ..MatmulOpts::default()
    };
    lib_matmul(&mut k, &out, &lhs, &rhs, &opts).unwrap();
    k.build().unwrap()
}

/// `kernels::mlp` with the operations, in the builder's order.
fn mlp(batch: usize, d_in: usize, hidden: usize, d_out: usize, dt: DType, act: ActFunc) -> Program {
    let mut k = Kernel::new("mlp");
    let x = k.input("x_t", dt, &[d_in, batch]).unwrap();
    let w1 = k.input("w1", dt, &[d_in, hidden]).unwrap();
    let b1 = k.input("b1", dt, &[hidden]).unwrap();
    let w2 = k.input("w2", dt, &[hidden, d_out]).unwrap();
    let b2 = k.input("b2", dt, &[d_out]).unwrap();
    let y = k.output("y_t", dt, &[d_out, batch]).unwrap();
    let (kt1, ht, ot) = (
        d_in.div_ceil(128),
        hidden.div_ceil(128),
        d_out.div_ceil(128),
    );
    let rows = |d: usize, t: usize| (t * 128, 128.min(d - t * 128));
    // Resident tiles `[128, tiles, columns]`, like the builder's SBUF plan.
    let xt = k.sbuf_tile("x", dt, &[128, kt1, batch]).unwrap();
    let w1t = k.sbuf_tile("w1", dt, &[128, kt1, hidden]).unwrap();
    let w2t = k.sbuf_tile("w2", dt, &[128, ht, d_out]).unwrap();
    let ht_ = k.sbuf_tile("h", dt, &[128, ht, batch]).unwrap();
    let yt = k.sbuf_tile("y", dt, &[128, ot, batch]).unwrap();
    let b1t = k.sbuf_tile("b1", dt, &[128, ht]).unwrap();
    let b2t = k.sbuf_tile("b2", dt, &[128, ot]).unwrap();
    let part =
        |t: &nrt_kernel::View, i: usize, p: usize| t.select(1, i).unwrap().slice(0, 0..p).unwrap();
    for kt in 0..kt1 {
        let (k0, kh) = rows(d_in, kt);
        k.dma_copy(&part(&xt, kt, kh), &x.slice(0, k0..k0 + kh).unwrap())
            .unwrap();
        k.dma_copy(&part(&w1t, kt, kh), &w1.slice(0, k0..k0 + kh).unwrap())
            .unwrap();
    }
    for t in 0..ht {
        let (h0, hh) = rows(hidden, t);
        k.dma_copy(&part(&w2t, t, hh), &w2.slice(0, h0..h0 + hh).unwrap())
            .unwrap();
    }
    for (bt, src, d) in [(&b1t, &b1, hidden), (&b2t, &b2, d_out)] {
        for t in 0..d.div_ceil(128) {
            let (f0, fh) = rows(d, t);
            let dst = bt.slice(0, 0..fh).unwrap().slice(1, t..=t).unwrap();
            k.dma_copy(&dst, &src.slice(0, f0..f0 + fh).unwrap())
                .unwrap();
        }
    }
    let mut banks = k
        .tile_pool("acc", Memory::Psum, DType::F32, &[128, batch], 8)
        .unwrap();
    for layer in 0..2 {
        let (kd, md, mov, w, out, bias, func) = if layer == 0 {
            (d_in, hidden, &xt, &w1t, &ht_, &b1t, act)
        } else {
            (hidden, d_out, &ht_, &w2t, &yt, &b2t, ActFunc::Identity)
        };
        for mt in 0..md.div_ceil(128) {
            let (m0, mw) = rows(md, mt);
            let acc = banks.next(&mut k).unwrap().slice(0, 0..mw).unwrap();
            for kt in 0..kd.div_ceil(128) {
                let (_, kh) = rows(kd, kt);
                let st = part(w, kt, kh).slice(1, m0..m0 + mw).unwrap();
                k.emit(nrt_kernel::NcMatmul {
                    dst: &acc,
                    stationary: &st,
                    moving: &part(mov, kt, kh),
                    accumulate: Some(kt > 0),
                })
                .unwrap();
            }
            let b = bias.slice(0, 0..mw).unwrap().slice(1, mt..=mt).unwrap();
            let o = part(out, mt, mw);
            k.activation(&o, func, &acc, &b, 1.0).unwrap();
            if layer == 1 {
                k.dma_copy(&y.slice(0, m0..m0 + mw).unwrap(), &o).unwrap();
            }
        }
    }
    k.build().unwrap()
}

fn compare(label: &str, builder: &Program, api: &Program, inputs: &[(&str, Vec<u8>)]) {
    compare_named(label, builder, api, inputs, "out");
}

fn compare_named(
    label: &str,
    builder: &Program,
    api: &Program,
    inputs: &[(&str, Vec<u8>)],
    out: &str,
) {
    let (o1, r1) = run(builder, inputs);
    let (o2, r2) = run(api, inputs);
    assert_eq!(
        output(&o1, out),
        output(&o2, out),
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

#[test]
fn matmul_matches_the_builder() {
    for (m, kd, n, in_dt, out_dt) in [
        (128, 128, 512, DType::Bf16, DType::F32),
        (300, 200, 700, DType::Bf16, DType::F32),
        (513, 385, 1100, DType::F32, DType::F32),
        (130, 1000, 90, DType::Bf16, DType::Bf16),
        (1024, 1024, 1024, DType::Bf16, DType::F32),
    ] {
        let builder = kernels::matmul(m as u64, kd as u64, n as u64, in_dt, out_dt).unwrap();
        let api = matmul(m, kd, n, in_dt, out_dt);
        let mut rng = Rng(21);
        let mut data = |len: usize| -> Vec<u8> {
            let v: Vec<f32> = (0..len).map(|_| rng.unit() * 2.0 - 1.0).collect();
            encode_f32(in_dt, &v)
        };
        let inputs = [("lhs_t", data(kd * m)), ("rhs", data(kd * n))];
        compare(
            &format!("matmul {m}x{kd}x{n} {in_dt} -> {out_dt}"),
            &builder,
            &api,
            &inputs,
        );
    }
}

#[test]
fn mlp_matches_the_builder() {
    for (batch, d_in, hidden, d_out, dt, act) in [
        (64, 128, 256, 128, DType::Bf16, ActFunc::Gelu),
        (100, 200, 300, 70, DType::F32, ActFunc::Relu),
        (512, 384, 512, 256, DType::Bf16, ActFunc::Tanh),
        (7, 1, 130, 129, DType::F32, ActFunc::Gelu),
    ] {
        let builder = kernels::mlp(
            batch as u64,
            d_in as u64,
            hidden as u64,
            d_out as u64,
            dt,
            act,
        )
        .unwrap();
        let api = mlp(batch, d_in, hidden, d_out, dt, act);
        let mut rng = Rng(34);
        let mut data = |len: usize, s: f32| -> Vec<u8> {
            let v: Vec<f32> = (0..len).map(|_| (rng.unit() * 2.0 - 1.0) * s).collect();
            encode_f32(dt, &v)
        };
        let inputs = [
            ("x_t", data(d_in * batch, 1.0)),
            ("w1", data(d_in * hidden, 0.2)),
            ("b1", data(hidden, 0.5)),
            ("w2", data(hidden * d_out, 0.2)),
            ("b2", data(d_out, 0.5)),
        ];
        compare_named(
            &format!(
                "mlp batch {batch}, {d_in} -> {hidden} ({}) -> {d_out}, {dt}",
                act.name()
            ),
            &builder,
            &api,
            &inputs,
            "y_t",
        );
    }
}

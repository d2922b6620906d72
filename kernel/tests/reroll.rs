//! `Kernel::build` rerolls: for every library kernel at a few sizes, the rerolled program
//! (`build`) and the unrolled one (`build_unrolled`) of the same recording give bit-identical
//! outputs with zero hazards, and the rerolled one has far fewer instructions (and
//! descriptors) on large iteration spaces. Counts and ticks are printed
//! (`cargo test -p nrt-kernel --test reroll -- --nocapture`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Rng, run};
use nrt_kernel::library::attention::{AttentionConfig, attention, multi_head_attention};
use nrt_kernel::library::conv::{Conv2dConfig, conv2d};
use nrt_kernel::library::elementwise::binary;
use nrt_kernel::library::matmul::{self, MatmulOpts, matmul};
use nrt_kernel::library::norm::{layernorm, rmsnorm};
use nrt_kernel::library::pool::build_pool2d;
use nrt_kernel::library::pool::{Pool2dConfig, PoolKind, pool2d};
use nrt_kernel::library::reduce::{ReduceOp, reduce, reduced_shape};
use nrt_kernel::library::{softmax, transpose};
use nrt_kernel::{AluOp, DType, Kernel, Program, TensorKind};
use nrt_sim::engine::reroll;

/// Records the kernel twice (`record` builds the same kernel both times) and returns
/// `(unrolled, rerolled)`.
fn both(record: impl Fn(&mut Kernel)) -> (Program, Program) {
    let mut a = Kernel::new("k");
    record(&mut a);
    let mut b = Kernel::new("k");
    record(&mut b);
    let unrolled = a.build_unrolled().unwrap();
    let rerolled = b.build().unwrap();
    assert_eq!(
        rerolled,
        reroll(&unrolled),
        "build is reroll(build_unrolled)"
    );
    (unrolled, rerolled)
}

/// Deterministic small values (exact in bf16) for every input of `p`.
fn inputs(p: &Program) -> Vec<(String, Vec<u8>)> {
    let mut rng = Rng(0x5eed_1234);
    p.tensors
        .iter()
        .filter(|t| t.kind == TensorKind::Input)
        .map(|t| {
            let n = t.elems().unwrap() as usize;
            let bytes: Vec<u8> = (0..n)
                .flat_map(|_| {
                    let v = rng.small(8) / 8.0;
                    match t.dtype {
                        DType::Bf16 => ((v.to_bits() >> 16) as u16).to_le_bytes().to_vec(),
                        DType::F32 => v.to_bits().to_le_bytes().to_vec(),
                        DType::F16 => half_bits(v).to_le_bytes().to_vec(),
                        d => panic!("input dtype {d:?}"),
                    }
                })
                .collect();
            (t.name.clone(), bytes)
        })
        .collect()
}

/// `v` (a multiple of 1/8 in [-1, 1]) as IEEE binary16 bits.
fn half_bits(v: f32) -> u16 {
    if v == 0.0 {
        return 0;
    }
    let sign = if v < 0.0 { 0x8000 } else { 0 };
    let a = v.abs();
    let e = a.log2().floor() as i32;
    let m = ((a / 2f32.powi(e) - 1.0) * 1024.0).round() as u16;
    sign | (((e + 15) as u16) << 10) | m
}

/// Runs both programs on the same inputs: outputs bit-identical, no hazards (checked by
/// `run`); prints the counts and ticks; returns `(unrolled, rerolled)` instruction counts.
fn check(what: &str, unrolled: &Program, rerolled: &Program) -> (usize, usize) {
    let ins = inputs(unrolled);
    let ins: Vec<(&str, Vec<u8>)> = ins.iter().map(|(n, d)| (n.as_str(), d.clone())).collect();
    let (out_u, rep_u) = run(unrolled, &ins);
    let (out_r, rep_r) = run(rerolled, &ins);
    assert_eq!(out_u, out_r, "{what}: outputs differ");
    let (iu, ir) = (unrolled.instruction_count(), rerolled.instruction_count());
    let loops = rerolled
        .streams
        .iter()
        .flatten()
        .filter(|i| i.is_loop())
        .count();
    println!(
        "{what}: instructions {iu} -> {ir} ({loops} loop instructions, {} terms), descriptors {} -> {}, ticks {} -> {} ({:+})",
        rerolled.terms.len(),
        unrolled.descriptors.len(),
        rerolled.descriptors.len(),
        rep_u.ticks,
        rep_r.ticks,
        rep_r.ticks as i64 - rep_u.ticks as i64
    );
    (iu, ir)
}

fn softmax_kernel(rows: usize, cols: usize) -> (Program, Program) {
    both(|k| {
        let x = k.input("x", DType::F32, &[rows, cols]).unwrap();
        let o = k.output("out", DType::F32, &[rows, cols]).unwrap();
        softmax::softmax(k, &o, &x).unwrap();
    })
}

#[test]
fn softmax_rows_independent_of_count() {
    let mut counts = Vec::new();
    for rows in [128, 1024, 4096] {
        let (u, r) = softmax_kernel(rows, 64);
        let (iu, ir) = check(&format!("softmax {rows}x64"), &u, &r);
        counts.push((rows, iu, ir));
    }
    let (_, iu, ir) = counts[2];
    assert!(ir * 10 < iu, "softmax 4096 rows: {ir} vs {iu} unrolled");
    // Beyond 1024 rows the rerolled program only changes trip counts.
    assert_eq!(counts[1].2, counts[2].2, "{counts:?}");
}

fn matmul_kernel(m: usize, kd: usize, n: usize, dt: DType) -> (Program, Program) {
    both(|k| {
        let a = k.input("a", dt, &[m, kd]).unwrap();
        let b = k.input("b", dt, &[kd, n]).unwrap();
        let o = k.output("out", DType::F32, &[m, n]).unwrap();
        matmul(k, &o, &a, &b, &MatmulOpts::default()).unwrap();
    })
}

#[test]
fn matmul_sizes() {
    for (m, kd, n) in [(128, 128, 128), (256, 384, 512), (300, 200, 130)] {
        let (u, r) = matmul_kernel(m, kd, n, DType::Bf16);
        check(&format!("matmul {m}x{kd}x{n} bf16"), &u, &r);
    }
}

#[test]
fn matmul_1024_cubed_shrinks() {
    let (u, r) = matmul_kernel(1024, 1024, 1024, DType::Bf16);
    let (iu, ir) = check("matmul 1024^3 bf16", &u, &r);
    assert!(ir * 4 < iu, "{ir} vs {iu}");
    assert!(r.descriptors.len() * 4 < u.descriptors.len());
    // The library's own builder rerolls the same way.
    let lib = matmul::build(
        1024,
        1024,
        1024,
        DType::Bf16,
        DType::F32,
        &MatmulOpts::default(),
    )
    .unwrap();
    assert_eq!(lib.instruction_count(), ir);
}

#[test]
fn norms() {
    for (rows, cols) in [(256, 130), (2048, 256)] {
        let (u, r) = both(|k| {
            let x = k.input("x", DType::F32, &[rows, cols]).unwrap();
            let g = k.input("g", DType::F32, &[cols]).unwrap();
            let b = k.input("b", DType::F32, &[cols]).unwrap();
            let o = k.output("out", DType::Bf16, &[rows, cols]).unwrap();
            layernorm(k, &o, &x, Some(&g), Some(&b), 1e-5).unwrap();
        });
        let (iu, ir) = check(&format!("layernorm {rows}x{cols}"), &u, &r);
        if rows >= 2048 {
            assert!(ir * 4 < iu, "{ir} vs {iu}");
        }
        let (u, r) = both(|k| {
            let x = k.input("x", DType::Bf16, &[rows, cols]).unwrap();
            let g = k.input("g", DType::Bf16, &[cols]).unwrap();
            let o = k.output("out", DType::F32, &[rows, cols]).unwrap();
            rmsnorm(k, &o, &x, Some(&g), 1e-6).unwrap();
        });
        let (iu, ir) = check(&format!("rmsnorm {rows}x{cols}"), &u, &r);
        if rows >= 2048 {
            assert!(ir * 4 < iu, "{ir} vs {iu}");
        }
    }
}

#[test]
fn attention_heads() {
    let cfg = AttentionConfig {
        causal: true,
        scale: None,
    };
    let (u, r) = both(|k| {
        let q = k.input("q", DType::Bf16, &[256, 64]).unwrap();
        let key = k.input("k", DType::Bf16, &[256, 64]).unwrap();
        let v = k.input("v", DType::Bf16, &[256, 64]).unwrap();
        let o = k.output("out", DType::F32, &[256, 64]).unwrap();
        attention(k, &o, &q, &key, &v, &cfg).unwrap();
    });
    check("attention 256x64 causal", &u, &r);
    let (u, r) = both(|k| {
        let q = k.input("q", DType::Bf16, &[8, 128, 64]).unwrap();
        let key = k.input("k", DType::Bf16, &[8, 128, 64]).unwrap();
        let v = k.input("v", DType::Bf16, &[8, 128, 64]).unwrap();
        let o = k.output("out", DType::Bf16, &[8, 128, 64]).unwrap();
        multi_head_attention(k, &o, &q, &key, &v, &AttentionConfig::default()).unwrap();
    });
    let (iu, ir) = check("attention 8 heads x 128x64", &u, &r);
    assert!(ir * 2 < iu, "{ir} vs {iu}");
}

#[test]
fn convolutions_and_pooling() {
    for (groups, c, o) in [(1, 16, 32), (16, 16, 16)] {
        let cfg = Conv2dConfig::new(1, 1, groups);
        let (u, r) = both(|k| {
            let x = k.input("x", DType::Bf16, &[2, c, 24, 24]).unwrap();
            let w = k.input("w", DType::Bf16, &[o, c / groups, 3, 3]).unwrap();
            let b = k.input("b", DType::Bf16, &[o]).unwrap();
            let y = k.output("y", DType::Bf16, &[2, o, 24, 24]).unwrap();
            conv2d(k, &y, &x, &w, Some(&b), &cfg).unwrap();
        });
        let (iu, ir) = check(&format!("conv2d groups {groups} {c}->{o} 24x24"), &u, &r);
        assert!(ir < iu, "{ir} vs {iu}");
    }
    let cfg = Pool2dConfig::new(PoolKind::Max, 2, 2, 0);
    let (u, r) = both(|k| {
        let x = k.input("x", DType::F32, &[4, 32, 32, 32]).unwrap();
        let y = k.output("y", DType::F32, &[4, 32, 16, 16]).unwrap();
        pool2d(k, &y, &x, &cfg).unwrap();
    });
    let (_, ir) = check("maxpool 2x2 [4,32,32,32]", &u, &r);
    assert_eq!(
        build_pool2d([4, 32, 32, 32], &cfg, DType::F32)
            .unwrap()
            .instruction_count(),
        ir
    );
}

#[test]
fn elementwise_reduce_transpose() {
    let (u, r) = both(|k| {
        let a = k.input("a", DType::F32, &[2048, 512]).unwrap();
        let b = k.input("b", DType::F32, &[512]).unwrap();
        let o = k.output("out", DType::F32, &[2048, 512]).unwrap();
        binary(k, &o, &a, &b, AluOp::Add).unwrap();
    });
    let (iu, ir) = check("add [2048,512] + [512]", &u, &r);
    assert!(ir * 3 < iu, "{ir} vs {iu}");
    for axis in [0, 1] {
        let shape = [1024, 384];
        let out = reduced_shape(&shape, axis, false);
        let (u, r) = both(|k| {
            let x = k.input("x", DType::F32, &shape).unwrap();
            let o = k.output("out", DType::F32, &out).unwrap();
            reduce(k, &o, &x, axis, ReduceOp::Sum, false).unwrap();
        });
        check(&format!("sum over axis {axis} of [1024,384]"), &u, &r);
    }
    let (u, r) = both(|k| {
        let x = k.input("x", DType::Bf16, &[1024, 384]).unwrap();
        let o = k.output("out", DType::Bf16, &[384, 1024]).unwrap();
        transpose::transpose(k, &o, &x).unwrap();
    });
    let (iu, ir) = check("transpose [1024,384] bf16", &u, &r);
    assert!(ir * 2 < iu, "{ir} vs {iu}");
}

/// Build time of the library matmul at large sizes: recording (`build_unrolled`) and
/// rerolling, printed (`cargo test --release -p nrt-kernel --test reroll -- --ignored
/// --nocapture`).
#[test]
#[ignore]
fn large_matmul_build_time() {
    for s in [2048usize, 4096, 8192] {
        let t = std::time::Instant::now();
        let mut k = Kernel::new("matmul");
        let a = k.input("a", DType::Bf16, &[s, s]).unwrap();
        let b = k.input("b", DType::Bf16, &[s, s]).unwrap();
        let o = k.output("out", DType::F32, &[s, s]).unwrap();
        let rec = matmul(&mut k, &o, &a, &b, &MatmulOpts::default());
        let recorded = t.elapsed().as_secs_f64();
        let u = match rec.and_then(|()| k.build_unrolled()) {
            Ok(u) => u,
            Err(e) => {
                println!("matmul {s}^3 bf16: not built: {e}");
                continue;
            }
        };
        let built = t.elapsed().as_secs_f64();
        let r = reroll(&u);
        let total = t.elapsed().as_secs_f64();
        println!(
            "matmul {s}^3 bf16: record {recorded:.3} s, assemble {:.3} s, reroll {:.3} s \
             (total {total:.3} s); {} -> {} instructions, {} -> {} descriptors",
            built - recorded,
            total - built,
            u.instruction_count(),
            r.instruction_count(),
            u.descriptors.len(),
            r.descriptors.len()
        );
    }
}

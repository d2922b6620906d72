//! Data movement, fills, matmul, transposes, `tensor_tensor` and the selects against plain
//! Rust references: `dma_copy` (multi-dimensional, permuted and strided access patterns,
//! casts between every dtype), `dma_transpose`, `tensor_copy` (every engine, casts),
//! `memset`, `iota`, `nc_matmul` (PSUM accumulation, explicit and inferred),
//! `nc_transpose` (TensorE and VectorE), `tensor_tensor` (arithmetic, minimum/maximum,
//! comparisons), `affine_select` and `range_select`.
//!
//! Bounds: everything here is bit-exact. Data movement keeps the bits it moves (NaN payloads
//! included); conversions are one RNE rounding per step (int32: nearest even, saturating,
//! NaN → 0); arithmetic is one fp32 rounding per operation with the canonical NaN; the matmul
//! order is fixed (fused multiply-adds from +0 in increasing k, then added to PSUM). Data
//! has NaN, ±∞, ±0, subnormals and the extremes sprinkled in; every program runs with no
//! hazards (`common::run` asserts it).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod refs;

use common::{Rng, output, run};
use nrt_kernel::{AffineSelect, AluOp, DType, EngineId, Kernel, NcMatmul, RangeSelect};
use nrt_kernel::{Memset, TensorCopy};
use refs::{QNAN, SPECIALS, alu, canon, cast, dec, enc, f32s, i32s, max_num, to_i32};

/// Random values in ±8 with the special values every 7th element.
fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|i| {
            if i % 7 == 3 {
                SPECIALS[rng.below(SPECIALS.len())]
            } else {
                rng.unit() * 8.0
            }
        })
        .collect()
}

/// Bits of float outputs, or int32 values as f32 bits for int32.
fn read(dtype: DType, b: &[u8]) -> Vec<f32> {
    if dtype == DType::I32 {
        to_i32(b).into_iter().map(|v| v as f32).collect()
    } else {
        dec(dtype, b)
    }
}

fn same_bits(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.to_bits(), w.to_bits(), "{what} #{i}: {g:e} vs {w:e}");
    }
}

#[test]
fn dma_copy_permuted_and_strided_patterns() {
    // x [6, 10, 12] read as [10, 6, 12] (a permuted HBM pattern), then a stepped sub-view of
    // that, an SBUF -> SBUF copy of a strided on-chip view, and PSUM -> SBUF.
    let (a, b, c) = (6, 10, 12);
    let mut k = Kernel::new("dma_patterns");
    let x = k.input("x", DType::F32, &[a, b, c]).unwrap();
    let y1 = k.output("y1", DType::F32, &[b, a, c]).unwrap();
    let y2 = k.output("y2", DType::F32, &[b, 3 * 4]).unwrap();
    let y3 = k.output("y3", DType::F32, &[b, a]).unwrap();
    let t1 = k.sbuf_tile("t1", DType::F32, &[b, a, c]).unwrap();
    let t2 = k.sbuf_tile("t2", DType::F32, &[b, 3, 4]).unwrap();
    let t3 = k.sbuf_tile("t3", DType::F32, &[b, a]).unwrap();
    let ps = k.psum_tile("ps", DType::F32, &[b, a]).unwrap();
    let xp = x.permute(&[1, 0, 2]).unwrap();
    k.dma_copy(&t1, &xp).unwrap();
    let stepped = xp
        .slice_step(1, 0..6, 2)
        .unwrap()
        .slice_step(2, 1..12, 3)
        .unwrap();
    k.dma_copy(&t2, &stepped).unwrap();
    // Column 5 of every row of t1 (stride c in each partition) -> PSUM by VectorE -> SBUF by
    // DMA.
    k.tensor_copy(&ps, &t1.select(2, 5).unwrap()).unwrap();
    k.dma_copy(&t3, &ps).unwrap();
    k.dma_copy(&y1, &t1).unwrap();
    k.dma_copy(&y2, &t2.reshape(&[b, 12]).unwrap()).unwrap();
    k.dma_copy(&y3, &t3).unwrap();
    let p = k.build().unwrap();
    let xv = data(a * b * c, 1);
    let (outs, _) = run(&p, &[("x", f32s(&xv))]);
    let at = |i: usize, j: usize, l: usize| xv[(i * b + j) * c + l];
    let mut w1 = Vec::new();
    let mut w2 = Vec::new();
    let mut w3 = Vec::new();
    for j in 0..b {
        for i in 0..a {
            for l in 0..c {
                w1.push(at(i, j, l));
            }
            w3.push(at(i, j, 5));
        }
        for i in (0..6).step_by(2) {
            for l in (1..12).step_by(3) {
                w2.push(at(i, j, l));
            }
        }
    }
    same_bits(&dec(DType::F32, output(&outs, "y1")), &w1, "permuted");
    same_bits(&dec(DType::F32, output(&outs, "y2")), &w2, "stepped");
    same_bits(&dec(DType::F32, output(&outs, "y3")), &w3, "psum");
}

#[test]
fn dma_copy_casts_between_every_dtype() {
    // HBM fp32 -> SBUF of each dtype (one conversion), then back to an HBM tensor of each
    // dtype (a second one): the reference converts twice through fp32.
    let (r, c) = (70, 24);
    let dts = [DType::F32, DType::Bf16, DType::F16, DType::I32];
    let mut xv = data(r * c, 2);
    // Values that round differently in each type, and int32 saturation.
    xv[0] = 1.0 + 2f32.powi(-8) + 2f32.powi(-20);
    xv[1] = 65519.0;
    xv[2] = 3.0e9;
    xv[3] = -2.5;
    xv[4] = 16_777_217.0;
    xv[5] = 6.0e-8;
    for mid in dts {
        let mut k = Kernel::new("casts");
        let x = k.input("x", DType::F32, &[r, c]).unwrap();
        let t = k.sbuf_tile("t", mid, &[r, c]).unwrap();
        k.dma_copy(&t, &x).unwrap();
        for out in dts {
            let y = k.output(&format!("y_{out}"), out, &[r, c]).unwrap();
            k.dma_copy(&y, &t).unwrap();
        }
        let p = k.build().unwrap();
        let (outs, _) = run(&p, &[("x", f32s(&xv))]);
        for out in dts {
            let want: Vec<f32> = xv.iter().map(|&v| cast(out, cast(mid, v))).collect();
            let got = read(out, output(&outs, &format!("y_{out}")));
            same_bits(&got, &want, &format!("fp32 -> {mid} -> {out}"));
        }
    }
    // int32 -> bf16 rounds twice (through fp32); a strided cast of a column slice.
    let mut k = Kernel::new("int_casts");
    let x = k.input("x", DType::I32, &[r, c]).unwrap();
    let y = k.output("y", DType::Bf16, &[r, c / 2]).unwrap();
    let t = k.sbuf_tile("t", DType::Bf16, &[r, c / 2]).unwrap();
    k.dma_copy(&t, &x.slice_step(1, 1..c, 2).unwrap()).unwrap();
    k.dma_copy(&y, &t).unwrap();
    let p = k.build().unwrap();
    let mut rng = Rng(4);
    let mut iv: Vec<i32> = (0..r * c).map(|_| rng.next() as i32).collect();
    iv[1] = (1 << 24) + (1 << 16) + 1;
    let (outs, _) = run(&p, &[("x", i32s(&iv))]);
    let want: Vec<f32> = (0..r)
        .flat_map(|i| (1..c).step_by(2).map(move |j| (i, j)))
        .map(|(i, j)| refs::bf16(iv[i * c + j] as f32))
        .collect();
    same_bits(
        &dec(DType::Bf16, output(&outs, "y")),
        &want,
        "int32 -> bf16",
    );
    assert_eq!(want[0], 16_777_216.0);
}

#[test]
fn dma_transpose_from_hbm_and_sbuf() {
    // src [R, C] from a column slice of a wider HBM tensor (pitch 80), and from SBUF.
    let (r, c, w) = (100, 60, 80);
    for dt in [DType::F32, DType::Bf16] {
        let mut k = Kernel::new("dma_t");
        let x = k.input("x", dt, &[r, w]).unwrap();
        let y1 = k.output("y1", dt, &[c, r]).unwrap();
        let y2 = k.output("y2", dt, &[r, c]).unwrap();
        let t1 = k.sbuf_tile("t1", dt, &[c, r]).unwrap();
        let t2 = k.sbuf_tile("t2", dt, &[r, c]).unwrap();
        k.dma_transpose(&t1, &x.slice(1, 7..7 + c).unwrap())
            .unwrap();
        k.dma_transpose(&t2, &t1).unwrap();
        k.dma_copy(&y1, &t1).unwrap();
        k.dma_copy(&y2, &t2).unwrap();
        let p = k.build().unwrap();
        let mut xv = data(r * w, 3);
        // A signalling NaN payload: transposes move bits.
        xv[7] = f32::from_bits(0x7F80_0001 | 0x0001_0000);
        let xs: Vec<f32> = xv.iter().map(|&v| cast(dt, v)).collect();
        let (outs, _) = run(&p, &[("x", enc(dt, &xs))]);
        let w1: Vec<f32> = (0..c)
            .flat_map(|j| (0..r).map(move |i| (i, j)))
            .map(|(i, j)| xs[i * w + 7 + j])
            .collect();
        let w2: Vec<f32> = (0..r * c).map(|e| xs[e / c * w + 7 + e % c]).collect();
        same_bits(&dec(dt, output(&outs, "y1")), &w1, "hbm transpose");
        same_bits(&dec(dt, output(&outs, "y2")), &w2, "sbuf transpose back");
    }
}

#[test]
fn tensor_copy_on_every_engine_with_casts() {
    let (p, f) = (90, 40);
    let mut k = Kernel::new("copies");
    let x = k.input("x", DType::F32, &[p, f]).unwrap();
    let xt = k.sbuf_tile("x", DType::F32, &[p, f]).unwrap();
    k.dma_copy(&xt, &x).unwrap();
    let cases = [
        (EngineId::Vector, DType::Bf16),
        (EngineId::Scalar, DType::F16),
        (EngineId::GpSimd, DType::I32),
        (EngineId::Vector, DType::F32),
    ];
    let mut outs_t = Vec::new();
    for (i, (e, dt)) in cases.iter().enumerate() {
        let t = k.sbuf_tile(&format!("t{i}"), *dt, &[p, f]).unwrap();
        k.emit(TensorCopy {
            dst: &t,
            src: &xt,
            engine: Some(*e),
        })
        .unwrap();
        // And back to fp32 on VectorE, through PSUM.
        let ps = k.psum_tile(&format!("ps{i}"), DType::F32, &[p, f]).unwrap();
        k.tensor_copy(&ps, &t).unwrap();
        let back = k.sbuf_tile(&format!("b{i}"), DType::F32, &[p, f]).unwrap();
        k.emit(TensorCopy {
            dst: &back,
            src: &ps,
            engine: Some(EngineId::Scalar),
        })
        .unwrap();
        let y = k.output(&format!("y{i}"), DType::F32, &[p, f]).unwrap();
        k.dma_copy(&y, &back).unwrap();
        outs_t.push((t, ps, back));
    }
    let prog = k.build().unwrap();
    let is_copy = |i: &nrt_sim::engine::Instr| i.name() == "TensorCopy";
    assert_eq!(common::count(&prog, EngineId::Vector, is_copy), 6);
    assert_eq!(common::count(&prog, EngineId::Scalar, is_copy), 5);
    assert_eq!(common::count(&prog, EngineId::GpSimd, is_copy), 1);
    let mut xv = data(p * f, 5);
    xv[0] = f32::from_bits(0x7F80_1234); // a signalling NaN: fp32 -> fp32 keeps it
    let (outs, _) = run(&prog, &[("x", f32s(&xv))]);
    for (i, (_, dt)) in cases.iter().enumerate() {
        let want: Vec<f32> = xv.iter().map(|&v| cast(*dt, v)).collect();
        same_bits(
            &dec(DType::F32, output(&outs, &format!("y{i}"))),
            &want,
            &format!("copy via {dt}"),
        );
    }
}

#[test]
fn memset_and_iota() {
    let (p, f) = (100, 30);
    let mut k = Kernel::new("fills");
    let yf = k.output("yf", DType::F32, &[p, f]).unwrap();
    let yb = k.output("yb", DType::Bf16, &[p, f]).unwrap();
    let yi = k.output("yi", DType::I32, &[p, f]).unwrap();
    let yv = k.output("yv", DType::F32, &[p, f]).unwrap();
    let ti = k.output("ti", DType::I32, &[p, f]).unwrap();
    let tf = k.output("tf", DType::F32, &[p, f]).unwrap();
    let tb = k.output("tb", DType::Bf16, &[p, f]).unwrap();
    let fsb = k.sbuf_tile("f", DType::F32, &[p, f]).unwrap();
    let bsb = k.sbuf_tile("b", DType::Bf16, &[p, f]).unwrap();
    let isb = k.sbuf_tile("i", DType::I32, &[p, f]).unwrap();
    let ps = k.psum_tile("ps", DType::F32, &[p, f]).unwrap();
    let vsb = k.sbuf_tile("v", DType::F32, &[p, f]).unwrap();
    let (ii, fi, bi) = (
        k.sbuf_tile("ii", DType::I32, &[p, 3, 10]).unwrap(),
        k.sbuf_tile("fi", DType::F32, &[p, f]).unwrap(),
        k.sbuf_tile("bi", DType::Bf16, &[p, f]).unwrap(),
    );
    // A quiet NaN with a payload (the f64 whose payload's top bits are fp32 0x7FC0_1234's:
    // built from bits, as a float conversion may change a NaN's payload), a value bf16
    // rounds (1 + 2^-8 + 2^-9 -> 1 + 2^-7), int32.
    let nan = f64::from_bits(0x7FF0_0000_0000_0000 | (0x40_1234u64 << 29));
    k.memset(&fsb, nan).unwrap();
    k.memset(&bsb, 1.0 + 2f64.powi(-8) + 2f64.powi(-9)).unwrap();
    k.memset(&isb, -123_456_789.0).unwrap();
    k.emit(Memset {
        dst: &ps,
        value: f64::NEG_INFINITY,
        engine: Some(EngineId::Vector),
    })
    .unwrap();
    k.tensor_copy(&vsb, &ps).unwrap();
    // iota: wrapping int32 near the top; a partition-offset view starts p at 0; conversions.
    k.iota(&ii, i32::MAX - 500, 7, 3).unwrap();
    k.iota(&fi.slice(0, 64..p).unwrap(), -20, 1 << 20, 1)
        .unwrap();
    k.iota(&fi.slice(0, 0..64).unwrap(), 16_777_215, 0, 1)
        .unwrap();
    k.iota(&bi, 0, 300, -7).unwrap();
    for (o, t) in [
        (&yf, &fsb),
        (&yb, &bsb),
        (&yi, &isb),
        (&yv, &vsb),
        (&tf, &fi),
        (&tb, &bi),
    ] {
        k.dma_copy(o, t).unwrap();
    }
    k.dma_copy(&ti, &ii.reshape(&[p, f]).unwrap()).unwrap();
    let prog = k.build().unwrap();
    let (outs, _) = run(&prog, &[]);
    let all = |b: &[u8], dt: DType, w: f32, what: &str| {
        same_bits(&dec(dt, b), &vec![w; p * f], what);
    };
    all(
        output(&outs, "yf"),
        DType::F32,
        f32::from_bits(0x7FC0_1234),
        "memset NaN",
    );
    all(
        output(&outs, "yb"),
        DType::Bf16,
        1.0 + 2f32.powi(-7),
        "memset bf16",
    );
    all(
        output(&outs, "yv"),
        DType::F32,
        f32::NEG_INFINITY,
        "memset VectorE PSUM",
    );
    assert!(
        to_i32(output(&outs, "yi"))
            .iter()
            .all(|&v| v == -123_456_789)
    );
    let gi = to_i32(output(&outs, "ti"));
    let gf = dec(DType::F32, output(&outs, "tf"));
    let gb = dec(DType::Bf16, output(&outs, "tb"));
    for r in 0..p {
        for i in 0..f {
            let n = r * f + i;
            let want = (i32::MAX - 500)
                .wrapping_add((r as i32).wrapping_mul(7))
                .wrapping_add(i as i32 * 3);
            assert_eq!(gi[n], want, "iota int32 ({r}, {i})");
            let wf = if r >= 64 {
                (-20i32 + ((r - 64) as i32) * (1 << 20) + i as i32) as f32
            } else {
                (16_777_215 + i as i32) as f32
            };
            assert_eq!(gf[n].to_bits(), wf.to_bits(), "iota fp32 ({r}, {i})");
            let wb = refs::bf16((r as i32 * 300 - 7 * i as i32) as f32);
            assert_eq!(gb[n].to_bits(), wb.to_bits(), "iota bf16 ({r}, {i})");
        }
    }
}

/// `acc[m, n] = Σ_k st[k, m]·mv[k, n]` as the ISA documents it: a chain of fused
/// multiply-adds from +0 in increasing k (one rounding each).
fn mm_tile(st: &[f32], mv: &[f32], kk: usize, m: usize, n: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut s = 0.0f32;
            for l in 0..kk {
                s = canon(st[l * m + i].mul_add(mv[l * n + j], s));
            }
            out[i * n + j] = s;
        }
    }
    out
}

#[test]
fn nc_matmul_accumulates_in_psum() {
    // Three K tiles (128, 128, 37) accumulated (inferred), a fourth matmul that overwrites
    // (explicit), then one explicit accumulation: fp32 data with specials and bf16 data.
    let (m, n) = (70, 130);
    let ks = [128usize, 128, 37];
    for dt in [DType::F32, DType::Bf16] {
        let mut k = Kernel::new("mm_acc");
        let mut ins = Vec::new();
        for (i, &kk) in ks.iter().enumerate() {
            let a = k.input(&format!("a{i}"), dt, &[kk, m]).unwrap();
            let b = k.input(&format!("b{i}"), dt, &[kk, n]).unwrap();
            let at = k.sbuf_tile(&format!("a{i}"), dt, &[kk, m]).unwrap();
            let bt = k.sbuf_tile(&format!("b{i}"), dt, &[kk, n]).unwrap();
            k.dma_copy(&at, &a).unwrap();
            k.dma_copy(&bt, &b).unwrap();
            ins.push((at, bt));
        }
        let y1 = k.output("y1", DType::F32, &[m, n]).unwrap();
        let y2 = k.output("y2", DType::F32, &[m, n]).unwrap();
        let acc = k.psum_tile("acc", DType::F32, &[m, n]).unwrap();
        let s1 = k.sbuf_tile("s1", DType::F32, &[m, n]).unwrap();
        let s2 = k.sbuf_tile("s2", DType::F32, &[m, n]).unwrap();
        for (at, bt) in &ins {
            k.nc_matmul(&acc, at, bt).unwrap();
        }
        k.tensor_copy(&s1, &acc).unwrap();
        for (i, acc_flag) in [(2usize, false), (0, true)] {
            k.emit(NcMatmul {
                dst: &acc,
                stationary: &ins[i].0,
                moving: &ins[i].1,
                accumulate: Some(acc_flag),
            })
            .unwrap();
        }
        k.tensor_copy(&s2, &acc).unwrap();
        k.dma_copy(&y1, &s1).unwrap();
        k.dma_copy(&y2, &s2).unwrap();
        let p = k.build().unwrap();
        let mut inputs = Vec::new();
        let mut vals = Vec::new();
        for (i, &kk) in ks.iter().enumerate() {
            let mut av: Vec<f32> = data(kk * m, 10 + i as u64);
            let mut bv: Vec<f32> = data(kk * n, 20 + i as u64);
            if dt == DType::Bf16 {
                // Finite bf16 values (the fast path's domain), one ∞·0 column.
                av = av
                    .iter()
                    .map(|&v| if v.is_finite() { refs::bf16(v) } else { 1.0 })
                    .collect();
                bv = bv
                    .iter()
                    .map(|&v| if v.is_finite() { refs::bf16(v) } else { 2.0 })
                    .collect();
                if i == 1 {
                    av[3] = f32::INFINITY;
                    bv[5] = 0.0;
                }
            }
            inputs.push((format!("a{i}"), enc(dt, &av)));
            inputs.push((format!("b{i}"), enc(dt, &bv)));
            vals.push((av, bv));
        }
        let inputs: Vec<(&str, Vec<u8>)> = inputs
            .iter()
            .map(|(n, d)| (n.as_str(), d.clone()))
            .collect();
        let (outs, _) = run(&p, &inputs);
        let tile = |i: usize| mm_tile(&vals[i].0, &vals[i].1, ks[i], m, n);
        let (t0, t1, t2) = (tile(0), tile(1), tile(2));
        let w1: Vec<f32> = (0..m * n)
            .map(|e| canon(canon(t0[e] + t1[e]) + t2[e]))
            .collect();
        let w2: Vec<f32> = (0..m * n).map(|e| canon(t2[e] + t0[e])).collect();
        same_bits(&dec(DType::F32, output(&outs, "y1")), &w1, "accumulated");
        same_bits(
            &dec(DType::F32, output(&outs, "y2")),
            &w2,
            "overwrite + accumulate",
        );
        if dt == DType::Bf16 {
            assert_eq!(w1[3 * n + 5].to_bits(), QNAN, "∞·0 is NaN");
        }
    }
}

#[test]
fn nc_transpose_on_tensor_and_vector_engines() {
    let mut k = Kernel::new("nc_t");
    let (p, f) = (100, 120);
    let x = k.input("x", DType::F32, &[p, f]).unwrap();
    let xb = k.input("xb", DType::Bf16, &[20, 32]).unwrap();
    let y = k.output("y", DType::F32, &[f, p]).unwrap();
    let yb = k.output("yb", DType::Bf16, &[32, 20]).unwrap();
    let xt = k.sbuf_tile("x", DType::F32, &[p, f]).unwrap();
    let xbt = k.sbuf_tile("xb", DType::Bf16, &[20, 32]).unwrap();
    let ps = k.psum_tile("ps", DType::F32, &[f, p]).unwrap();
    let yt = k.sbuf_tile("y", DType::F32, &[f, p]).unwrap();
    let ybt = k.sbuf_tile("yb", DType::Bf16, &[32, 20]).unwrap();
    k.dma_copy(&xt, &x).unwrap();
    k.dma_copy(&xbt, &xb).unwrap();
    k.nc_transpose(&ps, &xt).unwrap(); // TensorE
    k.nc_transpose(&ybt, &xbt).unwrap(); // VectorE (SBUF -> SBUF)
    k.tensor_copy(&yt, &ps).unwrap();
    k.dma_copy(&y, &yt).unwrap();
    k.dma_copy(&yb, &ybt).unwrap();
    let prog = k.build().unwrap();
    let tr = |i: &nrt_sim::engine::Instr| i.name() == "Transpose";
    assert_eq!(common::count(&prog, EngineId::Tensor, tr), 1);
    assert_eq!(common::count(&prog, EngineId::Vector, tr), 1);
    let mut xv = data(p * f, 6);
    xv[9] = f32::from_bits(0xFF80_0042);
    let xbv: Vec<f32> = data(20 * 32, 7).into_iter().map(refs::bf16).collect();
    let (outs, _) = run(&prog, &[("x", f32s(&xv)), ("xb", enc(DType::Bf16, &xbv))]);
    let w: Vec<f32> = (0..f)
        .flat_map(|j| (0..p).map(move |i| (i, j)))
        .map(|(i, j)| xv[i * f + j])
        .collect();
    let wb: Vec<f32> = (0..32)
        .flat_map(|j| (0..20).map(move |i| (i, j)))
        .map(|(i, j)| xbv[i * 32 + j])
        .collect();
    same_bits(&dec(DType::F32, output(&outs, "y")), &w, "TensorE");
    same_bits(&dec(DType::Bf16, output(&outs, "yb")), &wb, "VectorE");
}

#[test]
fn tensor_tensor_arithmetic_min_max_comparisons() {
    use AluOp::*;
    let (p, f) = (130, 36); // two row tiles, the second partial
    let ops = [
        Add,
        Sub,
        Mul,
        Divide,
        Max,
        Min,
        Equal,
        NotEqual,
        Greater,
        GreaterEqual,
        Less,
        LessEqual,
    ];
    let mut k = Kernel::new("tt");
    let a = k.input("a", DType::F32, &[p, f]).unwrap();
    let b = k.input("b", DType::Bf16, &[p, f]).unwrap();
    let outs_hbm: Vec<_> = ops
        .iter()
        .map(|op| {
            let dt = if *op == Mul { DType::Bf16 } else { DType::F32 };
            k.output(op.name(), dt, &[p, f]).unwrap()
        })
        .collect();
    for r0 in [0usize, 128] {
        let rows = 128.min(p - r0);
        k.scope(|k| {
            let at = k.sbuf_tile("a", DType::F32, &[rows, f])?;
            let bt = k.sbuf_tile("b", DType::Bf16, &[rows, f])?;
            k.dma_copy(&at, &a.slice(0, r0..r0 + rows)?)?;
            k.dma_copy(&bt, &b.slice(0, r0..r0 + rows)?)?;
            for (op, o) in ops.iter().zip(&outs_hbm) {
                let t = k.sbuf_tile("t", o.dtype(), &[rows, f])?;
                k.tensor_tensor(&t, &at, &bt, *op)?;
                k.dma_copy(&o.slice(0, r0..r0 + rows)?, &t)?;
            }
            Ok(())
        })
        .unwrap();
    }
    let prog = k.build().unwrap();
    let av = data(p * f, 8);
    let mut bv: Vec<f32> = data(p * f, 9).into_iter().map(refs::bf16).collect();
    // Equal pairs, ±0 pairs, NaN against NaN.
    for i in (0..p * f).step_by(5) {
        bv[i] = refs::bf16(av[i]);
    }
    bv[3] = -0.0;
    let (outs, _) = run(&prog, &[("a", f32s(&av)), ("b", enc(DType::Bf16, &bv))]);
    for (op, o) in ops.iter().zip(&outs_hbm) {
        let want: Vec<f32> = av
            .iter()
            .zip(&bv)
            .map(|(&x, &y)| cast(o.dtype(), alu(*op, x, y)))
            .collect();
        same_bits(&dec(o.dtype(), output(&outs, op.name())), &want, op.name());
    }
}

#[test]
fn affine_select_masks() {
    // A causal mask over [q, k] scores from partition 0, and a 3-D pattern with an offset
    // on a partition-offset view (p counts from the view's first partition); fp32 on_true
    // into a bf16 dst converts.
    let (q, kk) = (90, 100);
    let mut k = Kernel::new("affine");
    let x = k.input("x", DType::F32, &[q, kk]).unwrap();
    let y1 = k.output("y1", DType::F32, &[q, kk]).unwrap();
    let y2 = k.output("y2", DType::Bf16, &[26, kk]).unwrap();
    let xt = k.sbuf_tile("x", DType::F32, &[q, kk]).unwrap();
    let t1 = k.sbuf_tile("t1", DType::F32, &[q, kk]).unwrap();
    let t2 = k.sbuf_tile("t2", DType::Bf16, &[q, 4, 25]).unwrap();
    k.dma_copy(&xt, &x).unwrap();
    k.affine_select(
        &t1,
        &[(-1, kk)],
        1,
        &xt,
        f32::NEG_INFINITY,
        AluOp::GreaterEqual,
    )
    .unwrap();
    let sub_in = xt.slice(0, 64..q).unwrap().reshape(&[26, 4, 25]).unwrap();
    k.emit(AffineSelect {
        dst: &t2.slice(0, 64..q).unwrap(),
        pattern: &[(3, 4), (-1, 25)],
        channel_multiplier: 2,
        on_true: &sub_in,
        on_false_value: 0.5,
        cmp_op: AluOp::Less,
        offset: -40,
    })
    .unwrap();
    k.dma_copy(&y1, &t1).unwrap();
    k.dma_copy(
        &y2,
        &t2.slice(0, 64..q).unwrap().reshape(&[26, kk]).unwrap(),
    )
    .unwrap();
    let prog = k.build().unwrap();
    let xv = data(q * kk, 11);
    let (outs, _) = run(&prog, &[("x", f32s(&xv))]);
    let w1: Vec<f32> = (0..q * kk)
        .map(|e| {
            let (r, c) = (e / kk, e % kk);
            if r as i32 - c as i32 >= 0 {
                xv[e]
            } else {
                f32::NEG_INFINITY
            }
        })
        .collect();
    let w2: Vec<f32> = (0..26 * kk)
        .map(|e| {
            let (r, c) = (e / kk, e % kk);
            let (d0, d1) = (c / 25, c % 25);
            let v = -40 + 2 * r as i32 + 3 * d0 as i32 - d1 as i32;
            refs::bf16(if v < 0 { xv[(64 + r) * kk + c] } else { 0.5 })
        })
        .collect();
    same_bits(&dec(DType::F32, output(&outs, "y1")), &w1, "causal");
    same_bits(&dec(DType::Bf16, output(&outs, "y2")), &w2, "3-D pattern");
}

#[test]
fn range_select_with_reduction() {
    let (p, f) = (100, 64);
    let mut k = Kernel::new("range");
    let x = k.input("x", DType::F32, &[p, f]).unwrap();
    let bnd = k.input("bounds", DType::F32, &[p, 2]).unwrap();
    let y = k.output("y", DType::F32, &[p, f]).unwrap();
    let mx = k.output("mx", DType::F32, &[p, 1]).unwrap();
    let xt = k.sbuf_tile("x", DType::F32, &[p, f]).unwrap();
    let bt = k.sbuf_tile("b", DType::F32, &[p, 2]).unwrap();
    let yt = k.sbuf_tile("y", DType::F32, &[p, f]).unwrap();
    let mt = k.sbuf_tile("m", DType::F32, &[p, 1]).unwrap();
    k.dma_copy(&xt, &x).unwrap();
    k.dma_copy(&bt, &bnd).unwrap();
    let (b0, b1) = (bt.slice(1, 0..1).unwrap(), bt.slice(1, 1..2).unwrap());
    k.emit(RangeSelect {
        reduce_res: Some(&mt),
        range_start: 3,
        ..RangeSelect::new(&yt, &xt, AluOp::GreaterEqual, AluOp::Less, &b0, &b1)
    })
    .unwrap();
    k.dma_copy(&y, &yt).unwrap();
    k.dma_copy(&mx, &mt).unwrap();
    let prog = k.build().unwrap();
    let xv = data(p * f, 12);
    let mut rng = Rng(3);
    let bv: Vec<f32> = (0..p)
        .flat_map(|r| {
            let lo = rng.below(40) as f32 + 0.5;
            let hi = if r == 7 {
                f32::NAN
            } else {
                lo + rng.below(40) as f32
            };
            [lo, hi]
        })
        .collect();
    let (outs, _) = run(&prog, &[("x", f32s(&xv)), ("bounds", f32s(&bv))]);
    let gy = dec(DType::F32, output(&outs, "y"));
    let gm = dec(DType::F32, output(&outs, "mx"));
    for r in 0..p {
        let mut m = f32::NEG_INFINITY;
        for i in 0..f {
            let idx = (i + 3) as f32;
            let keep = idx >= bv[2 * r] && idx < bv[2 * r + 1];
            let w = if keep { xv[r * f + i] } else { f32::MIN };
            assert_eq!(gy[r * f + i].to_bits(), w.to_bits(), "({r}, {i})");
            m = max_num(m, w);
        }
        assert_eq!(gm[r].to_bits(), m.to_bits(), "max {r}");
    }
}

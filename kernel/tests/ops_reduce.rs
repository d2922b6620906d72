//! `tensor_reduce` (axes, keepdims, negate, fp32 with NaN/±∞, int32 bitwise), `bn_stats` /
//! `bn_aggr` (one and several statistics groups), `max8`, `nc_find_index8` and
//! `tensor_tensor_scan`, against plain Rust references of their documented semantics
//! (bit-exact: fixed fold orders), on partial tiles, with no hazards.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod refs;

use common::{Rng, output, run};
use nrt_kernel::{AluOp, DType, Kernel, TensorReduce, TensorTensorScan};
use refs::{SPECIALS, alu, alu_i32, canon, dec, f32s, i32s, to_i32};

fn data(n: usize, seed: u64, specials: bool) -> Vec<f32> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|i| {
            if specials && i % 37 == 5 {
                SPECIALS[rng.below(SPECIALS.len())]
            } else {
                rng.unit() * 10.0
            }
        })
        .collect()
}

/// Folds `xs` with `op` from the first element (the ISA's order), then negates.
fn fold(op: AluOp, xs: &[f32], negate: bool) -> f32 {
    let v = xs[1..].iter().fold(canon(xs[0]), |a, &b| alu(op, a, b));
    if negate { alu(AluOp::Mul, v, -1.0) } else { v }
}

#[test]
fn tensor_reduce_over_the_last_axes() {
    // data [P, 4, 6, 5]: reduce axis [3], [2, 3] and [1, 2, 3]; keepdims both ways.
    let (p, a, b, c) = (100, 4, 6, 5);
    for (axis, keep, op, negate) in [
        (&[3usize][..], false, AluOp::Add, false),
        (&[2, 3][..], true, AluOp::Max, false),
        (&[1, 2, 3][..], false, AluOp::Add, true),
        (&[2, 3][..], false, AluOp::Sub, false),
        (&[3][..], true, AluOp::Min, true),
        (&[1, 2, 3][..], true, AluOp::Mul, false),
    ] {
        let kept: Vec<usize> = [p, a, b, c][..axis[0]].to_vec();
        let mut dshape = kept.clone();
        if keep {
            dshape.extend(std::iter::repeat_n(1, 4 - axis[0]));
        } else if dshape.len() == 1 {
            dshape.push(1);
        }
        let per: usize = kept[1..].iter().product();
        let mut k = Kernel::new("reduce");
        let x = k.input("x", DType::F32, &[p, a, b, c]).unwrap();
        let y = k.output("y", DType::F32, &[p, per]).unwrap();
        let xt = k.sbuf_tile("x", DType::F32, &[p, a, b, c]).unwrap();
        let yt = k.sbuf_tile("y", DType::F32, &dshape).unwrap();
        k.dma_copy(&xt, &x).unwrap();
        k.emit(TensorReduce {
            dst: &yt,
            op,
            data: &xt,
            axis,
            negate,
            keepdims: keep,
        })
        .unwrap();
        let flat = yt.reshape(&[p, per]).unwrap();
        k.dma_copy(&y, &flat).unwrap();
        let prog = k.build().unwrap();
        let xv = data(p * a * b * c, 11, op != AluOp::Mul);
        let (outs, _) = run(&prog, &[("x", f32s(&xv))]);
        let got = dec(DType::F32, output(&outs, "y"));
        let group = a * b * c / per;
        for (i, g) in got.iter().enumerate() {
            let want = fold(op, &xv[i * group..(i + 1) * group], negate);
            assert_eq!(
                g.to_bits(),
                want.to_bits(),
                "{} axis {axis:?} #{i}: {g} vs {want}",
                op.name()
            );
        }
    }
}

#[test]
fn tensor_reduce_mean_as_nki_writes_it() {
    // NKI has no mean reduction: the sum, then one scaling — divide by n (one correctly
    // rounded division) or multiply by fl(1/n) (two roundings, as `activation`'s scale).
    let (p, a, b) = (100, 7, 9);
    let n = (a * b) as f32;
    let mut k = Kernel::new("mean");
    let x = k.input("x", DType::F32, &[p, a, b]).unwrap();
    let y = k.output("y", DType::F32, &[p, 2]).unwrap();
    let xt = k.sbuf_tile("x", DType::F32, &[p, a, b]).unwrap();
    let st = k.sbuf_tile("s", DType::F32, &[p, 1]).unwrap();
    let yt = k.sbuf_tile("y", DType::F32, &[p, 2]).unwrap();
    k.dma_copy(&xt, &x).unwrap();
    k.tensor_reduce(&st, AluOp::Add, &xt, &[1, 2]).unwrap();
    k.tensor_scalar(&yt.slice(1, 0..1).unwrap(), &st, AluOp::Divide, n)
        .unwrap();
    k.activation(
        &yt.slice(1, 1..2).unwrap(),
        nrt_kernel::ActFn::Identity,
        &st,
        -0.0,
        1.0 / n,
    )
    .unwrap();
    k.dma_copy(&y, &yt).unwrap();
    let prog = k.build().unwrap();
    let xv = data(p * a * b, 13, true);
    let (outs, _) = run(&prog, &[("x", f32s(&xv))]);
    let got = dec(DType::F32, output(&outs, "y"));
    for r in 0..p {
        let s = fold(AluOp::Add, &xv[r * a * b..(r + 1) * a * b], false);
        let want = [canon(s / n), refs::act_arg(s, 1.0 / n, -0.0)];
        for (j, w) in want.iter().enumerate() {
            assert_eq!(got[2 * r + j].to_bits(), w.to_bits(), "mean {r} form {j}");
        }
    }
}

#[test]
fn tensor_reduce_of_a_strided_view_and_int32_bitwise() {
    // The middle axis of a permuted view: data [P, 8, 6] read as [P, 6, 8] (axis 2 = the
    // original axis 1), and int32 bitwise_or / add.
    let (p, a, b) = (64, 8, 6);
    let mut k = Kernel::new("reduce_int");
    let x = k.input("x", DType::I32, &[p, a, b]).unwrap();
    let y = k.output("y", DType::I32, &[p, b]).unwrap();
    let z = k.output("z", DType::I32, &[p, 1]).unwrap();
    let xt = k.sbuf_tile("x", DType::I32, &[p, a, b]).unwrap();
    let yt = k.sbuf_tile("y", DType::I32, &[p, b]).unwrap();
    let zt = k.sbuf_tile("z", DType::I32, &[p, 1]).unwrap();
    k.dma_copy(&xt, &x).unwrap();
    let perm = xt.permute(&[0, 2, 1]).unwrap();
    k.tensor_reduce(&yt, AluOp::BitwiseOr, &perm, &[2]).unwrap();
    k.tensor_reduce(&zt, AluOp::Add, &xt, &[1, 2]).unwrap();
    k.dma_copy(&y, &yt).unwrap();
    k.dma_copy(&z, &zt).unwrap();
    let prog = k.build().unwrap();
    let mut rng = Rng(5);
    let xv: Vec<i32> = (0..p * a * b).map(|_| rng.next() as i32).collect();
    let (outs, _) = run(&prog, &[("x", i32s(&xv))]);
    let (gy, gz) = (to_i32(output(&outs, "y")), to_i32(output(&outs, "z")));
    for r in 0..p {
        for j in 0..b {
            let want = (0..a)
                .map(|i| xv[r * a * b + i * b + j])
                .reduce(|u, v| alu_i32(AluOp::BitwiseOr, u, v))
                .unwrap();
            assert_eq!(gy[r * b + j], want);
        }
        let want = xv[r * a * b..(r + 1) * a * b]
            .iter()
            .copied()
            .reduce(|u, v| u.wrapping_add(v))
            .unwrap();
        assert_eq!(gz[r], want);
    }
}

#[test]
fn bn_stats_and_bn_aggr_over_several_groups() {
    // 1000 elements per partition: two bn_stats of 512 and 488 into one [P, 12] tile, then
    // bn_aggr; also the odd-sized single group.
    let (p, f) = (90, 1000);
    let mut k = Kernel::new("bn");
    let x = k.input("x", DType::F32, &[p, f]).unwrap();
    let st = k.output("stats", DType::F32, &[p, 12]).unwrap();
    let mv = k.output("mv", DType::F32, &[p, 2]).unwrap();
    let xt = k.sbuf_tile("x", DType::Bf16, &[p, f]).unwrap();
    let stt = k.sbuf_tile("stats", DType::F32, &[p, 12]).unwrap();
    let mvt = k.sbuf_tile("mv", DType::F32, &[p, 2]).unwrap();
    k.dma_copy(&xt, &x).unwrap(); // cast to bf16 on the way in
    k.bn_stats(&stt.slice(1, 0..6).unwrap(), &xt.slice(1, 0..512).unwrap())
        .unwrap();
    k.bn_stats(&stt.slice(1, 6..12).unwrap(), &xt.slice(1, 512..f).unwrap())
        .unwrap();
    k.bn_aggr(&mvt, &stt).unwrap();
    k.dma_copy(&st, &stt).unwrap();
    k.dma_copy(&mv, &mvt).unwrap();
    let prog = k.build().unwrap();
    let xv: Vec<f32> = data(p * f, 23, false)
        .into_iter()
        .map(|v| v + 100.0)
        .collect();
    let (outs, _) = run(&prog, &[("x", f32s(&xv))]);
    let (gs, gm) = (
        dec(DType::F32, output(&outs, "stats")),
        dec(DType::F32, output(&outs, "mv")),
    );
    for r in 0..p {
        let row: Vec<f32> = xv[r * f..(r + 1) * f]
            .iter()
            .map(|&v| refs::bf16(v))
            .collect();
        let mut want = Vec::new();
        for half in [&row[..512], &row[512..]] {
            let even: Vec<f32> = half.iter().copied().step_by(2).collect();
            let odd: Vec<f32> = half.iter().copied().skip(1).step_by(2).collect();
            want.extend(refs::moments(&even));
            want.extend(refs::moments(&odd));
        }
        for (i, w) in want.iter().enumerate() {
            assert_eq!(gs[r * 12 + i].to_bits(), w.to_bits(), "stats ({r}, {i})");
        }
        let agg = refs::aggregate(&want);
        assert_eq!(gm[2 * r].to_bits(), agg[0].to_bits(), "mean {r}");
        assert_eq!(gm[2 * r + 1].to_bits(), agg[1].to_bits(), "var {r}");
        // And close to the binary64 statistics.
        let n = f as f64;
        let m: f64 = row.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
        let v: f64 = row.iter().map(|&x| (f64::from(x) - m).powi(2)).sum::<f64>() / n;
        assert!((f64::from(gm[2 * r]) - m).abs() <= 1e-4 * m.abs());
        assert!((f64::from(gm[2 * r + 1]) - v).abs() <= 1e-3 * v);
    }
}

/// The 8 largest by the ISA's rank (NaN above +∞, −0 below +0), stable.
fn top8(row: &[f32]) -> Vec<f32> {
    let rank = |v: f32| -> i64 {
        if v.is_nan() {
            i64::MAX
        } else {
            let b = v.to_bits() as i32;
            i64::from(if b < 0 { !(b & 0x7FFF_FFFF) } else { b })
        }
    };
    let mut idx: Vec<usize> = (0..row.len()).collect();
    idx.sort_by_key(|&i| std::cmp::Reverse(rank(row[i])));
    idx[..8].iter().map(|&i| row[i]).collect()
}

#[test]
fn max8_and_find_index8() {
    let (p, f) = (100, 300);
    let mut k = Kernel::new("top8");
    let x = k.input("x", DType::F32, &[p, f]).unwrap();
    let mx = k.output("max", DType::F32, &[p, 8]).unwrap();
    let ix = k.output("idx", DType::I32, &[p, 8]).unwrap();
    let xt = k.sbuf_tile("x", DType::F32, &[p, f]).unwrap();
    let mt = k.sbuf_tile("max", DType::F32, &[p, 8]).unwrap();
    let it = k.sbuf_tile("idx", DType::I32, &[p, 8]).unwrap();
    k.dma_copy(&xt, &x).unwrap();
    k.max8(&mt, &xt).unwrap();
    k.nc_find_index8(&it, &xt, &mt).unwrap();
    k.dma_copy(&mx, &mt).unwrap();
    k.dma_copy(&ix, &it).unwrap();
    let prog = k.build().unwrap();
    let mut rng = Rng(77);
    // Few distinct values: duplicates among the top 8; some rows with NaN, ±0, ±∞.
    let xv: Vec<f32> = (0..p * f)
        .map(|i| match (i / f) % 5 {
            0 => SPECIALS[rng.below(SPECIALS.len())],
            1 => [0.0, -0.0][rng.below(2)],
            _ => rng.small(20),
        })
        .collect();
    let (outs, _) = run(&prog, &[("x", f32s(&xv))]);
    let (gm, gi) = (
        dec(DType::F32, output(&outs, "max")),
        to_i32(output(&outs, "idx")),
    );
    for r in 0..p {
        let row = &xv[r * f..(r + 1) * f];
        let want = top8(row);
        for (j, w) in want.iter().enumerate() {
            assert_eq!(gm[r * 8 + j].to_bits(), w.to_bits(), "max8 ({r}, {j})");
        }
        // The first unclaimed occurrence of each value (fp32 ==: NaN matches nothing).
        let mut claimed = vec![false; f];
        for (j, w) in want.iter().enumerate() {
            let hit = (0..f).find(|&i| !claimed[i] && row[i] == *w);
            if let Some(i) = hit {
                claimed[i] = true;
            }
            let want_i = hit.map_or(-1, |i| i as i32);
            assert_eq!(gi[r * 8 + j], want_i, "find_index8 ({r}, {j}) of {w}");
        }
    }
}

#[test]
fn tensor_tensor_scan_forms() {
    let (p, f) = (72, 200);
    for (op0, op1, rev0, rev1, tile_init) in [
        (AluOp::Mul, AluOp::Add, false, false, true),
        (AluOp::Add, AluOp::Max, false, false, false),
        (AluOp::Sub, AluOp::Sub, true, true, true),
    ] {
        let mut k = Kernel::new("scan");
        let a = k.input("a", DType::F32, &[p, f]).unwrap();
        let b = k.input("b", DType::F32, &[p, f]).unwrap();
        let s = k.input("s", DType::F32, &[p, 1]).unwrap();
        let y = k.output("y", DType::Bf16, &[p, f]).unwrap();
        let at = k.sbuf_tile("a", DType::F32, &[p, f]).unwrap();
        let bt = k.psum_tile("b", DType::F32, &[p, f]).unwrap();
        let bs = k.sbuf_tile("bs", DType::F32, &[p, f]).unwrap();
        let st = k.sbuf_tile("s", DType::F32, &[p, 1]).unwrap();
        let yt = k.sbuf_tile("y", DType::Bf16, &[p, f]).unwrap();
        k.dma_copy(&at, &a).unwrap();
        k.dma_copy(&bs, &b).unwrap();
        k.tensor_copy(&bt, &bs).unwrap(); // data1 from PSUM
        k.dma_copy(&st, &s).unwrap();
        k.emit(TensorTensorScan {
            dst: &yt,
            data0: &at,
            data1: &bt,
            initial: if tile_init {
                (&st).into()
            } else {
                0.25f32.into()
            },
            op0,
            op1,
            reverse0: rev0,
            reverse1: rev1,
        })
        .unwrap();
        k.dma_copy(&y, &yt).unwrap();
        let prog = k.build().unwrap();
        let mut rng = Rng(3);
        let av: Vec<f32> = (0..p * f).map(|_| 0.9 + rng.unit() * 0.1).collect();
        let bv = data(p * f, 8, true);
        let sv: Vec<f32> = (0..p).map(|_| rng.unit()).collect();
        let (outs, _) = run(
            &prog,
            &[("a", f32s(&av)), ("b", f32s(&bv)), ("s", f32s(&sv))],
        );
        let got = dec(DType::Bf16, output(&outs, "y"));
        for r in 0..p {
            let mut s = if tile_init { sv[r] } else { 0.25 };
            for i in 0..f {
                let (d0, d1) = (av[r * f + i], bv[r * f + i]);
                let t = if rev0 {
                    alu(op0, s, d0)
                } else {
                    alu(op0, d0, s)
                };
                s = if rev1 {
                    alu(op1, d1, t)
                } else {
                    alu(op1, t, d1)
                };
                let want = refs::bf16(s);
                assert_eq!(got[r * f + i].to_bits(), want.to_bits(), "({r}, {i})");
            }
        }
    }
}

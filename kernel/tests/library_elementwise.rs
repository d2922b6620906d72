//! `library::elementwise::binary` (NumPy broadcasting over rank ≤ 4) and
//! `library::reduce::reduce` (sum / max / min / mean along an axis, keepdims both ways)
//! against plain references, bit-exact: element-wise results are one fp32 (or int32)
//! operation rounded to the output dtype; reductions fold in the documented order (left to
//! right within a chunk of the reduced axis, chunk results left to right, mean = sum / n).
//! Odd sizes, partial tiles, fp32 / bf16 / int32, NaN and ±∞ in the data, no hazards.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod refs;

use common::{Rng, output, run};
use nrt_kernel::library::elementwise::{self, broadcast_shape};
use nrt_kernel::library::reduce::{self, CHUNK, ReduceOp, reduced_shape};
use nrt_kernel::{AluOp, DType};
use refs::{SPECIALS, alu, alu_i32, canon, cast, dec, enc, i32s, to_i32};

fn values(n: usize, dt: DType, seed: u64, specials: bool) -> Vec<f32> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|i| {
            if dt == DType::I32 {
                // ±2^16: sums of these stay exact in the f32 the references hold them in
                // (wrapping is tested by the operation tests).
                return (rng.next() as i32 >> 15) as f32;
            }
            let v = if specials && i % 11 == 4 {
                SPECIALS[rng.below(SPECIALS.len())]
            } else {
                rng.unit() * 6.0
            };
            cast(dt, v)
        })
        .collect()
}

fn bytes(dt: DType, v: &[f32]) -> Vec<u8> {
    if dt == DType::I32 {
        i32s(&v.iter().map(|&x| x as i32).collect::<Vec<_>>())
    } else {
        enc(dt, v)
    }
}

fn read(dt: DType, b: &[u8]) -> Vec<f32> {
    if dt == DType::I32 {
        to_i32(b).into_iter().map(|v| v as f32).collect()
    } else {
        dec(dt, b)
    }
}

/// Row-major strides of `shape` padded to the rank of `out`, 0 where broadcast.
fn bstrides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let pad = out.len() - shape.len();
    let mut st = vec![0; out.len()];
    let mut s = 1;
    for i in (0..shape.len()).rev() {
        st[pad + i] = if shape[i] == 1 { 0 } else { s };
        s *= shape[i];
    }
    st
}

fn check_binary(sa: &[usize], da: DType, sb: &[usize], db: DType, out: DType, op: AluOp) {
    let p = elementwise::build((sa, da), (sb, db), out, op).unwrap();
    let so = broadcast_shape(sa, sb).unwrap();
    let na: usize = sa.iter().product();
    let nb: usize = sb.iter().product();
    let av = values(na, da, na as u64, true);
    let mut bv = values(nb, db, 7 + nb as u64, true);
    if op == AluOp::Power {
        bv = bv.iter().map(|v| v.round().clamp(-3.0, 3.0)).collect();
    }
    let (outs, _) = run(&p, &[("a", bytes(da, &av)), ("b", bytes(db, &bv))]);
    let got = read(out, output(&outs, "out"));
    let (ta, tb) = (bstrides(sa, &so), bstrides(sb, &so));
    let all_int = da == DType::I32 && db == DType::I32 && out == DType::I32;
    let n: usize = so.iter().product();
    assert_eq!(got.len(), n);
    for (e, g) in got.iter().enumerate().take(n) {
        let (mut ia, mut ib, mut rem) = (0, 0, e);
        for d in (0..so.len()).rev() {
            let i = rem % so[d];
            rem /= so[d];
            ia += i * ta[d];
            ib += i * tb[d];
        }
        let want = if all_int {
            alu_i32(op, av[ia] as i32, bv[ib] as i32) as f32
        } else {
            cast(out, alu(op, av[ia], bv[ib]))
        };
        assert_eq!(
            g.to_bits(),
            want.to_bits(),
            "{sa:?} {da} {} {sb:?} {db} -> {out} #{e}: {} {} -> {g} vs {want}",
            op.name(),
            av[ia],
            bv[ib],
        );
    }
}

#[test]
fn same_shapes_flat_with_remainder() {
    use DType::*;
    check_binary(&[129, 513], F32, &[129, 513], F32, F32, AluOp::Add);
    check_binary(&[300, 7], Bf16, &[300, 7], F32, Bf16, AluOp::Max);
    check_binary(&[5], I32, &[5], I32, I32, AluOp::Mul);
    check_binary(&[3, 5, 7, 11], F32, &[3, 5, 7, 11], Bf16, F32, AluOp::Less);
}

#[test]
fn numpy_broadcasting() {
    use DType::*;
    // Row vector over a rank-4 tensor (stride-0 partitions).
    check_binary(&[2, 3, 129, 5], F32, &[5], F32, F32, AluOp::Sub);
    // Column broadcast of b, row broadcast of a, leading dimension missing.
    check_binary(&[4, 1, 7], F32, &[3, 1], F32, F32, AluOp::Divide);
    // Column of a (reversed tensor_scalar) against a row of b.
    check_binary(&[129, 1], F32, &[1, 513], Bf16, Bf16, AluOp::Sub);
    // A scalar tensor against a vector; integer arithmetic.
    check_binary(&[1], I32, &[300], I32, I32, AluOp::Sub);
    // Every dimension broadcast somewhere.
    check_binary(
        &[2, 1, 3, 1],
        F32,
        &[1, 4, 1, 6],
        F32,
        F32,
        AluOp::GreaterEqual,
    );
    check_binary(&[2, 1, 3, 6], F32, &[4, 1, 6], F32, F32, AluOp::Min);
    // power runs on GpSimdE.
    check_binary(&[130, 3], F32, &[1, 3], F32, F32, AluOp::Power);
}

#[test]
fn binary_misuse() {
    let mut k = nrt_kernel::Kernel::new("bad");
    let a = k.input("a", DType::F32, &[4, 3]).unwrap();
    let b = k.input("b", DType::F32, &[4]).unwrap();
    let o = k.output("o", DType::F32, &[4, 3]).unwrap();
    let e = elementwise::binary(&mut k, &o, &a, &b, AluOp::Add).unwrap_err();
    assert_eq!(
        e.message(),
        "binary: a HBM tensor 'a' [4, 3] fp32 and b HBM tensor 'b' [4] fp32 do not broadcast to \
         out HBM tensor 'o' [4, 3] fp32"
    );
    let c = k.input("c", DType::F32, &[3]).unwrap();
    let o2 = k.output("o2", DType::F32, &[1, 4, 3]).unwrap();
    let e = elementwise::binary(&mut k, &o2, &a, &c, AluOp::Add).unwrap_err();
    assert_eq!(
        e.message(),
        "binary: a HBM tensor 'a' [4, 3] fp32 and b HBM tensor 'c' [3] fp32 do not broadcast to \
         out HBM tensor 'o2' [1, 4, 3] fp32 (their broadcast shape is [4, 3])"
    );
}

/// The documented fold of `xs`: chunks of `lc` left to right from their first element, chunk
/// results left to right.
fn fold(op: ReduceOp, xs: &[f32], lc: usize, int: bool) -> f32 {
    let f = |a: f32, b: f32| {
        if int {
            alu_i32(op.alu(), a as i32, b as i32) as f32
        } else {
            alu(op.alu(), a, b)
        }
    };
    let first = |c: &[f32]| if int { c[0] } else { canon(c[0]) };
    let v = xs
        .chunks(lc)
        .map(|c| c[1..].iter().fold(first(c), |a, &b| f(a, b)))
        .reduce(f)
        .unwrap();
    if op != ReduceOp::Mean {
        v
    } else if int {
        ((v as i32) / xs.len() as i32) as f32
    } else {
        canon(v / xs.len() as f32)
    }
}

fn check_reduce(shape: &[usize], dt: DType, axis: usize, op: ReduceOp, keep: bool, out: DType) {
    let p = reduce::build(shape, dt, axis, op, keep, out).unwrap();
    let n: usize = shape.iter().product();
    let xv = values(
        n,
        dt,
        n as u64 + axis as u64,
        op != ReduceOp::Sum || dt != DType::F32,
    );
    let (outs, _) = run(&p, &[("x", bytes(dt, &xv))]);
    let got = read(out, output(&outs, "out"));
    assert_eq!(
        got.len(),
        reduced_shape(shape, axis, keep).iter().product::<usize>()
    );
    let a: usize = shape[..axis].iter().product();
    let l = shape[axis];
    let b: usize = shape[axis + 1..].iter().product();
    // The chunk of L each layout folds first (see the module documentation).
    let lc = if b > 1 && b.min(128) > 2 * a.min(128) {
        l.min(CHUNK)
    } else {
        l.min((CHUNK / b.clamp(1, CHUNK / 4)).max(1))
    };
    let int = dt == DType::I32 && out == DType::I32;
    for i in 0..a {
        for j in 0..b {
            let xs: Vec<f32> = (0..l).map(|q| xv[(i * l + q) * b + j]).collect();
            let want = cast(out, fold(op, &xs, lc, int));
            let g = got[i * b + j];
            assert_eq!(
                g.to_bits(),
                want.to_bits(),
                "{shape:?} {dt} axis {axis} {op:?} -> {out} ({i}, {j}): {g} vs {want}"
            );
        }
    }
}

#[test]
fn reductions_along_every_axis() {
    use DType::*;
    use ReduceOp::*;
    check_reduce(&[300, 130], F32, 1, Sum, false, F32);
    check_reduce(&[129, 513], F32, 0, Max, true, F32); // transposed layout
    check_reduce(&[8300, 130], F32, 0, Sum, false, F32); // transposed, two chunks of L
    check_reduce(&[2, 50, 100], I32, 1, Sum, false, I32); // transposed, int32
    check_reduce(&[3, 3000, 4], F32, 1, Sum, true, F32); // rows, two chunks of 2048 of L
    check_reduce(&[2, 3, 4, 1000], Bf16, 3, Mean, true, F32);
    check_reduce(&[5, 9000], F32, 1, Sum, false, Bf16); // two chunks of the axis
    check_reduce(&[3, 1, 7, 2], F32, 1, Min, false, F32);
    check_reduce(&[3, 5, 7, 2], Bf16, 2, Mean, false, Bf16);
    check_reduce(&[300], F32, 0, Sum, false, F32);
    check_reduce(&[100, 50], I32, 1, Sum, true, I32);
    check_reduce(&[7, 50, 3], I32, 1, Mean, false, I32);
}

#[test]
fn reduce_misuse() {
    let mut k = nrt_kernel::Kernel::new("bad");
    let x = k.input("x", DType::F32, &[4, 3]).unwrap();
    let o = k.output("o", DType::F32, &[4, 1]).unwrap();
    let e = reduce::reduce(&mut k, &o, &x, 1, ReduceOp::Sum, false).unwrap_err();
    assert_eq!(
        e.message(),
        "reduce: out HBM tensor 'o' [4, 1] fp32 must have shape [4] (x HBM tensor 'x' [4, 3] \
         fp32 reduced along axis 1, keepdims false)"
    );
    reduce::reduce(&mut k, &o, &x, 1, ReduceOp::Sum, true).unwrap();
}

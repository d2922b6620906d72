//! `library::data`: transpose of any rank (the last axis kept and moved), concat, split,
//! slice with positive and negative steps, pad (constant, edge, reflect, cropping), tile,
//! expand and gather with constant indices — bit for bit against index arithmetic in the
//! test, fp32 and bf16 and int32, every run hazard-free.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod refs;

use common::{Rng, output, run};
use nrt_kernel::library::data::{self, PadMode};
use nrt_kernel::{DType, Kernel, View};

fn values(n: usize, seed: u64) -> Vec<u32> {
    let mut rng = Rng(seed);
    // Finite fp32 bit patterns (bf16: the upper half matters, the lower is dropped below).
    (0..n).map(|_| (rng.next() as u32) & 0xBFFF_FFFF).collect()
}

fn bytes(dt: DType, v: &[u32]) -> Vec<u8> {
    match dt {
        DType::Bf16 | DType::F16 => v
            .iter()
            .flat_map(|x| ((x >> 16) as u16).to_le_bytes())
            .collect(),
        _ => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }
}

fn unbytes(dt: DType, b: &[u8]) -> Vec<u32> {
    match dt {
        DType::Bf16 | DType::F16 => b
            .chunks(2)
            .map(|c| u32::from(u16::from_le_bytes([c[0], c[1]])) << 16)
            .collect(),
        _ => b
            .chunks(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    }
}

fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut at = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        at[d] = i % shape[d];
        i /= shape[d];
    }
    at
}

fn ravel(at: &[usize], shape: &[usize]) -> usize {
    at.iter().zip(shape).fold(0, |a, (&i, &s)| a * s + i)
}

/// Builds a kernel with inputs of `shapes` and one output `out`, filled by `f`, runs it on
/// random data and checks `out[i] == x_src[idx]` for `want(i) = Some((src, idx))` (None:
/// the value `fillv`).
fn check(
    dt: DType,
    shapes: &[&[usize]],
    out: &[usize],
    f: impl FnOnce(&mut Kernel, &View, &[View]),
    want: impl Fn(&[usize]) -> Option<(usize, Vec<usize>)>,
    fillv: u32,
) {
    let mut k = Kernel::new("data_test");
    let ins: Vec<View> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| (*k.input(&format!("x{i}"), dt, s).unwrap()).clone())
        .collect();
    let o = (*k.output("y", dt, out).unwrap()).clone();
    f(&mut k, &o, &ins);
    let p = k.build().unwrap();
    let vals: Vec<Vec<u32>> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let v = values(s.iter().product(), 31 + i as u64);
            unbytes(dt, &bytes(dt, &v))
        })
        .collect();
    let inputs: Vec<(String, Vec<u8>)> = vals
        .iter()
        .enumerate()
        .map(|(i, v)| (format!("x{i}"), bytes(dt, v)))
        .collect();
    let inputs: Vec<(&str, Vec<u8>)> = inputs
        .iter()
        .map(|(n, v)| (n.as_str(), v.clone()))
        .collect();
    let (outs, _) = run(&p, &inputs);
    let got = unbytes(dt, output(&outs, "y"));
    for (i, &g) in got.iter().enumerate() {
        let at = unravel(i, out);
        let w = match want(&at) {
            Some((s, idx)) => vals[s][ravel(&idx, shapes[s])],
            None => fillv,
        };
        assert_eq!(g, w, "{dt}: y{at:?}");
    }
}

#[test]
fn permute_keeps_or_moves_the_last_axis() {
    for (shape, perm) in [
        (vec![2usize, 5, 3, 4], vec![0usize, 2, 1, 3]),
        (vec![2, 3, 40, 130], vec![0, 1, 3, 2]),
        (vec![2, 150, 3, 7], vec![0, 2, 3, 1]),
        (vec![3, 200], vec![1, 0]),
        (vec![2, 3, 4, 5, 6], vec![4, 2, 0, 3, 1]),
    ] {
        let out: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
        for dt in [DType::F32, DType::Bf16] {
            check(
                dt,
                &[&shape],
                &out,
                |k, o, x| data::permute(k, o, &x[0], &perm).unwrap(),
                |at| {
                    let mut idx = vec![0; shape.len()];
                    for (i, &p) in perm.iter().enumerate() {
                        idx[p] = at[i];
                    }
                    Some((0, idx))
                },
                0,
            );
        }
    }
}

#[test]
fn concat_and_split() {
    for axis in [0usize, 1, 2] {
        let mut a = vec![2usize, 3, 70];
        let mut b = a.clone();
        b[axis] = 5;
        a[axis] = 1 + axis;
        let mut out = a.clone();
        out[axis] = a[axis] + b[axis];
        let (na, sa) = (a[axis], a.clone());
        check(
            DType::F32,
            &[&a, &b],
            &out,
            |k, o, x| data::concat(k, o, &[&x[0], &x[1]], axis).unwrap(),
            |at| {
                let mut idx = at.to_vec();
                if at[axis] < na {
                    Some((0, idx))
                } else {
                    idx[axis] -= na;
                    Some((1, idx))
                }
            },
            0,
        );
        // Split: the second part of the concatenated shape out of x.
        check(
            DType::I32,
            &[&out],
            &b,
            |k, o, x| {
                let first = k.scratch("first", DType::I32, &sa).unwrap();
                data::split(k, &[&first, o], &x[0], axis).unwrap();
            },
            |at| {
                let mut idx = at.to_vec();
                idx[axis] += na;
                Some((0, idx))
            },
            0,
        );
    }
}

#[test]
fn slice_with_steps_both_ways() {
    let x = [5usize, 6, 9];
    let spec: [(usize, isize); 3] = [(4, -2), (1, 2), (8, -3)];
    let out = [3usize, 3, 3];
    check(
        DType::F32,
        &[&x],
        &out,
        |k, o, xs| data::slice(k, o, &xs[0], &spec).unwrap(),
        |at| {
            let idx = at
                .iter()
                .zip(&spec)
                .map(|(&i, &(s, st))| (s as isize + i as isize * st) as usize)
                .collect();
            Some((0, idx))
        },
        0,
    );
    let mut k = Kernel::new("slice_bad");
    let xt = k.input("x", DType::F32, &x).unwrap();
    let yt = k.output("y", DType::F32, &[3, 3, 4]).unwrap();
    let e = data::slice(&mut k, &yt, &xt, &spec).unwrap_err();
    assert!(e.message().contains("reach outside"), "{}", e.message());
}

#[test]
fn pad_modes() {
    let x = [3usize, 4, 5];
    let pads: [(isize, isize); 3] = [(1, 0), (2, 1), (-1, 3)];
    let out = [4usize, 7, 7];
    let src = |at: &[usize], mode: PadMode| -> Option<(usize, Vec<usize>)> {
        let mut idx = Vec::new();
        for d in 0..3 {
            let (b, _) = pads[d];
            let crop = (-b).max(0);
            let n = x[d] as isize - crop - (-pads[d].1).max(0);
            let mut i = at[d] as isize - b.max(0);
            if i < 0 || i >= n {
                match mode {
                    PadMode::Constant(_) => return None,
                    PadMode::Edge => i = i.clamp(0, n - 1),
                    PadMode::Reflect => i = if i < 0 { -i } else { 2 * (n - 1) - i },
                }
            }
            idx.push((i + crop) as usize);
        }
        Some((0, idx))
    };
    for mode in [PadMode::Constant(2.5), PadMode::Edge, PadMode::Reflect] {
        check(
            DType::F32,
            &[&x],
            &out,
            |k, o, xs| data::pad(k, o, &xs[0], &pads, mode).unwrap(),
            |at| src(at, mode),
            2.5f32.to_bits(),
        );
    }
}

#[test]
fn tile_expand_gather() {
    check(
        DType::Bf16,
        &[&[2, 1, 3]],
        &[4, 3, 6],
        |k, o, x| data::tile(k, o, &x[0], &[2, 3, 2]).unwrap(),
        |at| Some((0, vec![at[0] % 2, 0, at[2] % 3])),
        0,
    );
    check(
        DType::F32,
        &[&[3, 1, 1]],
        &[2, 3, 4, 130],
        |k, o, x| data::expand(k, o, &x[0]).unwrap(),
        |at| Some((0, vec![at[1], 0, 0])),
        0,
    );
    let idx = [3i64, 4, 5, -1, 0, 2, 3];
    check(
        DType::I32,
        &[&[2, 7, 3]],
        &[2, 7, 3],
        |k, o, x| data::gather_const(k, o, &x[0], 1, &idx).unwrap(),
        |at| {
            let j = idx[at[1]];
            Some((
                0,
                vec![
                    at[0],
                    if j < 0 { (j + 7) as usize } else { j as usize },
                    at[2],
                ],
            ))
        },
        0,
    );
}

//! `library::gather`: ONNX Gather with run-time int32 indices (negative ones wrapping) by
//! one-hot matmuls — several blocks of rows, of indices and of columns, fp32 and bf16 —
//! bit for bit against indexing (finite data, no −0: the documented exact case), and an
//! out-of-range index giving a zero row; hazard-free.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod refs;

use common::{Rng, output, run};
use nrt_kernel::library::gather::gather;
use nrt_kernel::{DType, Kernel};
use refs::{cast, dec, enc, i32s};

#[test]
fn gather_rows_at_run_time() {
    let cases: [(&[usize], usize, &[usize], DType); 2] = [
        (&[2, 300, 5], 1, &[3, 4], DType::F32),
        (&[1000, 600], 0, &[130], DType::Bf16),
    ];
    for (ds, axis, is, dt) in cases {
        let mut out: Vec<usize> = ds[..axis].to_vec();
        out.extend_from_slice(is);
        out.extend_from_slice(&ds[axis + 1..]);
        let mut k = Kernel::new("gather_test");
        let d = k.input("d", dt, ds).unwrap();
        let i = k.input("i", DType::I32, is).unwrap();
        let y = k.output("y", dt, &out).unwrap();
        gather(&mut k, &y, &d, &i, axis).unwrap();
        let p = k.build().unwrap();
        let n: usize = ds.iter().product();
        let mut rng = Rng(3);
        let dv: Vec<f32> = (0..n).map(|_| cast(dt, rng.unit() * 9.0 + 0.001)).collect();
        let v = ds[axis] as i64;
        let t: usize = is.iter().product();
        let iv: Vec<i32> = (0..t)
            .map(|j| {
                if j == 5 {
                    v as i32 + 3 // out of range: a zero row
                } else {
                    (rng.below(2 * v as usize) as i64 - v) as i32
                }
            })
            .collect();
        let (outs, _) = run(&p, &[("d", enc(dt, &dv)), ("i", i32s(&iv))]);
        let got = dec(dt, output(&outs, "y"));
        let a: usize = ds[..axis].iter().product();
        let b: usize = ds[axis + 1..].iter().product();
        for ai in 0..a {
            for (j, &ix) in iv.iter().enumerate() {
                let row = if ix < 0 { ix as i64 + v } else { ix as i64 };
                for c in 0..b {
                    let g = got[(ai * t + j) * b + c];
                    let want = if (0..v).contains(&row) {
                        dv[(ai * ds[axis] + row as usize) * b + c]
                    } else {
                        0.0
                    };
                    assert_eq!(
                        g.to_bits(),
                        want.to_bits(),
                        "{ds:?}: y[{ai}, {j}, {c}] index {ix}"
                    );
                }
            }
        }
    }
}

/// int64 indices as the strided int32 view of their low words (`[T, 2]`, column 0).
#[test]
fn gather_int64_low_words() {
    let (v, b, t) = (200usize, 33usize, 9usize);
    let mut k = Kernel::new("gather_i64");
    let d = k.input("d", DType::F32, &[v, b]).unwrap();
    let i = k.input("i", DType::I32, &[t, 2]).unwrap();
    let y = k.output("y", DType::F32, &[t, b]).unwrap();
    gather(&mut k, &y, &d, &i.select(1, 0).unwrap(), 0).unwrap();
    let p = k.build().unwrap();
    let mut rng = Rng(8);
    let dv: Vec<f32> = (0..v * b).map(|_| rng.unit() * 3.0 + 0.01).collect();
    let idx: Vec<i64> = (0..t).map(|j| (j as i64 * 37) % v as i64 - 50).collect();
    let words: Vec<i32> = idx
        .iter()
        .flat_map(|&x| [x as i32, (x >> 32) as i32])
        .collect();
    let (outs, _) = run(&p, &[("d", enc(DType::F32, &dv)), ("i", i32s(&words))]);
    let got = dec(DType::F32, output(&outs, "y"));
    for (j, &ix) in idx.iter().enumerate() {
        let row = if ix < 0 { ix + v as i64 } else { ix } as usize;
        for c in 0..b {
            assert_eq!(
                got[j * b + c].to_bits(),
                dv[row * b + c].to_bits(),
                "y[{j}, {c}]"
            );
        }
    }
}

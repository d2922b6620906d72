//! `library::conv_transpose`: ONNX ConvTranspose (strides, pads, dilations, groups incl.
//! depthwise, output_padding, bias, 1-D, more than 128 channels) against a plain f64 scatter
//! loop, within the fp32 summation bound `2·T·2⁻²⁴·Σ|x·w|` (`T` the terms per output), every
//! run hazard-free; misuse is an error.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod refs;

use common::{Rng, output, run};
use nrt_kernel::library::conv_transpose::{ConvTransposeConfig, conv_transpose2d};
use nrt_kernel::{DType, Kernel};
use refs::{dec, enc};

fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed);
    (0..n).map(|_| rng.unit() * 2.0).collect()
}

fn check(x: [usize; 4], w: [usize; 4], cfg: ConvTransposeConfig, one_d: bool) {
    let [n, c, h, wd] = x;
    let [_, cog, kh, kw] = w;
    let g = cfg.groups;
    let o = cog * g;
    let (oh, ow) = cfg.output_size((h, wd), (kh, kw)).unwrap();
    let mut k = Kernel::new("convt");
    let (xs, ws, ys) = if one_d {
        (vec![n, c, wd], vec![c, cog, kw], vec![n, o, ow])
    } else {
        (x.to_vec(), w.to_vec(), vec![n, o, oh, ow])
    };
    let xt = k.input("x", DType::F32, &xs).unwrap();
    let wt = k.input("w", DType::F32, &ws).unwrap();
    let bt = k.input("b", DType::F32, &[o]).unwrap();
    let yt = k.output("y", DType::F32, &ys).unwrap();
    conv_transpose2d(&mut k, &yt, &xt, &wt, Some(&bt), &cfg).unwrap();
    let p = k.build().unwrap();
    let (xv, wv, bv) = (
        data(n * c * h * wd, 1),
        data(c * cog * kh * kw, 2),
        data(o, 3),
    );
    let (outs, _) = run(
        &p,
        &[
            ("x", enc(DType::F32, &xv)),
            ("w", enc(DType::F32, &wv)),
            ("b", enc(DType::F32, &bv)),
        ],
    );
    let got = dec(DType::F32, output(&outs, "y"));
    let mut want = vec![0f64; n * o * oh * ow];
    let mut mag = vec![0f64; n * o * oh * ow];
    let (sh, sw) = cfg.stride;
    let (dh, dw) = cfg.dilation;
    let [pt, pl, _, _] = cfg.pads;
    let cig = c / g;
    for img in 0..n {
        for ci in 0..c {
            let grp = ci / cig;
            for iy in 0..h {
                for ix in 0..wd {
                    let xval = f64::from(xv[((img * c + ci) * h + iy) * wd + ix]);
                    for j in 0..cog {
                        let oc = grp * cog + j;
                        for a in 0..kh {
                            for b in 0..kw {
                                let oy = (iy * sh + a * dh) as isize - pt as isize;
                                let ox = (ix * sw + b * dw) as isize - pl as isize;
                                if oy < 0 || ox < 0 || oy >= oh as isize || ox >= ow as isize {
                                    continue;
                                }
                                let wval = f64::from(wv[((ci * cog + j) * kh + a) * kw + b]);
                                let at = ((img * o + oc) * oh + oy as usize) * ow + ox as usize;
                                want[at] += xval * wval;
                                mag[at] += (xval * wval).abs();
                            }
                        }
                    }
                }
            }
        }
    }
    let terms = (cig * kh * kw) as f64 + 1.0;
    for (i, (&gv, (&w0, &m))) in got.iter().zip(want.iter().zip(&mag)).enumerate() {
        let oc = (i / (oh * ow)) % o;
        let wv_ = w0 + f64::from(bv[oc]);
        let tol = 2.0 * terms * 2f64.powi(-24) * (m + f64::from(bv[oc]).abs()) + 1e-30;
        assert!(
            (f64::from(gv) - wv_).abs() <= tol,
            "{x:?} {w:?} {cfg:?}: y[{i}] {gv} vs {wv_} ± {tol}"
        );
    }
}

#[test]
fn conv_transpose_matches_scatter() {
    let cfg =
        |s: (usize, usize), p: [usize; 4], d: (usize, usize), g: usize, op: (usize, usize)| {
            ConvTransposeConfig {
                stride: s,
                pads: p,
                dilation: d,
                groups: g,
                output_padding: op,
            }
        };
    check(
        [1, 4, 5, 6],
        [4, 3, 3, 3],
        cfg((2, 2), [1, 1, 1, 1], (1, 1), 1, (1, 1)),
        false,
    );
    check(
        [2, 4, 4, 4],
        [4, 2, 2, 3],
        cfg((2, 1), [0, 1, 1, 0], (1, 2), 2, (0, 0)),
        false,
    );
    check(
        [1, 3, 5, 5],
        [3, 2, 3, 3],
        cfg((2, 2), [1, 0, 0, 1], (1, 1), 3, (1, 0)),
        false,
    );
    check(
        [2, 3, 1, 7],
        [3, 4, 1, 4],
        cfg((1, 3), [0, 1, 0, 2], (1, 1), 1, (0, 0)),
        true,
    );
    check(
        [1, 130, 3, 3],
        [130, 5, 2, 2],
        cfg((2, 2), [0; 4], (1, 1), 1, (0, 0)),
        false,
    );
}

#[test]
fn conv_transpose_misuse() {
    let mut k = Kernel::new("convt_bad");
    let x = k.input("x", DType::F32, &[1, 4, 5, 5]).unwrap();
    let w = k.input("w", DType::F32, &[4, 2, 3, 3]).unwrap();
    let y = k.output("y", DType::F32, &[1, 2, 9, 9]).unwrap();
    let bad = ConvTransposeConfig {
        pads: [3, 0, 0, 0],
        ..ConvTransposeConfig::default()
    };
    let e = conv_transpose2d(&mut k, &y, &x, &w, None, &bad).unwrap_err();
    assert!(e.message().contains("each pad at most"), "{}", e.message());
    let e =
        conv_transpose2d(&mut k, &y, &x, &w, None, &ConvTransposeConfig::default()).unwrap_err();
    assert!(
        e.message().contains("must be [1, 2, 7, 7]"),
        "{}",
        e.message()
    );
}

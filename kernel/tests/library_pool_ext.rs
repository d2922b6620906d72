//! `library::pool` beyond the basic 2-D form: dilations, `ceil_mode` (with and without
//! `count_include_pad`, onnxruntime's divisor for windows past the padding), 1-D pooling,
//! the global pools, and 1-D convolution through `conv2d` — against plain f64 loops (max:
//! exact; average: within the bound of `library_pool.rs`), every run hazard-free.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod refs;

use common::{Rng, output, run};
use nrt_kernel::library::conv::{Conv2dConfig, conv2d};
use nrt_kernel::library::pool::{Pool2dConfig, PoolExt, PoolKind, global_pool, pool2d_ext};
use nrt_kernel::{DType, Kernel};
use refs::{dec, enc};

fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed);
    (0..n).map(|_| rng.unit() * 4.0).collect()
}

/// onnxruntime's output size and windows, in f64.
fn check(shape: [usize; 4], cfg: Pool2dConfig, ext: PoolExt, one_d: bool) {
    let [n, c, h, w] = shape;
    let (oh, ow) = cfg.output_size_ext((h, w), &ext).unwrap();
    let mut k = Kernel::new("pool_ext");
    let (xs, ys): (Vec<usize>, Vec<usize>) = if one_d {
        (vec![n, c, w], vec![n, c, ow])
    } else {
        (shape.to_vec(), vec![n, c, oh, ow])
    };
    let x = k.input("x", DType::F32, &xs).unwrap();
    let y = k.output("y", DType::F32, &ys).unwrap();
    pool2d_ext(&mut k, &y, &x, &cfg, &ext).unwrap();
    let p = k.build().unwrap();
    let xv = data(n * c * h * w, 3);
    let (outs, _) = run(&p, &[("x", enc(DType::F32, &xv))]);
    let got = dec(DType::F32, output(&outs, "y"));
    let (kh, kw) = cfg.kernel;
    let (sh, sw) = cfg.stride;
    let (dh, dw) = ext.dilation;
    let [pt, pl, pb, pr] = cfg.pads;
    for plane in 0..n * c {
        for r in 0..oh {
            for q in 0..ow {
                let (mut mx, mut sum, mut mag, mut cnt, mut padded) =
                    (f64::NEG_INFINITY, 0f64, 0f64, 0usize, 0usize);
                for i in 0..kh {
                    for j in 0..kw {
                        let yy = (r * sh + i * dh) as isize - pt as isize;
                        let xx = (q * sw + j * dw) as isize - pl as isize;
                        let in_pad = yy < (h + pb) as isize && xx < (w + pr) as isize;
                        padded += usize::from(in_pad);
                        if yy < 0 || xx < 0 || yy >= h as isize || xx >= w as isize {
                            continue;
                        }
                        let v = f64::from(xv[(plane * h + yy as usize) * w + xx as usize]);
                        mx = mx.max(v);
                        sum += v;
                        mag += v.abs();
                        cnt += 1;
                    }
                }
                let g = f64::from(got[(plane * oh + r) * ow + q]);
                let at = format!("{shape:?} {cfg:?} {ext:?}: y[{plane}, {r}, {q}]");
                match cfg.kind {
                    PoolKind::Max => assert_eq!(g, mx, "{at}"),
                    PoolKind::Average { count_include_pad } => {
                        let div = if count_include_pad { padded } else { cnt };
                        let want = sum / div as f64;
                        let u = 2f64.powi(-24);
                        let tol = 2.0 * ((kh * kw) as f64 * u * mag / div as f64 + u * want.abs())
                            + u * want.abs()
                            + 1e-30;
                        assert!((g - want).abs() <= tol, "{at} = {g}, want {want}");
                    }
                }
            }
        }
    }
}

#[test]
fn dilation_and_ceil_mode() {
    let base = |kind, k: usize, s: usize, pads: [usize; 4]| Pool2dConfig {
        kind,
        kernel: (k, k),
        stride: (s, s),
        pads,
    };
    let ceil = PoolExt {
        dilation: (1, 1),
        ceil_mode: true,
    };
    let dil = PoolExt {
        dilation: (2, 3),
        ceil_mode: false,
    };
    let both = PoolExt {
        dilation: (2, 2),
        ceil_mode: true,
    };
    for kind in [
        PoolKind::Max,
        PoolKind::AVERAGE,
        PoolKind::Average {
            count_include_pad: true,
        },
    ] {
        check([1, 3, 32, 32], base(kind, 3, 2, [0; 4]), ceil, false);
        check([2, 5, 11, 12], base(kind, 3, 2, [1, 0, 1, 2]), ceil, false);
        check([1, 130, 9, 10], base(kind, 2, 1, [1, 1, 0, 0]), dil, false);
        check([1, 4, 13, 13], base(kind, 3, 3, [1, 1, 1, 1]), both, false);
    }
    // 32 and 64 planes: the output rows in bands across the partitions.
    let none = PoolExt::default();
    check(
        [1, 64, 20, 17],
        base(PoolKind::Max, 3, 2, [1, 1, 1, 1]),
        ceil,
        false,
    );
    check(
        [1, 64, 112, 112],
        base(PoolKind::Max, 3, 2, [1, 1, 1, 1]),
        none,
        false,
    );
    check(
        [2, 16, 9, 9],
        base(
            PoolKind::Average {
                count_include_pad: true,
            },
            3,
            1,
            [1, 0, 1, 2],
        ),
        none,
        false,
    );
    check([2, 16, 9, 9], base(PoolKind::Max, 2, 2, [0; 4]), dil, false);
    // 1-D: kernel (1, 3), stride (1, 2), pads on W only.
    let one = Pool2dConfig {
        kind: PoolKind::Max,
        kernel: (1, 3),
        stride: (1, 2),
        pads: [0, 1, 0, 1],
    };
    check([2, 3, 1, 17], one, ceil, true);
}

#[test]
fn global_pools() {
    for (max, c) in [(false, 130usize), (true, 130), (false, 1024), (true, 1024)] {
        let mut k = Kernel::new("gap");
        let x = k.input("x", DType::F32, &[2, c, 7, 7]).unwrap();
        let y = k.output("y", DType::F32, &[2, c, 1, 1]).unwrap();
        global_pool(&mut k, &y, &x, max).unwrap();
        let p = k.build().unwrap();
        let xv = data(2 * c * 49, 5);
        let (outs, _) = run(&p, &[("x", enc(DType::F32, &xv))]);
        let got = dec(DType::F32, output(&outs, "y"));
        for r in 0..2 * c {
            let row = &xv[r * 49..(r + 1) * 49];
            let want = if max {
                row.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b))
            } else {
                row.iter().fold(0f32, |a, &b| a + b) / 49.0
            };
            assert_eq!(got[r].to_bits(), want.to_bits(), "max {max}: y[{r}]");
        }
    }
}

/// Conv1d as H = 1: fp32 sums of products in some order, within `K·u·Σ|x·w|` (factor 2).
#[test]
fn conv1d_through_conv2d() {
    let (n, c, l, o, kk) = (2usize, 6usize, 40usize, 8usize, 3usize);
    let cfg = Conv2dConfig {
        stride: (1, 2),
        pads: [0, 2, 0, 1],
        dilation: (1, 2),
        groups: 2,
    };
    let ol = (l + 3 - 2 * (kk - 1) - 1) / 2 + 1;
    let mut k = Kernel::new("conv1d");
    let x = k.input("x", DType::F32, &[n, c, l]).unwrap();
    let w = k.input("w", DType::F32, &[o, c / 2, kk]).unwrap();
    let b = k.input("b", DType::F32, &[o]).unwrap();
    let y = k.output("y", DType::F32, &[n, o, ol]).unwrap();
    conv2d(&mut k, &y, &x, &w, Some(&b), &cfg).unwrap();
    let p = k.build().unwrap();
    let (xv, wv, bv) = (data(n * c * l, 1), data(o * 3 * kk, 2), data(o, 3));
    let (outs, _) = run(
        &p,
        &[
            ("x", enc(DType::F32, &xv)),
            ("w", enc(DType::F32, &wv)),
            ("b", enc(DType::F32, &bv)),
        ],
    );
    let got = dec(DType::F32, output(&outs, "y"));
    for img in 0..n {
        for oc in 0..o {
            let g = oc / (o / 2);
            for q in 0..ol {
                let (mut s, mut mag) = (f64::from(bv[oc]), f64::from(bv[oc]).abs());
                for ci in 0..c / 2 {
                    for t in 0..kk {
                        let pos = (q * 2 + t * 2) as isize - 2;
                        if pos < 0 || pos >= l as isize {
                            continue;
                        }
                        let xv_ = f64::from(xv[(img * c + g * 3 + ci) * l + pos as usize]);
                        let wv_ = f64::from(wv[(oc * 3 + ci) * kk + t]);
                        s += xv_ * wv_;
                        mag += (xv_ * wv_).abs();
                    }
                }
                let gv = f64::from(got[(img * o + oc) * ol + q]);
                let tol = 2.0 * 12.0 * 2f64.powi(-24) * mag + 1e-30;
                assert!((gv - s).abs() <= tol, "y[{img}, {oc}, {q}] {gv} vs {s}");
            }
        }
    }
}

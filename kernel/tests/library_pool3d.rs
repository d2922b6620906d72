//! `library::pool3d` (3-D MaxPool / AveragePool: pads, strides, dilations, `ceil_mode`,
//! `count_include_pad`, more than 128 planes or output depths, column chunks) bit for bit
//! against plain f32 loops in ONNX semantics and the module's documented order (each depth
//! plane's window sum over `(kh, kw)` row-major, then those sums in increasing `kd`, padding
//! and planes outside the input as 0.0, one division by the count), every run hazard-free;
//! misuse is an `NRT_INVALID` error with its exact message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod refs;

use common::{Rng, output, run};
use nrt_core::NrtStatus;
use nrt_kernel::library::pool::PoolKind;
use nrt_kernel::library::pool3d::{Pool3dConfig, pool3d};
use nrt_kernel::{DType, Kernel};
use refs::{bf16, dec, enc, max_num};

fn data(n: usize, seed: u64, dt: DType) -> Vec<f32> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|_| {
            let v = rng.unit() * 4.0 - 1.0;
            if dt == DType::Bf16 { bf16(v) } else { v }
        })
        .collect()
}

/// Taps of one window along an axis inside `lo..hi` (signed bounds).
fn inside(first: isize, [k, _, d]: [usize; 3], lo: isize, hi: isize) -> usize {
    (0..k)
        .filter(|&t| (lo..hi).contains(&(first + (t * d) as isize)))
        .count()
}

fn reference(x: &[f32], shape: [usize; 5], cfg: &Pool3dConfig) -> Vec<f32> {
    let [n, c, d, h, w] = shape;
    let o = cfg.output_size([d, h, w]).unwrap();
    let ax = |i: usize| [cfg.kernel[i], cfg.stride[i], cfg.dilation[i]];
    let sizes = [d, h, w];
    // Each axis's window starts (signed input indices; tap t at start + t·dil).
    let firsts: Vec<Vec<isize>> = (0..3)
        .map(|i| {
            (0..o[i])
                .map(|j| (j * cfg.stride[i]) as isize - cfg.pads[i] as isize)
                .collect()
        })
        .collect();
    let overhang = (0..3).any(|i| {
        let span = cfg.dilation[i] * (cfg.kernel[i] - 1) + 1;
        (o[i] - 1) * cfg.stride[i] + span > cfg.pads[i] + sizes[i] + cfg.pads[i + 3]
    });
    let [kd, kh, kw] = cfg.kernel;
    let at = |p: usize, z: isize, r: isize, q: isize| -> Option<f32> {
        let ok = (0..d as isize).contains(&z)
            && (0..h as isize).contains(&r)
            && (0..w as isize).contains(&q);
        ok.then(|| x[((p * d + z as usize) * h + r as usize) * w + q as usize])
    };
    let mut y = Vec::with_capacity(n * c * o[0] * o[1] * o[2]);
    for p in 0..n * c {
        for &fz in &firsts[0] {
            for &fr in &firsts[1] {
                for &fq in &firsts[2] {
                    let out = match cfg.kind {
                        PoolKind::Max => {
                            let mut m = f32::NEG_INFINITY;
                            for a in 0..kd {
                                for b in 0..kh {
                                    for e in 0..kw {
                                        let (z, r, q) = (
                                            fz + (a * cfg.dilation[0]) as isize,
                                            fr + (b * cfg.dilation[1]) as isize,
                                            fq + (e * cfg.dilation[2]) as isize,
                                        );
                                        if let Some(v) = at(p, z, r, q) {
                                            m = max_num(m, v);
                                        }
                                    }
                                }
                            }
                            m
                        }
                        PoolKind::Average { count_include_pad } => {
                            let mut t = 0f32;
                            for a in 0..kd {
                                let z = fz + (a * cfg.dilation[0]) as isize;
                                let mut s = 0f32;
                                if (0..d as isize).contains(&z) {
                                    for b in 0..kh {
                                        for e in 0..kw {
                                            let r = fr + (b * cfg.dilation[1]) as isize;
                                            let q = fq + (e * cfg.dilation[2]) as isize;
                                            let v = at(p, z, r, q).unwrap_or(0.0);
                                            s = if b == 0 && e == 0 { v } else { s + v };
                                        }
                                    }
                                }
                                t = if a == 0 { s } else { t + s };
                            }
                            let div = if count_include_pad && !overhang {
                                (kd * kh * kw) as f32
                            } else {
                                let f = [fz, fr, fq];
                                let cnt: Vec<usize> = (0..3)
                                    .map(|i| {
                                        let (lo, hi) = if count_include_pad {
                                            (
                                                -(cfg.pads[i] as isize),
                                                (sizes[i] + cfg.pads[i + 3]) as isize,
                                            )
                                        } else {
                                            (0, sizes[i] as isize)
                                        };
                                        inside(f[i], ax(i), lo, hi)
                                    })
                                    .collect();
                                (cnt[1] * cnt[2]) as f32 * cnt[0] as f32
                            };
                            t / div
                        }
                    };
                    y.push(out);
                }
            }
        }
    }
    y
}

fn check(shape: [usize; 5], cfg: Pool3dConfig, dt: DType) {
    let [n, c, d, h, w] = shape;
    let [od, oh, ow] = cfg.output_size([d, h, w]).unwrap();
    let mut k = Kernel::new("pool3d");
    let x = k.input("x", dt, &shape).unwrap();
    let y = k.output("y", DType::F32, &[n, c, od, oh, ow]).unwrap();
    pool3d(&mut k, &y, &x, &cfg).unwrap();
    let p = k.build().unwrap();
    let xv = data(n * c * d * h * w, 7, dt);
    let (outs, report) = run(&p, &[("x", enc(dt, &xv))]);
    assert!(report.hazards.is_empty());
    let got = dec(DType::F32, output(&outs, "y"));
    let want = reference(&xv, shape, &cfg);
    assert_eq!(got.len(), want.len());
    for (i, (g, r)) in got.iter().zip(&want).enumerate() {
        assert_eq!(
            g.to_bits(),
            r.to_bits(),
            "{shape:?} {cfg:?}: y[{i}] = {g}, want {r}"
        );
    }
}

const AVG_PAD: PoolKind = PoolKind::Average {
    count_include_pad: true,
};

#[test]
fn pads_strides_dilations_ceil_mode() {
    for kind in [PoolKind::Max, PoolKind::AVERAGE, AVG_PAD] {
        check(
            [1, 3, 8, 9, 10],
            Pool3dConfig::new(kind, 2, 1, 0),
            DType::F32,
        );
        let cfg = Pool3dConfig {
            kind,
            kernel: [3, 2, 3],
            stride: [2, 1, 2],
            dilation: [2, 1, 1],
            pads: [1, 0, 1, 2, 1, 0],
            ceil_mode: true,
        };
        check([2, 3, 7, 6, 9], cfg, DType::F32);
        let cfg = Pool3dConfig {
            ceil_mode: false,
            ..cfg
        };
        check([2, 3, 7, 6, 9], cfg, DType::F32);
        // The ONNX backend tests' large dilated case.
        let cfg = Pool3dConfig {
            kind,
            kernel: [5; 3],
            stride: [3; 3],
            dilation: [2; 3],
            pads: [0; 6],
            ceil_mode: true,
        };
        check([1, 1, 20, 20, 20], cfg, DType::F32);
    }
    // bf16 input, fp32 output.
    check(
        [1, 2, 5, 6, 7],
        Pool3dConfig::new(PoolKind::AVERAGE, 3, 2, 1),
        DType::Bf16,
    );
}

#[test]
fn chunks_of_planes_depths_and_columns() {
    // 130 planes: two partition chunks of (N·C) planes.
    check(
        [1, 130, 3, 4, 4],
        Pool3dConfig::new(PoolKind::AVERAGE, 2, 1, 1),
        DType::F32,
    );
    // 140 output depths of one plane: two chunks of depths.
    let deep = Pool3dConfig {
        kernel: [3, 1, 1],
        pads: [1, 0, 0, 1, 0, 0],
        ..Pool3dConfig::new(PoolKind::Max, 1, 1, 0)
    };
    check([1, 1, 140, 2, 3], deep, DType::F32);
    // 12,000 columns per depth: the depth pass in column chunks (with the count tile).
    let wide = Pool3dConfig {
        kind: PoolKind::AVERAGE,
        ..deep
    };
    check([1, 2, 4, 120, 100], wide, DType::F32);
}

fn invalid(r: Result<(), nrt_core::Error>, msg: &str) {
    let e = r.unwrap_err();
    assert_eq!(e.status(), NrtStatus::Invalid, "{}", e.message());
    assert_eq!(e.message(), msg);
}

#[test]
fn misuse_is_invalid() {
    let mut k = Kernel::new("misuse");
    let x = k.input("x", DType::F32, &[1, 2, 4, 4, 4]).unwrap();
    let x4 = k.input("x4", DType::F32, &[1, 2, 4, 4]).unwrap();
    let xi = k.input("xi", DType::I32, &[1, 2, 4, 4, 4]).unwrap();
    let y = k.output("y", DType::F32, &[1, 2, 3, 3, 3]).unwrap();
    let cfg = Pool3dConfig::new(PoolKind::Max, 2, 1, 0);
    invalid(
        pool3d(&mut k, &y, &x4, &cfg),
        "pool3d: x HBM tensor 'x4' [1, 2, 4, 4] fp32 must be 5-D [N, C, D, H, W]",
    );
    invalid(
        pool3d(&mut k, &y, &x, &Pool3dConfig::new(PoolKind::Max, 3, 1, 0)),
        "pool3d: y HBM tensor 'y' [1, 2, 3, 3, 3] fp32 must be [1, 2, 2, 2, 2] for x HBM tensor 'x' [1, 2, 4, 4, 4] fp32",
    );
    invalid(
        pool3d(&mut k, &y, &xi, &cfg),
        "pool3d: x HBM tensor 'xi' [1, 2, 4, 4, 4] int32 and y HBM tensor 'y' [1, 2, 3, 3, 3] fp32 must have float dtypes",
    );
    let bad = Pool3dConfig {
        dilation: [1, 0, 1],
        ..cfg
    };
    invalid(
        pool3d(&mut k, &y, &x, &bad),
        "pool3d: kernel, stride and dilation must be ≥ 1 (axis H: kernel 2, stride 1, dilation 0)",
    );
    let bad = Pool3dConfig {
        pads: [0, 0, 0, 2, 0, 0],
        ..cfg
    };
    invalid(
        pool3d(&mut k, &y, &x, &bad),
        "pool3d: pads 0, 2 along D must be smaller than the kernel 2 (a window would hold only \
         padding)",
    );
    let bad = Pool3dConfig {
        kernel: [2, 2, 6],
        ..cfg
    };
    invalid(
        pool3d(&mut k, &y, &x, &bad),
        "pool3d: the kernel (6) is larger than the padded input (4) along W",
    );
    // Nothing half-recorded: the kernel still builds.
    k.build().unwrap();
}

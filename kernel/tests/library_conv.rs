//! `library::conv`: 2-D convolutions with stride, asymmetric padding, dilation, groups
//! (grouped, depthwise with a channel multiplier), with and without bias, odd sizes, more
//! than 128 input and output channels, output rows wider than a PSUM bank, fp32 and bf16 —
//! each checked against a plain f64 convolution within a stated bound, every run
//! hazard-free. Also: the ResNet-50 stage conv builds, and misuse is an error.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Rng, output, run};
use nrt_core::NrtStatus;
use nrt_kernel::library::conv::{Conv2dConfig, build_conv2d, conv2d};
use nrt_kernel::{DType, Kernel, Program};
use nrt_sim::engine::{decode_f32, encode_f32, round_through};

struct Case {
    x: [usize; 4],
    w: [usize; 4],
    cfg: Conv2dConfig,
    dt: DType,
    out_dt: DType,
    bias: bool,
}

fn kernel(c: &Case) -> (Program, [usize; 4]) {
    let mut k = Kernel::new("conv_test");
    let x = k.input("x", c.dt, &c.x).unwrap();
    let w = k.input("w", c.dt, &c.w).unwrap();
    let b = c.bias.then(|| k.input("b", c.dt, &[c.w[0]]).unwrap());
    let (oh, ow) = c
        .cfg
        .output_size((c.x[2], c.x[3]), (c.w[2], c.w[3]))
        .unwrap();
    let ys = [c.x[0], c.w[0], oh, ow];
    let y = k.output("y", c.out_dt, &ys).unwrap();
    conv2d(&mut k, &y, &x, &w, b.as_deref(), &c.cfg).unwrap();
    (k.build().unwrap(), ys)
}

fn unit(dt: DType) -> f64 {
    match dt {
        DType::Bf16 => 2f64.powi(-8),
        _ => 2f64.powi(-24),
    }
}

/// Runs the case and compares with an f64 reference.
///
/// Bound per output: the `K = C/groups·KH·KW` products are exact in fp32 (bf16 inputs) or
/// rounded once (fp32), and summed in fp32 in some order, plus the bias: at most
/// `(K + 2)·u·(Σ|x·w| + |b|)` (the standard `γ_{K+1}` bound for any summation order, `u` the
/// fp32 unit roundoff); then one rounding to the output dtype, `u_out·|y|`.
fn check(c: &Case, seed: u64) {
    let (p, ys) = kernel(c);
    let mut rng = Rng(seed);
    let mut draw =
        |n: usize| -> Vec<f32> { (0..n).map(|_| round_through(c.dt, rng.unit())).collect() };
    let xs = draw(c.x.iter().product());
    let ws = draw(c.w.iter().product());
    let bs = draw(c.w[0]);
    let mut inputs = vec![("x", encode_f32(c.dt, &xs)), ("w", encode_f32(c.dt, &ws))];
    if c.bias {
        inputs.push(("b", encode_f32(c.dt, &bs)));
    }
    let (outs, report) = run(&p, &inputs);
    let got = decode_f32(c.out_dt, output(&outs, "y"));
    let [n, ch, h, wd] = c.x;
    let [o, cig, kh, kw] = c.w;
    let [_, _, oh, ow] = ys;
    let cog = o / c.cfg.groups;
    let (sh, sw) = c.cfg.stride;
    let (dh, dw) = c.cfg.dilation;
    let [pt, pl, _, _] = c.cfg.pads;
    let (u, uo) = (unit(DType::F32), unit(c.out_dt));
    let kk = (cig * kh * kw) as f64;
    for img in 0..n {
        for oc in 0..o {
            let g = oc / cog;
            for r in 0..oh {
                for q in 0..ow {
                    let (mut acc, mut mag) = (0f64, 0f64);
                    for ci in 0..cig {
                        let cin = g * cig + ci;
                        for i in 0..kh {
                            for j in 0..kw {
                                let yy = (r * sh + i * dh) as isize - pt as isize;
                                let xx = (q * sw + j * dw) as isize - pl as isize;
                                if yy < 0 || xx < 0 || yy >= h as isize || xx >= wd as isize {
                                    continue;
                                }
                                let xv =
                                    xs[((img * ch + cin) * h + yy as usize) * wd + xx as usize];
                                let wv = ws[((oc * cig + ci) * kh + i) * kw + j];
                                let t = f64::from(xv) * f64::from(wv);
                                acc += t;
                                mag += t.abs();
                            }
                        }
                    }
                    if c.bias {
                        acc += f64::from(bs[oc]);
                        mag += f64::from(bs[oc]).abs();
                    }
                    let tol = (kk + 2.0) * u * mag + uo * acc.abs() + 1e-30;
                    let gv = f64::from(got[((img * o + oc) * oh + r) * ow + q]);
                    assert!(
                        (gv - acc).abs() <= tol,
                        "x {:?} w {:?} {:?} {}: y[{img}, {oc}, {r}, {q}] = {gv}, want {acc} ± {tol}",
                        c.x,
                        c.w,
                        c.cfg,
                        c.dt
                    );
                }
            }
        }
    }
    eprintln!(
        "conv x {:?} w {:?} stride {:?} pads {:?} dil {:?} groups {} {}: {} ticks, {} \
         instructions",
        c.x,
        c.w,
        c.cfg.stride,
        c.cfg.pads,
        c.cfg.dilation,
        c.cfg.groups,
        c.dt,
        report.ticks,
        p.instruction_count()
    );
}

#[test]
fn dense_fp32() {
    check(
        &Case {
            x: [2, 3, 11, 9],
            w: [5, 3, 3, 3],
            cfg: Conv2dConfig::new(1, 1, 1),
            dt: DType::F32,
            out_dt: DType::F32,
            bias: true,
        },
        1,
    );
    // Stride 2, asymmetric padding, dilation, a 3x2 kernel, no bias.
    check(
        &Case {
            x: [1, 4, 13, 10],
            w: [6, 4, 3, 2],
            cfg: Conv2dConfig {
                stride: (2, 1),
                pads: [1, 0, 2, 1],
                dilation: (2, 3),
                groups: 1,
            },
            dt: DType::F32,
            out_dt: DType::F32,
            bias: false,
        },
        2,
    );
    // 1x1, stride 2.
    check(
        &Case {
            x: [1, 7, 9, 9],
            w: [3, 7, 1, 1],
            cfg: Conv2dConfig::new(2, 0, 1),
            dt: DType::F32,
            out_dt: DType::F32,
            bias: true,
        },
        3,
    );
}

#[test]
fn many_channels_and_wide_rows() {
    // 130 input and 129 output channels: two chunks each, accumulated in PSUM.
    check(
        &Case {
            x: [1, 130, 5, 7],
            w: [129, 130, 3, 3],
            cfg: Conv2dConfig::new(1, 1, 1),
            dt: DType::Bf16,
            out_dt: DType::F32,
            bias: true,
        },
        4,
    );
    // 40 output rows of 30 columns: row blocks of 17, 17 and 6.
    check(
        &Case {
            x: [1, 2, 40, 30],
            w: [3, 2, 3, 3],
            cfg: Conv2dConfig::new(1, 1, 1),
            dt: DType::F32,
            out_dt: DType::F32,
            bias: true,
        },
        9,
    );
    // Output rows of 599 columns: blocks of 512 and 87.
    check(
        &Case {
            x: [1, 2, 3, 601],
            w: [3, 2, 2, 3],
            cfg: Conv2dConfig::default(),
            dt: DType::F32,
            out_dt: DType::F32,
            bias: false,
        },
        5,
    );
}

#[test]
fn grouped_and_depthwise() {
    // Two groups of 3 input and 2 output channels, bf16 in and out.
    check(
        &Case {
            x: [2, 6, 7, 5],
            w: [4, 3, 3, 3],
            cfg: Conv2dConfig::new(1, 1, 2),
            dt: DType::Bf16,
            out_dt: DType::Bf16,
            bias: true,
        },
        6,
    );
    // Depthwise with channel multiplier 2, stride 2.
    check(
        &Case {
            x: [1, 5, 9, 11],
            w: [10, 1, 3, 3],
            cfg: Conv2dConfig::new(2, 1, 5),
            dt: DType::F32,
            out_dt: DType::F32,
            bias: true,
        },
        7,
    );
    // Depthwise, 130 channels (two partition chunks), bf16, dilation 2, no bias.
    check(
        &Case {
            x: [1, 130, 6, 7],
            w: [130, 1, 3, 3],
            cfg: Conv2dConfig {
                stride: (1, 1),
                pads: [2, 2, 2, 2],
                dilation: (2, 2),
                groups: 130,
            },
            dt: DType::Bf16,
            out_dt: DType::F32,
            bias: false,
        },
        8,
    );
}

#[test]
fn misuse_is_an_error() {
    let mut k = Kernel::new("bad");
    let x = k.input("x", DType::F32, &[1, 6, 8, 8]).unwrap();
    let w = k.input("w", DType::F32, &[4, 3, 3, 3]).unwrap();
    let y = k.output("y", DType::F32, &[1, 4, 6, 6]).unwrap();
    let e = conv2d(&mut k, &y, &x, &w, None, &Conv2dConfig::new(1, 0, 1)).unwrap_err();
    assert!(e.message().contains("groups"), "{}", e.message());
    let e = conv2d(&mut k, &y, &x, &w, None, &Conv2dConfig::new(1, 1, 2)).unwrap_err();
    assert!(
        e.message().contains("must be [1, 4, 8, 8]"),
        "{}",
        e.message()
    );
    let e = conv2d(&mut k, &y, &x, &w, None, &Conv2dConfig::new(0, 0, 2)).unwrap_err();
    assert!(e.message().contains("stride"), "{}", e.message());
    let big = k.input("big", DType::F32, &[4, 3, 11, 3]).unwrap();
    let e = conv2d(&mut k, &y, &x, &big, None, &Conv2dConfig::new(1, 1, 2)).unwrap_err();
    assert!(
        e.message().contains("larger than the padded input"),
        "{}",
        e.message()
    );
    let b = k.input("b", DType::F32, &[5]).unwrap();
    let e = conv2d(&mut k, &y, &x, &w, Some(&b), &Conv2dConfig::new(1, 0, 2)).unwrap_err();
    assert!(e.message().contains("bias"), "{}", e.message());
}

/// A plane too large to stay resident is an allocation error, not a panic.
#[test]
fn too_large_is_an_allocation_error() {
    let cfg = Conv2dConfig::new(1, 1, 1);
    let e = build_conv2d([1, 3, 300, 300], [8, 3, 3, 3], &cfg, DType::F32, false).unwrap_err();
    // A tile larger than a partition is refused as invalid, one that does not fit in what
    // is left as a resource error; either names the tile.
    assert!(
        matches!(e.status(), NrtStatus::Invalid | NrtStatus::Resource)
            && e.message().contains("conv_input"),
        "{}",
        e.message()
    );
}

/// Builds (does not run) a ResNet-50 stage-2 conv: 3x3, 64 -> 64 channels, 56x56, pad 1.
#[test]
fn builds_resnet_stage_conv() {
    for (batch, dt) in [(1, DType::Bf16), (4, DType::Bf16), (1, DType::F32)] {
        let t = std::time::Instant::now();
        let p = build_conv2d(
            [batch, 64, 56, 56],
            [64, 64, 3, 3],
            &Conv2dConfig::new(1, 1, 1),
            dt,
            true,
        )
        .unwrap();
        eprintln!(
            "build_conv2d(x [{batch}, 64, 56, 56], w [64, 64, 3, 3], pad 1, {dt}): built in \
             {:.3} s, {} instructions, {} DMA descriptors",
            t.elapsed().as_secs_f64(),
            p.instruction_count(),
            p.descriptors.len()
        );
        assert!(p.instruction_count() > 0);
    }
}

//! `library::conv_transpose3d` (ONNX ConvTranspose on rank-5 inputs: strides, pads,
//! dilations, groups, output_padding, bias, output depths no input reaches, more than 128
//! gathered channels) against a plain scatter loop. The operands are small integers, so every
//! product and partial sum is exact in fp32 and the results must match bit for bit in any
//! summation order; every run is hazard-free. Misuse is an `NRT_INVALID` error with its exact
//! message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod refs;

use common::{Rng, output, run};
use nrt_core::NrtStatus;
use nrt_kernel::library::conv_transpose3d::{ConvTranspose3dConfig, conv_transpose3d};
use nrt_kernel::{DType, Kernel};
use refs::{dec, enc};

fn ints(n: usize, seed: u64, k: i64) -> Vec<f32> {
    let mut rng = Rng(seed);
    (0..n).map(|_| rng.small(k)).collect()
}

fn check(x: [usize; 5], w: [usize; 5], cfg: ConvTranspose3dConfig, with_bias: bool) {
    let [n, c, d, h, wd] = x;
    let [_, cog, kd, kh, kw] = w;
    let o = cog * cfg.groups;
    let [od, oh, ow] = cfg.output_size([d, h, wd], [kd, kh, kw]).unwrap();
    let mut k = Kernel::new("convt3d");
    let xt = k.input("x", DType::F32, &x).unwrap();
    let wt = k.input("w", DType::F32, &w).unwrap();
    let bt = k.input("b", DType::F32, &[o]).unwrap();
    let yt = k.output("y", DType::F32, &[n, o, od, oh, ow]).unwrap();
    let bias = with_bias.then_some(&*bt);
    conv_transpose3d(&mut k, &yt, &xt, &wt, bias, &cfg).unwrap();
    let p = k.build().unwrap();
    let xv = ints(x.iter().product(), 1, 3);
    let wv = ints(w.iter().product(), 2, 2);
    let bv = ints(o, 3, 5);
    let (outs, report) = run(
        &p,
        &[
            ("x", enc(DType::F32, &xv)),
            ("w", enc(DType::F32, &wv)),
            ("b", enc(DType::F32, &bv)),
        ],
    );
    assert!(report.hazards.is_empty());
    let got = dec(DType::F32, output(&outs, "y"));
    let mut want = vec![0f32; n * o * od * oh * ow];
    if with_bias {
        for (i, v) in want.iter_mut().enumerate() {
            *v = bv[(i / (od * oh * ow)) % o];
        }
    }
    let cig = c / cfg.groups;
    let (s, dl, p0) = (cfg.stride, cfg.dilation, cfg.pads);
    let out_at = |i: usize, t: usize, ax: usize| (i * s[ax] + t * dl[ax]).checked_sub(p0[ax]);
    for img in 0..n {
        for ci in 0..c {
            for (iz, iy, ix) in
                (0..d).flat_map(|z| (0..h).flat_map(move |y| (0..wd).map(move |q| (z, y, q))))
            {
                let xval = xv[(((img * c + ci) * d + iz) * h + iy) * wd + ix];
                for j in 0..cog {
                    let oc = (ci / cig) * cog + j;
                    for (a, b, e) in (0..kd)
                        .flat_map(|a| (0..kh).flat_map(move |b| (0..kw).map(move |e| (a, b, e))))
                    {
                        let (Some(z), Some(y), Some(q)) =
                            (out_at(iz, a, 0), out_at(iy, b, 1), out_at(ix, e, 2))
                        else {
                            continue;
                        };
                        if z >= od || y >= oh || q >= ow {
                            continue;
                        }
                        let wval = wv[(((ci * cog + j) * kd + a) * kh + b) * kw + e];
                        want[(((img * o + oc) * od + z) * oh + y) * ow + q] += xval * wval;
                    }
                }
            }
        }
    }
    for (i, (g, r)) in got.iter().zip(&want).enumerate() {
        assert_eq!(
            g.to_bits(),
            r.to_bits(),
            "{x:?} {w:?} {cfg:?}: y[{i}] = {g}, want {r}"
        );
    }
}

#[test]
fn strides_pads_dilations_groups() {
    // The ONNX backend test's shape.
    check(
        [1, 1, 3, 4, 5],
        [1, 2, 3, 3, 3],
        ConvTranspose3dConfig::default(),
        false,
    );
    let cfg = ConvTranspose3dConfig {
        stride: [2, 1, 2],
        pads: [1, 0, 1, 0, 1, 1],
        dilation: [1, 2, 1],
        groups: 2,
        output_padding: [1, 0, 1],
    };
    check([2, 4, 3, 4, 3], [4, 3, 3, 2, 3], cfg, true);
    // Dilated depth taps with a stride sharing a factor: the pairs step by 2 input depths.
    let cfg = ConvTranspose3dConfig {
        stride: [2, 1, 1],
        dilation: [4, 1, 1],
        ..ConvTranspose3dConfig::default()
    };
    check([1, 3, 5, 3, 3], [3, 2, 3, 2, 2], cfg, true);
    // Depthwise (one channel per group).
    let cfg = ConvTranspose3dConfig {
        groups: 3,
        stride: [1, 2, 2],
        ..ConvTranspose3dConfig::default()
    };
    check([1, 3, 2, 3, 3], [3, 1, 2, 3, 3], cfg, true);
}

#[test]
fn depths_without_input_and_many_channels() {
    // Stride 3 along D with a 1-deep kernel: two of every three output depths are the bias.
    let cfg = ConvTranspose3dConfig {
        stride: [3, 1, 1],
        output_padding: [2, 0, 0],
        ..ConvTranspose3dConfig::default()
    };
    check([1, 2, 3, 3, 4], [2, 130, 1, 2, 2], cfg, true);
    check([1, 2, 3, 3, 4], [2, 3, 1, 2, 2], cfg, false);
    // 50 channels × 3 depth pairs = 150 gathered channels: two partition chunks.
    check(
        [1, 50, 4, 3, 3],
        [50, 4, 3, 2, 2],
        ConvTranspose3dConfig::default(),
        true,
    );
}

fn invalid(r: Result<(), nrt_core::Error>, msg: &str) {
    let e = r.unwrap_err();
    assert_eq!(e.status(), NrtStatus::Invalid, "{}", e.message());
    assert_eq!(e.message(), msg);
}

#[test]
fn misuse_is_invalid() {
    let mut k = Kernel::new("misuse");
    let x = k.input("x", DType::F32, &[1, 2, 3, 3, 3]).unwrap();
    let x4 = k.input("x4", DType::F32, &[1, 2, 3, 3]).unwrap();
    let w = k.input("w", DType::F32, &[2, 1, 2, 2, 2]).unwrap();
    let wb = k.input("wb", DType::Bf16, &[2, 1, 2, 2, 2]).unwrap();
    let b = k.input("b", DType::F32, &[3]).unwrap();
    let y = k.output("y", DType::F32, &[1, 1, 4, 4, 4]).unwrap();
    let cfg = ConvTranspose3dConfig::default();
    invalid(
        conv_transpose3d(&mut k, &y, &x4, &w, None, &cfg),
        "conv_transpose3d: x HBM tensor 'x4' [1, 2, 3, 3] fp32 must be 5-D [N, C, D, H, W]",
    );
    invalid(
        conv_transpose3d(
            &mut k,
            &y,
            &x,
            &w,
            None,
            &ConvTranspose3dConfig { groups: 3, ..cfg },
        ),
        "conv_transpose3d: w HBM tensor 'w' [2, 1, 2, 2, 2] fp32 must have x HBM tensor 'x' \
         [1, 2, 3, 3, 3] fp32's 2 channels first, and groups 3 must divide them",
    );
    invalid(
        conv_transpose3d(&mut k, &y, &x, &wb, None, &cfg),
        "conv_transpose3d: x HBM tensor 'x' [1, 2, 3, 3, 3] fp32 and w HBM tensor 'wb' \
         [2, 1, 2, 2, 2] bf16 must have one float dtype, y HBM tensor 'y' [1, 1, 4, 4, 4] fp32 \
         a float dtype",
    );
    invalid(
        conv_transpose3d(&mut k, &y, &x, &w, Some(&b), &cfg),
        "conv_transpose3d: bias must be a float [1]",
    );
    let bad = ConvTranspose3dConfig {
        pads: [0, 0, 0, 0, 0, 2],
        ..cfg
    };
    invalid(
        conv_transpose3d(&mut k, &y, &x, &w, None, &bad),
        "conv_transpose3d: input 3, kernel 2, stride 1, dilation 1, pads 0/2, output_padding 0: \
         each must be ≥ 1 (output_padding ≥ 0 and below the stride or dilation), each pad at \
         most dil·(K − 1) = 1",
    );
    invalid(
        conv_transpose3d(
            &mut k,
            &y,
            &x,
            &w,
            None,
            &ConvTranspose3dConfig {
                stride: [2, 1, 1],
                ..cfg
            },
        ),
        "conv_transpose3d: y HBM tensor 'y' [1, 1, 4, 4, 4] fp32 must be [1, 1, 6, 4, 4] for x \
         HBM tensor 'x' [1, 2, 3, 3, 3] fp32 and w HBM tensor 'w' [2, 1, 2, 2, 2] fp32",
    );
    k.build().unwrap();
}

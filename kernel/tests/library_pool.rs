//! `library::pool`: 2-D max pooling (bit-exact) and average pooling excluding the padding
//! (ONNX's default) and including it (within a stated bound), odd sizes, asymmetric
//! padding, more than 128 planes, fp32 and bf16 — against plain f64 loops, every run
//! hazard-free. Also: the ResNet-50 stem max-pool builds, and misuse is an error.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Rng, output, run};
use nrt_core::NrtStatus;
use nrt_kernel::library::pool::{Pool2dConfig, PoolKind, build_pool2d, pool2d};
use nrt_kernel::{DType, Kernel};
use nrt_sim::engine::{decode_f32, encode_f32, round_through};

/// Runs `cfg` on a random `x` of `shape` (`dt`), output in `out_dt`, and compares with plain
/// loops.
///
/// Max: exact (the result is one of the inputs; converting bf16 → fp32 → bf16 is exact).
/// Average: the window sum of at most `T = KH·KW` terms in fp32, in some order, is within
/// `(T − 1)·u·Σ|x|` of the exact sum; the division by the (exact) count adds `u·|y|`, the
/// output rounding `u_out·|y|` (with a factor 2 of slack on the first two).
fn check(shape: [usize; 4], cfg: Pool2dConfig, dt: DType, out_dt: DType, seed: u64) {
    let (oh, ow) = cfg.output_size((shape[2], shape[3])).unwrap();
    let [n, c, h, w] = shape;
    let mut k = Kernel::new("pool_test");
    let x = k.input("x", dt, &shape).unwrap();
    let y = k.output("y", out_dt, &[n, c, oh, ow]).unwrap();
    pool2d(&mut k, &y, &x, &cfg).unwrap();
    let p = k.build().unwrap();
    let mut rng = Rng(seed);
    let xs: Vec<f32> = (0..n * c * h * w)
        .map(|_| round_through(dt, rng.unit() * 4.0))
        .collect();
    let (outs, report) = run(&p, &[("x", encode_f32(dt, &xs))]);
    let got = decode_f32(out_dt, output(&outs, "y"));
    let (kh, kw) = cfg.kernel;
    let (sh, sw) = cfg.stride;
    let [pt, pl, _, _] = cfg.pads;
    let u = 2f64.powi(-24);
    let uo = if out_dt == DType::Bf16 {
        2f64.powi(-8)
    } else {
        u
    };
    for plane in 0..n * c {
        for r in 0..oh {
            for q in 0..ow {
                let (mut mx, mut sum, mut mag, mut cnt) = (f64::NEG_INFINITY, 0f64, 0f64, 0usize);
                for i in 0..kh {
                    for j in 0..kw {
                        let yy = (r * sh + i) as isize - pt as isize;
                        let xx = (q * sw + j) as isize - pl as isize;
                        if yy < 0 || xx < 0 || yy >= h as isize || xx >= w as isize {
                            continue;
                        }
                        let v = f64::from(xs[(plane * h + yy as usize) * w + xx as usize]);
                        mx = mx.max(v);
                        sum += v;
                        mag += v.abs();
                        cnt += 1;
                    }
                }
                let g = f64::from(got[(plane * oh + r) * ow + q]);
                let at = format!("{shape:?} {cfg:?} {dt}: y[{plane}, {r}, {q}]");
                match cfg.kind {
                    PoolKind::Max => {
                        let want = f64::from(round_through(out_dt, mx as f32));
                        assert_eq!(g, want, "{at}");
                    }
                    PoolKind::Average { count_include_pad } => {
                        let div = if count_include_pad { kh * kw } else { cnt };
                        let want = sum / div as f64;
                        let tol = 2.0 * ((kh * kw) as f64 * u * mag / div as f64 + u * want.abs())
                            + uo * want.abs()
                            + 1e-30;
                        assert!((g - want).abs() <= tol, "{at} = {g}, want {want} ± {tol}");
                    }
                }
            }
        }
    }
    eprintln!(
        "pool {shape:?} {cfg:?} {dt}: {} ticks, {} instructions",
        report.ticks,
        p.instruction_count()
    );
}

#[test]
fn max_pool() {
    let s2 = Pool2dConfig::new(PoolKind::Max, 3, 2, 1);
    check([2, 3, 13, 11], s2, DType::F32, DType::F32, 1);
    check([2, 3, 13, 11], s2, DType::Bf16, DType::Bf16, 2);
    // 2x2 stride 2 on odd sizes: the last row and column are dropped.
    check(
        [1, 4, 7, 9],
        Pool2dConfig::new(PoolKind::Max, 2, 2, 0),
        DType::F32,
        DType::F32,
        3,
    );
    // Asymmetric kernel, stride and padding; 130 planes (two chunks).
    let odd = Pool2dConfig {
        kind: PoolKind::Max,
        kernel: (2, 3),
        stride: (1, 2),
        pads: [1, 0, 0, 2],
    };
    check([2, 65, 5, 8], odd, DType::F32, DType::F32, 4);
}

#[test]
fn average_pool() {
    // ONNX's default: the padding is not counted.
    let excl = Pool2dConfig::new(PoolKind::AVERAGE, 3, 1, 1);
    check([1, 130, 7, 5], excl, DType::F32, DType::F32, 5);
    check([2, 3, 9, 6], excl, DType::Bf16, DType::Bf16, 6);
    let incl = Pool2dConfig {
        kind: PoolKind::Average {
            count_include_pad: true,
        },
        kernel: (3, 2),
        stride: (2, 2),
        pads: [0, 1, 2, 1],
    };
    check([1, 5, 11, 8], incl, DType::F32, DType::F32, 7);
    let asym = Pool2dConfig {
        kind: PoolKind::AVERAGE,
        ..incl
    };
    check([1, 5, 11, 8], asym, DType::Bf16, DType::F32, 8);
}

#[test]
fn misuse_is_an_error() {
    let mut k = Kernel::new("bad");
    let x = k.input("x", DType::F32, &[1, 2, 8, 8]).unwrap();
    let y = k.output("y", DType::F32, &[1, 2, 4, 4]).unwrap();
    let e = pool2d(&mut k, &y, &x, &Pool2dConfig::new(PoolKind::Max, 2, 2, 2)).unwrap_err();
    assert!(
        e.message().contains("smaller than the kernel"),
        "{}",
        e.message()
    );
    let e = pool2d(&mut k, &y, &x, &Pool2dConfig::new(PoolKind::Max, 3, 1, 0)).unwrap_err();
    assert!(
        e.message().contains("must be [1, 2, 6, 6]"),
        "{}",
        e.message()
    );
    let e = pool2d(&mut k, &y, &x, &Pool2dConfig::new(PoolKind::Max, 0, 1, 0)).unwrap_err();
    assert!(e.message().contains("≥ 1"), "{}", e.message());
    let xi = k.input("xi", DType::I32, &[1, 2, 8, 8]).unwrap();
    let e = pool2d(&mut k, &y, &xi, &Pool2dConfig::new(PoolKind::Max, 2, 2, 0)).unwrap_err();
    assert!(e.message().contains("float"), "{}", e.message());
}

/// A plane too large to stay resident is an allocation error, not a panic.
#[test]
fn too_large_is_an_allocation_error() {
    let cfg = Pool2dConfig::new(PoolKind::Max, 3, 2, 1);
    let e = build_pool2d([1, 3, 300, 300], &cfg, DType::F32).unwrap_err();
    // A tile larger than a partition is refused as invalid, one that does not fit in what
    // is left as a resource error; either names the tile.
    assert!(
        matches!(e.status(), NrtStatus::Invalid | NrtStatus::Resource)
            && e.message().contains("pool_input"),
        "{}",
        e.message()
    );
}

/// Builds (does not run) the ResNet-50 stem max-pool: 3x3, stride 2, pad 1, 64 x 112 x 112.
#[test]
fn builds_resnet_stem_pool() {
    let t = std::time::Instant::now();
    let p = build_pool2d(
        [1, 64, 112, 112],
        &Pool2dConfig::new(PoolKind::Max, 3, 2, 1),
        DType::Bf16,
    )
    .unwrap();
    eprintln!(
        "build_pool2d(x [1, 64, 112, 112], max 3x3 stride 2 pad 1, bf16): built in {:.3} s, {} \
         instructions, {} DMA descriptors",
        t.elapsed().as_secs_f64(),
        p.instruction_count(),
        p.descriptors.len()
    );
    assert!(p.instruction_count() > 0);
}

/// The engines' maximum is maximumNumber: a NaN is skipped unless the whole window is NaN.
#[test]
fn max_pool_skips_nan() {
    let mut k = Kernel::new("pool_nan");
    let x = k.input("x", DType::F32, &[1, 1, 3, 3]).unwrap();
    let y = k.output("y", DType::F32, &[1, 1, 2, 2]).unwrap();
    pool2d(&mut k, &y, &x, &Pool2dConfig::new(PoolKind::Max, 2, 1, 0)).unwrap();
    let p = k.build().unwrap();
    let nan = f32::NAN;
    // [[NaN, 1, 2], [NaN, NaN, 5], [7, 8, NaN]]
    let xs = [nan, 1.0, 2.0, nan, nan, 5.0, 7.0, 8.0, nan];
    let (outs, _) = run(&p, &[("x", encode_f32(DType::F32, &xs))]);
    let got = decode_f32(DType::F32, output(&outs, "y"));
    assert_eq!(got, vec![1.0, 5.0, 8.0, 8.0]);
    let all = [nan; 9];
    let (outs, _) = run(&p, &[("x", encode_f32(DType::F32, &all))]);
    let got = decode_f32(DType::F32, output(&outs, "y"));
    assert!(got.iter().all(|v| v.is_nan()), "{got:?}");
}

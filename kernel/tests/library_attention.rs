//! `library::attention`: one head and several, with and without the causal mask, sequence
//! lengths not multiples of 128, head dims 64 and 128, fp32 and bf16 inputs — each output
//! checked against a plain f64 softmax-attention within a stated bound; every run is
//! hazard-free (`common::run` asserts it). Also: the realistic-size builder builds, and
//! misuse is an error.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Rng, output, run};
use nrt_kernel::library::attention::{
    AttentionConfig, attention, build_attention, multi_head_attention,
};
use nrt_kernel::{DType, Kernel, Program};
use nrt_sim::engine::{decode_f32, encode_f32, round_through};

/// Unit roundoff of a dtype's significand.
fn unit(dt: DType) -> f64 {
    match dt {
        DType::Bf16 => 2f64.powi(-8),
        DType::F16 => 2f64.powi(-11),
        _ => 2f64.powi(-24),
    }
}

struct Case {
    heads: usize,
    sq: usize,
    sk: usize,
    d: usize,
    dt: DType,
    causal: bool,
    /// `None`: 1/√d.
    scale: Option<f32>,
    /// Build with `build_attention` (output in the input dtype) instead of a test kernel
    /// (fp32 output).
    builder: bool,
}

fn kernel(c: &Case) -> Program {
    if c.builder {
        assert!(c.sq == c.sk && c.scale.is_none());
        return build_attention(c.heads, c.sq, c.d, c.dt, c.causal).unwrap();
    }
    let mut k = Kernel::new("attn_test");
    let q = k.input("q", c.dt, &[c.heads, c.sq, c.d]).unwrap();
    let key = k.input("k", c.dt, &[c.heads, c.sk, c.d]).unwrap();
    let v = k.input("v", c.dt, &[c.heads, c.sk, c.d]).unwrap();
    let out = k.output("out", DType::F32, &[c.heads, c.sq, c.d]).unwrap();
    let cfg = AttentionConfig {
        causal: c.causal,
        scale: c.scale,
    };
    if c.heads == 1 {
        attention(
            &mut k,
            &out.select(0, 0).unwrap(),
            &q.select(0, 0).unwrap(),
            &key.select(0, 0).unwrap(),
            &v.select(0, 0).unwrap(),
            &cfg,
        )
        .unwrap();
    } else {
        multi_head_attention(&mut k, &out, &q, &key, &v, &cfg).unwrap();
    }
    k.build().unwrap()
}

/// Runs the case and compares with an f64 reference.
///
/// Bound, per output element (`u` = fp32 unit roundoff, `u_p` = the input dtype's, in which
/// the probabilities are stored): a score error `e_s` (fp32 accumulation over `d` products,
/// `d·u·scale·Σ|q_t·k_t|`, plus the scaling's rounding) moves every probability by a factor
/// within `exp(±2·e_s)`; the probabilities are rounded once to the input dtype (`u_p`); the
/// fp32 row sum and the P·V accumulation over `nk` terms add `nk·u` each, exp and the
/// final division a few `u`. Relative to `Σ p·|v| / Σ p ≤ max|v|`, with a factor 2
/// of slack: `tol = 2·max|v|·(2·e_s + 2·(nk + 4)·u + 2·u_p)`, plus the rounding to the
/// output dtype, `u_out·|out|`.
fn check(c: &Case, seed: u64) {
    let p = kernel(c);
    let mut rng = Rng(seed);
    let mut draw =
        |n: usize| -> Vec<f32> { (0..n).map(|_| round_through(c.dt, rng.unit())).collect() };
    let q = draw(c.heads * c.sq * c.d);
    let kk = draw(c.heads * c.sk * c.d);
    let v = draw(c.heads * c.sk * c.d);
    let (outs, report) = run(
        &p,
        &[
            ("q", encode_f32(c.dt, &q)),
            ("k", encode_f32(c.dt, &kk)),
            ("v", encode_f32(c.dt, &v)),
        ],
    );
    let out_dt = if c.builder { c.dt } else { DType::F32 };
    let got = decode_f32(out_dt, output(&outs, "out"));
    let (u, up, uo) = (unit(DType::F32), unit(c.dt), unit(out_dt));
    let scale = c.scale.map_or(1.0 / (c.d as f64).sqrt(), f64::from);
    let mut worst = 0f64;
    for h in 0..c.heads {
        let qh = &q[h * c.sq * c.d..];
        let kh = &kk[h * c.sk * c.d..];
        let vh = &v[h * c.sk * c.d..];
        for i in 0..c.sq {
            let nk = if c.causal { i + 1 } else { c.sk };
            let mut s = vec![0f64; nk];
            let mut es = 0f64;
            for (j, sj) in s.iter_mut().enumerate() {
                let (mut dot, mut mag) = (0f64, 0f64);
                for t in 0..c.d {
                    let x = f64::from(qh[i * c.d + t]) * f64::from(kh[j * c.d + t]);
                    dot += x;
                    mag += x.abs();
                }
                *sj = dot * scale;
                es = es.max(c.d as f64 * u * mag * scale + 2.0 * u * sj.abs());
            }
            let mx = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = s.iter().map(|x| (x - mx).exp()).collect();
            let sum: f64 = e.iter().sum();
            let vmax = (0..nk * c.d)
                .map(|x| f64::from(vh[x]).abs())
                .fold(0f64, f64::max);
            let tol_mix = 2.0 * vmax * (2.0 * es + 2.0 * (nk as f64 + 4.0) * u + 2.0 * up);
            for t in 0..c.d {
                let want: f64 = (0..nk)
                    .map(|j| e[j] * f64::from(vh[j * c.d + t]))
                    .sum::<f64>()
                    / sum;
                let g = f64::from(got[(h * c.sq + i) * c.d + t]);
                let tol = tol_mix + uo * want.abs() + 1e-30;
                assert!(
                    (g - want).abs() <= tol,
                    "head {h} query {i} dim {t}: got {g}, want {want} ± {tol} (H={} Sq={} Sk={} \
                     d={} {} causal={})",
                    c.heads,
                    c.sq,
                    c.sk,
                    c.d,
                    c.dt,
                    c.causal
                );
                worst = worst.max((g - want).abs() / tol);
            }
        }
    }
    eprintln!(
        "attention H={} Sq={} Sk={} d={} {} causal={}: {} ticks, {} instructions, worst \
         error {worst:.3} of the bound",
        c.heads,
        c.sq,
        c.sk,
        c.d,
        c.dt,
        c.causal,
        report.ticks,
        p.instruction_count()
    );
}

#[test]
fn one_head_fp32() {
    for (sq, sk, d, causal) in [
        (1, 1, 64, false),
        (1, 1, 64, true),
        (100, 100, 64, false),
        (100, 100, 64, true),
        (100, 257, 128, false),
    ] {
        check(
            &Case {
                heads: 1,
                sq,
                sk,
                d,
                dt: DType::F32,
                causal,
                scale: None,
                builder: false,
            },
            7 + sq as u64 + sk as u64,
        );
    }
}

#[test]
fn causal_257_fp32_and_bf16() {
    for dt in [DType::F32, DType::Bf16] {
        check(
            &Case {
                heads: 1,
                sq: 257,
                sk: 257,
                d: 128,
                dt,
                causal: true,
                scale: None,
                builder: false,
            },
            11,
        );
    }
}

#[test]
fn multi_head_bf16() {
    for causal in [false, true] {
        check(
            &Case {
                heads: 3,
                sq: 130,
                sk: 130,
                d: 64,
                dt: DType::Bf16,
                causal,
                scale: None,
                builder: false,
            },
            5,
        );
    }
}

/// More than 512 keys: several score blocks per query tile (block maxima without a mask,
/// blocks computed only up to the tile's last query with one).
#[test]
fn several_key_blocks() {
    for (sq, sk, dt, causal) in [(40, 600, DType::F32, false), (530, 530, DType::Bf16, true)] {
        check(
            &Case {
                heads: 1,
                sq,
                sk,
                d: 64,
                dt,
                causal,
                scale: None,
                builder: false,
            },
            19,
        );
    }
}

/// An explicit scale, and the `build_attention` kernel (bf16 in and out).
#[test]
fn scale_and_builder() {
    check(
        &Case {
            heads: 1,
            sq: 70,
            sk: 150,
            d: 64,
            dt: DType::F32,
            causal: false,
            scale: Some(0.3),
            builder: false,
        },
        13,
    );
    check(
        &Case {
            heads: 2,
            sq: 100,
            sk: 100,
            d: 64,
            dt: DType::Bf16,
            causal: true,
            scale: None,
            builder: true,
        },
        17,
    );
}

#[test]
fn misuse_is_an_error() {
    let mut k = Kernel::new("bad");
    let q = k.input("q", DType::F32, &[10, 64]).unwrap();
    let key = k.input("k", DType::F32, &[12, 64]).unwrap();
    let v = k.input("v", DType::F32, &[12, 64]).unwrap();
    let out = k.output("out", DType::F32, &[10, 64]).unwrap();
    let causal = AttentionConfig {
        causal: true,
        scale: None,
    };
    let e = attention(&mut k, &out, &q, &key, &v, &causal).unwrap_err();
    assert!(e.message().contains("causal"), "{}", e.message());
    let e = attention(&mut k, &out, &q, &v.slice(0, 0..11).unwrap(), &v, &causal).unwrap_err();
    assert!(e.message().contains("shapes"), "{}", e.message());
    let wide = k.input("wide", DType::F32, &[10, 129]).unwrap();
    let e = attention(
        &mut k,
        &wide,
        &wide,
        &wide,
        &wide,
        &AttentionConfig::default(),
    )
    .unwrap_err();
    assert!(e.message().contains("head dimension"), "{}", e.message());
    let neg = AttentionConfig {
        causal: false,
        scale: Some(-1.0),
    };
    let e = attention(&mut k, &out, &q, &q, &q, &neg).unwrap_err();
    assert!(e.message().contains("positive"), "{}", e.message());
    // Too long to stay resident: an allocation error naming the tile, not a panic.
    let e = build_attention(1, 8192, 128, DType::F32, false).unwrap_err();
    assert_eq!(e.status(), nrt_core::NrtStatus::Resource, "{}", e.message());
    let qi = k.input("qi", DType::I32, &[10, 64]).unwrap();
    let e = attention(&mut k, &out, &qi, &qi, &qi, &AttentionConfig::default()).unwrap_err();
    assert!(e.message().contains("float"), "{}", e.message());
}

/// Builds (does not run) the benchmark-size kernel: seq 2048, head dim 128.
#[test]
fn builds_at_benchmark_size() {
    for (heads, causal) in [(1, false), (1, true), (4, true)] {
        let t = std::time::Instant::now();
        let p = build_attention(heads, 2048, 128, DType::Bf16, causal).unwrap();
        eprintln!(
            "build_attention(heads {heads}, seq 2048, d 128, bf16, causal {causal}): built in \
             {:.3} s, {} instructions, {} DMA descriptors",
            t.elapsed().as_secs_f64(),
            p.instruction_count(),
            p.descriptors.len()
        );
        assert!(p.instruction_count() > 0);
    }
}

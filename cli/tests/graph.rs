//! Graph specs (layers naming their inputs and output) through the `nrt` command: the
//! examples `transformer_block.toml` and `cnn.toml`, and a spec using the other ops, each run
//! by `nrt run SPEC -o DIR` and its outputs compared with a plain f64 reference computed here
//! from the same seeded data (the generator documented in `cli/src/spec.rs`, in
//! `common::seeded`); then malformed graphs, refused with exact one-line messages.
//!
//! Tolerance: every spec is fp32, so each kernel rounds to fp32 after every op (the matmuls,
//! convolutions and reductions sum in fp32 in tile order; the activations are the
//! simulator's ScalarE functions, rounded once to fp32). Over a dozen chained ops of depth
//! ≤ 256 on values of size ≈ 1 the error stays within a few dozen fp32 ULPs (2⁻²³ ≈ 1.2e-7
//! each): the worst scaled error observed is 7.8e-7 (transformer block). The bound
//! `|got − want| ≤ 1e-5 · max(1, |want|)` keeps more than 10× margin over that, while any
//! wrong index, missed mask, wrong scale or wrong normalisation moves values by ≥ 1e-2.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;

use common::{nrt, read_f32_npy, root, spec_tensor};

const TOL: f64 = 1e-5;

fn spec_of(path: &Path) -> toml::Table {
    std::fs::read_to_string(path).unwrap().parse().unwrap()
}

/// Runs `nrt run SPEC -o DIR` (from the repository root) and returns the directory.
fn run(spec: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    nrt()
        .current_dir(root())
        .args(["run", &spec.display().to_string(), "-o"])
        .arg(dir.path())
        .assert()
        .success();
    dir
}

/// Output `name` written by `nrt run -o`: checks its shape in the header, returns the data.
fn output(dir: &Path, name: &str, shape: &[usize]) -> Vec<f64> {
    let (header, data) = read_f32_npy(&dir.join(format!("{name}.npy")));
    let dims: Vec<String> = shape.iter().map(|d| format!("{d}, ")).collect();
    let want = format!("'shape': ({})", dims.concat());
    assert!(header.contains(&want), "{name}: {header} lacks {want}");
    data.into_iter().map(f64::from).collect()
}

fn check(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let mut worst = 0.0f64;
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let err = (g - w).abs() / w.abs().max(1.0);
        assert!(err <= TOL, "{what}[{i}]: got {g}, want {w} (error {err:e})");
        worst = worst.max(err);
    }
    eprintln!("{what}: {} values, worst scaled error {worst:e}", got.len());
}

// ---- plain f64 reference ops -----------------------------------------------------------------

/// `a [m, k] · b [k, n]`.
fn matmul(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..k).map(|t| a[i * k + t] * b[t * n + j]).sum();
        }
    }
    out
}

/// `x [rows, c] + b [c]` per row.
fn bias(x: &[f64], b: &[f64]) -> Vec<f64> {
    let c = b.len();
    x.iter().enumerate().map(|(i, v)| v + b[i % c]).collect()
}

fn layernorm(x: &[f64], g: &[f64], b: &[f64], eps: f64) -> Vec<f64> {
    let c = g.len();
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(c) {
        let mean = row.iter().sum::<f64>() / c as f64;
        let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / c as f64;
        let r = 1.0 / (var + eps).sqrt();
        out.extend(
            row.iter()
                .enumerate()
                .map(|(j, v)| (v - mean) * r * g[j] + b[j]),
        );
    }
    out
}

/// erf by its Maclaurin series (|x| < 6; f64 cancellation stays below 1e-9 there), ±1
/// beyond (|1 − erf| < 2e-17).
fn erf(x: f64) -> f64 {
    if x.abs() >= 6.0 {
        return x.signum();
    }
    let (mut term, mut sum) = (x, x);
    for n in 1..200 {
        term *= -x * x / n as f64;
        sum += term / (2 * n + 1) as f64;
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2))
}

fn softmax_rows(x: &[f64], c: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(c) {
        let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = row.iter().map(|v| (v - m).exp()).collect();
        let s: f64 = e.iter().sum();
        out.extend(e.iter().map(|v| v / s));
    }
    out
}

/// Multi-head attention of `[s, heads·d]` operands, head `h` in columns `h·d ..`.
fn attention(q: &[f64], k: &[f64], v: &[f64], s: usize, width: usize, heads: usize) -> Vec<f64> {
    let d = width / heads;
    let scale = 1.0 / (d as f64).sqrt();
    let mut out = vec![0.0; s * width];
    for h in 0..heads {
        for i in 0..s {
            // causal: keys 0..=i
            let scores: Vec<f64> = (0..=i)
                .map(|j| {
                    (0..d)
                        .map(|t| q[i * width + h * d + t] * k[j * width + h * d + t])
                        .sum::<f64>()
                        * scale
                })
                .collect();
            let p = softmax_rows(&scores, scores.len());
            for t in 0..d {
                out[i * width + h * d + t] = (0..=i).map(|j| p[j] * v[j * width + h * d + t]).sum();
            }
        }
    }
    out
}

/// `conv2d` NCHW/OIHW, stride 1, padding `pad`, with bias.
fn conv(
    x: &[f64],
    xs: [usize; 4],
    w: &[f64],
    ws: [usize; 4],
    b: &[f64],
    pad: usize,
) -> (Vec<f64>, [usize; 4]) {
    let [n, c, h, wd] = xs;
    let [o, _, kh, kw] = ws;
    let (oh, ow) = (h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1);
    let mut y = vec![0.0; n * o * oh * ow];
    for ni in 0..n {
        for oi in 0..o {
            for i in 0..oh {
                for j in 0..ow {
                    let mut acc = b[oi];
                    for ci in 0..c {
                        for a in 0..kh {
                            for e in 0..kw {
                                let (r, col) = (
                                    (i + a) as isize - pad as isize,
                                    (j + e) as isize - pad as isize,
                                );
                                if r < 0 || col < 0 || r >= h as isize || col >= wd as isize {
                                    continue;
                                }
                                let xv = x[((ni * c + ci) * h + r as usize) * wd + col as usize];
                                acc += xv * w[((oi * c + ci) * kh + a) * kw + e];
                            }
                        }
                    }
                    y[((ni * o + oi) * oh + i) * ow + j] = acc;
                }
            }
        }
    }
    (y, [n, o, oh, ow])
}

fn relu(x: &[f64]) -> Vec<f64> {
    x.iter().map(|v| v.max(0.0)).collect()
}

/// 2×2 max pooling, stride 2.
fn maxpool2(x: &[f64], s: [usize; 4]) -> (Vec<f64>, [usize; 4]) {
    let [n, c, h, w] = s;
    let (oh, ow) = (h / 2, w / 2);
    let mut y = vec![0.0; n * c * oh * ow];
    for p in 0..n * c {
        for i in 0..oh {
            for j in 0..ow {
                let at = |a: usize, e: usize| x[(p * h + 2 * i + a) * w + 2 * j + e];
                y[(p * oh + i) * ow + j] = at(0, 0).max(at(0, 1)).max(at(1, 0)).max(at(1, 1));
            }
        }
    }
    (y, [n, c, oh, ow])
}

// ---- the examples ----------------------------------------------------------------------------

#[test]
fn transformer_block_example_matches_the_reference() {
    let path = root().join("examples/transformer_block.toml");
    let spec = spec_of(&path);
    let t = |n: &str| spec_tensor(&spec, n).1;
    let (s, dm, heads, ff) = (64, 128, 4, 256);
    assert_eq!(spec_tensor(&spec, "x").0, [s, dm]);
    let x = t("x");
    let h1 = layernorm(&x, &t("ln1_g"), &t("ln1_b"), 1e-5);
    let q = matmul(&h1, &t("wq"), s, dm, dm);
    let k = matmul(&h1, &t("wk"), s, dm, dm);
    let v = matmul(&h1, &t("wv"), s, dm, dm);
    let att = attention(&q, &k, &v, s, dm, heads);
    let proj = matmul(&att, &t("wo"), s, dm, dm);
    let r1: Vec<f64> = x.iter().zip(&proj).map(|(a, b)| a + b).collect();
    let h2 = layernorm(&r1, &t("ln2_g"), &t("ln2_b"), 1e-5);
    let f1: Vec<f64> = bias(&matmul(&h2, &t("w1"), s, dm, ff), &t("b1"))
        .into_iter()
        .map(gelu)
        .collect();
    let f2 = bias(&matmul(&f1, &t("w2"), s, ff, dm), &t("b2"));
    let y: Vec<f64> = r1.iter().zip(&f2).map(|(a, b)| a + b).collect();

    let dir = run(&path);
    check(&output(dir.path(), "y", &[s, dm]), &y, "transformer y");
}

#[test]
fn cnn_example_matches_the_reference() {
    let path = root().join("examples/cnn.toml");
    let spec = spec_of(&path);
    let t = |n: &str| spec_tensor(&spec, n).1;
    let (c1, s1) = conv(
        &t("x"),
        [2, 3, 16, 16],
        &t("c1_w"),
        [8, 3, 3, 3],
        &t("c1_b"),
        1,
    );
    let (p1, s2) = maxpool2(&relu(&c1), s1);
    let (c2, s3) = conv(&p1, s2, &t("c2_w"), [16, 8, 3, 3], &t("c2_b"), 1);
    let r2 = relu(&c2);
    let plane = s3[2] * s3[3];
    let features: Vec<f64> = r2
        .chunks(plane)
        .map(|p| p.iter().sum::<f64>() / plane as f64)
        .collect();
    let y = bias(&matmul(&features, &t("fc_w"), 2, 16, 10), &t("fc_b"));

    let dir = run(&path);
    check(
        &output(dir.path(), "features", &[2, 16]),
        &features,
        "cnn features",
    );
    check(&output(dir.path(), "y", &[2, 10]), &y, "cnn y");
}

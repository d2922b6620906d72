//! Graph specs (layers naming their inputs and output) through the `nrt` command: the
//! examples `transformer_block.toml` and `cnn.toml`, a spec using the other ops and a bf16
//! graph, each run
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

/// Multi-head attention of `q [sq, heads·d]`, `k`, `v` `[sk, heads·d]` (head `h` in columns
/// `h·d ..`), optionally causal (key ≤ query).
#[allow(clippy::too_many_arguments)]
fn attention(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    (sq, sk): (usize, usize),
    width: usize,
    heads: usize,
    causal: bool,
    scale: f64,
) -> Vec<f64> {
    let d = width / heads;
    let mut out = vec![0.0; sq * width];
    for h in 0..heads {
        for i in 0..sq {
            let keys = if causal { i + 1 } else { sk };
            let scores: Vec<f64> = (0..keys)
                .map(|j| {
                    (0..d)
                        .map(|t| q[i * width + h * d + t] * k[j * width + h * d + t])
                        .sum::<f64>()
                        * scale
                })
                .collect();
            let p = softmax_rows(&scores, keys);
            for t in 0..d {
                out[i * width + h * d + t] =
                    (0..keys).map(|j| p[j] * v[j * width + h * d + t]).sum();
            }
        }
    }
    out
}

/// `conv2d` NCHW/OIHW with stride `st`, zero padding `pad` on every side, `groups`, and a
/// bias (or none).
#[allow(clippy::too_many_arguments)]
fn conv(
    x: &[f64],
    xs: [usize; 4],
    w: &[f64],
    ws: [usize; 4],
    b: Option<&[f64]>,
    st: usize,
    pad: usize,
    groups: usize,
) -> (Vec<f64>, [usize; 4]) {
    let [n, c, h, wd] = xs;
    let [o, cg, kh, kw] = ws;
    let (oh, ow) = ((h + 2 * pad - kh) / st + 1, (wd + 2 * pad - kw) / st + 1);
    let og = o / groups;
    let mut y = vec![0.0; n * o * oh * ow];
    for ni in 0..n {
        for oi in 0..o {
            for i in 0..oh {
                for j in 0..ow {
                    let mut acc = b.map_or(0.0, |b| b[oi]);
                    for cl in 0..cg {
                        let ci = (oi / og) * cg + cl;
                        for a in 0..kh {
                            for e in 0..kw {
                                let r = (i * st + a) as isize - pad as isize;
                                let col = (j * st + e) as isize - pad as isize;
                                if r < 0 || col < 0 || r >= h as isize || col >= wd as isize {
                                    continue;
                                }
                                let xv = x[((ni * c + ci) * h + r as usize) * wd + col as usize];
                                acc += xv * w[((oi * cg + cl) * kh + a) * kw + e];
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
    let att = attention(&q, &k, &v, (s, s), dm, heads, true, 1.0 / 32f64.sqrt());
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
        Some(&t("c1_b")),
        1,
        1,
        1,
    );
    let (p1, s2) = maxpool2(&relu(&c1), s1);
    let (c2, s3) = conv(
        &p1,
        s2,
        &t("c2_w"),
        [16, 8, 3, 3],
        Some(&t("c2_b")),
        1,
        1,
        1,
    );
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

// ---- the other ops ---------------------------------------------------------------------------

/// A graph using every other op, with one model output per op.
const OPS: &str = r#"
name = "ops"
dtype = "fp32"
outputs = ["o_sub", "o_max", "o_min", "o_div", "o_sigmoid", "o_silu", "o_tanh", "o_gelu_tanh",
           "o_softplus", "o_softmax", "o_rms", "o_rsum", "o_rmax", "o_rmean", "o_t", "o_mm_tb",
           "o_mm_ta", "o_reshape", "o_avg", "o_dw", "o_att"]

[tensors.a]
kind = "input"
shape = [6, 40]
seed = 1
scale = 2.0
[tensors.b]
kind = "weight"
shape = [40]
seed = 2
[tensors.c]
kind = "input"
shape = [6, 1]
seed = 3
[tensors.w]
kind = "weight"
shape = [24, 40]
seed = 4
[tensors.m]
kind = "input"
shape = [40, 6]
seed = 5
[tensors.b2]
kind = "weight"
shape = [40, 8]
seed = 6
[tensors.g]
kind = "weight"
shape = [40]
seed = 7
[tensors.x4]
kind = "input"
shape = [2, 3, 4, 5]
seed = 8
[tensors.x4b]
kind = "input"
shape = [3, 1, 5]
seed = 9
[tensors.dw]
kind = "weight"
shape = [3, 1, 3, 3]
seed = 10
[tensors.q]
kind = "input"
shape = [10, 16]
seed = 11
[tensors.k]
kind = "input"
shape = [12, 16]
seed = 12
[tensors.v]
kind = "input"
shape = [12, 16]
seed = 13

[[layers]]
op = "sub"
inputs = ["a", "b"]
output = "o_sub"
[[layers]]
op = "max"
inputs = ["a", "c"]
output = "o_max"
[[layers]]
op = "min"
inputs = ["x4", "x4b"]
output = "o_min"
[[layers]]
op = "exp"
inputs = ["c"]
output = "ce"
[[layers]]
op = "div"
inputs = ["a", "ce"]
output = "o_div"
[[layers]]
op = "sigmoid"
inputs = ["a"]
output = "o_sigmoid"
[[layers]]
op = "silu"
inputs = ["a"]
output = "o_silu"
[[layers]]
op = "tanh"
inputs = ["a"]
output = "o_tanh"
[[layers]]
op = "gelu_tanh"
inputs = ["a"]
output = "o_gelu_tanh"
[[layers]]
op = "softplus"
inputs = ["a"]
output = "o_softplus"
[[layers]]
op = "softmax"
inputs = ["a"]
output = "o_softmax"
[[layers]]
op = "rmsnorm"
inputs = ["a", "g"]
output = "o_rms"
eps = 1e-6
[[layers]]
op = "reduce_sum"
inputs = ["a"]
output = "o_rsum"
axis = 0
[[layers]]
op = "reduce_max"
inputs = ["a"]
output = "o_rmax"
keepdims = true
[[layers]]
op = "reduce_mean"
inputs = ["x4"]
output = "o_rmean"
axis = 1
[[layers]]
op = "transpose"
inputs = ["a"]
output = "o_t"
[[layers]]
op = "matmul"
inputs = ["a", "w"]
output = "o_mm_tb"
transpose_b = true
[[layers]]
op = "matmul"
inputs = ["m", "b2"]
output = "o_mm_ta"
transpose_a = true
[[layers]]
op = "reshape"
inputs = ["a"]
output = "o_reshape"
shape = [-1, 10]
[[layers]]
op = "avgpool"
inputs = ["x4"]
output = "o_avg"
kernel_size = 3
stride = 2
padding = 1
[[layers]]
op = "conv2d"
inputs = ["x4", "dw"]
output = "o_dw"
stride = 2
padding = 1
groups = 3
[[layers]]
op = "attention"
inputs = ["q", "k", "v"]
output = "o_att"
heads = 2
scale = 0.5
"#;

fn map(x: &[f64], f: impl Fn(f64) -> f64) -> Vec<f64> {
    x.iter().map(|&v| f(v)).collect()
}

#[test]
fn every_other_op_matches_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ops.toml");
    std::fs::write(&path, OPS).unwrap();
    let spec: toml::Table = OPS.parse().unwrap();
    let t = |n: &str| spec_tensor(&spec, n).1;
    let (a, b, c) = (t("a"), t("b"), t("c"));
    let (x4, x4b) = (t("x4"), t("x4b"));
    let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
    let mut want: Vec<(&str, Vec<usize>, Vec<f64>)> = Vec::new();
    let rows = |f: &dyn Fn(usize, usize) -> f64, r: usize, cc: usize| -> Vec<f64> {
        (0..r * cc).map(|i| f(i / cc, i % cc)).collect()
    };
    want.push((
        "o_sub",
        vec![6, 40],
        rows(&|i, j| a[i * 40 + j] - b[j], 6, 40),
    ));
    want.push((
        "o_max",
        vec![6, 40],
        rows(&|i, j| a[i * 40 + j].max(c[i]), 6, 40),
    ));
    // x4b [3, 1, 5] against x4 [2, 3, 4, 5]: channel (i / 20) % 3, column i % 5.
    let min: Vec<f64> = (0..120)
        .map(|i| x4[i].min(x4b[(i / 20 % 3) * 5 + i % 5]))
        .collect();
    want.push(("o_min", vec![2, 3, 4, 5], min));
    want.push((
        "o_div",
        vec![6, 40],
        rows(&|i, j| a[i * 40 + j] / c[i].exp(), 6, 40),
    ));
    want.push(("o_sigmoid", vec![6, 40], map(&a, sig)));
    want.push(("o_silu", vec![6, 40], map(&a, |v| v * sig(v))));
    want.push(("o_tanh", vec![6, 40], map(&a, f64::tanh)));
    let k0 = (2.0 / std::f64::consts::PI).sqrt();
    let gt = |v: f64| 0.5 * v * (1.0 + (k0 * (v + 0.044715 * v * v * v)).tanh());
    want.push(("o_gelu_tanh", vec![6, 40], map(&a, gt)));
    want.push(("o_softplus", vec![6, 40], map(&a, |v| v.exp().ln_1p())));
    want.push(("o_softmax", vec![6, 40], softmax_rows(&a, 40)));
    let g = t("g");
    let mut rms = Vec::new();
    for row in a.chunks(40) {
        let r = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / 40.0 + 1e-6).sqrt();
        rms.extend(row.iter().zip(&g).map(|(v, gg)| v * r * gg));
    }
    want.push(("o_rms", vec![6, 40], rms));
    let rsum = (0..40)
        .map(|j| (0..6).map(|i| a[i * 40 + j]).sum())
        .collect();
    want.push(("o_rsum", vec![40], rsum));
    let rmax = a
        .chunks(40)
        .map(|r| r.iter().cloned().fold(f64::NEG_INFINITY, f64::max))
        .collect();
    want.push(("o_rmax", vec![6, 1], rmax));
    let rmean = (0..40)
        .map(|i| {
            let (n, hw) = (i / 20, i % 20);
            (0..3).map(|ch| x4[(n * 3 + ch) * 20 + hw]).sum::<f64>() / 3.0
        })
        .collect();
    want.push(("o_rmean", vec![2, 4, 5], rmean));
    want.push(("o_t", vec![40, 6], rows(&|i, j| a[j * 40 + i], 40, 6)));
    let w = t("w");
    let tb = rows(
        &|i, j| (0..40).map(|q| a[i * 40 + q] * w[j * 40 + q]).sum(),
        6,
        24,
    );
    want.push(("o_mm_tb", vec![6, 24], tb));
    let (m, b2) = (t("m"), t("b2"));
    let ta = rows(
        &|i, j| (0..40).map(|q| m[q * 6 + i] * b2[q * 8 + j]).sum(),
        6,
        8,
    );
    want.push(("o_mm_ta", vec![6, 8], ta));
    want.push(("o_reshape", vec![24, 10], a.clone()));
    // 3×3 average, stride 2, padding 1, divided by the valid elements (count_include_pad 0).
    let mut avg = Vec::new();
    for p in 0..6 {
        for i in 0..2 {
            for j in 0..3 {
                let mut vals = Vec::new();
                for r in (2 * i) as isize - 1..=(2 * i) as isize + 1 {
                    for col in (2 * j) as isize - 1..=(2 * j) as isize + 1 {
                        if (0..4).contains(&r) && (0..5).contains(&col) {
                            vals.push(x4[p * 20 + r as usize * 5 + col as usize]);
                        }
                    }
                }
                avg.push(vals.iter().sum::<f64>() / vals.len() as f64);
            }
        }
    }
    want.push(("o_avg", vec![2, 3, 2, 3], avg));
    let (dwv, _) = conv(&x4, [2, 3, 4, 5], &t("dw"), [3, 1, 3, 3], None, 2, 1, 3);
    want.push(("o_dw", vec![2, 3, 2, 3], dwv));
    let att = attention(&t("q"), &t("k"), &t("v"), (10, 12), 16, 2, false, 0.5);
    want.push(("o_att", vec![10, 16], att));

    let out = run(&path);
    for (name, shape, w) in &want {
        check(&output(out.path(), name, shape), w, name);
    }
}

// ---- malformed graphs ------------------------------------------------------------------------

/// A well-formed two-layer graph the error cases below edit.
const SMALL: &str = r#"name = "bad"
[tensors.x]
kind = "input"
shape = [4, 3]
[tensors.w]
kind = "weight"
shape = [3, 5]
seed = 1
[[layers]]
op = "matmul"
inputs = ["x", "w"]
output = "h"
[[layers]]
op = "relu"
inputs = ["h"]
output = "out"
"#;

/// `nrt build` of `text`: fails with exit code 1 and exactly one stderr line.
fn build_error(text: &str) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("bad.toml");
    std::fs::write(&spec, text).unwrap();
    let out = dir.path().join("x.neff");
    let o = nrt()
        .args(["build", &spec.display().to_string(), "-o"])
        .arg(&out)
        .assert()
        .code(1)
        .get_output()
        .clone();
    assert!(!out.exists());
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    (spec.display().to_string(), err.trim_end().to_owned())
}

#[test]
fn the_small_graph_builds() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("ok.toml");
    std::fs::write(&spec, SMALL).unwrap();
    let s = common::stdout_of(
        nrt()
            .args(["build", &spec.display().to_string(), "-o"])
            .arg(dir.path().join("ok.neff")),
    );
    assert!(
        s.contains("graph of 2 layers [matmul, relu] in one kernel (fp32)"),
        "{s}"
    );
    assert!(s.contains("out   output     fp32   [4, 5]"), "{s}");
}

#[test]
fn malformed_graphs_are_refused_with_exact_messages() {
    // (edit of SMALL, position of the message ("" or ":line:col"), message)
    let cases: [(&str, &str, &str, &str); 15] = [
        (
            "shape = [4, 3]",
            "shape = [4294967296, 3]",
            "",
            "tensor 'x' is too large (more than 2^32 elements)",
        ),
        (
            "output = \"out\"",
            "output = \"out\"\n[[layers]]\nop = \"maxpool\"\ninputs = [\"out\"]\noutput = \"p\"\nkernel_size = 0",
            ":17:1",
            "layer 3 (maxpool): attribute 'kernel_size' must be an integer from 1 to 16777216 or a list [h, w] of them",
        ),
        (
            "inputs = [\"h\"]",
            "inputs = [\"hh\"]",
            "",
            "layer 2 (relu): unknown tensor 'hh' (neither declared nor the output of a layer)",
        ),
        (
            "inputs = [\"x\", \"w\"]",
            "inputs = [\"out\", \"w\"]",
            "",
            "layer 1 (matmul): input 'out' is used before it is defined (by layer 2; layers \
             run in order, so the graph must not have cycles)",
        ),
        (
            "shape = [3, 5]",
            "shape = [4, 5]",
            "",
            "layer 1 (matmul): the contraction dimensions differ: 'x' [4, 3] gives K = 3, 'w' \
             [4, 5] gives K = 4",
        ),
        (
            "output = \"out\"",
            "output = \"out\"\nalpha = 0.1",
            ":13:1",
            "layer 2 (relu): unknown attribute 'alpha' (it takes none)",
        ),
        (
            "output = \"h\"",
            "output = \"h\"\ntranspose_a = 1",
            ":9:1",
            "layer 1 (matmul): attribute 'transpose_a' must be true or false",
        ),
        (
            "output = \"h\"",
            "output = \"h\"\ntranspose = true",
            ":9:1",
            "layer 1 (matmul): unknown attribute 'transpose' (it takes: transpose_a, \
             transpose_b)",
        ),
        (
            "output = \"out\"",
            "output = \"h\"",
            "",
            "layer 2 (relu): output 'h' is already the output of layer 1",
        ),
        (
            "output = \"out\"",
            "output = \"x\"",
            "",
            "layer 2 (relu): output 'x' has the name of a declared tensor",
        ),
        (
            "output = \"out\"\n",
            "output = \"out\"\n[[layers]]\nop = \"tanh\"\ninputs = [\"h\"]\noutput = \"u\"\n",
            "",
            "layer 3 (tanh): output 'u' is never used (not an input of a later layer, nor one \
             of the model's outputs)",
        ),
        (
            "name = \"bad\"",
            "name = \"bad\"\noutput = \"y\"",
            "",
            "the model output 'y' is not the output of any layer",
        ),
        (
            "inputs = [\"h\"]",
            "inputs = [\"h\", \"x\"]",
            ":13:1",
            "layer 2 (relu): takes 1 input, got 2",
        ),
        (
            "op = \"relu\"",
            "op = \"add\"",
            ":13:1",
            "layer 2 (add): takes 2 inputs, got 1",
        ),
        (
            "inputs = [\"h\"]\n",
            "",
            ":13:1",
            "layer 2 (relu): missing 'inputs' (a graph layer names its inputs and its output)",
        ),
    ];
    for (from, to, at, msg) in cases {
        assert!(SMALL.contains(from), "{from}");
        let (spec, line) = build_error(&SMALL.replacen(from, to, 1));
        assert_eq!(line, format!("error: {spec}{at}: {msg}"));
    }
    // Broadcasting and unknown ops.
    let text = SMALL
        .replace("op = \"relu\"", "op = \"add\"")
        .replace("inputs = [\"h\"]", "inputs = [\"h\", \"x\"]");
    let (spec, line) = build_error(&text);
    assert_eq!(
        line,
        format!(
            "error: {spec}: layer 2 (add): 'h' [4, 5] and 'x' [4, 3] do not broadcast together"
        )
    );
    let (spec, line) = build_error(&SMALL.replace("op = \"relu\"", "op = \"relu6\""));
    let want = format!(
        "error: {spec}:13:1: layer 2 (relu6): unknown op 'relu6' (expected one of: matmul, add, sub, mul, div, max, min, bias_add, identity, relu, gelu, gelu_tanh, silu, sigmoid, tanh, exp, log, sqrt, rsqrt, reciprocal, square, abs, softplus, softmax, layernorm, rmsnorm, reduce_sum, reduce_mean, reduce_max, reduce_min, transpose, attention, conv2d, maxpool, avgpool, global_avgpool, reshape, flatten)"
    );
    assert_eq!(line, want);
}

// ---- bf16 ------------------------------------------------------------------------------------

/// The spacing of bf16 values around `v` (8 significant bits).
fn bf16_ulp(v: f64) -> f64 {
    2f64.powi(v.abs().max(1e-30).log2().floor() as i32 - 7)
}

/// A bf16 graph (every tensor and intermediate bf16): `y = gelu_tanh(x·w + b)`. The
/// reference rounds where the kernel does — the inputs, and each layer's output to bf16 —
/// with exact sums before the rounding. The kernel's fp32 sums may round a matmul output to
/// the neighbouring bf16 value, which moves `h1 = bf16(h0 + b)` by up to `ulp(h0)` plus its
/// own rounding step; GELU's slope is below 1.13. Bound: `|got − want| ≤ 2.5·(ulp(h0) +
/// ulp(h1)) + 2·ulp(y)` (ulps of the reference values, doubled against binade edges).
#[test]
fn a_bf16_graph_rounds_where_the_reference_does() {
    use nrt_sim::engine::{DType, round_through};
    let text = r#"
name = "bf16_graph"
dtype = "bf16"
output = "y"
[tensors.x]
kind = "input"
shape = [8, 64]
seed = 21
[tensors.w]
kind = "weight"
shape = [64, 32]
seed = 22
scale = 0.25
[tensors.b]
kind = "weight"
shape = [32]
seed = 23
[[layers]]
op = "matmul"
inputs = ["x", "w"]
output = "h0"
[[layers]]
op = "bias_add"
inputs = ["h0", "b"]
output = "h1"
[[layers]]
op = "gelu_tanh"
inputs = ["h1"]
output = "y"
"#;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bf16.toml");
    std::fs::write(&path, text).unwrap();
    let spec: toml::Table = text.parse().unwrap();
    let bf = |v: f64| f64::from(round_through(DType::Bf16, v as f32));
    let t = |n: &str| map(&spec_tensor(&spec, n).1, bf);
    let (x, w, b) = (t("x"), t("w"), t("b"));
    let h0 = map(&matmul(&x, &w, 8, 64, 32), bf);
    let h1 = map(&bias(&h0, &b), bf);
    let k0 = (2.0 / std::f64::consts::PI).sqrt();
    let y = map(&h1, |v| {
        bf(0.5 * v * (1.0 + (k0 * (v + 0.044715 * v * v * v)).tanh()))
    });

    let out = run(&path);
    let o = std::fs::read(out.path().join("y.npy")).unwrap();
    let hlen = u16::from_le_bytes([o[8], o[9]]) as usize;
    let header = String::from_utf8_lossy(&o[10..10 + hlen]).to_string();
    // bf16 outputs are written as float32 .npy (exact: every bf16 value is an fp32 value).
    assert!(
        header.contains("'<f4'") && header.contains("'shape': (8, 32, )"),
        "{header}"
    );
    let got: Vec<f64> = o[10 + hlen..]
        .chunks_exact(4)
        .map(|c| f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]])))
        .collect();
    assert_eq!(got.len(), y.len());
    let mut exact = 0;
    for i in 0..y.len() {
        let bound = 2.5 * (bf16_ulp(h0[i]) + bf16_ulp(h1[i])) + 2.0 * bf16_ulp(y[i]);
        assert!(
            (got[i] - y[i]).abs() <= bound,
            "y[{i}]: got {}, want {} (bound {bound})",
            got[i],
            y[i]
        );
        exact += usize::from(got[i] == y[i]);
    }
    eprintln!("bf16 y: {exact} of {} equal to the reference", y.len());
}

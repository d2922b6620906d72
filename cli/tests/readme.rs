//! The README's first command, `cargo run -p nrt-cli -- run examples/mlp.toml`, run as the
//! built `nrt` binary with the same arguments from the repository root, and its results
//! checked against a straightforward reference: the spec's seeded data regenerated from the
//! documented generator, then the MLP in plain loops with the same rounding (fp32 products
//! and sums, bias, relu, results rounded to bf16).
//!
//! Tolerance: at most 1 bf16 ULP per element. The reference sums k in one pass; the kernel
//! sums each 128-row K-tile from +0.0 and adds the tile sums (hidden = 160 is two tiles), so
//! the fp32 sums may differ in their last bits, which can move a bf16 rounding by one step.
//!
//! The tiled matmul example is checked too, bit-exactly: its reference sums each K-tile
//! separately, as the kernel documents, and its output is fp32.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use assert_cmd::Command;
use common::{read_f32_npy, root};
use nrt_sim::engine::{DType, round_through};

fn nrt() -> Command {
    let mut c = common::nrt();
    c.current_dir(root());
    c
}

/// The documented generator: SplitMix64 from state `seed + (i+1)·γ`, top 24 bits as `u`,
/// value `(2u − 1)·scale`.
fn seeded(seed: u64, n: usize, scale: f64) -> Vec<f32> {
    (0..n as u64)
        .map(|i| {
            let mut z = seed.wrapping_add((i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            let u = (z >> 40) as f64 / 16_777_216.0;
            ((2.0 * u - 1.0) * scale) as f32
        })
        .collect()
}

/// A tensor of the example spec: its shape and seeded data rounded to `dt`.
fn tensor(spec: &toml::Table, name: &str, dt: DType) -> (Vec<usize>, Vec<f32>) {
    let t = spec["tensors"][name].as_table().unwrap();
    let shape: Vec<usize> = t["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_integer().unwrap() as usize)
        .collect();
    let seed = t["seed"].as_integer().unwrap() as u64;
    let scale = t.get("scale").and_then(|v| v.as_float()).unwrap_or(1.0);
    let n = shape.iter().product();
    let v = seeded(seed, n, scale)
        .into_iter()
        .map(|x| round_through(dt, x))
        .collect();
    (shape, v)
}

fn spec(name: &str) -> toml::Table {
    std::fs::read_to_string(root().join("examples").join(name))
        .unwrap()
        .parse()
        .unwrap()
}

/// Distance in bf16 steps between two bf16-exact values.
fn bf16_ulps(a: f32, b: f32) -> u32 {
    let key = |x: f32| {
        let h = (x.to_bits() >> 16) as i32;
        if h & 0x8000 != 0 { -(h & 0x7FFF) } else { h }
    };
    key(a).abs_diff(key(b))
}

/// y_t = w2ᵀ·relu(w1ᵀ·x_t + b1) + b2, feature-major, plain loops.
fn mlp_reference() -> (Vec<usize>, Vec<f32>) {
    let s = spec("mlp.toml");
    assert_eq!(s["dtype"].as_str(), Some("bf16"));
    let dt = DType::Bf16;
    let (xs, x) = tensor(&s, "x_t", dt);
    let (w1s, w1) = tensor(&s, "w1", dt);
    let (_, b1) = tensor(&s, "b1", dt);
    let (w2s, w2) = tensor(&s, "w2", dt);
    let (_, b2) = tensor(&s, "b2", dt);
    let (d_in, batch) = (xs[0], xs[1]);
    let hidden = w1s[1];
    let d_out = w2s[1];
    let mut h = vec![0f32; hidden * batch];
    for j in 0..hidden {
        for b in 0..batch {
            let mut acc = 0f32;
            for k in 0..d_in {
                acc = w1[k * hidden + j].mul_add(x[k * batch + b], acc);
            }
            h[j * batch + b] = round_through(dt, (acc + b1[j]).max(0.0));
        }
    }
    let mut y = vec![0f32; d_out * batch];
    for o in 0..d_out {
        for b in 0..batch {
            let mut acc = 0f32;
            for k in 0..hidden {
                acc = w2[k * d_out + o].mul_add(h[k * batch + b], acc);
            }
            y[o * batch + b] = round_through(dt, acc + b2[o]);
        }
    }
    (vec![d_out, batch], y)
}

/// The numbers of the summary's `values` column: `[a, b, …]  min m  max M  mean μ`.
fn printed_values(stdout: &str, output: &str) -> (Vec<f64>, f64, f64) {
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{output} ")) && l.contains('['))
        .unwrap_or_else(|| panic!("no line for {output} in\n{stdout}"));
    let vals = line.rsplit_once('[').unwrap().1;
    let (list, rest) = vals.split_once(']').unwrap();
    let first = list
        .split(", ")
        .filter(|v| *v != "…")
        .map(|v| v.parse::<f64>().unwrap())
        .collect();
    let words: Vec<&str> = rest.split_whitespace().collect();
    let min = words[words.iter().position(|w| *w == "min").unwrap() + 1]
        .parse()
        .unwrap();
    let max = words[words.iter().position(|w| *w == "max").unwrap() + 1]
        .parse()
        .unwrap();
    (first, min, max)
}

#[test]
fn readme_first_command_matches_the_reference() {
    // Exactly the README's first command's arguments, from the repository root.
    let out = nrt().args(["run", "examples/mlp.toml"]).assert().success();
    let stdout = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(out.get_output().stderr.is_empty(), "nothing on stderr");
    let (shape, want) = mlp_reference();
    assert!(
        stdout.contains(&format!("y_t   bf16   [{}, {}]", shape[0], shape[1])),
        "{stdout}"
    );
    // Counters from the report of that execution; the engine ran once, for it.
    assert!(
        stdout.contains(
            "counters   from the report the simulator kept of the execution above, made \
             through the runtime"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("engine     1 program run in this process (the execution above)"),
        "{stdout}"
    );

    // The printed values (6 significant digits) against the reference.
    let (first, min, max) = printed_values(&stdout, "y_t");
    assert_eq!(first.len(), 6);
    let close = |got: f64, want: f32| {
        let w = f64::from(want);
        // 6 significant digits, or 1 bf16 ULP (2^-7 relative).
        (got - w).abs() <= w.abs() * (1.0 / 128.0) + 1e-6
    };
    for (g, w) in first.iter().zip(&want) {
        assert!(close(*g, *w), "printed {g}, reference {w}");
    }
    let wmin = want.iter().copied().fold(f32::INFINITY, f32::min);
    let wmax = want.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    assert!(
        close(min, wmin) && close(max, wmax),
        "min {min} max {max} vs {wmin} {wmax}"
    );

    // Every element, through --output-dir.
    let dir = tempfile::tempdir().unwrap();
    nrt()
        .args(["run", "examples/mlp.toml", "--output-dir"])
        .arg(dir.path())
        .assert()
        .success();
    let (header, got) = read_f32_npy(&dir.path().join("y_t.npy"));
    assert!(
        header.contains(&format!("({}, {}", shape[0], shape[1])),
        "{header}"
    );
    assert_eq!(got.len(), want.len());
    let worst = got
        .iter()
        .zip(&want)
        .map(|(g, w)| bf16_ulps(*g, *w))
        .max()
        .unwrap();
    assert!(
        worst <= 1,
        "an element is {worst} bf16 ULPs from the reference"
    );
    assert!(got.iter().any(|v| *v != 0.0) && got.iter().any(|v| *v < 0.0));
}

#[test]
fn matmul_example_is_bit_exact_against_the_tiled_reference() {
    let s = spec("matmul.toml");
    let dt = DType::Bf16;
    let (ls, lhs_t) = tensor(&s, "lhs_t", dt);
    let (rs, rhs) = tensor(&s, "rhs", dt);
    let (k, m, n) = (ls[0], ls[1], rs[1]);
    assert_eq!(rs[0], k);
    // out[i, j] = Σ_tiles (Σ_{k in tile} lhs_t[k, i]·rhs[k, j]), each tile a chain of fused
    // multiply-adds from +0.0.
    let mut want = vec![0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut total = 0f32;
            for (t, k0) in (0..k).step_by(128).enumerate() {
                let mut tile = 0f32;
                for kk in k0..(k0 + 128).min(k) {
                    tile = lhs_t[kk * m + i].mul_add(rhs[kk * n + j], tile);
                }
                total = if t == 0 { tile } else { total + tile };
            }
            want[i * n + j] = total;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    nrt()
        .args(["run", "examples/matmul.toml", "-o"])
        .arg(dir.path())
        .assert()
        .success();
    let (_, got) = read_f32_npy(&dir.path().join("out.npy"));
    assert_eq!(got.len(), want.len());
    let bad = got
        .iter()
        .zip(&want)
        .filter(|(g, w)| g.to_bits() != w.to_bits())
        .count();
    assert_eq!(bad, 0, "{bad} elements differ from the reference");
}

//! The row softmax of the kernel guide (`docs/KERNELS.md`), in five versions, each a step
//! of the guide's "make it faster" section.
//!
//! ```text
//! cargo run -p nrt-kernel --example softmax -- build DIR       # DIR/softmax_*.neff, DIR/x.npy
//! cargo run -p nrt-kernel --example softmax -- check X.npy Y.npy   # Y against a plain softmax of X
//! cargo run -p nrt-kernel --example softmax -- reroll   # softmax_naive: build() vs build_unrolled()
//! ```
//!
//! `build` writes one NEFF per version (input `x`, output `y`, both fp32 `[N, D]`) and a
//! sample input; `check` compares an output `nrt run` wrote with a softmax computed here in
//! f64 plain loops, and fails (exit status 1) beyond the bound stated at [`TOLERANCE`];
//! `reroll` runs `softmax_naive` in-process as [`Kernel::build`] gives it (streams rerolled
//! into loops) and as [`Kernel::build_unrolled`] gives it, and prints the instruction and
//! descriptor counts and simulated ticks of each.
//!
//! The kernel functions are the guide's code, verbatim: `cli/tests/guide.rs` checks that every
//! kernel function the guide shows appears here as it is written there.

use std::error::Error;
use std::path::Path;

use nrt_kernel::{ActFn, AluOp, DType, EngineId, Kernel, Memory, Program};
use nrt_kernel::{TensorReduce, TensorScalarChain};
use nrt_sim::Instance;
use nrt_sim::engine::{Device, ExecOptions, encode_f32};

/// Rows.
const N: usize = 1024;
/// Columns (the softmax runs along each row).
const D: usize = 512;

/// Relative error allowed per element against the f64 reference: the kernel sums `D` fp32
/// values left to right (worst case `(D − 1)·u` relative, u = 2⁻²⁴, about 3.0e-5 for
/// D = 512) and rounds a few more times (exp, reciprocal, product: a few u each).
const TOLERANCE: f64 = 4e-5;

fn softmax_naive(n: usize, d: usize) -> Result<Program, nrt_core::Error> {
    let mut k = Kernel::new("softmax_naive");
    let x = k.input("x", DType::F32, &[n, d])?;
    let y = k.output("y", DType::F32, &[n, d])?;
    for r0 in (0..n).step_by(128) {
        let rows = r0..(r0 + 128).min(n);
        let p = rows.len();
        k.scope(|k| {
            let t = k.sbuf_tile("t", DType::F32, &[p, d])?;
            let m = k.sbuf_tile("m", DType::F32, &[p, 1])?;
            let s = k.sbuf_tile("s", DType::F32, &[p, 1])?;
            k.dma_copy(&t, &x.slice(0, rows.clone())?)?;
            k.tensor_reduce(&m, AluOp::Max, &t, &[1])?; // VectorE: m = max of the row
            k.tensor_scalar(&m, &m, AluOp::Mul, -1.0)?; // VectorE: m = -max
            k.activation(&t, ActFn::Exp, &t, &m, 1.0)?; // ScalarE: t = exp(t - max)
            k.tensor_reduce(&s, AluOp::Add, &t, &[1])?; // VectorE: s = sum of the row
            k.reciprocal(&s, &s)?; // VectorE: s = 1 / sum
            k.tensor_scalar(&t, &t, AluOp::Mul, &s)?; // VectorE: t = t / sum
            k.dma_copy(&y.slice(0, rows)?, &t)
        })?;
    }
    k.build()
}

/// `softmax_naive` built with [`Kernel::build_unrolled`] instead of [`Kernel::build`]: the
/// same recording, every instruction as recorded (one copy per 128-row tile), for the
/// `reroll` comparison. The code of `softmax_naive` (less its comments) but for the last
/// line.
fn softmax_naive_unrolled(n: usize, d: usize) -> Result<Program, nrt_core::Error> {
    let mut k = Kernel::new("softmax_naive");
    let x = k.input("x", DType::F32, &[n, d])?;
    let y = k.output("y", DType::F32, &[n, d])?;
    for r0 in (0..n).step_by(128) {
        let rows = r0..(r0 + 128).min(n);
        let p = rows.len();
        k.scope(|k| {
            let t = k.sbuf_tile("t", DType::F32, &[p, d])?;
            let m = k.sbuf_tile("m", DType::F32, &[p, 1])?;
            let s = k.sbuf_tile("s", DType::F32, &[p, 1])?;
            k.dma_copy(&t, &x.slice(0, rows.clone())?)?;
            k.tensor_reduce(&m, AluOp::Max, &t, &[1])?;
            k.tensor_scalar(&m, &m, AluOp::Mul, -1.0)?;
            k.activation(&t, ActFn::Exp, &t, &m, 1.0)?;
            k.tensor_reduce(&s, AluOp::Add, &t, &[1])?;
            k.reciprocal(&s, &s)?;
            k.tensor_scalar(&t, &t, AluOp::Mul, &s)?;
            k.dma_copy(&y.slice(0, rows)?, &t)
        })?;
    }
    k.build_unrolled()
}

fn softmax_fused(n: usize, d: usize) -> Result<Program, nrt_core::Error> {
    let mut k = Kernel::new("softmax_fused");
    let x = k.input("x", DType::F32, &[n, d])?;
    let y = k.output("y", DType::F32, &[n, d])?;
    for r0 in (0..n).step_by(128) {
        let rows = r0..(r0 + 128).min(n);
        let p = rows.len();
        k.scope(|k| {
            let t = k.sbuf_tile("t", DType::F32, &[p, d])?;
            let m = k.sbuf_tile("m", DType::F32, &[p, 1])?;
            let s = k.sbuf_tile("s", DType::F32, &[p, 1])?;
            k.dma_copy(&t, &x.slice(0, rows.clone())?)?;
            // m = -max in one instruction: the reduction's `negate` option.
            k.emit(TensorReduce {
                dst: &m,
                op: AluOp::Max,
                data: &t,
                axis: &[1],
                negate: true,
                keepdims: false,
            })?;
            // t = exp(t - max) and s = its row sums, in one ScalarE instruction.
            k.activation_reduce(&t, ActFn::Exp, &t, AluOp::Add, &s, &m, 1.0)?;
            k.reciprocal(&s, &s)?;
            k.tensor_scalar(&t, &t, AluOp::Mul, &s)?;
            k.dma_copy(&y.slice(0, rows)?, &t)
        })?;
    }
    k.build()
}

fn softmax_pipelined(n: usize, d: usize, bufs: usize) -> Result<Program, nrt_core::Error> {
    let mut k = Kernel::new("softmax_pipelined");
    let x = k.input("x", DType::F32, &[n, d])?;
    let y = k.output("y", DType::F32, &[n, d])?;
    let mut ts = k.tile_pool("t", Memory::Sbuf, DType::F32, &[128, d], bufs)?;
    let mut ms = k.tile_pool("m", Memory::Sbuf, DType::F32, &[128, 1], bufs)?;
    let mut ss = k.tile_pool("s", Memory::Sbuf, DType::F32, &[128, 1], bufs)?;
    for r0 in (0..n).step_by(128) {
        let rows = r0..(r0 + 128).min(n);
        let p = rows.len();
        let (t, m, s) = (ts.next(&mut k)?, ms.next(&mut k)?, ss.next(&mut k)?);
        let (t, m, s) = (t.slice(0, ..p)?, m.slice(0, ..p)?, s.slice(0, ..p)?);
        k.dma_copy(&t, &x.slice(0, rows.clone())?)?;
        k.emit(TensorReduce {
            dst: &m,
            op: AluOp::Max,
            data: &t,
            axis: &[1],
            negate: true,
            keepdims: false,
        })?;
        k.activation_reduce(&t, ActFn::Exp, &t, AluOp::Add, &s, &m, 1.0)?;
        k.reciprocal(&s, &s)?;
        k.tensor_scalar(&t, &t, AluOp::Mul, &s)?;
        k.dma_copy(&y.slice(0, rows)?, &t)?;
    }
    k.build()
}

fn softmax_balanced(n: usize, d: usize, bufs: usize) -> Result<Program, nrt_core::Error> {
    let mut k = Kernel::new("softmax_balanced");
    let x = k.input("x", DType::F32, &[n, d])?;
    let y = k.output("y", DType::F32, &[n, d])?;
    let mut ts = k.tile_pool("t", Memory::Sbuf, DType::F32, &[128, d], bufs)?;
    let mut ms = k.tile_pool("m", Memory::Sbuf, DType::F32, &[128, 1], bufs)?;
    let mut ss = k.tile_pool("s", Memory::Sbuf, DType::F32, &[128, 1], bufs)?;
    for r0 in (0..n).step_by(128) {
        let rows = r0..(r0 + 128).min(n);
        let p = rows.len();
        let (t, m, s) = (ts.next(&mut k)?, ms.next(&mut k)?, ss.next(&mut k)?);
        let (t, m, s) = (t.slice(0, ..p)?, m.slice(0, ..p)?, s.slice(0, ..p)?);
        k.dma_copy(&t, &x.slice(0, rows.clone())?)?;
        k.emit(TensorReduce {
            dst: &m,
            op: AluOp::Max,
            data: &t,
            axis: &[1],
            negate: true,
            keepdims: false,
        })?;
        k.activation_reduce(&t, ActFn::Exp, &t, AluOp::Add, &s, &m, 1.0)?;
        k.reciprocal(&s, &s)?;
        // The final scaling on ScalarE instead of VectorE.
        k.emit(TensorScalarChain {
            engine: Some(EngineId::Scalar),
            ..TensorScalarChain::new(&t, &t, AluOp::Mul, &s)
        })?;
        k.dma_copy(&y.slice(0, rows)?, &t)?;
    }
    k.build()
}

fn softmax_wide(n: usize, d: usize, r: usize, bufs: usize) -> Result<Program, nrt_core::Error> {
    if n % (128 * r) != 0 {
        return Err(nrt_core::err!(
            Invalid,
            "softmax_wide: {n} rows are not tiles of 128 x {r}"
        ));
    }
    let mut k = Kernel::new("softmax_wide");
    let x = k.input("x", DType::F32, &[n, d])?;
    let y = k.output("y", DType::F32, &[n, d])?;
    let mut ts = k.tile_pool("t", Memory::Sbuf, DType::F32, &[128, r, d], bufs)?;
    let mut ms = k.tile_pool("m", Memory::Sbuf, DType::F32, &[128, r], bufs)?;
    let mut ss = k.tile_pool("s", Memory::Sbuf, DType::F32, &[128, r], bufs)?;
    for r0 in (0..n).step_by(128 * r) {
        // Partition p holds rows r0 + p·r .. r0 + (p + 1)·r: one contiguous run of HBM.
        let rows = r0..r0 + 128 * r;
        let (t, m, s) = (ts.next(&mut k)?, ms.next(&mut k)?, ss.next(&mut k)?);
        k.dma_copy(&t, &x.slice(0, rows.clone())?.reshape(&[128, r, d])?)?;
        k.emit(TensorReduce {
            dst: &m,
            op: AluOp::Max,
            data: &t,
            axis: &[2],
            negate: true,
            keepdims: false,
        })?;
        for j in 0..r {
            let tj = t.select(1, j)?;
            let (mj, sj) = (m.slice(1, j..j + 1)?, s.slice(1, j..j + 1)?);
            k.activation_reduce(&tj, ActFn::Exp, &tj, AluOp::Add, &sj, &mj, 1.0)?;
        }
        k.reciprocal(&s, &s)?;
        for j in 0..r {
            let (tj, sj) = (t.select(1, j)?, s.slice(1, j..j + 1)?);
            k.emit(TensorScalarChain {
                engine: Some(EngineId::Scalar),
                ..TensorScalarChain::new(&tj, &tj, AluOp::Mul, &sj)
            })?;
        }
        k.dma_copy(&y.slice(0, rows)?.reshape(&[128, r, d])?, &t)?;
    }
    k.build()
}

/// The versions `build` writes, in the guide's order.
fn versions() -> Result<Vec<(&'static str, Program)>, nrt_core::Error> {
    Ok(vec![
        ("softmax_naive", softmax_naive(N, D)?),
        ("softmax_fused", softmax_fused(N, D)?),
        ("softmax_pipelined", softmax_pipelined(N, D, 3)?),
        ("softmax_balanced", softmax_balanced(N, D, 3)?),
        ("softmax_wide", softmax_wide(N, D, 2, 3)?),
    ])
}

/// The sample input: values in [-8, 8), from a fixed linear congruential generator.
fn sample_input(n: usize, d: usize) -> Vec<f32> {
    let mut state: u32 = 12345;
    (0..n * d)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 8) as f32 / (1u32 << 24) as f32 * 16.0 - 8.0
        })
        .collect()
}

/// Writes an fp32 `.npy` file (version 1.0, C order).
fn write_npy(path: &Path, shape: &[usize], data: &[f32]) -> Result<(), Box<dyn Error>> {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    let mut header = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({}{}), }}",
        dims.join(", "),
        if dims.len() == 1 { "," } else { "" }
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&u16::try_from(header.len())?.to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    for v in data {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    std::fs::write(path, bytes)?;
    Ok(())
}

/// Reads a 2-D fp32 `.npy` file (version 1.0 or 2.0, C order): its shape and data.
fn read_npy(path: &Path) -> Result<([usize; 2], Vec<f32>), Box<dyn Error>> {
    let bytes = std::fs::read(path)?;
    let bad = || format!("{}: not a 2-D little-endian fp32 .npy file", path.display());
    if bytes.len() < 10 || !bytes.starts_with(b"\x93NUMPY") {
        return Err(bad().into());
    }
    let (hlen, start) = match bytes[6] {
        1 => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
        2 if bytes.len() >= 12 => {
            let b = [bytes[8], bytes[9], bytes[10], bytes[11]];
            (usize::try_from(u32::from_le_bytes(b))?, 12)
        }
        _ => return Err(bad().into()),
    };
    let header = std::str::from_utf8(bytes.get(start..start + hlen).ok_or_else(bad)?)?;
    if !header.contains("'<f4'") || header.contains("'fortran_order': True") {
        return Err(bad().into());
    }
    let dims = header
        .split_once("'shape': (")
        .and_then(|(_, r)| r.split_once(')'))
        .ok_or_else(bad)?
        .0;
    let dims: Vec<usize> = dims
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let [r, c] = dims[..] else {
        return Err(bad().into());
    };
    let data: Vec<f32> = bytes[start + hlen..]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    if data.len() != r * c {
        return Err(bad().into());
    }
    Ok(([r, c], data))
}

/// The softmax of each row of `x` (`[rows, cols]`), in f64 plain loops.
fn reference(x: &[f32], cols: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(cols) {
        let max = row
            .iter()
            .fold(f64::NEG_INFINITY, |m, v| m.max(f64::from(*v)));
        let e: Vec<f64> = row.iter().map(|v| (f64::from(*v) - max).exp()).collect();
        let sum: f64 = e.iter().sum();
        out.extend(e.iter().map(|v| v / sum));
    }
    out
}

fn build(dir: &Path) -> Result<(), Box<dyn Error>> {
    std::fs::create_dir_all(dir)?;
    for (name, program) in versions()? {
        let neff = nrt_sim::neff::neff_from_programs(name, &[program])?;
        let path = dir.join(format!("{name}.neff"));
        std::fs::write(&path, &neff)?;
        println!("wrote {} ({} bytes)", path.display(), neff.len());
    }
    let path = dir.join("x.npy");
    write_npy(&path, &[N, D], &sample_input(N, D))?;
    println!("wrote {} (fp32 [{N}, {D}])", path.display());
    Ok(())
}

fn check(x: &Path, y: &Path) -> Result<bool, Box<dyn Error>> {
    let (xs, xv) = read_npy(x)?;
    let (ys, yv) = read_npy(y)?;
    if xs != ys {
        return Err(format!("shapes differ: {xs:?} and {ys:?}").into());
    }
    let want = reference(&xv, xs[1]);
    let worst = yv
        .iter()
        .zip(&want)
        .map(|(g, w)| (f64::from(*g) - w).abs() / w.abs().max(f64::MIN_POSITIVE))
        .fold(0.0, f64::max);
    let sums: Vec<f64> = yv
        .chunks(xs[1])
        .map(|r| r.iter().map(|v| f64::from(*v)).sum())
        .collect();
    let sum_err = sums.iter().map(|s| (s - 1.0).abs()).fold(0.0, f64::max);
    let ok = worst <= TOLERANCE;
    println!(
        "{} rows: largest relative error {worst:.1e} (bound {TOLERANCE:.0e}), \
         row sums within {sum_err:.1e} of 1: {}",
        xs[0],
        if ok { "ok" } else { "MISMATCH" }
    );
    Ok(ok)
}

/// `12,345` for 12345.
fn grouped(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Builds `softmax_naive` both ways, runs each on the sample input on a simulated trn1
/// core, and prints its instruction count (all five streams), its descriptor count and its
/// simulated ticks; fails if the two outputs are not bit-identical or a run has hazards.
fn reroll() -> Result<(), Box<dyn Error>> {
    let input = encode_f32(DType::F32, &sample_input(N, D));
    let mut outputs = Vec::new();
    println!("softmax_naive, x fp32 [{N}, {D}]");
    println!(
        "  {:<18} {:>12} {:>12} {:>8}",
        "built with", "instructions", "descriptors", "ticks"
    );
    for (how, program) in [
        ("build_unrolled()", softmax_naive_unrolled(N, D)?),
        ("build()", softmax_naive(N, D)?),
    ] {
        let instrs: usize = program.streams.iter().map(Vec::len).sum();
        let descs = program.descriptors.len();
        let dev = Device::new(Instance::Trn1);
        let loaded = dev.load(0, program)?;
        let (out, report) = dev.run(&loaded, &[("x", &input)], &ExecOptions::default())?;
        if !report.hazards.is_empty() {
            return Err(format!("{how}: {} hazards", report.hazards.len()).into());
        }
        println!(
            "  {how:<18} {:>12} {:>12} {:>8}",
            grouped(instrs as u64),
            grouped(descs as u64),
            grouped(report.ticks)
        );
        outputs.push(out);
    }
    if outputs[0] != outputs[1] {
        return Err("build() and build_unrolled() gave different outputs".into());
    }
    println!("outputs bit-identical");
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: softmax build DIR | softmax check X.npy Y.npy | softmax reroll";
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["build", dir] => build(Path::new(dir)),
        ["reroll"] => reroll(),
        ["check", x, y] => {
            if check(Path::new(x), Path::new(y))? {
                Ok(())
            } else {
                std::process::exit(1)
            }
        }
        _ => Err(usage.into()),
    }
}

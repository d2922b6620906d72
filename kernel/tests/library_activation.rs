//! `library::activation`: `activation` / `activation_with` (every `ActFn`, any rank and size,
//! scale and bias, dtype changes) and `copy` (with and without a cast) against plain
//! references; NaN and ±∞ in the data; contiguous and strided views; exact error messages;
//! every program run hazard-free (`common::run` asserts it).
//!
//! Bounds. The routine is the ISA's `activation` applied once per element, so the reference
//! is the documented rule: `t = x·scale + bias` in fp32 (two roundings), then the function.
//! The functions the ISA documents as correctly rounded (identity, relu, sqrt, reciprocal,
//! square, abs) are compared bit for bit against `t`'s correctly rounded result. The others
//! are compared within 1 ULP of fp32 against binary64 references, for the reason
//! `ops_activation.rs` states: the simulator evaluates them in binary64 (`+ − × /` and
//! `sqrt` only, relative error below about 2^−45) and rounds once, and the references here
//! are binary64 (Rust's libm, a series / continued fraction for erf), so both round to the
//! same fp32 value except within about 2^−45 of a rounding boundary, where they may be the
//! two neighbours — 1 ULP apart, never more. A bf16 or fp16 output rounds that fp32 value
//! once more: 1 ULP of the output type. int32 outputs of the exact functions are bit-exact. Copies do no arithmetic:
//! bit-exact always (NaN payloads included without a cast; casts as documented).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod refs;

use common::{output, run};
use nrt_kernel::library::activation::{self, ActOpts, FREE};
use nrt_kernel::{ActFn, DType, EngineId, Kernel, Program, View};
use nrt_sim::engine::Instr;
use refs::{
    QNAN, SPECIALS, act_arg, act_exact, act_ref, bf16, canon, cast, dec, enc, f16, grid, i32s,
    to_i32, to_int, ulps, ulps_bf16,
};

/// `n` inputs over `f`'s interesting range, every special value (±0, ±∞, NaN, extremes,
/// subnormals) at spread positions.
fn inputs(f: ActFn, n: usize, seed: u64) -> Vec<f32> {
    let (lo, hi) = match f {
        ActFn::Log | ActFn::Sqrt | ActFn::Rsqrt => (0.0, 50.0),
        ActFn::Exp => (-100.0, 90.0),
        _ => (-30.0, 30.0),
    };
    let mut v = grid(n, lo, hi, seed + u64::from(f.code()));
    for (i, s) in SPECIALS.iter().enumerate() {
        let at = (i * 7919 + 3) % n;
        v[at] = *s;
    }
    v
}

/// The bytes of `v` in `dt` (int32: each value rounded as the reference's `to_int`).
fn bytes(dt: DType, v: &[f32]) -> Vec<u8> {
    if dt == DType::I32 {
        i32s(&v.iter().map(|&x| to_int(x)).collect::<Vec<_>>())
    } else {
        enc(dt, v)
    }
}

/// The values of `b` in `dt`, as fp32 (int32 exactly as integers, for comparisons).
fn values(dt: DType, b: &[u8]) -> Vec<f32> {
    if dt == DType::I32 {
        to_i32(b).into_iter().map(|v| v as f32).collect()
    } else {
        dec(dt, b)
    }
}

/// The value `x` holds once stored in `dt` and read back as fp32 (what the engine reads).
fn stored(dt: DType, x: f32) -> f32 {
    match dt {
        DType::I32 => to_int(x) as f32,
        _ => cast(dt, x),
    }
}

/// ULPs between two fp16 values held as fp32 (0 for two NaNs; huge for a NaN and a number).
fn ulps_f16(a: f32, b: f32) -> u64 {
    let ord = |v: f32| {
        let e = enc(DType::F16, &[v]);
        let bits = i64::from(u16::from_le_bytes([e[0], e[1]]));
        if bits & 0x8000 != 0 {
            -(bits & 0x7FFF)
        } else {
            bits
        }
    };
    match (a.is_nan(), b.is_nan()) {
        (true, true) => 0,
        (false, false) => (ord(a) - ord(b)).unsigned_abs(),
        _ => u64::MAX,
    }
}

/// Checks `got` (of dtype `out`) against the reference of `f(x·scale + bias)`.
fn check_act(f: ActFn, opts: &ActOpts, x: &[f32], out: DType, got: &[f32], what: &str) {
    assert_eq!(got.len(), x.len(), "{what}");
    for (i, (&xv, &g)) in x.iter().zip(got).enumerate() {
        let t = act_arg(xv, opts.scale, opts.bias);
        let exact32 = canon(act_ref(f, t) as f32);
        let want = stored(out, exact32);
        let ok = match out {
            _ if act_exact(f) => g.to_bits() == want.to_bits(),
            DType::Bf16 => ulps_bf16(g, want) <= 1,
            DType::F16 => ulps_f16(g, want) <= 1,
            _ => ulps(g, want) <= 1,
        };
        // NaN results are the canonical NaN (int32 outputs: 0).
        let nan_ok = !want.is_nan() || out != DType::F32 || g.to_bits() == QNAN;
        assert!(
            ok && nan_ok,
            "{what}: {} #{i}: f({xv:e}·{} + {}) = f({t:e}) = {g:e} ({:#x}), want {want:e} ({:#x})",
            f.name(),
            opts.scale,
            opts.bias,
            g.to_bits(),
            want.to_bits()
        );
    }
}

/// Builds and runs `activation` over `shape` with inputs `x`; returns the outputs (as fp32)
/// and how many activation instructions ScalarE runs.
fn run_act(
    shape: &[usize],
    xd: DType,
    od: DType,
    f: ActFn,
    opts: &ActOpts,
    x: &[f32],
) -> (Vec<f32>, usize) {
    let p = activation::build(shape, xd, od, f, opts).unwrap();
    let acts = executed(&p, EngineId::Scalar, |i| {
        matches!(i, Instr::Activation { .. } | Instr::Activate { .. })
    });
    let (outs, _) = run(&p, &[("x", bytes(xd, x))]);
    (values(od, output(&outs, "out")), acts)
}

/// How many times instructions of `engine`'s stream for which `f` holds run: each counted
/// once per iteration of the loops around it (the kernel rerolls repeated blocks into
/// loops).
fn executed(p: &Program, engine: EngineId, f: impl Fn(&Instr) -> bool) -> usize {
    let mut times = vec![1usize];
    let mut n = 0;
    for i in p.stream(engine) {
        match i {
            Instr::LoopBegin { count, .. } => {
                let outer = *times.last().unwrap();
                times.push(outer * *count as usize);
            }
            Instr::LoopEnd { .. } => {
                times.pop();
            }
            _ if f(i) => n += *times.last().unwrap(),
            _ => {}
        }
    }
    n
}

/// The documented flat layout's partition count for `n` elements: ⌈√(n/8)⌉ up to 128, or
/// the divisor of `n` nearest to it within a factor of 2 (the smaller on a tie).
fn layout_rows(n: usize) -> usize {
    let mut best = 1;
    while best < 128 && best * best * 8 < n {
        best += 1;
    }
    if best == 128 || n % best == 0 {
        return best;
    }
    let mut pick = best;
    let mut dist = usize::MAX;
    for p in best.div_ceil(2)..=(2 * best).min(128) {
        let d = p.abs_diff(best);
        if n % p == 0 && d < dist {
            (pick, dist) = (p, d);
        }
    }
    pick
}

/// Blocks of the flat layout of `n` contiguous elements: `[rows, ⌊n/rows⌋]` in column
/// blocks of at most `FREE`, and the remainder.
fn flat_blocks(n: usize) -> usize {
    let rows = layout_rows(n);
    (n / rows).div_ceil(FREE) + usize::from(n % rows != 0)
}

#[test]
fn every_function_over_odd_shapes() {
    let shapes: [&[usize]; 4] = [&[1, 7], &[4099], &[2, 3, 5, 67], &[129, 2049]];
    for f in ActFn::ALL {
        for shape in shapes {
            let n: usize = shape.iter().product();
            let x = inputs(f, n, n as u64);
            let opts = ActOpts::default();
            let (got, acts) = run_act(shape, DType::F32, DType::F32, f, &opts, &x);
            check_act(f, &opts, &x, DType::F32, &got, &format!("{shape:?}"));
            assert_eq!(acts, flat_blocks(n), "{shape:?}: one activation per block");
        }
    }
    // The layouts of these shapes: [1, 7] on 1 partition; 4099 (prime) on 23, a remainder
    // of 5; 2010 on 15 (√(2010/8) → 16, 15 divides); 264,321 on 128 (2 column blocks and a
    // remainder of 1).
    for (n, rows, blocks) in [(7, 1, 1), (4099, 23, 2), (2010, 15, 1), (264_321, 128, 3)] {
        assert_eq!((layout_rows(n), flat_blocks(n)), (rows, blocks), "{n}");
    }
}

#[test]
fn large_rank3_tensor_in_partial_blocks() {
    // 975,000 elements: four column blocks of [128, ≤ 2048] and a remainder of 24.
    let shape = [3, 130, 2500];
    let n: usize = shape.iter().product();
    for f in [ActFn::Identity, ActFn::Gelu, ActFn::Sqrt, ActFn::Erf] {
        let x = inputs(f, n, 5);
        let opts = ActOpts::default();
        let (got, acts) = run_act(&shape, DType::F32, DType::F32, f, &opts, &x);
        check_act(f, &opts, &x, DType::F32, &got, "[3, 130, 2500]");
        assert_eq!(acts, 5);
    }
}

#[test]
fn scale_and_bias() {
    let opts = ActOpts {
        scale: -0.75,
        bias: 1.5,
    };
    for f in ActFn::ALL {
        let x = inputs(f, 3 * 131, 11);
        let (got, _) = run_act(&[3, 131], DType::F32, DType::F32, f, &opts, &x);
        check_act(f, &opts, &x, DType::F32, &got, "scale -0.75, bias 1.5");
    }
    // A −0 bias keeps a −0 argument −0 (the default +0 bias makes it +0).
    let minus = ActOpts {
        scale: 1.0,
        bias: -0.0,
    };
    let x = [-0.0, 0.0, -1.0, f32::NEG_INFINITY];
    let (got, _) = run_act(&[4], DType::F32, DType::F32, ActFn::Identity, &minus, &x);
    assert_eq!(got[0].to_bits(), (-0.0f32).to_bits());
    let (got, _) = run_act(
        &[4],
        DType::F32,
        DType::F32,
        ActFn::Identity,
        &ActOpts::default(),
        &x,
    );
    assert_eq!(got[0].to_bits(), 0.0f32.to_bits());
}

#[test]
fn other_dtypes() {
    use DType::*;
    let opts = ActOpts::default();
    // fp32 → bf16 / fp16 for every function; bf16 → fp32.
    for f in ActFn::ALL {
        let x = inputs(f, 700, 3);
        for od in [Bf16, F16] {
            let (got, _) = run_act(&[700], F32, od, f, &opts, &x);
            check_act(f, &opts, &x, od, &got, &format!("fp32 -> {od}"));
        }
        let xb: Vec<f32> = x.iter().map(|&v| bf16(v)).collect();
        let (got, _) = run_act(&[7, 100], Bf16, F32, f, &opts, &xb);
        check_act(f, &opts, &xb, F32, &got, "bf16 -> fp32");
    }
    // int32 operands: format 1.0's functions take the per-partition scale (the `Activate`
    // form), the others an immediate; scaled and biased too.
    let ints: Vec<f32> = (0..300)
        .map(|i| ((i * 7919) % 2001) as f32 - 1000.0)
        .collect();
    let scaled = ActOpts {
        scale: 0.5,
        bias: -3.0,
    };
    for o in [opts, scaled] {
        for f in [
            ActFn::Identity,
            ActFn::Relu,
            ActFn::Abs,
            ActFn::Square,
            ActFn::Tanh,
        ] {
            for (xd, od) in [(I32, I32), (I32, F32), (F32, I32)] {
                let (got, _) = run_act(&[3, 100], xd, od, f, &o, &ints);
                let what = format!("{xd} -> {od}, scale {}", o.scale);
                if act_exact(f) {
                    check_act(f, &o, &ints, od, &got, &what);
                } else {
                    // tanh is not correctly rounded: within 1 ULP as fp32 (the module's
                    // reason); into int32 two such neighbours round to different integers
                    // only across ±0.5, and then to adjacent ones, so within 1.
                    for (i, (&xv, &g)) in ints.iter().zip(&got).enumerate() {
                        let want =
                            stored(od, canon(act_ref(f, act_arg(xv, o.scale, o.bias)) as f32));
                        let d = if od == I32 {
                            (g - want).abs() as u64
                        } else {
                            ulps(g, want)
                        };
                        assert!(d <= 1, "{what}: {} #{i}: {g} vs {want}", f.name());
                    }
                }
            }
        }
    }
}

#[test]
fn strided_and_permuted_views() {
    let f = ActFn::Silu;
    let opts = ActOpts::default();
    // Columns 7..290 of a [6, 300] tensor, into a [6, 283] output.
    let mut k = Kernel::new("strided");
    let x = k.input("x", DType::F32, &[6, 300]).unwrap();
    let o = k.output("out", DType::F32, &[6, 283]).unwrap();
    let xs = x.slice(1, 7..290).unwrap();
    activation::activation(&mut k, &o, &xs, f).unwrap();
    let xv = inputs(f, 1800, 9);
    let (outs, _) = run(&k.build().unwrap(), &[("x", bytes(DType::F32, &xv))]);
    let got = values(DType::F32, output(&outs, "out"));
    let sel: Vec<f32> = (0..6)
        .flat_map(|r| xv[r * 300 + 7..r * 300 + 290].to_vec())
        .collect();
    check_act(f, &opts, &sel, DType::F32, &got, "columns 7..290");
    // Every third element of a vector (rank 1, strided), and a row broadcast over 130 rows
    // (stride-0 rows: each block loads the same row into every partition).
    let mut k = Kernel::new("rank1_and_broadcast");
    let x = k.input("x", DType::F32, &[1000]).unwrap();
    let r = k.input("r", DType::F32, &[1, 300]).unwrap();
    let o = k.output("out", DType::F32, &[334]).unwrap();
    let ob = k.output("rows", DType::F32, &[130, 300]).unwrap();
    activation::activation(&mut k, &o, &x.slice_step(0, .., 3).unwrap(), f).unwrap();
    activation::activation(&mut k, &ob, &r.broadcast(0, 130).unwrap(), f).unwrap();
    let xv = inputs(f, 1000, 21);
    let rv = inputs(f, 300, 23);
    let ins = [("x", bytes(DType::F32, &xv)), ("r", bytes(DType::F32, &rv))];
    let (outs, _) = run(&k.build().unwrap(), &ins);
    let third: Vec<f32> = xv.iter().copied().step_by(3).collect();
    let got = values(DType::F32, output(&outs, "out"));
    check_act(f, &opts, &third, DType::F32, &got, "every third element");
    let rows: Vec<f32> = (0..130).flat_map(|_| rv.iter().copied()).collect();
    let got = values(DType::F32, output(&outs, "rows"));
    check_act(f, &opts, &rows, DType::F32, &got, "broadcast rows");
    // A permuted [4, 5, 130] → [130, 4, 5] view, into its own output; and a copy of it.
    let mut k = Kernel::new("permuted");
    let x = k.input("x", DType::F32, &[4, 5, 130]).unwrap();
    let o = k.output("out", DType::F32, &[130, 4, 5]).unwrap();
    let c = k.output("copy", DType::Bf16, &[130, 4, 5]).unwrap();
    let xp = x.permute(&[2, 0, 1]).unwrap();
    activation::activation(&mut k, &o, &xp, f).unwrap();
    activation::copy(&mut k, &c, &xp).unwrap();
    let xv = inputs(f, 2600, 13);
    let (outs, _) = run(&k.build().unwrap(), &[("x", bytes(DType::F32, &xv))]);
    let perm: Vec<f32> = (0..130)
        .flat_map(|i| (0..4).flat_map(move |a| (0..5).map(move |b| (a, b, i))))
        .map(|(a, b, i)| xv[(a * 5 + b) * 130 + i])
        .collect();
    let got = values(DType::F32, output(&outs, "out"));
    check_act(f, &opts, &perm, DType::F32, &got, "permuted");
    let copied = values(DType::Bf16, output(&outs, "copy"));
    for (i, (&g, &w)) in copied.iter().zip(&perm).enumerate() {
        assert_eq!(g.to_bits(), bf16(w).to_bits(), "permuted copy #{i}");
    }
}

/// The bytes of `values` (raw fp32 bit patterns) in `dt`, as the reference converts them.
fn cast_bits(src: DType, dst: DType, b: &[u8]) -> Vec<u8> {
    if src == dst {
        return b.to_vec();
    }
    let as_f32: Vec<f32> = if src == DType::I32 {
        // int32 → fp32 rounds to nearest even (Rust's `as` does).
        to_i32(b).into_iter().map(|v| v as f32).collect()
    } else {
        dec(src, b)
    };
    match dst {
        DType::I32 => i32s(&as_f32.iter().map(|&v| to_int(v)).collect::<Vec<_>>()),
        DType::F32 => as_f32.iter().flat_map(|v| v.to_le_bytes()).collect(),
        DType::Bf16 => as_f32
            .iter()
            .flat_map(|&v| ((bf16(v).to_bits() >> 16) as u16).to_le_bytes())
            .collect(),
        DType::F16 => enc(
            DType::F16,
            &as_f32.iter().map(|&v| f16(v)).collect::<Vec<_>>(),
        ),
    }
}

/// Source bytes of `n` elements of `dt`: values with the specials and, for fp32, NaNs with
/// payloads (a signalling one too) that a plain copy must keep.
fn copy_source(dt: DType, n: usize) -> Vec<u8> {
    let mut v = grid(n, -7.0e4, 7.0e4, n as u64);
    for (i, s) in SPECIALS.iter().enumerate() {
        v[(i * 997 + 1) % n] = *s;
    }
    match dt {
        DType::I32 => {
            let mut w: Vec<i32> = v.iter().map(|&x| to_int(x * 3.0e4)).collect();
            w[0] = i32::MAX;
            w[n - 1] = (1 << 24) + (1 << 16) + 1;
            i32s(&w)
        }
        DType::F32 => {
            let mut b = enc(dt, &v);
            for (at, bits) in [(2usize, 0x7FA0_1234u32), (n - 2, 0xFFC0_0001)] {
                b[at * 4..at * 4 + 4].copy_from_slice(&bits.to_le_bytes());
            }
            b
        }
        _ => enc(dt, &v),
    }
}

#[test]
fn copies_bit_exact_with_and_without_a_cast() {
    use DType::*;
    let shapes: [&[usize]; 4] = [&[1, 7], &[4099], &[2, 3, 5, 67], &[3, 130, 2500]];
    for shape in shapes {
        let n: usize = shape.iter().product();
        let pairs: &[(DType, DType)] = if n > 100_000 {
            &[(F32, F32), (F32, Bf16)]
        } else {
            &[
                (F32, F32),
                (Bf16, Bf16),
                (I32, I32),
                (F32, Bf16),
                (Bf16, F32),
                (F32, F16),
                (F16, F32),
                (F32, I32),
                (I32, F32),
                (I32, Bf16),
            ]
        };
        for &(sd, od) in pairs {
            let p = activation::build_copy(shape, sd, od).unwrap();
            assert_eq!(
                executed(&p, EngineId::Scalar, |i| matches!(
                    i,
                    Instr::Activate { .. }
                )),
                0
            );
            let src = copy_source(sd, n);
            let (outs, _) = run(&p, &[("src", src.clone())]);
            let got = output(&outs, "out");
            let want = cast_bits(sd, od, &src);
            assert_eq!(got.len(), want.len());
            let es = od.size();
            for (i, (g, w)) in got.chunks(es).zip(want.chunks(es)).enumerate() {
                assert_eq!(g, w, "{shape:?} {sd} -> {od} #{i}");
            }
        }
    }
}

#[test]
fn misuse_is_refused_with_exact_messages() {
    let mut k = Kernel::new("bad");
    let x = k.input("x", DType::F32, &[4, 3]).unwrap();
    let flat = k.input("flat", DType::F32, &[12]).unwrap();
    let o = k.output("o", DType::F32, &[3, 4]).unwrap();
    let o1 = k.output("o1", DType::F32, &[12]).unwrap();
    let t = k.sbuf_tile("t", DType::F32, &[4, 3]).unwrap();
    let msg = |r: Result<(), nrt_core::Error>| r.unwrap_err().message().to_owned();
    assert_eq!(
        msg(activation::activation(&mut k, &o, &x, ActFn::Exp)),
        "activation: x HBM tensor 'x' [4, 3] fp32 and out HBM tensor 'o' [3, 4] fp32 differ \
         in shape"
    );
    assert_eq!(
        msg(activation::activation(&mut k, &o1, &x, ActFn::Exp)),
        "activation: x HBM tensor 'x' [4, 3] fp32 and out HBM tensor 'o1' [12] fp32 differ \
         in shape (rank 2 vs 1)"
    );
    assert_eq!(
        msg(activation::copy(&mut k, &o, &flat)),
        "copy: src HBM tensor 'flat' [12] fp32 and out HBM tensor 'o' [3, 4] fp32 differ in \
         shape (rank 1 vs 2)"
    );
    assert_eq!(
        msg(activation::copy(&mut k, &o, &x)),
        "copy: src HBM tensor 'x' [4, 3] fp32 and out HBM tensor 'o' [3, 4] fp32 differ in \
         shape"
    );
    let tv: &View = t.view();
    assert_eq!(
        msg(activation::activation(&mut k, &o, tv, ActFn::Relu)),
        "activation: x must be a view of an HBM tensor, not SBUF tile 't'"
    );
    assert_eq!(
        msg(activation::copy(&mut k, &x, &x)),
        "copy: out HBM tensor 'x' must be an output or scratch tensor"
    );
    let wide = k.output("wide", DType::F32, &[1, 3]).unwrap();
    let bcast = wide.broadcast(0, 4).unwrap();
    assert_eq!(
        msg(activation::activation(&mut k, &bcast, &x, ActFn::Relu)),
        "activation: out HBM tensor 'wide' [4, 3] fp32 addresses some elements more than once \
         (a broadcast view)"
    );
    // Nothing was recorded by the refused calls: the kernel builds empty.
    let p = k.build().unwrap();
    assert_eq!(
        executed(&p, EngineId::Scalar, |i| matches!(
            i,
            Instr::Activation { .. }
        )),
        0
    );
}

#[test]
fn chained_through_scratch_and_in_place() {
    // out = exp(relu(x)·0.25 − 1) as bf16: a copy into a scratch tensor, an in-place
    // activation there, an activation with scale and bias into the output.
    let mut k = Kernel::new("chain");
    let x = k.input("x", DType::F32, &[5, 300]).unwrap();
    let s = k.scratch("s", DType::F32, &[5, 300]).unwrap();
    let o = k.output("out", DType::Bf16, &[5, 300]).unwrap();
    activation::copy(&mut k, &s, &x).unwrap();
    activation::activation(&mut k, &s, &s, ActFn::Relu).unwrap();
    let opts = ActOpts {
        scale: 0.25,
        bias: -1.0,
    };
    activation::activation_with(&mut k, &o, &s, ActFn::Exp, &opts).unwrap();
    let xv = inputs(ActFn::Relu, 1500, 17);
    let (outs, _) = run(&k.build().unwrap(), &[("x", bytes(DType::F32, &xv))]);
    let got = values(DType::Bf16, output(&outs, "out"));
    let relu: Vec<f32> = xv
        .iter()
        .map(|&v| canon(act_ref(ActFn::Relu, act_arg(v, 1.0, 0.0)) as f32))
        .collect();
    check_act(ActFn::Exp, &opts, &relu, DType::Bf16, &got, "chain");
}

#[test]
fn empty_tensors_record_nothing() {
    let act = activation::build(
        &[0, 3],
        DType::F32,
        DType::F32,
        ActFn::Exp,
        &ActOpts::default(),
    );
    let copy = activation::build_copy(&[4, 0], DType::F32, DType::Bf16);
    for p in [act.unwrap(), copy.unwrap()] {
        for e in EngineId::ALL {
            assert!(
                p.stream(e).iter().all(|i| matches!(i, Instr::Halt)),
                "{}: {e:?}",
                p.name
            );
        }
        let input = if p.name == "copy" { "src" } else { "x" };
        let (outs, _) = run(&p, &[(input, Vec::new())]);
        assert!(output(&outs, "out").is_empty());
    }
}

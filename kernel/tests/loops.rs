//! `Kernel::for_range`: explicit loops recorded once and emitted as format-1.1 loops. Loop
//! kernels give bit-identical outputs to the same kernel written with Rust loops
//! (`build_unrolled`), with zero hazards; what a loop body cannot express is refused with an
//! exact message; the library matmul (which loops) matches an independent reference.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Rng, run};
use nrt_kernel::{ActBias, ActFunc, AluOp, DType, Kernel, Program, TensorKind};
use nrt_sim::engine::{Instr, encode_f32};

/// Deterministic inputs for every input tensor of `p` (values exact in every float type).
fn inputs(p: &Program, seed: u64) -> Vec<(String, Vec<u8>)> {
    let mut rng = Rng(seed);
    p.tensors
        .iter()
        .filter(|t| t.kind == TensorKind::Input)
        .map(|t| {
            let n = t.elems().unwrap() as usize;
            let v: Vec<f32> = (0..n).map(|_| rng.small(8) / 8.0).collect();
            (t.name.clone(), encode_f32(t.dtype, &v))
        })
        .collect()
}

/// Runs both programs on the same inputs; asserts identical outputs and no hazards
/// (`run` checks hazards); returns (looped ticks, unrolled ticks).
fn same_outputs(looped: &Program, unrolled: &Program) -> (u64, u64) {
    let ins = inputs(looped, 0x1234_5678);
    let refs: Vec<(&str, Vec<u8>)> = ins.iter().map(|(n, d)| (n.as_str(), d.clone())).collect();
    let (a, ra) = run(looped, &refs);
    let (b, rb) = run(unrolled, &refs);
    assert_eq!(a, b, "{}: looped and unrolled outputs differ", looped.name);
    (ra.ticks, rb.ticks)
}

fn loops_in(p: &Program) -> usize {
    p.streams
        .iter()
        .flatten()
        .filter(|i| matches!(i, Instr::LoopBegin { .. }))
        .count()
}

/// `out = relu(a + b) * 0.5` over `rows` rows of 64, 128 rows per iteration; `looped`
/// chooses `for_range` or a Rust loop.
fn add_relu(rows: usize, looped: bool) -> Kernel {
    let mut k = Kernel::new("add_relu");
    let a = k.input("a", DType::F32, &[rows, 64]).unwrap();
    let b = k.input("b", DType::F32, &[rows, 64]).unwrap();
    let out = k.output("out", DType::F32, &[rows, 64]).unwrap();
    let body = |k: &mut Kernel, t: usize| {
        let r = t * 128..(t + 1) * 128;
        k.scope(|k| {
            let ta = k.sbuf_tile("ta", DType::F32, &[128, 64])?;
            let tb = k.sbuf_tile("tb", DType::F32, &[128, 64])?;
            k.dma_copy(&ta, &a.slice(0, r.clone())?)?;
            k.dma_copy(&tb, &b.slice(0, r.clone())?)?;
            k.tensor_tensor(&ta, &ta, &tb, AluOp::Add)?;
            k.activation(&tb, ActFunc::Relu, &ta, ActBias::None, 1.0)?;
            k.tensor_scalar(&ta, &tb, AluOp::Mul, 0.5)?;
            k.dma_copy(&out.slice(0, r.clone())?, &ta)
        })
    };
    if looped {
        k.for_range(rows / 128, body).unwrap();
    } else {
        for t in 0..rows / 128 {
            body(&mut k, t).unwrap();
        }
    }
    k
}

#[test]
fn elementwise_loop_matches_rust_loop() {
    for tiles in [1, 3, 4, 5, 9] {
        let looped = add_relu(tiles * 128, true).build_unrolled().unwrap();
        let unrolled = add_relu(tiles * 128, false).build_unrolled().unwrap();
        let (tl, tu) = same_outputs(&looped, &unrolled);
        println!(
            "add_relu {tiles} tiles: looped {} instrs {} descs {tl} ticks, unrolled {} / {} / {tu}",
            looped.instruction_count(),
            looped.descriptors.len(),
            unrolled.instruction_count(),
            unrolled.descriptors.len()
        );
        assert_eq!(loops_in(&looped) > 0, tiles >= 4);
    }
}

/// The library matmul at 8192³ bf16 builds through the kernel API in well under a second
/// (release build) and fits the program limits.
#[test]
fn library_matmul_8192_cubed_builds() {
    use nrt_kernel::library::matmul::{self, MatmulOpts};
    let t = std::time::Instant::now();
    let p = matmul::build(
        8192,
        8192,
        8192,
        DType::Bf16,
        DType::F32,
        &MatmulOpts::default(),
    )
    .unwrap();
    let secs = t.elapsed().as_secs_f64();
    println!(
        "library matmul 8192^3 bf16: {secs:.3} s, {} instructions, {} descriptors, {} terms, {} loops",
        p.instruction_count(),
        p.descriptors.len(),
        p.terms.len(),
        loops_in(&p)
    );
    p.validate().unwrap();
    assert!(p.instruction_count() < 20_000);
    assert!(p.descriptors.len() < 100_000);
    if !cfg!(debug_assertions) {
        assert!(secs < 1.0, "build took {secs:.3} s");
    }
}

/// The 8192³ bf16 library matmul runs (release build, a few minutes of host time):
/// `cargo test --release -p nrt-kernel --test suite -- loops:: --ignored --nocapture`. Inputs are
/// multiples of 1/8 in [-1, 1]: every product and partial sum is a multiple of 1/64 below
/// 2^13, exact in fp32, so the output equals an f64 reference exactly whatever the order of
/// the additions. Sampled 128 × 128 output tiles are checked; the simulated time is printed.
#[test]
#[ignore]
fn library_matmul_8192_cubed_runs() {
    use nrt_kernel::library::matmul::{self, MatmulOpts};
    use nrt_sim::Instance;
    use nrt_sim::engine::{Device, ExecOptions, TICKS_PER_SECOND, decode_f32};
    let n = 8192;
    let p = matmul::build(n, n, n, DType::Bf16, DType::F32, &MatmulOpts::default()).unwrap();
    let mut rng = Rng(0x8192);
    let av: Vec<f32> = (0..n * n).map(|_| rng.small(8) / 8.0).collect();
    let bv: Vec<f32> = (0..n * n).map(|_| rng.small(8) / 8.0).collect();
    let dev = Device::new(Instance::Trn1);
    let lp = dev.load(0, p).unwrap();
    dev.write_tensor(&lp, "a", &encode_f32(DType::Bf16, &av))
        .unwrap();
    dev.write_tensor(&lp, "b", &encode_f32(DType::Bf16, &bv))
        .unwrap();
    let t = std::time::Instant::now();
    let report = dev.execute(&lp, &ExecOptions::default()).unwrap();
    let host = t.elapsed().as_secs_f64();
    assert!(report.hazards.is_empty(), "{:?}", report.hazards.first());
    report.result().unwrap();
    let out = decode_f32(DType::F32, &dev.read_tensor(&lp, "out").unwrap());
    let tiles = [(0, 0), (63, 63), (17, 42), (40, 5), (63, 0), (0, 63)];
    for (ti, tj) in tiles {
        for i in ti * 128..(ti + 1) * 128 {
            for j in tj * 128..(tj + 1) * 128 {
                let want: f64 = (0..n)
                    .map(|l| f64::from(av[i * n + l]) * f64::from(bv[l * n + j]))
                    .sum();
                assert_eq!(f64::from(out[i * n + j]), want, "out[{i}, {j}]");
            }
        }
    }
    let ms = report.ticks as f64 / TICKS_PER_SECOND as f64 * 1e3;
    let tflops = 2.0 * (n as f64).powi(3) / (ms / 1e3) / 1e12;
    println!(
        "library matmul 8192^3 bf16: {} ticks = {ms:.2} ms simulated ({tflops:.1} TFLOP/s), \
         {host:.0} s of host time; {} sampled tiles exact",
        report.ticks,
        tiles.len()
    );
}

/// `out[r, c] = (x[r, c] · 2 + running sum of x over the row blocks so far)` over a
/// `[128 · rb, 32 · cb]` tensor, the row blocks in an outer loop and the column blocks in an
/// inner one (`depth` 1: the outer loop only; 2: both; 3: and a third loop inside): a loop-carried dependence (the running sum tile, written every
/// iteration) and per-iteration tiles. With `depth` 3 the inner body is a third loop over
/// four quarters of the 32 columns.
fn nested(rb: usize, cb: usize, depth: usize, looped: bool) -> Kernel {
    let mut k = Kernel::new("nested");
    let (rows, cols) = (128 * rb, 32 * cb);
    let x = k.input("x", DType::F32, &[rows, cols]).unwrap();
    let out = k.output("out", DType::F32, &[rows, cols]).unwrap();
    let sum = k.sbuf_tile("sum", DType::F32, &[128, cols]).unwrap();
    k.memset(&sum, 0.0).unwrap();
    let rep = |k: &mut Kernel,
               n: usize,
               on: bool,
               f: &mut dyn FnMut(&mut Kernel, usize) -> Result<(), nrt_core::Error>|
     -> Result<(), nrt_core::Error> {
        if on && looped {
            k.for_range(n, f)
        } else {
            (0..n).try_for_each(|i| f(k, i))
        }
    };
    let quarter = |k: &mut Kernel, r: usize, c: usize, h: usize| {
        k.scope(|k| {
            let rs = r * 128..(r + 1) * 128;
            let cs = c * 32 + h * 8..c * 32 + (h + 1) * 8;
            let t = k.sbuf_tile("t", DType::F32, &[128, 8])?;
            k.dma_copy(&t, &x.slice(0, rs.clone())?.slice(1, cs.clone())?)?;
            let s = sum.slice(1, cs.clone())?;
            k.tensor_tensor(&s, &s, &t, AluOp::Add)?;
            k.scalar_tensor_tensor(&t, &t, AluOp::Mul, 2.0, AluOp::Add, &s)?;
            k.dma_copy(&out.slice(0, rs)?.slice(1, cs)?, &t)
        })
    };
    rep(&mut k, rb, true, &mut |k, r| {
        rep(k, cb, depth >= 2, &mut |k, c| {
            rep(k, 4, depth >= 3, &mut |k, h| quarter(k, r, c, h))
        })
    })
    .unwrap();
    k
}

#[test]
fn nested_loops_match_rust_loops() {
    for (rb, cb, depth) in [(4, 1, 1), (5, 4, 2), (4, 6, 2), (6, 5, 3), (2, 4, 2)] {
        let looped = nested(rb, cb, depth, true).build_unrolled().unwrap();
        let unrolled = nested(rb, cb, depth, false).build_unrolled().unwrap();
        let (tl, tu) = same_outputs(&looped, &unrolled);
        println!(
            "nested {rb}x{cb} depth {depth}: looped {} instrs {} loops {tl} ticks, unrolled {} \
             instrs {tu} ticks",
            looped.instruction_count(),
            loops_in(&looped),
            unrolled.instruction_count(),
        );
    }
}

/// A kernel with `x` `[1024, 64]` and `out` of the same shape, for the refusals.
fn small() -> (Kernel, nrt_kernel::Tensor, nrt_kernel::Tensor) {
    let mut k = Kernel::new("refusals");
    let x = k.input("x", DType::F32, &[1024, 64]).unwrap();
    let out = k.output("out", DType::F32, &[1024, 64]).unwrap();
    (k, x, out)
}

/// The error of `body` looped 8 times, which must leave the kernel's program unchanged.
fn refused(
    body: impl Fn(&mut Kernel, &nrt_kernel::Tensor, usize) -> Result<(), nrt_core::Error>,
) -> String {
    let (mut k, x, out) = small();
    let t = k.sbuf_tile("t", DType::F32, &[128, 64]).unwrap();
    k.dma_copy(&t, &x.slice(0, 0..128).unwrap()).unwrap();
    let e = k.for_range(8, |k, i| body(k, &x, i)).unwrap_err();
    assert_eq!(e.status(), nrt_core::NrtStatus::Invalid);
    // Nothing was recorded: the kernel still builds to what it had before the loop.
    k.dma_copy(&out.slice(0, 0..128).unwrap(), &t).unwrap();
    let after = k.build_unrolled().unwrap();
    let (mut k2, x2, out2) = small();
    let t2 = k2.sbuf_tile("t", DType::F32, &[128, 64]).unwrap();
    k2.dma_copy(&t2, &x2.slice(0, 0..128).unwrap()).unwrap();
    k2.dma_copy(&out2.slice(0, 0..128).unwrap(), &t2).unwrap();
    assert_eq!(after, k2.build_unrolled().unwrap());
    e.message().to_owned()
}

#[test]
fn loop_bodies_that_cannot_be_loops_are_refused() {
    // A shape that depends on the index.
    let e = refused(|k, x, i| {
        k.scope(|k| {
            let t = k.sbuf_tile("u", DType::F32, &[128, 64])?;
            let w = 8 + i;
            k.dma_copy(&t.slice(1, 0..w)?, &x.slice(0, 0..128)?.slice(1, 0..w)?)
        })
    });
    assert_eq!(
        e,
        "for_range: dma_copy (operation 0 of the loop body): its DMA descriptors in iterations 1 \
         and 2 differ by more than one source and one destination offset (a shape that depends \
         on the loop index, or addresses that move unevenly)"
    );
    // A tile whose size depends on the index.
    let e = refused(|k, _, i| {
        k.scope(|k| {
            let t = k.sbuf_tile("u", DType::F32, &[128, 4 + i])?;
            k.memset(&t, 1.0)
        })
    });
    assert_eq!(
        e,
        "for_range: memset (operation 0 of the loop body) differs between iterations 1 and 2 in \
         more than its addresses (a shape, dtype, engine, flag, scalar or tile that depends on \
         the loop index)"
    );
    // An address that is not affine in the index.
    let e = refused(|k, x, i| {
        k.scope(|k| {
            let t = k.sbuf_tile("u", DType::F32, &[128, 64])?;
            let r = i * i;
            k.dma_copy(&t.slice(0, 0..1)?, &x.slice(0, r..r + 1)?)
        })
    });
    assert_eq!(
        e,
        "for_range: dma_copy: the DMA source offset (relative to iteration 1) is not affine in \
         the loop index (operation 0 of the loop body): it is 0, 768 and 12288 in iterations 1, \
         2 and 7"
    );
    // Operations that depend on the index.
    let e = refused(|k, _, i| {
        k.scope(|k| {
            let t = k.sbuf_tile("u", DType::F32, &[128, 64])?;
            if i % 2 == 0 {
                k.memset(&t, 0.0)?;
            }
            k.memset(&t, 1.0)
        })
    });
    assert_eq!(
        e,
        "for_range: the loop body records 1 operations in iteration 1 and 2 in iteration 2; \
         every iteration from 1 on must record the same operations"
    );
    // A tile left allocated: allocation would grow per iteration.
    let e = refused(|k, _, _| k.sbuf_tile("leak", DType::F32, &[128, 4]).map(|_| ()));
    assert_eq!(
        e,
        "for_range: the loop body allocates tile leak and leaves it allocated (its allocation \
         would grow with every iteration); allocate it before the loop, or inside a scope of the \
         body"
    );
    // More nesting than the format's four iteration registers.
    let e = refused(|k, _, _| {
        k.for_range(4, |k, _| {
            k.for_range(4, |k, _| {
                k.for_range(4, |k, _| k.for_range(4, |_, _| Ok(())))
            })
        })
    });
    assert_eq!(
        e,
        "for_range: loops nest at most 4 deep (the program format's iteration registers); this \
         loop would be number 5"
    );
    // An error of the body itself is returned as is.
    let e = refused(|k, x, _| {
        k.scope(|k| {
            let t = k.sbuf_tile("u", DType::F32, &[128, 64])?;
            k.dma_copy(&t, &x.slice(0, 0..64)?)
        })
    });
    assert!(e.starts_with("dma_copy: "), "{e}");
}

/// The library matmul's streamed schedule (written with loops) against an f64 reference, with
/// zero hazards: inputs are multiples of 1/8 in [-1, 1], so every product and partial sum is
/// exact in fp32 and the output equals the f64 sum exactly (fp32 output; the bf16 output is
/// the f64 sum rounded to bf16 once: exact sums round the same either way).
#[test]
fn library_matmul_with_loops_matches_reference() {
    use nrt_kernel::library::matmul::{self, MatmulOpts, Schedule};
    use nrt_sim::engine::{decode_f32, round_through};
    for (m, kd, n, out_dt) in [
        (300, 700, 260, DType::F32),
        (1024, 1024, 1024, DType::F32),
        (640, 1152, 2100, DType::Bf16),
    ] {
        let opts = MatmulOpts {
            schedule: Schedule::Streamed,
            ..MatmulOpts::default()
        };
        let p = matmul::build(m, kd, n, DType::Bf16, out_dt, &opts).unwrap();
        assert!(loops_in(&p) > 0, "{m}x{kd}x{n} has loops");
        let mut rng = Rng(0xabc ^ m as u64);
        let av: Vec<f32> = (0..m * kd).map(|_| rng.small(8) / 8.0).collect();
        let bv: Vec<f32> = (0..kd * n).map(|_| rng.small(8) / 8.0).collect();
        let ins = [
            ("a", encode_f32(DType::Bf16, &av)),
            ("b", encode_f32(DType::Bf16, &bv)),
        ];
        let (outs, report) = run(&p, &ins);
        let got = decode_f32(out_dt, &outs[0].1);
        for i in 0..m {
            for j in 0..n {
                let want: f64 = (0..kd)
                    .map(|l| f64::from(av[i * kd + l]) * f64::from(bv[l * n + j]))
                    .sum();
                let want = round_through(out_dt, want as f32);
                assert_eq!(got[i * n + j], want, "{m}x{kd}x{n}: out[{i}, {j}]");
            }
        }
        println!(
            "library matmul {m}x{kd}x{n} (streamed, looped): {} instructions, {} descriptors, \
             {} ticks",
            p.instruction_count(),
            p.descriptors.len(),
            report.ticks
        );
    }
}

/// A K loop accumulating into one PSUM tile (`accumulate: Some(i > 0)`: iteration 0
/// overwrites, so it is emitted apart), then an evacuation and a store after the loop,
/// `for_range` against a Rust loop: the same outputs bit for bit, zero hazards, and `build()`
/// (which rerolls what is not looped yet) agrees with `build_unrolled()`.
#[test]
fn accumulating_loop_matches_rust_loop() {
    let kernel = |kt: usize, looped: bool| {
        let mut k = Kernel::new("acc");
        let a = k.input("a", DType::Bf16, &[128 * kt, 128]).unwrap();
        let b = k.input("b", DType::Bf16, &[128 * kt, 256]).unwrap();
        let out = k.output("out", DType::F32, &[128, 256]).unwrap();
        let acc = k.psum_tile("acc", DType::F32, &[128, 256]).unwrap();
        let body = |k: &mut Kernel, i: usize| {
            k.scope(|k| {
                let at = k.sbuf_tile("at", DType::Bf16, &[128, 128])?;
                let bt = k.sbuf_tile("bt", DType::Bf16, &[128, 256])?;
                let rows = i * 128..(i + 1) * 128;
                k.dma_copy(&at, &a.slice(0, rows.clone())?)?;
                k.dma_copy(&bt, &b.slice(0, rows)?)?;
                k.emit(nrt_kernel::NcMatmul {
                    dst: &acc,
                    stationary: &at,
                    moving: &bt,
                    accumulate: Some(i > 0),
                })
            })
        };
        if looped {
            k.for_range(kt, body).unwrap();
        } else {
            (0..kt).try_for_each(|i| body(&mut k, i)).unwrap();
        }
        let o = k.sbuf_tile("o", DType::F32, &[128, 256]).unwrap();
        k.tensor_copy(&o, &acc).unwrap();
        k.dma_copy(&out, &o).unwrap();
        k
    };
    for kt in [4, 7] {
        let looped = kernel(kt, true).build_unrolled().unwrap();
        let unrolled = kernel(kt, false).build_unrolled().unwrap();
        assert!(loops_in(&looped) > 0);
        same_outputs(&looped, &unrolled);
        let rebuilt = kernel(kt, true).build().unwrap();
        same_outputs(&rebuilt, &unrolled);
    }
}

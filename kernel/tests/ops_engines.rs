//! Engines and special values for every operation: each operation runs on the engine NKI
//! assigns it (checked in the built program's streams), an engine override is honoured where
//! NKI has `engine=`, a disallowed engine (or one the format-1.1 ISA refuses for that
//! operation, operand or memory) fails with an exact `NRT_INVALID` message and records
//! nothing; and NaN / ±∞ propagate through the operations the other files do not already
//! cover with special values (`activation_reduce`, `bn_stats`/`bn_aggr`, `tensor_reduce`
//! mean, `tensor_scalar` on ScalarE, `scalar_tensor_tensor`, `reciprocal`), bit-exact.
//!
//! Special-value coverage elsewhere: `ops_data.rs` (DMA, copies, memset, transposes,
//! `tensor_tensor`, matmul ∞·0, selects), `ops_elementwise.rs` (`tensor_scalar` chains,
//! `scalar_tensor_tensor`, `reciprocal`, `power`), `ops_activation.rs` (every function at
//! its documented limits), `ops_reduce.rs` (`tensor_reduce`, `max8`, `nc_find_index8`,
//! `tensor_tensor_scan`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod refs;

use common::{output, run};
use nrt_core::NrtStatus;
use nrt_kernel::{
    ActBias, ActFn, AluOp, DType, DmaCopy, DmaTranspose, EngineId, Kernel, Memset, NcTranspose,
    TensorCopy, TensorScalar, TensorScalarChain, TensorTensor,
};
use nrt_sim::engine::Instr;
use refs::{QNAN, alu, canon, dec, f32s, max_num};

fn msg(r: Result<(), nrt_core::Error>) -> String {
    let Err(e) = r else {
        return "OK".to_owned();
    };
    assert_eq!(e.status(), NrtStatus::Invalid, "{e}");
    e.message().to_owned()
}

/// The engine whose stream holds instruction `name` (exactly one engine must).
fn engine_of(p: &nrt_kernel::Program, name: &str) -> Vec<EngineId> {
    EngineId::ALL
        .into_iter()
        .filter(|&e| common::count(p, e, |i| i.name() == name) > 0)
        .collect()
}

#[test]
fn every_operation_runs_on_its_nki_engine() {
    use EngineId::*;
    let (p, f) = (64, 32);
    let mut k = Kernel::new("engines");
    let x = k.input("x", DType::F32, &[p, f]).unwrap();
    let y = k.output("y", DType::F32, &[p, f]).unwrap();
    let t = |k: &mut Kernel, n: &str, dt: DType, s: &[usize]| k.sbuf_tile(n, dt, s).unwrap();
    let a = t(&mut k, "a", DType::F32, &[p, f]);
    let b = t(&mut k, "b", DType::F32, &[p, f]);
    let c = t(&mut k, "c", DType::F32, &[p, f]);
    let col = t(&mut k, "col", DType::F32, &[p, 1]);
    let col2 = t(&mut k, "col2", DType::F32, &[p, 1]);
    let st = t(&mut k, "st", DType::F32, &[p, 6]);
    let mv = t(&mut k, "mv", DType::F32, &[p, 2]);
    let m8 = t(&mut k, "m8", DType::F32, &[p, 8]);
    let i8 = t(&mut k, "i8", DType::I32, &[p, 8]);
    let sq = t(&mut k, "sq", DType::F32, &[32, 32]);
    let sqt = t(&mut k, "sqt", DType::F32, &[32, 32]);
    let ps = k.psum_tile("ps", DType::F32, &[f, p]).unwrap();
    let mm = k.psum_tile("mm", DType::F32, &[f, f]).unwrap();
    k.dma_copy(&a, &x).unwrap();
    k.dma_transpose(&sq, &x.slice(0, 0..32).unwrap()).unwrap();
    k.memset(&b, 1.0).unwrap();
    k.iota(&col, 0, 1, 0).unwrap();
    k.tensor_copy(&c, &a).unwrap();
    k.nc_matmul(&mm, &a, &b).unwrap();
    k.nc_transpose(&ps, &a).unwrap();
    k.nc_transpose(&sqt, &sq).unwrap();
    k.tensor_tensor(&c, &a, &b, AluOp::Add).unwrap();
    k.tensor_tensor(&c, &c, &b, AluOp::Power).unwrap();
    k.tensor_scalar(&c, &c, AluOp::Mul, 2.0).unwrap();
    k.scalar_tensor_tensor(&c, &a, AluOp::Mul, 2.0, AluOp::Add, &b)
        .unwrap();
    k.tensor_reduce(&col2, AluOp::Max, &c, &[1]).unwrap();
    k.activation(&b, ActFn::Exp, &a, ActBias::None, 1.0)
        .unwrap();
    k.activation_reduce(&b, ActFn::Exp, &a, AluOp::Add, &col2, ActBias::None, 1.0)
        .unwrap();
    k.reciprocal(&b, &a).unwrap();
    k.affine_select(&c, &[(-1, f)], 1, &a, 0.0, AluOp::GreaterEqual)
        .unwrap();
    k.range_select(&c, &a, AluOp::GreaterEqual, AluOp::Less, &col, &col2)
        .unwrap();
    k.bn_stats(&st, &a).unwrap();
    k.bn_aggr(&mv, &st).unwrap();
    k.tensor_tensor_scan(&c, &a, &b, 0.0, AluOp::Mul, AluOp::Add)
        .unwrap();
    k.max8(&m8, &a).unwrap();
    k.nc_find_index8(&i8, &a, &m8).unwrap();
    k.dma_copy(&y, &c).unwrap();
    let prog = k.build().unwrap();
    let want: [(&str, &[EngineId]); 19] = [
        ("Memset", &[GpSimd]),
        ("Iota", &[GpSimd]),
        ("TensorCopy", &[Vector]),
        ("LoadStationary", &[Tensor]),
        ("MultiplyMoving", &[Tensor]),
        ("Transpose", &[Tensor, Vector]), // SBUF -> PSUM on TensorE, 32 x 32 on VectorE
        ("TensorTensor", &[Vector, GpSimd]), // power on GpSimdE
        ("TensorScalar", &[Vector]),      // one immediate operation: format 1.0's instruction
        ("ScalarTensorTensor", &[Vector]),
        ("TensorReduce", &[Vector]),
        ("Activate", &[Scalar]),
        ("Reciprocal", &[Vector]),
        ("AffineSelect", &[GpSimd]),
        ("RangeSelect", &[Vector]),
        ("BnStats", &[Vector]),
        ("BnAggr", &[Vector]),
        ("TensorTensorScan", &[Vector]),
        ("Max8", &[Vector]),
        ("FindIndex8", &[Vector]),
    ];
    for (name, engines) in want {
        assert_eq!(engine_of(&prog, name), engines, "{name}");
    }
    let pow_on_gpsimd = |i: &Instr| {
        matches!(
            i,
            Instr::TensorTensor {
                op: AluOp::Power,
                ..
            }
        )
    };
    assert_eq!(common::count(&prog, GpSimd, pow_on_gpsimd), 1);
    // The program runs, hazard-free.
    let xv: Vec<f32> = (0..p * f).map(|i| (i % 13) as f32 * 0.25).collect();
    run(&prog, &[("x", f32s(&xv))]);
}

#[test]
fn engine_overrides_are_honoured() {
    use EngineId::*;
    let mut k = Kernel::new("overrides");
    let x = k.input("x", DType::F32, &[64, 32]).unwrap();
    let y = k.output("y", DType::F32, &[64, 32]).unwrap();
    let a = k.sbuf_tile("a", DType::F32, &[64, 32]).unwrap();
    let b = k.sbuf_tile("b", DType::F32, &[64, 32]).unwrap();
    let sq = k.sbuf_tile("sq", DType::F32, &[32, 32]).unwrap();
    let pt = k.psum_tile("pt", DType::F32, &[32, 32]).unwrap();
    k.emit(DmaCopy {
        engine: Some(GpSimd),
        ..DmaCopy::new(&a, &x)
    })
    .unwrap();
    k.emit(DmaTranspose {
        engine: Some(Scalar),
        ..DmaTranspose::new(&sq, &x.slice(0, 0..32).unwrap())
    })
    .unwrap();
    k.emit(Memset {
        dst: &b,
        value: 2.0,
        engine: Some(Vector),
    })
    .unwrap();
    for e in [Vector, Scalar, GpSimd] {
        k.emit(TensorCopy {
            dst: &b,
            src: &a,
            engine: Some(e),
        })
        .unwrap();
    }
    k.emit(TensorTensor {
        dst: &b,
        data1: &b,
        data2: &a,
        op: AluOp::Sub,
        engine: Some(GpSimd),
    })
    .unwrap();
    k.emit(TensorScalar {
        dst: &b,
        data: &b,
        op: AluOp::Add,
        operand: 1.0,
        engine: Some(Scalar),
    })
    .unwrap();
    k.emit(NcTranspose {
        dst: &pt,
        data: &sq,
        engine: Some(Vector),
    })
    .unwrap();
    k.dma_copy(&y, &b).unwrap();
    let p = k.build().unwrap();
    let trig = |e| common::triggers(&p, e);
    assert!(trig(GpSimd) >= 1 && trig(Scalar) >= 1);
    let n = |e, name: &'static str| common::count(&p, e, |i| i.name() == name);
    assert_eq!(n(Vector, "Memset"), 1);
    assert_eq!(
        (
            n(Vector, "TensorCopy"),
            n(Scalar, "TensorCopy"),
            n(GpSimd, "TensorCopy")
        ),
        (1, 1, 1)
    );
    assert_eq!(n(GpSimd, "TensorTensor"), 1);
    assert_eq!(n(Scalar, "TensorScalar"), 1);
    assert_eq!(n(Vector, "Transpose"), 1);
    let xv: Vec<f32> = (0..64 * 32).map(|i| i as f32).collect();
    let (outs, _) = run(&p, &[("x", f32s(&xv))]);
    let got = dec(DType::F32, output(&outs, "y"));
    // b = a (three copies), b − a = 0, + 1.
    assert!(got.iter().all(|&g| g == 1.0));
}

#[test]
fn disallowed_engines_fail_exactly() {
    use EngineId::*;
    let mut k = Kernel::new("refusals");
    let a = k.sbuf_tile("a", DType::F32, &[64, 32]).unwrap();
    let b = k.sbuf_tile("b", DType::F32, &[64, 32]).unwrap();
    let sq = k.sbuf_tile("sq", DType::F32, &[32, 32]).unwrap();
    let ps = k.psum_tile("ps", DType::F32, &[64, 32]).unwrap();
    let pt = k.psum_tile("pt", DType::F32, &[32, 32]).unwrap();
    let pt2 = k.psum_tile("pt2", DType::F32, &[32, 64]).unwrap();
    let tt = |e, op, dst| TensorTensor {
        dst,
        data1: &a,
        data2: &a,
        op,
        engine: Some(e),
    };
    let mut got = Vec::new();
    for e in [Sync, Tensor] {
        got.push(msg(k.emit(tt(e, AluOp::Add, &b))));
        got.push(msg(k.emit(TensorCopy {
            dst: &b,
            src: &a,
            engine: Some(e),
        })));
        got.push(msg(k.emit(TensorScalar {
            dst: &b,
            data: &a,
            op: AluOp::Add,
            operand: 1.0,
            engine: Some(e),
        })));
    }
    for e in [Sync, Tensor, Scalar] {
        got.push(msg(k.emit(Memset {
            dst: &b,
            value: 0.0,
            engine: Some(e),
        })));
    }
    for e in [Sync, Scalar, GpSimd] {
        got.push(msg(k.emit(NcTranspose {
            dst: &pt,
            data: &sq,
            engine: Some(e),
        })));
    }
    // Engines NKI allows for the operation but not for these operands, operations or memories
    // (the format-1.1 rules). The kernel uses format 1.1 from the first such check on.
    k.tensor_scalar_chain(&b, &a, AluOp::Add, 1.0, AluOp::Mul, 2.0)
        .unwrap();
    got.push(msg(k.emit(tt(Vector, AluOp::Power, &b))));
    got.push(msg(k.emit(tt(Scalar, AluOp::Add, &b))));
    let ia = k.sbuf_tile("ia", DType::I32, &[64, 32]).unwrap();
    got.push(msg(k.emit(TensorTensor {
        dst: &ia,
        data1: &ia,
        data2: &ia,
        op: AluOp::BitwiseAnd,
        engine: Some(GpSimd),
    })));
    got.push(msg(k.emit(tt(GpSimd, AluOp::Add, &ps))));
    got.push(msg(k.emit(TensorScalar {
        dst: &b,
        data: &a,
        op: AluOp::Sub,
        operand: 1.0,
        engine: Some(Scalar),
    })));
    got.push(msg(k.emit(TensorCopy {
        dst: &b,
        src: &ps,
        engine: Some(GpSimd),
    })));
    got.push(msg(k.emit(Memset {
        dst: &ps,
        value: 0.0,
        engine: Some(GpSimd),
    })));
    got.push(msg(k.iota(&ps, 0, 1, 1)));
    got.push(msg(k.emit(NcTranspose {
        dst: &b.slice(0, 0..32).unwrap(),
        data: &sq,
        engine: Some(Tensor),
    })));
    got.push(msg(k.emit(NcTranspose {
        dst: &pt2,
        data: &a,
        engine: Some(Vector),
    })));
    let p = k.build().unwrap();
    // Only the memset-free chain was recorded.
    // Only the chain was recorded: no failed operation left an instruction.
    let control = [
        "SemWait",
        "SemInc",
        "SemSet",
        "DmaTrigger",
        "Notify",
        "Halt",
    ];
    let data_path: usize = EngineId::ALL
        .into_iter()
        .map(|e| common::count(&p, e, |i| !control.contains(&i.name())))
        .sum();
    assert_eq!(data_path, 1);
    assert_eq!(
        common::count(&p, Vector, |i| i.name() == "TensorScalarChain"),
        1
    );
    assert_eq!(got, EXPECTED);
}

/// The refusals, in the order the test makes them.
const EXPECTED: [&str; 22] = [
    "tensor_tensor: cannot run on SyncE (this ISA runs it on VectorE, ScalarE or GpSimdE)",
    "tensor_copy: cannot run on SyncE (this ISA runs it on VectorE, ScalarE or GpSimdE)",
    "tensor_scalar: cannot run on SyncE (this ISA runs it on VectorE or ScalarE)",
    "tensor_tensor: cannot run on TensorE (this ISA runs it on VectorE, ScalarE or GpSimdE)",
    "tensor_copy: cannot run on TensorE (this ISA runs it on VectorE, ScalarE or GpSimdE)",
    "tensor_scalar: cannot run on TensorE (this ISA runs it on VectorE or ScalarE)",
    "memset: cannot run on SyncE (this ISA runs it on GpSimdE or VectorE)",
    "memset: cannot run on TensorE (this ISA runs it on GpSimdE or VectorE)",
    "memset: cannot run on ScalarE (this ISA runs it on GpSimdE or VectorE)",
    "nc_transpose: cannot run on SyncE (this ISA runs it on TensorE or VectorE)",
    "nc_transpose: cannot run on ScalarE (this ISA runs it on TensorE or VectorE)",
    "nc_transpose: cannot run on GpSimdE (this ISA runs it on TensorE or VectorE)",
    "tensor_tensor: TensorTensor power cannot run on VectorE (NKI runs it on GpSimdE)",
    "tensor_tensor: TensorTensor cannot run on ScalarE in a format 1.1 program (NKI runs it on VectorE or GpSimdE; the format-1.0 assignment is accepted only in programs that use nothing of format 1.1); this kernel already uses format 1.1 (from tensor_scalar (TensorScalarChain on VectorE))",
    "tensor_tensor: TensorTensor bitwise_and cannot run on GpSimdE (NKI runs it on VectorE)",
    "tensor_tensor: TensorTensor on GpSimdE: GpSimdE cannot access PSUM",
    "tensor_scalar: TensorScalar on ScalarE: subtract is not one of ScalarE's tensor-scalar operations in a format 1.1 program (NKI: multiply, add, or multiply then add; use VectorE; the format-1.0 assignment is accepted only in programs that use nothing of format 1.1); this kernel already uses format 1.1 (from tensor_scalar (TensorScalarChain on VectorE))",
    "tensor_copy: TensorCopy on GpSimdE: GpSimdE cannot access PSUM",
    "memset: GpSimdE cannot access PSUM (dst PSUM tile 'ps')",
    "iota: GpSimdE cannot access PSUM (dst PSUM tile 'ps')",
    "nc_transpose: Transpose output on TensorE: must be in PSUM, not SBUF",
    "nc_transpose: Transpose on VectorE: input [64, 32] exceeds one 32x32 block",
];

/// Runs a `[1, n]` kernel body over input `x` and returns the outputs.
fn one_row(
    n: usize,
    xv: &[f32],
    body: impl FnOnce(&mut Kernel, &nrt_kernel::Tile) -> Vec<(String, nrt_kernel::Tile)>,
) -> Vec<(String, Vec<f32>)> {
    let mut k = Kernel::new("specials");
    let x = k.input("x", DType::F32, &[1, n]).unwrap();
    let xt = k.sbuf_tile("x", DType::F32, &[1, n]).unwrap();
    k.dma_copy(&xt, &x).unwrap();
    let outs = body(&mut k, &xt);
    for (name, t) in &outs {
        let o = k.output(name, DType::F32, &t.shape()).unwrap();
        k.dma_copy(&o, t).unwrap();
    }
    let p = k.build().unwrap();
    let (got, _) = run(&p, &[("x", f32s(xv))]);
    got.into_iter()
        .map(|(n, b)| (n, dec(DType::F32, &b)))
        .collect()
}

fn get<'a>(outs: &'a [(String, Vec<f32>)], name: &str) -> &'a [f32] {
    &outs.iter().find(|(n, _)| n == name).unwrap().1
}

#[test]
fn nan_and_infinities_propagate() {
    let inf = f32::INFINITY;
    let nan = f32::from_bits(0x7FC0_0F00); // a payload: arithmetic canonicalises it
    // Rows: [finite..., +inf], [.., -inf, +inf], [.., NaN].
    let rows: [&[f32]; 4] = [
        &[1.0, 2.0, 3.0, inf, 0.5, -1.0, 0.0, 4.0],
        &[1.0, -inf, 3.0, inf, 0.5, -1.0, 0.0, 4.0],
        &[1.0, 2.0, nan, 3.0, 0.5, -1.0, 0.0, 4.0],
        &[-0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0],
    ];
    for xv in rows {
        let n = xv.len();
        let outs = one_row(n, xv, |k, xt| {
            let t = |k: &mut Kernel, s: &[usize]| k.sbuf_tile("t", DType::F32, s).unwrap();
            let (ex, sum, mx) = (t(k, &[1, n]), t(k, &[1, 1]), t(k, &[1, 1]));
            let ex2 = t(k, &[1, n]);
            k.activation_reduce(&ex, ActFn::Exp, xt, AluOp::Add, &sum, ActBias::None, 1.0)
                .unwrap();
            k.activation_reduce(
                &ex2,
                ActFn::Identity,
                xt,
                AluOp::Max,
                &mx,
                ActBias::None,
                1.0,
            )
            .unwrap();
            let (st, mv, mean) = (t(k, &[1, 6]), t(k, &[1, 2]), t(k, &[1, 1]));
            k.bn_stats(&st, xt).unwrap();
            k.bn_aggr(&mv, &st).unwrap();
            // mean = sum · (1/n) (NKI has no mean reduction).
            k.tensor_reduce(&mean, AluOp::Add, xt, &[1]).unwrap();
            k.tensor_scalar(&mean, &mean, AluOp::Mul, 1.0 / n as f32)
                .unwrap();
            let (sc, rc, stt) = (t(k, &[1, n]), t(k, &[1, n]), t(k, &[1, n]));
            k.emit(TensorScalarChain {
                engine: Some(EngineId::Scalar),
                ..TensorScalarChain::new(&sc, xt, AluOp::Mul, -2.0).then(AluOp::Add, inf)
            })
            .unwrap();
            k.reciprocal(&rc, xt).unwrap();
            k.scalar_tensor_tensor(&stt, xt, AluOp::Mul, 0.0, AluOp::Add, xt)
                .unwrap();
            [
                ("ex", ex),
                ("sum", sum),
                ("mx", mx),
                ("st", st),
                ("mv", mv),
                ("mean", mean),
            ]
            .into_iter()
            .chain([("sc", sc), ("rc", rc), ("stt", stt)])
            .map(|(a, b)| (a.to_owned(), b))
            .collect()
        });
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let exp: Vec<f32> = xv
            .iter()
            .map(|&v| canon(refs::act_ref(ActFn::Exp, v) as f32))
            .collect();
        let ex = get(&outs, "ex");
        for (g, w) in ex.iter().zip(&exp) {
            assert!(refs::ulps(*g, *w) <= 1 && (!w.is_nan() || g.to_bits() == QNAN));
        }
        let sum = ex.iter().fold(0.0f32, |a, &v| canon(a + v));
        assert_eq!(bits(get(&outs, "sum")), bits(&[sum]), "{xv:?}");
        // ActBias::None adds +0: a −0 input activates to +0.
        let mx = xv.iter().fold(f32::NEG_INFINITY, |a, &v| {
            max_num(a, refs::act_arg(v, 1.0, 0.0))
        });
        assert_eq!(bits(get(&outs, "mx")), bits(&[mx]), "{xv:?}");
        let mean = canon(
            xv.iter()
                .skip(1)
                .fold(canon(xv[0]), |a, &v| alu(AluOp::Add, a, v))
                * (1.0 / n as f32),
        );
        assert_eq!(bits(get(&outs, "mean")), bits(&[mean]), "{xv:?}");
        let want_sc: Vec<f32> = xv.iter().map(|&v| canon(canon(v * -2.0) + inf)).collect();
        assert_eq!(bits(get(&outs, "sc")), bits(&want_sc), "{xv:?}");
        let want_rc: Vec<f32> = xv.iter().map(|&v| canon(1.0 / v)).collect();
        assert_eq!(bits(get(&outs, "rc")), bits(&want_rc), "{xv:?}");
        let want_stt: Vec<f32> = xv.iter().map(|&v| canon(canon(v * 0.0) + v)).collect();
        assert_eq!(bits(get(&outs, "stt")), bits(&want_stt), "{xv:?}");
        // bn_stats / bn_aggr: exactly the documented statistics (NaN or ∞ in a half makes its
        // mean and M2 NaN or ∞, and the aggregate NaN; an all-(−0) row has +0 statistics).
        let even: Vec<f32> = xv.iter().copied().step_by(2).collect();
        let odd: Vec<f32> = xv.iter().copied().skip(1).step_by(2).collect();
        let mut want_st = refs::moments(&even).to_vec();
        want_st.extend(refs::moments(&odd));
        assert_eq!(bits(get(&outs, "st")), bits(&want_st), "bn_stats {xv:?}");
        let want_mv = refs::aggregate(&want_st);
        assert_eq!(bits(get(&outs, "mv")), bits(&want_mv), "bn_aggr {xv:?}");
        if xv.iter().any(|v| !v.is_finite()) {
            assert_eq!(want_mv[1].to_bits(), QNAN);
        }
    }
}

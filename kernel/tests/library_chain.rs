//! Library emitters compose in one kernel through scratch tensors — matmul → softmax →
//! column sums, plus a transpose and a layernorm of the same scratch — with the automatic
//! synchronisation ordering each emitter after the one it reads: the run is hazard-free and
//! every output equals, bit for bit, the stand-alone kernels run one after another (each
//! checked against its plain reference in the other `library_*` tests).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod refs;

use common::{Rng, output, run};
use nrt_kernel::library::reduce::ReduceOp;
use nrt_kernel::library::{matmul, norm, reduce, softmax, transpose};
use nrt_kernel::{DType, Kernel};
use refs::{cast, enc};

#[test]
fn emitters_chain_through_scratch_tensors() {
    let (m, kd, n) = (129, 130, 200);
    let mut k = Kernel::new("chain");
    let x = k.input("x", DType::Bf16, &[m, kd]).unwrap();
    let w = k.input("w", DType::Bf16, &[kd, n]).unwrap();
    let h = k.scratch("h", DType::F32, &[m, n]).unwrap();
    let y = k.output("y", DType::F32, &[m, n]).unwrap();
    let z = k.output("z", DType::F32, &[n]).unwrap();
    let t = k.output("t", DType::F32, &[n, m]).unwrap();
    let l = k.output("l", DType::Bf16, &[m, n]).unwrap();
    matmul::matmul(&mut k, &h, &x, &w, &Default::default()).unwrap();
    softmax::softmax(&mut k, &y, &h).unwrap();
    reduce::reduce(&mut k, &z, &y, 0, ReduceOp::Sum, false).unwrap();
    transpose::transpose(&mut k, &t, &h).unwrap();
    norm::layernorm(&mut k, &l, &h, None, None, 1e-3).unwrap();
    let p = k.build().unwrap();
    let mut rng = Rng(17);
    let xv: Vec<f32> = (0..m * kd).map(|_| cast(DType::Bf16, rng.unit())).collect();
    let wv: Vec<f32> = (0..kd * n).map(|_| cast(DType::Bf16, rng.unit())).collect();
    let (xb, wb) = (enc(DType::Bf16, &xv), enc(DType::Bf16, &wv));
    let (outs, _) = run(&p, &[("x", xb.clone()), ("w", wb.clone())]);

    // The same steps as separate kernels.
    let one = |p: nrt_kernel::Program, ins: Vec<(&str, Vec<u8>)>| {
        let (o, _) = run(&p, &ins);
        o.into_iter().next().unwrap().1
    };
    let hb = one(
        matmul::build(m, kd, n, DType::Bf16, DType::F32, &Default::default()).unwrap(),
        vec![("a", xb), ("b", wb)],
    );
    let yb = one(
        softmax::build(m, n, DType::F32, DType::F32).unwrap(),
        vec![("x", hb.clone())],
    );
    let zb = one(
        reduce::build(&[m, n], DType::F32, 0, ReduceOp::Sum, false, DType::F32).unwrap(),
        vec![("x", yb.clone())],
    );
    let tb = one(
        transpose::build(m, n, DType::F32).unwrap(),
        vec![("x", hb.clone())],
    );
    let lb = one(
        norm::build_layernorm(m, n, DType::F32, DType::Bf16, false, 1e-3).unwrap(),
        vec![("x", hb)],
    );
    assert_eq!(output(&outs, "y"), &yb[..], "softmax");
    assert_eq!(output(&outs, "z"), &zb[..], "column sums");
    assert_eq!(output(&outs, "t"), &tb[..], "transpose");
    assert_eq!(output(&outs, "l"), &lb[..], "layernorm");
}

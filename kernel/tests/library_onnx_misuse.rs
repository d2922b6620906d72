//! Misuse of the ONNX-facing emitters is an `NRT_INVALID` error naming the kernel and the
//! operand (never a panic), and records nothing that breaks a later build.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use nrt_core::NrtStatus;
use nrt_kernel::library::{chnorm, data, gather, gemm, lrn, pointwise, pool, reduce, softmax};
use nrt_kernel::{DType, Kernel};

fn invalid(r: Result<(), nrt_core::Error>, has: &str) {
    let e = r.unwrap_err();
    assert_eq!(e.status(), NrtStatus::Invalid, "{}", e.message());
    assert!(e.message().contains(has), "{:?} lacks {has:?}", e.message());
}

#[test]
fn errors_name_the_problem() {
    let mut k = Kernel::new("misuse");
    let x = k.input("x", DType::F32, &[2, 3, 4, 5]).unwrap();
    let c3 = k.input("c3", DType::F32, &[3]).unwrap();
    let c4 = k.input("c4", DType::F32, &[4]).unwrap();
    let y = k.output("y", DType::F32, &[2, 3, 4, 5]).unwrap();
    let bad = k.output("bad", DType::F32, &[2, 3, 4, 6]).unwrap();
    let i = k.input("i", DType::I32, &[7]).unwrap();
    let f = k.input("f", DType::F32, &[7]).unwrap();

    invalid(
        data::permute(&mut k, &y, &x, &[0, 1, 1, 3]),
        "not a permutation",
    );
    invalid(
        data::permute(&mut k, &bad, &x, &[0, 1, 2, 3]),
        "permuted by",
    );
    invalid(data::concat(&mut k, &bad, &[&x, &x], 3), "add up to 10");
    invalid(data::split(&mut k, &[&y], &x, 4), "out of range");
    invalid(
        data::pad(&mut k, &bad, &x, &[(0, 0); 4], data::PadMode::Edge),
        "padded by",
    );
    invalid(
        data::pad(
            &mut k,
            &y,
            &x,
            &[(0, 0), (0, 0), (4, -4), (0, 0)],
            data::PadMode::Reflect,
        ),
        "needs more input than pad",
    );
    invalid(data::tile(&mut k, &bad, &x, &[1, 1, 1, 2]), "repeated");
    invalid(
        data::gather_const(&mut k, &y, &x, 1, &[0, 1, 3]),
        "out of range",
    );
    invalid(data::expand(&mut k, &y, &bad), "does not broadcast");
    invalid(gemm::matmul_nd(&mut k, &y, &x, &x), "do not multiply");
    invalid(
        gemm::gemm(&mut k, &y, &x, &x, None, &gemm::GemmOpts::default()),
        "must be 2-D",
    );
    invalid(
        chnorm::batchnorm(&mut k, &y, &x, &c4, &c3, &c3, &c3, 1e-5),
        "scale HBM tensor 'c4' [4] fp32 must have shape [3]",
    );
    invalid(
        chnorm::instancenorm(&mut k, &bad, &x, &c3, &c3, 1e-5),
        "must be [N, C",
    );
    invalid(
        lrn::lrn(
            &mut k,
            &y,
            &x,
            &lrn::LrnOpts {
                size: 0,
                alpha: 1e-4,
                beta: 0.75,
                bias: 1.0,
            },
        ),
        "size ≥ 1",
    );
    invalid(gather::gather(&mut k, &y, &x, &f, 1), "int32");
    invalid(
        gather::gather(&mut k, &y, &x, &i, 1),
        "must have shape [2, 7, 4, 5]",
    );
    invalid(
        reduce::reduce_axes(&mut k, &y, &x, &[1, 5], reduce::ReduceOp::Sum, true),
        "out of range",
    );
    invalid(
        reduce::reduce_axes(&mut k, &y, &x, &[1], reduce::ReduceOp::Sum, true),
        "must have shape [2, 1, 4, 5]",
    );
    invalid(softmax::softmax_axis(&mut k, &y, &x, 4, false), "axis 4");
    invalid(pool::global_pool(&mut k, &bad, &x, false), "N·C elements");
    let cfg = pool::Pool2dConfig::new(pool::PoolKind::Max, 3, 1, 0);
    let ext = pool::PoolExt {
        dilation: (0, 1),
        ceil_mode: true,
    };
    invalid(
        pool::pool2d_ext(&mut k, &y, &x, &cfg, &ext),
        "dilation must be ≥ 1",
    );
    invalid(pointwise::where_(&mut k, &y, &x, &x, &i), "must have out");
    invalid(pointwise::cast(&mut k, &bad, &x), "differ in shape");
    // The kernel still builds (nothing half-recorded breaks it).
    k.build().unwrap();
}

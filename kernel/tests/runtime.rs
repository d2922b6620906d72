//! A kernel built with the API, packed into a NEFF (`neff_from_programs`), loaded and executed
//! by the runtime on the simulator driver, with the caller's device tensors bound.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use nrt_core::tensor::{TensorPlacement, TensorSet};
use nrt_core::{FrameworkType, Runtime};
use nrt_kernel::{ActBias, ActFunc, AluOp, DType, Kernel};
use nrt_sim::engine::{decode_f32, encode_f32};
use nrt_sim::{Instance, SimConfig, SimDriver, SimMachine};

#[test]
fn a_kernel_runs_through_the_runtime() {
    let (rows, cols) = (200, 48);
    let mut k = Kernel::new("softplus_ish");
    let x = k.input("x", DType::F32, &[rows, cols]).unwrap();
    let y = k.output("y", DType::F32, &[rows, cols]).unwrap();
    for r0 in (0..rows).step_by(128) {
        let rh = 128.min(rows - r0);
        k.scope(|k| {
            let t = k.sbuf_tile("t", DType::F32, &[rh, cols])?;
            k.dma_copy(&t, &x.slice(0, r0..r0 + rh)?)?;
            k.activation(&t, ActFunc::Relu, &t, ActBias::Scalar(-1.0), 1.0)?;
            k.tensor_scalar(&t, &t, AluOp::Add, 0.25)?;
            k.dma_copy(&y.slice(0, r0..r0 + rh)?, &t)
        })
        .unwrap();
    }
    let neff = nrt_sim::neff::neff_from_programs("relu_shift", &[k.build().unwrap()]).unwrap();

    let machine = SimMachine::new(SimConfig::funtime(Instance::Trn1, 1));
    let rt = Runtime::new(SimDriver::attach(&machine));
    rt.init(
        FrameworkType::NoFw,
        "",
        "",
        &[("NEURON_RT_LOG_LEVEL", "ERROR")],
    )
    .unwrap();
    let h = rt.load(&neff, 0, -1).unwrap();
    let xv: Vec<f32> = (0..rows * cols).map(|i| (i % 9) as f32 - 4.0).collect();
    let bytes = rows * cols * 4;
    let xt = rt
        .tensor_allocate(TensorPlacement::Device, 0, bytes as u64, "x")
        .unwrap();
    xt.write(0, &encode_f32(DType::F32, &xv)).unwrap();
    let yt = rt
        .tensor_allocate(TensorPlacement::Device, 0, bytes as u64, "y")
        .unwrap();
    let mut inputs = TensorSet::new();
    inputs.add("x", xt);
    let mut outputs = TensorSet::new();
    outputs.add("y", yt.clone());
    rt.execute(h, &inputs, &outputs).unwrap();
    let mut out = vec![0u8; bytes];
    yt.read(0, &mut out).unwrap();
    let got = decode_f32(DType::F32, &out);
    for (g, v) in got.iter().zip(&xv) {
        assert_eq!(*g, (v - 1.0).max(0.0) + 0.25);
    }
}

//! Models carried in NEFFs and executed by the simulator through the runtime: the builders'
//! MLP against a direct engine run and a reference, the execution timeout, hazards.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use nrt_core::tensor::{TensorPlacement, TensorSet};
use nrt_core::{NrtStatus, Runtime};
use nrt_host::CapturingHost;
use nrt_sim::engine::{self, DType, EngineId, ProgramBuilder};
use nrt_sim::neff::neff_from_programs;
use nrt_sim::{Instance, SimConfig, SimDriver, SimMachine};
use nrt_tests::conformance::{MLP_DIMS, mlp_expected, mlp_program, mlp_sets, mlp_values, read_all};
use nrt_tests::{assert_err_prefix, init};

type Rt = Runtime<SimDriver, Arc<CapturingHost>>;

fn runtime(vars: &[(&str, &str)]) -> (Rt, Arc<SimMachine>) {
    let machine = SimMachine::new(SimConfig::funtime(Instance::Trn1, 1));
    let rt = Runtime::with_host(SimDriver::attach(&machine), Arc::new(CapturingHost::new()));
    init(&rt, vars).unwrap();
    (rt, machine)
}

/// A straightforward reference: y_t = W2ᵀ relu(W1ᵀ x_t + b1) + b2, fp32 accumulation in k
/// order, the hidden layer rounded to bf16 as the program stores it.
fn reference_output() -> Vec<f32> {
    let (batch, d_in, hidden, d_out) = (
        MLP_DIMS.0 as usize,
        MLP_DIMS.1 as usize,
        MLP_DIMS.2 as usize,
        MLP_DIMS.3 as usize,
    );
    let dt = DType::Bf16;
    let r = |v: Vec<f32>| {
        v.into_iter()
            .map(|x| engine::round_through(dt, x))
            .collect::<Vec<f32>>()
    };
    let (x, w1, b1, w2, b2) = (
        r(mlp_values(1, d_in * batch)),
        r(mlp_values(2, d_in * hidden)),
        r(mlp_values(3, hidden)),
        r(mlp_values(4, hidden * d_out)),
        r(mlp_values(5, d_out)),
    );
    let mut h = vec![0f32; hidden * batch];
    for j in 0..hidden {
        for b in 0..batch {
            let mut acc = 0f32;
            for k in 0..d_in {
                acc = w1[k * hidden + j].mul_add(x[k * batch + b], acc);
            }
            h[j * batch + b] = engine::round_through(dt, (acc + b1[j]).max(0.0));
        }
    }
    let mut y = vec![0f32; d_out * batch];
    for o in 0..d_out {
        for b in 0..batch {
            let mut acc = 0f32;
            for k in 0..hidden {
                acc = w2[k * d_out + o].mul_add(h[k * batch + b], acc);
            }
            y[o * batch + b] = engine::round_through(dt, acc + b2[o]);
        }
    }
    y
}

#[test]
fn mlp_neff_executes_through_the_runtime() {
    let neff = neff_from_programs("mlp", &[mlp_program()]).unwrap();
    let (rt, machine) = runtime(&[]);
    machine.set_reports(nrt_sim::Reports::Counters);
    let h = rt.load(&neff, 0, -1).unwrap();
    assert!(!rt.model(h).unwrap().is_plumbing());
    let expected = mlp_expected();
    for placement in [TensorPlacement::Device, TensorPlacement::Host] {
        let (i, o) = mlp_sets(&rt, placement);
        rt.execute(h, &i, &o).unwrap();
        assert_eq!(read_all(&o, "y_t"), expected, "{placement:?}");
    }
    let pnc = machine
        .staged_pnc(rt.model(h).unwrap().staged()[0].handle)
        .unwrap();
    assert!(machine.last_report(pnc).unwrap().ticks > 0);
    let got = engine::decode_f32(DType::Bf16, &expected);
    let want = reference_output();
    let max_ulp = got
        .iter()
        .zip(&want)
        .map(|(g, w)| (g.to_bits() as i64 - w.to_bits() as i64).unsigned_abs())
        .max()
        .unwrap();
    // bf16 values compared as f32 bit patterns: 1 bf16 ULP is 1 << 16.
    assert!(
        max_ulp <= 1 << 16,
        "more than 1 bf16 ULP from the reference: {max_ulp}"
    );
    assert!(got.iter().any(|v| *v != 0.0));
    rt.unload(h).unwrap();
    drop(rt);
    assert_eq!(
        machine.total_device_bytes_allocated(),
        0,
        "program tensors freed at unload"
    );
}

#[test]
fn sync_and_implicit_async_give_identical_outputs() {
    let neff = neff_from_programs("mlp", &[mlp_program()]).unwrap();
    let (rt, _m) = runtime(&[]);
    let h = rt.load(&neff, 0, -1).unwrap();
    let (i, o) = mlp_sets(&rt, TensorPlacement::Device);
    rt.execute(h, &i, &o).unwrap();
    let sync = read_all(&o, "y_t");
    let (rt2, _m2) = runtime(&[("NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS", "4")]);
    let h2 = rt2.load(&neff, 0, -1).unwrap();
    let (i2, o2) = mlp_sets(&rt2, TensorPlacement::Device);
    rt2.execute(h2, &i2, &o2).unwrap();
    rt2.async_drain(0).unwrap();
    assert_eq!(read_all(&o2, "y_t"), sync);
}

#[test]
fn explicit_async_runs_several_in_order() {
    let neff = neff_from_programs("mlp", &[mlp_program()]).unwrap();
    let (rt, machine) = runtime(&[]);
    let h = rt.load(&neff, 0, -1).unwrap();
    let (i, o) = mlp_sets(&rt, TensorPlacement::Device);
    let seqs: Vec<u64> = (0..4)
        .map(|_| rt.execute_schedule(h, &i, &o, 0, None).unwrap())
        .collect();
    assert!(!rt.is_completed(seqs[0]).unwrap());
    assert_eq!(rt.process_async(), 4);
    assert!(seqs.iter().all(|&s| rt.is_completed(s).unwrap()));
    assert_eq!(machine.executions(), 4);
    assert_eq!(read_all(&o, "y_t"), mlp_expected());
}

#[test]
fn a_program_that_never_halts_times_out() {
    let mut b = ProgramBuilder::new("deadlock");
    let x = b.input("x", DType::F32, &[4]);
    let _ = x;
    b.output("y", DType::F32, &[4]);
    let s = b.sem().unwrap();
    b.wait(EngineId::Scalar, s, 1);
    let neff = neff_from_programs("deadlock", &[b.build().unwrap()]).unwrap();
    let (rt, _m) = runtime(&[("NEURON_RT_EXEC_TIMEOUT", "1")]);
    let h = rt.load(&neff, 0, -1).unwrap();
    let mut i = TensorSet::new();
    i.add(
        "x",
        rt.tensor_allocate(TensorPlacement::Device, 0, 16, "x")
            .unwrap(),
    );
    let mut o = TensorSet::new();
    o.add(
        "y",
        rt.tensor_allocate(TensorPlacement::Device, 0, 16, "y")
            .unwrap(),
    );
    let e = rt.execute(h, &i, &o).unwrap_err();
    assert_eq!(e.status(), NrtStatus::Timeout, "{e}");
    assert!(
        e.message().starts_with(&format!(
            "Execution of model {} failed: simulated driver: execution failed:",
            h.id()
        )),
        "{e}"
    );
    assert!(
        e.message().contains("ScalarE pc 0 waits for semaphore"),
        "{e}"
    );
}

#[test]
fn an_invalid_program_is_refused_at_load() {
    let neff = nrt_core::neff::write(&nrt_core::neff::NeffSpec {
        name: "bad".into(),
        uuid: [0; 16],
        version: (2, 0),
        feature_bits: nrt_core::neff::NeffFeatures::empty(),
        lnc_size: 1,
        num_tpb: 1,
        gzip: true,
        subgraphs: vec![nrt_core::neff::SubgraphSpec {
            name: "sg00".into(),
            members: vec![(
                nrt_core::neff::SIM_PROGRAM_MEMBER.into(),
                b"NRTSIMPG garbage".to_vec(),
            )],
        }],
        tensors: vec![nrt_core::neff::NeffTensor {
            name: "x".into(),
            usage: nrt_core::io::TensorUsage::Input,
            size: 4,
            dtype: nrt_core::io::Dtype::Float32,
            shape: vec![1],
            var_id: 1,
        }],
    })
    .unwrap();
    let (rt, machine) = runtime(&[]);
    assert_err_prefix(
        rt.load(&neff, 0, -1).map(|_| ()),
        NrtStatus::Invalid,
        "Failed to stage subgraph sg00 of bad on Neuron Core 0: simulated driver: invalid simulator program:",
    );
    assert!(machine.staged_models().is_empty());
}

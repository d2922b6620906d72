//! A model of two subgraphs (an LNC-2 logical core on trn2) executed through the runtime: its
//! subgraphs run together on their two physical cores (in lock step, each on its own host
//! thread), every output is right, each core keeps its report, the timing is the same run after
//! run, and two such models on two logical cores of one device run from two host threads at
//! once.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use nrt_core::tensor::{TensorPlacement, TensorSet};
use nrt_core::{ModelHandle, Runtime};
use nrt_sim::engine::{DType, Program, decode_f32, encode_f32, kernels};
use nrt_sim::{Instance, Reports, SimDriver, SimMachine};

type Rt = Runtime<SimDriver>;

const M: u64 = 128;
const K: u64 = 256;
const N: u64 = 512;

/// Half `i` of a row-split matmul: `lhs_t{i}` `[K, M]` by the shared `rhs` `[K, N]` into
/// `out{i}` `[M, N]`.
fn half(i: usize) -> Program {
    let mut p = kernels::matmul(M, K, N, DType::F32, DType::F32).unwrap();
    for t in &mut p.tensors {
        if t.name == "lhs_t" || t.name == "out" {
            t.name.push_str(&i.to_string());
        }
    }
    p
}

fn values(n: u64, seed: u64) -> Vec<f32> {
    (0..n)
        .map(|i| ((i.wrapping_mul(seed) % 13) as f32 - 6.0) / 4.0)
        .collect()
}

/// `lhs_t` `[K, M]` transposed times `rhs` `[K, N]`, in f64.
fn reference(lhs_t: &[f32], rhs: &[f32]) -> Vec<f64> {
    let (m, k, n) = (M as usize, K as usize, N as usize);
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for kk in 0..k {
            let a = f64::from(lhs_t[kk * m + i]);
            for j in 0..n {
                out[i * n + j] += a * f64::from(rhs[kk * n + j]);
            }
        }
    }
    out
}

fn runtime() -> (Rt, Arc<SimMachine>) {
    common::sim_runtime(Instance::Trn2, Reports::Counters)
}

struct Loaded<'r> {
    h: ModelHandle,
    inputs: TensorSet<'r>,
    outputs: TensorSet<'r>,
    want: Vec<Vec<f64>>,
}

/// Loads the two-subgraph model on logical core `lnc` with its inputs written.
fn load(rt: &Rt, lnc: i32, seed: u64) -> Loaded<'_> {
    let neff = nrt_sim::neff::neff_from_programs("mm2", &[half(0), half(1)]).unwrap();
    let h = rt.load(&neff, lnc, 1).unwrap();
    let rhs = values(K * N, seed);
    let lhs: Vec<Vec<f32>> = (0..2).map(|i| values(K * M, seed + 3 + i)).collect();
    let mut inputs = TensorSet::new();
    let mut outputs = TensorSet::new();
    let dev = |name: &str, data: Option<&[f32]>, size: u64| {
        let t = rt
            .tensor_allocate(TensorPlacement::Device, lnc, size, name)
            .unwrap();
        if let Some(d) = data {
            t.write(0, &encode_f32(DType::F32, d)).unwrap();
        }
        t
    };
    inputs.add("rhs", dev("rhs", Some(&rhs), K * N * 4));
    for (i, l) in lhs.iter().enumerate() {
        inputs.add(&format!("lhs_t{i}"), dev("lhs", Some(l), K * M * 4));
        outputs.add(&format!("out{i}"), dev("out", None, M * N * 4));
    }
    let want = lhs.iter().map(|l| reference(l, &rhs)).collect();
    Loaded {
        h,
        inputs,
        outputs,
        want,
    }
}

fn check(rt: &Rt, l: &Loaded<'_>) {
    rt.execute(l.h, &l.inputs, &l.outputs).unwrap();
    for (i, want) in l.want.iter().enumerate() {
        let t = l.outputs.get(&format!("out{i}")).unwrap();
        let mut bytes = vec![0u8; (M * N * 4) as usize];
        t.read(0, &mut bytes).unwrap();
        let got = decode_f32(DType::F32, &bytes);
        for (g, w) in got.iter().zip(want) {
            assert!(
                (f64::from(*g) - w).abs() <= 1e-4 * w.abs().max(1.0),
                "out{i}: {g} vs {w}"
            );
        }
    }
}

#[test]
fn both_subgraphs_run_and_each_core_keeps_its_report() {
    let (rt, machine) = runtime();
    let l = load(&rt, 0, 1);
    let pncs: Vec<u32> = rt
        .model(l.h)
        .unwrap()
        .staged()
        .iter()
        .map(|s| machine.staged_pnc(s.handle).unwrap())
        .collect();
    assert_eq!(pncs, [0, 1]);
    check(&rt, &l);
    let first: Vec<_> = pncs
        .iter()
        .map(|&p| machine.last_report(p).unwrap())
        .collect();
    for r in &first {
        r.result().unwrap();
        assert!(r.ticks > 0);
    }
    for _ in 0..3 {
        check(&rt, &l);
        for (&p, r) in pncs.iter().zip(&first) {
            let again = machine.last_report(p).unwrap();
            assert_eq!(again.ticks, r.ticks, "lock step is deterministic");
            assert_eq!(again.dma_engines, r.dma_engines);
        }
    }
    assert_eq!(machine.executions(), 4);
}

#[test]
fn two_models_on_two_logical_cores_run_from_two_threads() {
    let (rt, _machine) = runtime();
    let models = [load(&rt, 0, 1), load(&rt, 1, 11)];
    std::thread::scope(|s| {
        for l in &models {
            let rt = &rt;
            s.spawn(move || {
                for _ in 0..5 {
                    check(rt, l);
                }
            });
        }
    });
}

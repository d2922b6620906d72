//! Shared helpers of the engine tests: deterministic data and reference implementations.
#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use nrt_sim::Instance;
use nrt_sim::engine::{
    ActFunc, DType, Device, DmaDescriptor, DmaEndpoint, ExecOptions, ExecReport, Program,
    decode_f32, encode_f32, round_through,
};

/// `rows` descriptors loading rows of `row_bytes` from HBM tensor `tensor` (consecutive) into
/// SBUF partitions `0..rows` at offset 0.
pub fn row_loads(tensor: u32, rows: u32, row_bytes: u32) -> Vec<DmaDescriptor> {
    (0..rows)
        .map(|p| DmaDescriptor {
            src: DmaEndpoint::Hbm {
                tensor,
                offset: u64::from(p) * u64::from(row_bytes),
            },
            dst: DmaEndpoint::Sbuf {
                partition: p as u8,
                offset: 0,
            },
            len: row_bytes,
        })
        .collect()
}

/// A deterministic pseudo-random sequence (64-bit LCG), values in [-1, 1) rounded to `dtype`.
pub fn data(seed: u64, n: usize, dtype: DType) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let v = ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0;
            round_through(dtype, v)
        })
        .collect()
}

/// Runs `program` on core 0 of a fresh trn1 device with float inputs; returns the outputs
/// (decoded) and the report.
pub fn run(
    program: Program,
    inputs: &[(&str, DType, &[f32])],
) -> (Vec<(String, Vec<f32>)>, ExecReport) {
    let dev = Device::new(Instance::Trn1);
    let outs_dtype: Vec<(String, DType)> = program
        .tensors
        .iter()
        .map(|t| (t.name.clone(), t.dtype))
        .collect();
    let lp = dev.load(0, program).unwrap();
    let bytes: Vec<(String, Vec<u8>)> = inputs
        .iter()
        .map(|(n, d, v)| (n.to_string(), encode_f32(*d, v)))
        .collect();
    let refs: Vec<(&str, &[u8])> = bytes
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    let (outs, report) = dev.run(&lp, &refs, &ExecOptions::default()).unwrap();
    let decoded = outs
        .into_iter()
        .map(|(n, b)| {
            let dt = outs_dtype.iter().find(|(x, _)| *x == n).unwrap().1;
            (n, decode_f32(dt, &b))
        })
        .collect();
    (decoded, report)
}

/// The simulator's matmul order: per 128-row K tile a sequential fp32 sum of fused
/// multiply-adds from +0.0, tile sums accumulated in increasing order, one rounding to `out`.
pub fn ref_matmul(
    lhs_t: &[f32],
    rhs: &[f32],
    m: usize,
    k: usize,
    n: usize,
    out: DType,
) -> Vec<f32> {
    let mut c = vec![0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0f32;
            for (kt, k0) in (0..k).step_by(128).enumerate() {
                let mut part = 0f32;
                for kk in k0..(k0 + 128).min(k) {
                    part = lhs_t[kk * m + i].mul_add(rhs[kk * n + j], part);
                }
                acc = if kt == 0 { part } else { acc + part };
            }
            c[i * n + j] = round_through(out, acc);
        }
    }
    c
}

/// Activation reference in binary64 with the platform libm.
pub fn ref_act(f: ActFunc, x: f64) -> f64 {
    match f {
        ActFunc::Identity => x,
        ActFunc::Relu => x.max(0.0),
        ActFunc::Exp => x.exp(),
        ActFunc::Tanh => x.tanh(),
        ActFunc::Gelu => {
            let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
            x / (1.0 + (-2.0 * u).exp())
        }
    }
}

/// Distance in units in the last place of `dtype` between two values of `dtype`.
pub fn ulps(dtype: DType, a: f32, b: f32) -> u64 {
    let key = |v: f32| -> i64 {
        let bits: i64 = match dtype {
            DType::Bf16 => i64::from(nrt_sim::engine::f32_to_bf16(v)),
            DType::F16 => i64::from(nrt_sim::engine::f32_to_f16(v)),
            _ => i64::from(v.to_bits()),
        };
        let sign = match dtype {
            DType::Bf16 | DType::F16 => 0x8000,
            _ => 0x8000_0000,
        };
        if bits & sign != 0 {
            -(bits & (sign - 1))
        } else {
            bits
        }
    };
    key(a).abs_diff(key(b))
}

/// FNV-1a 64 of bytes.
pub fn fnv(bytes: &[u8]) -> u64 {
    let mut h = 0xcbf29ce484222325u64;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// Asserts `active + idle + stalls == ticks` for every unit.
pub fn check_counters(r: &ExecReport) {
    for (i, c) in r.engines.iter().chain(r.dma_engines.iter()).enumerate() {
        assert_eq!(
            c.active + c.idle + c.stalled(),
            r.ticks,
            "unit {i}: {c:?} vs {} ticks",
            r.ticks
        );
    }
}

pub fn trn1() -> Instance {
    Instance::Trn1
}

/// A runtime on a new simulated machine of one `instance` device (funtime), keeping reports as
/// `reports` says, initialised with errors-only logging; and the machine.
pub fn sim_runtime(
    instance: Instance,
    reports: nrt_sim::Reports,
) -> (
    nrt_core::Runtime<nrt_sim::SimDriver>,
    std::sync::Arc<nrt_sim::SimMachine>,
) {
    let machine =
        nrt_sim::SimMachine::with_reports(nrt_sim::SimConfig::funtime(instance, 1), reports);
    let rt = nrt_core::Runtime::new(nrt_sim::SimDriver::attach(&machine));
    rt.init(
        nrt_core::FrameworkType::NoFw,
        "",
        "",
        &[("NEURON_RT_LOG_LEVEL", "ERROR")],
    )
    .unwrap();
    (rt, machine)
}

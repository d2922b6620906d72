//! Runs one library kernel through the simulator once, for profiling the simulator's
//! execution (e.g. `valgrind --tool=callgrind --toggle-collect='*Device*execute*'`).
//!
//! ```text
//! cargo run --release -p nrt-kernel --example sim_profile -- softmax|layernorm|matmul N
//! ```
//!
//! softmax and layernorm run on `[N, 4096]` fp32, matmul on `N³` bf16 in, fp32 out. Prints
//! the simulated tick count.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use nrt_kernel::DType;
use nrt_kernel::library::{matmul, norm, softmax};
use nrt_sim::Instance;
use nrt_sim::engine::{Device, ExecOptions, encode_f32};

fn data(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 * 4.0 - 2.0
        })
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let case = args.get(1).map_or("softmax", String::as_str);
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(512);
    let (p, inputs) = match case {
        "softmax" => (
            softmax::build(n, 4096, DType::F32, DType::F32).unwrap(),
            vec![("x", encode_f32(DType::F32, &data(n * 4096, 1)))],
        ),
        "layernorm" => (
            norm::build_layernorm(n, 4096, DType::F32, DType::F32, false, 1e-5).unwrap(),
            vec![("x", encode_f32(DType::F32, &data(n * 4096, 1)))],
        ),
        "matmul" => (
            matmul::build(
                n,
                n,
                n,
                DType::Bf16,
                DType::F32,
                &matmul::MatmulOpts::default(),
            )
            .unwrap(),
            vec![
                ("a", encode_f32(DType::Bf16, &data(n * n, 2))),
                ("b", encode_f32(DType::Bf16, &data(n * n, 3))),
            ],
        ),
        other => panic!("unknown case {other}: softmax, layernorm or matmul"),
    };
    let quiet = ExecOptions {
        record_events: false,
        ..ExecOptions::default()
    };
    let dev = Device::new(Instance::Trn1);
    let lp = dev.load(0, p).unwrap();
    for (name, bytes) in &inputs {
        dev.write_tensor(&lp, name, bytes).unwrap();
    }
    let r = dev.execute(&lp, &quiet).unwrap();
    assert!(r.hazards.is_empty(), "hazards: {:?}", r.hazards);
    r.result().unwrap();
    println!("{case} {n}: {} ticks", r.ticks);
}

//! Imports an ONNX model, compiles it and simulates one inference in-process (no NEFF, no
//! runtime), printing the host time of each phase: the measurement tool of
//! docs/PERFORMANCE.md's ONNX figures.
//!
//! `cargo run --release -p nrt-onnx --example onnx_sim -- MODEL.onnx [IN.f32 [OUT.f32]] [--bf16]`
//! (`IN.f32`: the first input's raw little-endian fp32 elements; zeros when absent).

use std::collections::HashMap;
use std::time::Instant;

use nrt_onnx::Precision;
use nrt_sim::Instance;
use nrt_sim::engine::{Device, ExecOptions, decode_f32};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let bf16 = args.iter().any(|a| a == "--bf16");
    let pos: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let Some(path) = pos.first() else {
        return Err("usage: onnx_sim MODEL.onnx [IN.f32 [OUT.f32]] [--bf16]".into());
    };
    let t0 = Instant::now();
    let bytes = std::fs::read(path)?;
    let m = nrt_onnx::import(&bytes)?;
    let t1 = Instant::now();
    let prec = if bf16 {
        Precision::Bf16
    } else {
        Precision::Fp32
    };
    let lw = nrt_onnx::compile(&m, &HashMap::new(), prec)?;
    let t2 = Instant::now();
    let mut inputs = Vec::new();
    for (i, t) in lw.inputs.iter().enumerate() {
        let n: usize = t.shape.iter().product::<usize>().max(1) * 4;
        let data = match pos.get(1) {
            Some(f) if i == 0 => std::fs::read(f)?,
            _ => vec![0u8; n],
        };
        inputs.push((t.name.clone(), data));
    }
    let program = lw.program;
    let dev = Device::new(Instance::Trn1);
    let lp = dev.load(0, program)?;
    let t3 = Instant::now();
    let refs: Vec<(&str, &[u8])> = inputs.iter().map(|(n, d)| (n.as_str(), &d[..])).collect();
    let (outs, report) = dev.run(&lp, &refs, &ExecOptions::default())?;
    let t4 = Instant::now();
    report.result()?;
    if let (Some(f), Some((_, o))) = (pos.get(2), outs.first()) {
        let v = decode_f32(nrt_sim::engine::DType::F32, o);
        let b: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        std::fs::write(f, b)?;
    }
    println!(
        "import {:.3} s, compile {:.3} s ({} device nodes, {} folded, {} batch norms fused), load {:.3} s, simulate {:.3} s; total {:.3} s",
        (t1 - t0).as_secs_f64(),
        (t2 - t1).as_secs_f64(),
        lw.nodes.len(),
        lw.folded,
        lw.fused,
        (t3 - t2).as_secs_f64(),
        (t4 - t3).as_secs_f64(),
        (t4 - t0).as_secs_f64()
    );
    println!(
        "simulated {} ticks, {} instructions issued; peak device memory {} B (scratch {} B, {} B without reuse; weights {} B); hazards {}",
        report.ticks,
        report.engines.iter().map(|c| c.instructions).sum::<u64>(),
        lw.peak_bytes,
        lw.scratch_bytes,
        lw.unplanned_bytes,
        lw.weight_bytes,
        report.hazards.len()
    );
    Ok(())
}

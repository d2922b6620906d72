//! Writes a two-layer MLP as a NEFF for the simulator, with its inputs and expected output:
//! `DIR/mlp.neff`, `DIR/<input>.bin` for each input, `DIR/<output>.expected`.
//!
//! ```text
//! cargo run -p nrt-sim --example mlp_neff -- DIR
//! ```

use std::process::ExitCode;

use nrt_sim::Instance;
use nrt_sim::engine::{self, ActFunc, DType, Device, ExecOptions, kernels};
use nrt_sim::neff::neff_from_programs;

fn main() -> ExitCode {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: mlp_neff DIR");
        return ExitCode::from(2);
    };
    match run(std::path::Path::new(&dir)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mlp_neff: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(dir: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let (batch, d_in, hidden, d_out) = (32u64, 64u64, 48u64, 16u64);
    let dt = DType::Bf16;
    let program = kernels::mlp(batch, d_in, hidden, d_out, dt, ActFunc::Relu)?;
    let values = |seed: u32, n: u64| -> Vec<u8> {
        let v: Vec<f32> = (0..n as u32)
            .map(|i| (i.wrapping_mul(2654435761).wrapping_add(seed) % 17) as f32 / 8.0 - 1.0)
            .collect();
        engine::encode_f32(dt, &v)
    };
    let inputs = [
        ("x_t", values(1, d_in * batch)),
        ("w1", values(2, d_in * hidden)),
        ("b1", values(3, hidden)),
        ("w2", values(4, hidden * d_out)),
        ("b2", values(5, d_out)),
    ];
    let dev = Device::new(Instance::Trn2);
    let lp = dev.load(0, program.clone())?;
    let refs: Vec<(&str, &[u8])> = inputs.iter().map(|(n, d)| (*n, d.as_slice())).collect();
    let (outputs, _) = dev.run(&lp, &refs, &ExecOptions::default())?;
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("mlp.neff"), neff_from_programs("mlp", &[program])?)?;
    for (name, data) in &inputs {
        std::fs::write(dir.join(format!("{name}.bin")), data)?;
    }
    for (name, data) in &outputs {
        std::fs::write(dir.join(format!("{name}.expected")), data)?;
    }
    println!("wrote {}", dir.display());
    Ok(())
}

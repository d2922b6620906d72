//! Host side of the firmware example, run at build time with the project's own tools: builds
//! the simulator program of a small MLP with the kernel library (`nrt_sim::engine::kernels`),
//! packs it into NEFFs with the project's NEFF writer, runs it on the host simulator to get the
//! expected outputs, and writes everything into `OUT_DIR` for `include_bytes!`. Also places the
//! target's `memory.x` and turns `NRT_FW_HEAP_BYTES` into a constant.

use std::fmt::Write as _;
use std::path::PathBuf;

use nrt_sim::Instance;
use nrt_sim::engine::kernels;
use nrt_sim::engine::{ActFunc, DType, Device, ExecOptions};
use nrt_sim::neff::{neff_from_programs, neff_from_programs_packed};

/// The MLP: `y_t = W2ᵀ·relu(W1ᵀ·x_t + b1) + b2`, fp32, feature-major.
const BATCH: u64 = 8;
const D_IN: u64 = 16;
const HIDDEN: u64 = 16;
const D_OUT: u64 = 8;
/// Input sets the firmware cycles through (each execution checks its own set's outputs).
const SETS: usize = 2;
/// Default size of the firmware's main heap.
const DEFAULT_HEAP: usize = 96 * 1024;

/// Deterministic inputs (a 64-bit LCG), values in [-1, 1) with a few exact zeros and negatives.
fn values(seed: u64, n: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(1);
    let mut out = Vec::new();
    for _ in 0..n {
        s = s
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let v = ((s >> 40) as i32 - (1 << 23)) as f32 / (1 << 23) as f32;
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let target = std::env::var("TARGET")?;
    let memory = if target.starts_with("thumb") {
        "memory-arm.x"
    } else if target.starts_with("riscv32") {
        "memory-riscv.x"
    } else {
        return Err(format!("unsupported target {target}: build for thumbv7em-none-eabihf or riscv32imac-unknown-none-elf").into());
    };
    std::fs::copy(manifest.join(memory), out.join("memory.x"))?;
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rerun-if-changed={memory}");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=NRT_FW_HEAP_BYTES");
    let heap: usize = match std::env::var("NRT_FW_HEAP_BYTES") {
        Ok(v) => v.parse()?,
        Err(_) => DEFAULT_HEAP,
    };

    std::fs::write(out.join("heap_bytes.rs"), format!("{heap}"))?;

    let program = kernels::mlp(BATCH, D_IN, HIDDEN, D_OUT, DType::F32, ActFunc::Relu)?;
    // Plain tar (package version 1): what the example loads 1,000 times.
    let plain = neff_from_programs_packed("mlp", std::slice::from_ref(&program), false)?;
    // gzip (package version 2, as the compiler writes it): loaded once, through the inflater.
    let gzip = neff_from_programs("mlp", std::slice::from_ref(&program))?;
    // Two subgraphs: needs a logical core of two physical cores.
    let two = neff_from_programs_packed("mlp2", &[program.clone(), program.clone()], false)?;
    std::fs::write(out.join("mlp.neff"), &plain)?;
    std::fs::write(out.join("mlp.neff.gz"), &gzip)?;
    std::fs::write(out.join("mlp2.neff"), &two)?;

    let device = Device::new(Instance::Trn1);
    let loaded = device.load(0, program.clone())?;
    let shapes = [
        ("x_t", D_IN * BATCH),
        ("w1", D_IN * HIDDEN),
        ("b1", HIDDEN),
        ("w2", HIDDEN * D_OUT),
        ("b2", D_OUT),
    ];
    let mut rs = String::new();
    writeln!(rs, "/// Heap bytes (`NRT_FW_HEAP_BYTES`).")?;
    writeln!(rs, "pub const HEAP_BYTES: usize = {heap};")?;
    writeln!(rs, "/// Input sets.")?;
    writeln!(rs, "pub const SETS: usize = {SETS};")?;
    writeln!(rs, "/// Bytes of the output `y_t`.")?;
    writeln!(rs, "pub const OUTPUT_BYTES: usize = {};", D_OUT * BATCH * 4)?;
    writeln!(rs, "/// The NEFFs.")?;
    writeln!(
        rs,
        "pub static NEFF: &[u8] = include_bytes!(concat!(env!(\"OUT_DIR\"), \"/mlp.neff\"));"
    )?;
    writeln!(rs, "/// The same model, gzipped.")?;
    writeln!(
        rs,
        "pub static NEFF_GZ: &[u8] = include_bytes!(concat!(env!(\"OUT_DIR\"), \"/mlp.neff.gz\"));"
    )?;
    writeln!(rs, "/// Two subgraphs.")?;
    writeln!(
        rs,
        "pub static NEFF_TWO: &[u8] = include_bytes!(concat!(env!(\"OUT_DIR\"), \"/mlp2.neff\"));"
    )?;
    writeln!(
        rs,
        "/// Per set: the inputs `(name, bytes)` and the expected output bytes."
    )?;
    writeln!(
        rs,
        "pub type Set = ([(&'static str, &'static [u8]); {}], &'static [u8]);",
        shapes.len()
    )?;
    writeln!(rs, "pub static DATA: [Set; SETS] = [")?;
    for set in 0..SETS {
        let inputs: Vec<(&str, Vec<u8>)> = shapes
            .iter()
            .enumerate()
            .map(|(i, &(name, n))| {
                // Weights are shared by the sets; x_t differs.
                let seed = if name == "x_t" {
                    100 + set as u64
                } else {
                    i as u64
                };
                (name, values(seed, n))
            })
            .collect();
        let refs: Vec<(&str, &[u8])> = inputs.iter().map(|(n, d)| (*n, d.as_slice())).collect();
        let (outs, _) = device.run(&loaded, &refs, &ExecOptions::default())?;
        let y = outs
            .iter()
            .find(|(n, _)| n == "y_t")
            .ok_or("the simulator gave no y_t")?;
        if y.1.len() as u64 != D_OUT * BATCH * 4 {
            return Err("y_t has an unexpected size".into());
        }
        write!(rs, "    ([")?;
        for (name, data) in &inputs {
            let file = format!("set{set}_{name}.bin");
            std::fs::write(out.join(&file), data)?;
            write!(
                rs,
                "(\"{name}\", include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{file}\"))), "
            )?;
        }
        let file = format!("set{set}_y_t.bin");
        std::fs::write(out.join(&file), &y.1)?;
        writeln!(
            rs,
            "], include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{file}\"))),"
        )?;
    }
    writeln!(rs, "];")?;
    std::fs::write(out.join("fw_data.rs"), rs)?;
    Ok(())
}

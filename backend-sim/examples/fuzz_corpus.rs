//! Writes seed corpora for the byte-input fuzz targets into `fuzz/corpus/<target>/`:
//!
//! * `neff_parse`: NEFFs built by the writer (gzip and plain tar) and from the simulator's
//!   kernel programs, plus the compiler fixture `../shared/fixtures/neff/matmul_small.neff`
//!   when it exists (read at run time, never copied into the repository; without it a
//!   `SKIPPED` line on stderr, or an error when `NRT_REQUIRE_SHARED=1`);
//! * `sim_program`: the kernel builders' programs, and one program of format-1.1 instructions
//!   and block DMA descriptors;
//! * `assembler`: the same programs as text (`engine::disassemble`).
//!
//! The structured targets (`neff_roundtrip`, `config`, `facade`, `coredump_template`) start
//! from libFuzzer's own inputs.
//!
//! `cargo run -p nrt-sim --example fuzz_corpus` (from anywhere in the repository). It lives in
//! the main workspace, not in `fuzz/`, so it builds with the workspace's tests: an example of
//! the fuzz crate would build that crate's whole dependency stack once more without the fuzz
//! flags.

use std::fs;
use std::path::Path;

use nrt_core::io::{Dtype, TensorUsage};
use nrt_core::neff::{self, NeffSpec, NeffTensor, SubgraphSpec};
use nrt_sim::engine::{
    AccessPattern, ActFn, ActReduce, AluOp, Bias, DType, DmaBlock, DmaDescriptor, DmaEndpoint,
    EngineId, Instr, MemKind, Operand, Program, ProgramBuilder, ScalarStep, disassemble, kernels,
};

/// A small program of format-1.1 instructions: a block DMA load (transposing), a tensor-scalar
/// chain, an activation with its reduction, a reduction, a TensorE transpose.
fn isa11_program() -> Result<Program, Box<dyn std::error::Error>> {
    let mut b = ProgramBuilder::new("isa11");
    let x = b.input("x", DType::Bf16, &[8, 4]);
    let s = b.sem()?;
    let blk = |mem, index, rows, cols, transposed| DmaBlock {
        mem,
        index,
        offset: 0,
        dtype: DType::Bf16,
        rows,
        cols,
        pitch: cols,
        transposed,
    };
    b.dma_on(
        EngineId::Sync,
        0,
        0,
        &[DmaDescriptor {
            src: DmaEndpoint::Block(blk(MemKind::Hbm, x, 8, 4, false)),
            dst: DmaEndpoint::Block(blk(MemKind::Sbuf, 0, 4, 8, true)),
            len: 64,
        }],
        s,
        1,
    );
    let t = AccessPattern::sbuf(DType::Bf16, 0, 4, 0, 8);
    let f = AccessPattern::sbuf(DType::F32, 0, 4, 64, 8);
    b.wait(EngineId::Vector, s, 1);
    b.push(
        EngineId::Vector,
        Instr::TensorScalarChain {
            src: t,
            out: f,
            first: ScalarStep {
                op: AluOp::Mul,
                operand: Operand::Imm(0.5),
                reverse: false,
            },
            second: Some(ScalarStep {
                op: AluOp::Min,
                operand: Operand::Int(3),
                reverse: true,
            }),
        },
    );
    b.push(
        EngineId::Vector,
        Instr::TensorReduce {
            op: AluOp::Max,
            src: f,
            out: AccessPattern::sbuf(DType::F32, 0, 4, 128, 1),
            axes: 1,
            negate: false,
        },
    );
    b.wait(EngineId::Scalar, s, 1);
    b.push(
        EngineId::Scalar,
        Instr::Activate {
            func: ActFn::Silu,
            src: t,
            out: AccessPattern::sbuf(DType::Bf16, 0, 4, 256, 8),
            scale: Operand::Imm(1.0),
            bias: Bias::Imm(0.0),
            reduce: Some(ActReduce {
                op: AluOp::Add,
                out: AccessPattern::sbuf(DType::F32, 0, 4, 320, 1),
            }),
        },
    );
    b.wait(EngineId::Tensor, s, 1);
    b.push(
        EngineId::Tensor,
        Instr::Transpose {
            src: t,
            out: AccessPattern::psum(DType::Bf16, 0, 8, 0, 4),
        },
    );
    Ok(b.build()?)
}

fn save(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    fs::create_dir_all(dir)?;
    fs::write(dir.join(name), bytes)?;
    println!("{} ({} bytes)", dir.join(name).display(), bytes.len());
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The repository: the folder above this package's.
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let repo = manifest.parent().unwrap_or(manifest);
    let root = repo.join("fuzz");
    let corpus = root.join("corpus");
    let neff_dir = corpus.join("neff_parse");
    let prog_dir = corpus.join("sim_program");

    let programs: Vec<(&str, Program)> = vec![
        (
            "add",
            kernels::elementwise(kernels::Elementwise::Add, 2, 4, DType::F32)?,
        ),
        (
            "mul_bf16",
            kernels::elementwise(kernels::Elementwise::Mul, 3, 5, DType::Bf16)?,
        ),
        ("matmul", kernels::matmul(4, 4, 4, DType::F32, DType::F32)?),
        (
            "matmul_bf16",
            kernels::matmul(8, 16, 8, DType::Bf16, DType::F32)?,
        ),
        ("isa11", isa11_program()?),
        // Format 1.1 loops: every loop of the kernel (groups, N-block pairs, K-tile pairs).
        (
            "matmul_looped",
            kernels::matmul_looped(1024, 640, 2048, DType::Bf16, DType::F32)?,
        ),
    ];
    let asm_dir = corpus.join("assembler");
    for (name, p) in &programs {
        save(&prog_dir, &format!("{name}.prog"), &p.to_bytes())?;
        save(&asm_dir, &format!("{name}.s"), disassemble(p).as_bytes())?;
        save(
            &neff_dir,
            &format!("{name}.neff"),
            &nrt_sim::neff::neff_from_programs(name, std::slice::from_ref(p))?,
        )?;
    }

    for gzip in [true, false] {
        let spec = NeffSpec {
            name: "seed".into(),
            uuid: [3; 16],
            version: (2, 0),
            feature_bits: nrt_core::neff::NeffFeatures::empty(),
            lnc_size: 1,
            num_tpb: 1,
            gzip,
            subgraphs: vec![SubgraphSpec {
                name: "sg00".into(),
                members: vec![("nrt-sim.prog".into(), vec![1, 2, 3])],
            }],
            tensors: vec![
                NeffTensor {
                    name: "x".into(),
                    usage: TensorUsage::Input,
                    size: 8,
                    dtype: Dtype::Float32,
                    shape: vec![2],
                    var_id: 1,
                },
                NeffTensor {
                    name: "y".into(),
                    usage: TensorUsage::Output,
                    size: 4,
                    dtype: Dtype::Int16,
                    shape: vec![1, 2],
                    var_id: 2,
                },
            ],
        };
        let kind = if gzip { "gzip" } else { "tar" };
        save(
            &neff_dir,
            &format!("spec_{kind}.neff"),
            &neff::write(&spec)?,
        )?;
    }

    // `shared/` sits beside the repository in the CI layout; a fresh clone has none.
    let beside = repo.parent().unwrap_or(repo);
    let fixture = beside.join("shared/fixtures/neff/matmul_small.neff");
    match fs::read(&fixture) {
        Ok(b) => save(&neff_dir, "fixture_matmul_small.neff", &b)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if std::env::var_os("NRT_REQUIRE_SHARED").is_some_and(|v| v == "1") {
                return Err(format!(
                    "{} is absent, and NRT_REQUIRE_SHARED=1 requires it",
                    fixture.display()
                )
                .into());
            }
            eprintln!(
                "SKIPPED seed {}: absent (no `shared/` folder beside the repository); set \
                 NRT_REQUIRE_SHARED=1 to make this a failure",
                fixture.display()
            );
        }
        Err(e) => return Err(format!("read {}: {e}", fixture.display()).into()),
    }
    Ok(())
}

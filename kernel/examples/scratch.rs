#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use nrt_kernel::*;
fn main() {
    let mut k = Kernel::new("add_relu_scale");
    let a = k.input("a", DType::F32, &[256, 64]).unwrap();
    let b = k.input("b", DType::F32, &[256, 64]).unwrap();
    let out = k.output("out", DType::F32, &[256, 64]).unwrap();
    for t in 0..2 {
        let rows = t * 128..(t + 1) * 128;
        k.scope(|k| {
            let ta = k.sbuf_tile("ta", DType::F32, &[128, 64])?;
            let tb = k.sbuf_tile("tb", DType::F32, &[128, 64])?;
            k.emit(DmaCopy { dma_engines: 2, ..DmaCopy::new(&ta, &a.slice(0, rows.clone())?) })?;
            k.emit(DmaCopy { dma_engines: 2, ..DmaCopy::new(&tb, &b.slice(0, rows.clone())?) })?;
            k.tensor_tensor(&ta, &ta, &tb, AluOp::Add)?;
            k.activation(&tb, ActFunc::Relu, &ta, ActBias::None, 1.0)?;
            k.tensor_scalar(&ta, &tb, AluOp::Mul, 0.5)?;
            k.emit(DmaCopy { dma_engines: 2, ..DmaCopy::new(&out.slice(0, rows.clone())?, &ta) })
        }).unwrap();
    }
    let p = k.build().unwrap();
    for e in EngineId::ALL {
        println!("== {e}");
        for i in p.stream(e) {
            match i {
                nrt_sim::engine::Instr::SemWait{..} | nrt_sim::engine::Instr::SemInc{..} | nrt_sim::engine::Instr::DmaTrigger{..} => println!("  {i:?}"),
                other => println!("  {}", other.name()),
            }
        }
    }
}

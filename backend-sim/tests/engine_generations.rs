//! Each instance family runs its own generation's figures: trn2 (NeuronCore-v3) has the v3
//! SBUF (224 KiB per partition, A3: "28MiB (or, 128 partitions of 224KiB)"), clocks and
//! engine ports; inf2 and trn1 (NeuronCore-v2) keep 192 KiB and v2's shared ports.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use nrt_core::NrtStatus;
use nrt_sim::Instance;
use nrt_sim::engine::{
    AccessPattern, ActFunc, Bias, DType, Device, EngineId, ExecOptions, Instr, NEURONCORE_V2,
    NEURONCORE_V3, ProgramBuilder,
};

/// A program that memsets the last `bytes` of a 224 KiB partition.
fn high_sbuf_program(bytes: u32) -> nrt_sim::engine::Program {
    let mut b = ProgramBuilder::new("high_sbuf");
    let elems = (bytes / 4) as u16;
    b.push(
        EngineId::GpSimd,
        Instr::Memset {
            out: AccessPattern::sbuf(DType::F32, 0, 128, 224 * 1024 - bytes, elems),
            bits: 0x3f80_0000,
        },
    );
    b.build().unwrap()
}

#[test]
fn the_specs_are_the_instances() {
    assert_eq!(Instance::Inf2.core_spec(), &NEURONCORE_V2);
    assert_eq!(Instance::Trn1.core_spec(), &NEURONCORE_V2);
    assert_eq!(Instance::Trn2.core_spec(), &NEURONCORE_V3);
    assert_eq!(NEURONCORE_V2.sbuf_partition_bytes, 192 * 1024);
    assert_eq!(NEURONCORE_V3.sbuf_partition_bytes, 224 * 1024);
}

/// SBUF beyond 192 KiB: loads and runs on trn2, refused at load on trn1 and inf2 with
/// `NRT_INVALID` naming the program, the extent and the generation.
#[test]
fn sbuf_beyond_v2_runs_on_trn2_only() {
    let p = high_sbuf_program(4096);
    let dev = Device::new(Instance::Trn2);
    let lp = dev.load(0, p.clone()).unwrap();
    let r = dev.execute(&lp, &ExecOptions::default()).unwrap();
    r.result().unwrap();
    let sbuf = dev.sbuf(0).unwrap();
    assert_eq!(sbuf.partition_bytes(), 224 * 1024);
    assert_eq!(sbuf.read(127, 224 * 1024 - 4, 4), &1.0f32.to_le_bytes()[..]);
    for inst in [Instance::Trn1, Instance::Inf2] {
        let dev = Device::new(inst);
        let e = dev.load(0, p.clone()).unwrap_err();
        assert_eq!(e.status(), NrtStatus::Invalid);
        assert_eq!(
            e.message(),
            format!(
                "program 'high_sbuf' uses SBUF bytes up to 229376 of each partition; a \
                 NeuronCore-v2 partition has 196608 ({} device)",
                inst.name()
            )
        );
        assert_eq!(dev.hbm().allocated(), 0, "nothing kept");
    }
    // Within 192 KiB it loads everywhere.
    let mut b = ProgramBuilder::new("low");
    b.push(
        EngineId::GpSimd,
        Instr::Memset {
            out: AccessPattern::sbuf(DType::F32, 0, 128, 192 * 1024 - 64, 16),
            bits: 0,
        },
    );
    let p = b.build().unwrap();
    for inst in [Instance::Trn1, Instance::Inf2, Instance::Trn2] {
        Device::new(inst).load(0, p.clone()).unwrap();
    }
    // Past every generation's SBUF the validator refuses it.
    let mut b = ProgramBuilder::new("past");
    b.push(
        EngineId::GpSimd,
        Instr::Memset {
            out: AccessPattern::sbuf(DType::F32, 0, 128, 224 * 1024 - 60, 16),
            bits: 0,
        },
    );
    assert_eq!(b.build().unwrap_err().status(), NrtStatus::Invalid);
}

/// A2: "VectorE and ScalarE cannot access the PSUM in parallel" on NeuronCore-v2; A3 lifts
/// it on v3. The same program stalls ScalarE on trn1 and not on trn2.
#[test]
fn the_psum_port_is_shared_on_v2_only() {
    let mut b = ProgramBuilder::new("psum_ports");
    b.push(
        EngineId::Scalar,
        Instr::Activation {
            func: ActFunc::Exp,
            src: AccessPattern::psum(DType::F32, 0, 128, 0, 512),
            out: AccessPattern::sbuf(DType::F32, 0, 128, 4096, 512),
            scale: 1.0,
            bias: Bias::Imm(0.0),
        },
    );
    b.push(
        EngineId::Vector,
        Instr::TensorCopy {
            src: AccessPattern::psum(DType::F32, 0, 128, 2048, 512),
            out: AccessPattern::sbuf(DType::F32, 0, 128, 8192, 512),
        },
    );
    let p = b.build().unwrap();
    let stall = |inst| {
        let dev = Device::new(inst);
        let lp = dev.load(0, p.clone()).unwrap();
        let r = dev.execute(&lp, &ExecOptions::default()).unwrap();
        r.result().unwrap();
        r.engine(EngineId::Scalar).stall_port
    };
    assert!(stall(Instance::Trn1) > 0);
    assert_eq!(stall(Instance::Trn2), 0);
}

/// One VectorE instruction alone on core 0: its duration, ns.
fn vector_ns(inst: Instance, ins: Instr) -> f64 {
    let mut b = ProgramBuilder::new("one");
    b.push(EngineId::Vector, ins);
    let dev = Device::new(inst);
    let lp = dev.load(0, b.build().unwrap()).unwrap();
    let r = dev.execute(&lp, &ExecOptions::default()).unwrap();
    r.result().unwrap();
    r.engine(EngineId::Vector).active as f64 / 1.4
}

/// The ISA reference's `tensor_tensor` cost table (`general/nki/api/nki/isa/__init__.py` at
/// 8a38e733): `N` with one input in PSUM and the other in SBUF, else `2N`; applied on
/// NeuronCore-v3, where the Trainium2 guide lists VectorE's faster modes. v2 keeps A2's
/// "roughly 2N cycles" for two inputs. Each plus the ~60-cycle access overhead, at 0.96 GHz
/// (v3) and 1.12 GHz (v2).
#[test]
fn tensor_tensor_with_a_psum_input_streams_once_on_v3() {
    use nrt_sim::engine::AluOp;
    let add = Instr::TensorTensor {
        op: AluOp::Add,
        a: AccessPattern::sbuf(DType::F32, 0, 128, 0, 512),
        b: AccessPattern::psum(DType::F32, 0, 128, 0, 512),
        out: AccessPattern::sbuf(DType::F32, 0, 128, 4096, 512),
    };
    let v3 = vector_ns(Instance::Trn2, add);
    let v2 = vector_ns(Instance::Trn1, add);
    assert!((v3 - (512.0 + 60.0) / 0.96).abs() < 2.0, "{v3}");
    assert!((v2 - (1024.0 + 60.0) / 1.12).abs() < 2.0, "{v2}");
    // Both inputs in SBUF, fp32: 2N on both.
    let sbuf = Instr::TensorTensor {
        op: AluOp::Add,
        a: AccessPattern::sbuf(DType::F32, 0, 128, 0, 512),
        b: AccessPattern::sbuf(DType::F32, 0, 128, 2048, 512),
        out: AccessPattern::sbuf(DType::F32, 0, 128, 4096, 512),
    };
    let v3 = vector_ns(Instance::Trn2, sbuf);
    assert!((v3 - (1024.0 + 60.0) / 0.96).abs() < 2.0, "{v3}");
}

/// Trainium2 guide, VectorE performance modes: a bf16 `tensor_copy` SBUF to SBUF with
/// contiguous operands runs 4x faster than on v2; with one side in PSUM, 2x.
#[test]
fn bf16_copies_use_v3s_fast_modes() {
    let copy = |src: AccessPattern| Instr::TensorCopy {
        src,
        out: AccessPattern::sbuf(DType::Bf16, 0, 128, 8192, 512),
    };
    let sb = copy(AccessPattern::sbuf(DType::Bf16, 0, 128, 0, 512));
    let ps = copy(AccessPattern::psum(DType::Bf16, 0, 128, 0, 512));
    let v3 = vector_ns(Instance::Trn2, sb);
    assert!((v3 - (128.0 + 60.0) / 0.96).abs() < 2.0, "{v3}");
    let v3 = vector_ns(Instance::Trn2, ps);
    assert!((v3 - (256.0 + 60.0) / 0.96).abs() < 2.0, "{v3}");
    let v2 = vector_ns(Instance::Trn1, sb);
    assert!((v2 - (512.0 + 60.0) / 1.12).abs() < 2.0, "{v2}");
}

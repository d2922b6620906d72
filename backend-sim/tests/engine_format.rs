//! Program format: round trip, validation at load, malformed input never panics; HBM capacity.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use nrt_core::NrtStatus;
use nrt_sim::Instance;
use nrt_sim::engine::{
    AccessPattern, ActFunc, Bias, DType, Device, DmaDescriptor, DmaEndpoint, EngineId, Instr,
    Program, ProgramBuilder, TensorKind, kernels,
};

fn sample() -> Program {
    let mut p = kernels::mlp(32, 40, 50, 10, DType::F16, ActFunc::Gelu).unwrap();
    p.tensors.push(nrt_sim::engine::TensorDecl {
        name: "c".into(),
        kind: TensorKind::Const,
        dtype: DType::I32,
        shape: vec![2, 2],
        data: vec![1; 16],
    });
    p.streams[EngineId::GpSimd.index()].insert(
        0,
        Instr::Iota {
            out: AccessPattern::new(
                nrt_sim::engine::Space::Sbuf,
                DType::I32,
                96,
                32,
                64,
                &[(3, 4), (5, -1)],
            ),
            base: -3,
            partition_step: 7,
            free_step: 2,
        },
    );
    p
}

#[test]
fn round_trip_is_exact() {
    let p = sample();
    let bytes = p.to_bytes();
    assert_eq!(&bytes[..8], b"NRTSIMPG");
    let q = Program::from_bytes(&bytes).unwrap();
    assert_eq!(p, q);
    assert_eq!(q.to_bytes(), bytes);
}

#[test]
fn every_truncation_is_rejected() {
    let bytes = sample().to_bytes();
    for n in 0..bytes.len() {
        let e = Program::from_bytes(&bytes[..n]).unwrap_err();
        assert_eq!(e.status(), NrtStatus::Invalid, "prefix {n}: {e}");
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(Program::from_bytes(&longer).is_err());
}

#[test]
fn mutations_never_panic() {
    let bytes = sample().to_bytes();
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut accepted = 0;
    for _ in 0..4000 {
        let mut m = bytes.clone();
        for _ in 0..(next() % 4 + 1) {
            let i = (next() as usize) % m.len();
            match next() % 3 {
                0 => m[i] = next() as u8,
                1 => m[i] ^= 1 << (next() % 8),
                _ => m[i] = 0xFF,
            }
        }
        if let Ok(p) = Program::from_bytes(&m) {
            accepted += 1;
            // Anything accepted is valid and runs (or fails cleanly) without panicking.
            let dev = Device::with_hbm_capacity(Instance::Trn1, 1 << 30);
            if let Ok(lp) = dev.load(0, p) {
                let opts = nrt_sim::engine::ExecOptions {
                    max_ticks: 2_000_000,
                    ..Default::default()
                };
                let _ = dev.execute(&lp, &opts).unwrap();
            }
        }
    }
    println!("{accepted} of 4000 mutants accepted");
}

#[test]
fn version_and_magic_are_checked() {
    let mut bytes = sample().to_bytes();
    bytes[8] = 2; // major version 2
    assert_eq!(
        Program::from_bytes(&bytes).unwrap_err().status(),
        NrtStatus::UnsupportedNeffVersion
    );
    let mut bytes = sample().to_bytes();
    bytes[0] = b'X';
    assert!(
        Program::from_bytes(&bytes)
            .unwrap_err()
            .message()
            .contains("magic")
    );
}

#[test]
fn huge_counts_do_not_allocate() {
    // Header + one tensor section claiming 2^32-1 tensors in 4 bytes of payload.
    let mut b = b"NRTSIMPG".to_vec();
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes());
    b.extend_from_slice(&2u32.to_le_bytes());
    b.extend_from_slice(&4u64.to_le_bytes());
    b.extend_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(
        Program::from_bytes(&b).unwrap_err().status(),
        NrtStatus::Invalid
    );
    // A section length past the end.
    let mut b2 = b[..24].to_vec();
    b2.extend_from_slice(&u64::MAX.to_le_bytes());
    assert!(Program::from_bytes(&b2).is_err());
}

fn one(engine: EngineId, ins: Instr) -> Result<Program, nrt_core::Error> {
    let mut b = ProgramBuilder::new("one");
    b.input("x", DType::F32, &[16]);
    b.push(engine, ins);
    b.build()
}

#[test]
fn partition_rules_are_enforced_at_load() {
    let cases: Vec<(EngineId, Instr, &str)> = vec![
        (
            EngineId::Vector,
            Instr::TensorCopy {
                src: AccessPattern::sbuf(DType::F32, 32, 64, 0, 8),
                out: AccessPattern::sbuf(DType::F32, 0, 64, 0, 8),
            },
            "cannot start at partition 32",
        ),
        (
            EngineId::Vector,
            Instr::TensorCopy {
                src: AccessPattern::sbuf(DType::F32, 64, 65, 0, 8),
                out: AccessPattern::sbuf(DType::F32, 0, 65, 0, 8),
            },
            "cannot start at partition 64",
        ),
        (
            EngineId::Scalar,
            Instr::TensorCopy {
                src: AccessPattern::sbuf(DType::F32, 0, 4, 229_370, 8),
                out: AccessPattern::sbuf(DType::F32, 0, 4, 0, 8),
            },
            "outside",
        ),
        (
            EngineId::GpSimd,
            Instr::Memset {
                out: AccessPattern::psum(DType::F32, 0, 4, 0, 4097),
                bits: 0,
            },
            "limit",
        ),
        (
            EngineId::Scalar,
            Instr::Memset {
                out: AccessPattern::sbuf(DType::F32, 0, 4, 0, 8),
                bits: 0,
            },
            "cannot run on ScalarE",
        ),
        (
            EngineId::Tensor,
            Instr::MultiplyMoving {
                moving: AccessPattern::sbuf(DType::Bf16, 0, 128, 0, 512),
                dst: AccessPattern::psum(DType::F32, 0, 128, 0, 512),
                accumulate: false,
            },
            "before any LoadStationary",
        ),
        (
            EngineId::Scalar,
            Instr::Activation {
                func: ActFunc::Exp,
                src: AccessPattern::sbuf(DType::F32, 0, 8, 0, 8),
                out: AccessPattern::sbuf(DType::F32, 0, 8, 64, 8),
                scale: 1.0,
                bias: Bias::PerPartition(AccessPattern::sbuf(DType::F32, 0, 8, 128, 2)),
            },
            "bias",
        ),
        (
            EngineId::Sync,
            Instr::DmaTrigger {
                dma: 16,
                queue: 0,
                first: 0,
                count: 1,
                sem: 0,
                inc: 1,
            },
            "does not exist",
        ),
    ];
    for (engine, ins, want) in cases {
        let e = one(engine, ins).unwrap_err();
        assert_eq!(e.status(), NrtStatus::Invalid);
        assert!(e.message().contains(want), "expected '{want}' in: {e}");
    }
    // A descriptor in a bad direction or out of bounds.
    let mut b = ProgramBuilder::new("bad_dma");
    let t = b.input("x", DType::F32, &[16]);
    b.dma_on(
        EngineId::Sync,
        0,
        0,
        &[DmaDescriptor {
            src: DmaEndpoint::Hbm {
                tensor: t,
                offset: 60,
            },
            dst: DmaEndpoint::Sbuf {
                partition: 0,
                offset: 0,
            },
            len: 8,
        }],
        0,
        1,
    );
    assert!(b.build().unwrap_err().message().contains("outside tensor"));
    let mut b = ProgramBuilder::new("bad_dir");
    b.dma_on(
        EngineId::Sync,
        0,
        0,
        &[DmaDescriptor {
            src: DmaEndpoint::Sbuf {
                partition: 0,
                offset: 0,
            },
            dst: DmaEndpoint::Psum {
                partition: 0,
                offset: 0,
            },
            len: 8,
        }],
        0,
        1,
    );
    assert!(b.build().unwrap_err().message().contains("direction"));
    // Device::load validates too (a hand-made invalid program).
    let mut p = kernels::elementwise(kernels::Elementwise::Add, 4, 4, DType::F32).unwrap();
    p.streams[0].pop();
    let dev = Device::new(Instance::Trn2);
    assert!(
        dev.load(0, p)
            .unwrap_err()
            .message()
            .contains("end with Halt")
    );
}

#[test]
fn hbm_capacity_is_accounted() {
    // trn1: 32 GiB per device. Sparse: declaring 20 GiB costs no host memory.
    let mut b = ProgramBuilder::new("big");
    b.input("x", DType::F32, &[5 << 30]);
    let big = b.build().unwrap();
    let dev = Device::new(Instance::Trn1);
    let lp = dev.load(0, big.clone()).unwrap();
    assert_eq!(dev.hbm().allocated(), 20 << 30);
    assert_eq!(dev.hbm().resident_bytes(), 0);
    let e = dev.load(1, big.clone()).unwrap_err();
    assert_eq!(e.status(), NrtStatus::Resource);
    assert!(e.message().contains("tensor 'x'"), "{e}");
    assert_eq!(
        dev.hbm().allocated(),
        20 << 30,
        "a failed load keeps nothing"
    );
    dev.unload(lp).unwrap();
    dev.load(1, big.clone()).unwrap();
    // trn2: 96 GiB, 8 cores.
    let dev2 = Device::new(Instance::Trn2);
    assert_eq!(dev2.core_count(), 8);
    for core in 0..4 {
        dev2.load(core, big.clone()).unwrap();
    }
    assert_eq!(dev2.load(5, big).unwrap_err().status(), NrtStatus::Resource);
    assert_eq!(Device::machine(Instance::Inf2, 3).len(), 3);
}

#[test]
fn io_binds_by_name() {
    let p = kernels::elementwise(kernels::Elementwise::Add, 2, 2, DType::F32).unwrap();
    let dev = Device::new(Instance::Inf2);
    let lp = dev.load(0, p).unwrap();
    assert_eq!(
        dev.write_tensor(&lp, "nope", &[0; 16])
            .unwrap_err()
            .status(),
        NrtStatus::Invalid
    );
    assert_eq!(
        dev.write_tensor(&lp, "a", &[0; 15]).unwrap_err().status(),
        NrtStatus::Invalid
    );
    let other = Device::new(Instance::Inf2);
    assert_eq!(
        other.read_tensor(&lp, "a").unwrap_err().status(),
        NrtStatus::InvalidHandle
    );
    assert_eq!(
        dev.load(
            2,
            kernels::elementwise(kernels::Elementwise::Add, 1, 1, DType::F32).unwrap()
        )
        .unwrap_err()
        .status(),
        NrtStatus::Invalid
    );
}

//! A loaded program remembers the tensor addresses at which it ran to completion without a
//! hazard, and later executions there skip the check (`ExecReport::hazards_checked`): the
//! schedule depends on nothing else. These tests pin down when the check still runs: the first
//! execution, every execution of a program with a hazard, an execution at other addresses
//! (where aliasing tensors may create a hazard the first run could not have), and every
//! execution with `ExecOptions::recheck_hazards`. Skipping changes nothing else in the report
//! or the outputs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use nrt_core::NrtStatus;
use nrt_sim::Instance;
use nrt_sim::engine::{
    AccessPattern, ActFunc, Bias, DType, Device, DmaDescriptor, DmaEndpoint, EngineId, ExecOptions,
    Instr, MemKind, Program, ProgramBuilder, Space, encode_f32,
};

const COLS: u32 = 64;

fn row_desc(src: DmaEndpoint, dst: DmaEndpoint) -> Vec<DmaDescriptor> {
    vec![DmaDescriptor {
        src,
        dst,
        len: COLS * 4,
    }]
}

/// `x [1, 64]` → SBUF partition 0, ScalarE doubles it 1 KiB further along, Sync stores that to
/// `y`; meanwhile (unordered with all of it) a second queue copies partition 2 (zeros) to `z`.
/// At its own addresses nothing conflicts; with `z` bound onto `x` the zero-copy's HBM write
/// races the load's read of `x`.
fn program() -> Program {
    let mut b = ProgramBuilder::new("memo");
    let x = b.input("x", DType::F32, &[1, u64::from(COLS)]);
    let y = b.output("y", DType::F32, &[1, u64::from(COLS)]);
    let z = b.output("z", DType::F32, &[1, u64::from(COLS)]);
    let (loaded, done, stored, other) = (
        b.sem().unwrap(),
        b.sem().unwrap(),
        b.sem().unwrap(),
        b.sem().unwrap(),
    );
    let sbuf = |partition: u8, offset: u32| DmaEndpoint::Sbuf { partition, offset };
    let hbm = |tensor: u32| DmaEndpoint::Hbm { tensor, offset: 0 };
    b.dma_on(
        EngineId::GpSimd,
        1,
        0,
        &row_desc(sbuf(2, 0), hbm(z)),
        other,
        1,
    );
    b.dma_on(
        EngineId::Sync,
        0,
        0,
        &row_desc(hbm(x), sbuf(0, 0)),
        loaded,
        1,
    );
    b.wait(EngineId::Scalar, loaded, 1);
    let ap = |off: u32| AccessPattern::new(Space::Sbuf, DType::F32, 0, 1, off, &[(COLS as u16, 1)]);
    b.push(
        EngineId::Scalar,
        Instr::Activation {
            func: ActFunc::Identity,
            src: ap(0),
            out: ap(1024),
            scale: 2.0,
            bias: Bias::Imm(0.0),
        },
    );
    b.signal(EngineId::Scalar, done, 1);
    b.wait(EngineId::Sync, done, 1);
    b.dma_on(
        EngineId::Sync,
        0,
        0,
        &row_desc(sbuf(0, 1024), hbm(y)),
        stored,
        1,
    );
    b.wait(EngineId::Sync, stored, 1);
    b.wait(EngineId::GpSimd, other, 1);
    b.build().unwrap()
}

fn x() -> Vec<f32> {
    (0..COLS).map(|i| i as f32 * 0.5 - 7.0).collect()
}

#[test]
fn a_clean_run_at_the_same_addresses_is_not_checked_again() {
    let dev = Device::new(Instance::Trn1);
    let lp = dev.load(0, program()).unwrap();
    dev.write_tensor(&lp, "x", &encode_f32(DType::F32, &x()))
        .unwrap();
    let first = dev.execute(&lp, &ExecOptions::default()).unwrap();
    assert_eq!(first.status, NrtStatus::Success);
    assert!(first.hazards_checked);
    let y1 = dev.read_tensor(&lp, "y").unwrap();
    let want: Vec<u8> = encode_f32(DType::F32, &x().iter().map(|v| v * 2.0).collect::<Vec<_>>());
    assert_eq!(y1, want);

    let second = dev.execute(&lp, &ExecOptions::default()).unwrap();
    assert_eq!(second.status, NrtStatus::Success);
    assert!(!second.hazards_checked);
    assert_eq!(dev.read_tensor(&lp, "y").unwrap(), want);
    // Nothing else in the report changes.
    assert_eq!(second.ticks, first.ticks);
    assert_eq!(second.engines, first.engines);
    assert_eq!(second.dma_engines, first.dma_engines);
    assert_eq!(second.semaphores, first.semaphores);
    assert_eq!(second.events.len(), first.events.len());

    // A clone of the load shares what it learned; `recheck_hazards` forces the check.
    let again = dev.execute(&lp.clone(), &ExecOptions::default()).unwrap();
    assert!(!again.hazards_checked);
    let forced = ExecOptions {
        recheck_hazards: true,
        ..ExecOptions::default()
    };
    let r = dev.execute(&lp, &forced).unwrap();
    assert_eq!(r.status, NrtStatus::Success);
    assert!(r.hazards_checked);
    assert_eq!(r.ticks, first.ticks);
}

#[test]
fn other_addresses_are_checked_and_an_aliasing_binding_is_a_hazard() {
    let dev = Device::new(Instance::Trn1);
    let lp = dev.load(0, program()).unwrap();
    let (xi, zi) = (0usize, 2usize);
    assert_eq!(lp.program().tensors[zi].name, "z");
    let r = dev.execute(&lp, &ExecOptions::default()).unwrap();
    assert_eq!(r.status, NrtStatus::Success);
    assert!(r.hazards_checked);

    // z bound onto x: the zero-copy's write races the load's read.
    let x_addr = lp.tensor_address(xi).unwrap();
    for _ in 0..2 {
        let r = dev
            .execute_bound(&lp, &[(zi, x_addr)], &ExecOptions::default())
            .unwrap();
        assert!(r.hazards_checked);
        assert_eq!(r.status, NrtStatus::ExecCompletedWithErr);
        assert_eq!(r.hazards.len(), 1, "{:#?}", r.hazards);
        let h = r.hazards[0];
        assert_eq!(h.first.region.mem, MemKind::Hbm);
        assert!(h.first.write != h.second.write, "{h}");
        assert_eq!(
            r.result().unwrap_err().status(),
            NrtStatus::ExecCompletedWithErr
        );
    }

    // z bound to a clean address of its own: checked once, then remembered.
    let spare = dev.hbm().alloc(u64::from(COLS) * 4).unwrap();
    let checked: Vec<bool> = (0..2)
        .map(|_| {
            let r = dev
                .execute_bound(&lp, &[(zi, spare)], &ExecOptions::default())
                .unwrap();
            assert_eq!(r.status, NrtStatus::Success);
            r.hazards_checked
        })
        .collect();
    assert_eq!(checked, [true, false]);
    // The load's own addresses are still remembered.
    assert!(
        !dev.execute(&lp, &ExecOptions::default())
            .unwrap()
            .hazards_checked
    );
}

#[test]
fn a_program_with_a_hazard_is_checked_every_time() {
    let dev = Device::new(Instance::Trn1);
    // ScalarE writes the tile VectorE reads, with no semaphore between them.
    let mut b = ProgramBuilder::new("race");
    b.output("y", DType::F32, &[1, 4]);
    let ap = |off: u32| AccessPattern::new(Space::Sbuf, DType::F32, 0, 1, off, &[(4, 1)]);
    b.push(
        EngineId::Scalar,
        Instr::Activation {
            func: ActFunc::Identity,
            src: ap(0),
            out: ap(64),
            scale: 1.0,
            bias: Bias::Imm(0.0),
        },
    );
    b.push(
        EngineId::Vector,
        Instr::TensorCopy {
            src: ap(64),
            out: ap(128),
        },
    );
    let lp = dev.load(0, b.build().unwrap()).unwrap();
    for _ in 0..3 {
        let r = dev.execute(&lp, &ExecOptions::default()).unwrap();
        assert!(r.hazards_checked);
        assert_eq!(r.status, NrtStatus::ExecCompletedWithErr);
        assert_eq!(r.hazards.len(), 1);
    }
}
